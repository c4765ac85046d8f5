// @vitest-environment happy-dom
// useLoad, the dashboard's one data-loading hook, driven through a real Preact render:
// aborts on unmount and on new parameters, never overlapping polls, error states.

import { describe, expect, it, vi } from "vitest";
import { h, render } from "preact";
import { act } from "preact/test-utils";
import { freshRoot } from "./freshRoot.js";
import { STALE_MS, useLoad } from "../src/hooks.js";

/** A load function whose calls the test answers by hand. */
function controlled() {
  const calls = [];
  const load = vi.fn((signal, info) => {
    let resolve;
    let reject;
    const promise = new Promise((res, rej) => {
      resolve = res;
      reject = rej;
    });
    signal.addEventListener("abort", () => reject(new DOMException("aborted", "AbortError")));
    calls.push({ signal, info, resolve, reject });
    return promise;
  });
  return { load, calls };
}

const dom = freshRoot({ fakeTimers: true });
const probe = { seen: null }; // the hook's latest return value
function Probe({ load, deps, opts }) {
  // The probe hands the test's own load and deps through, as a page would inline them.
  // eslint-disable-next-line react-hooks/exhaustive-deps -- the test is the caller
  probe.seen = useLoad(load, deps, opts);
  return null;
}
const mount = (props) => act(() => render(h(Probe, props), dom.root));
const settle = () => act(async () => {
  await Promise.resolve();
  await Promise.resolve();
});

describe("useLoad", () => {
  it("loads on mount and shows the answer", async () => {
    const { load, calls } = controlled();
    await mount({ load, deps: ["a"] });
    expect(probe.seen.loading).toBe(true);
    expect(calls).toHaveLength(1);
    expect(calls[0].info).toEqual({ first: true });
    calls[0].resolve({ n: 1 });
    await settle();
    expect(probe.seen).toMatchObject({ data: { n: 1 }, error: null, loading: false });
  });

  it("aborts the request in flight on unmount", async () => {
    const { load, calls } = controlled();
    await mount({ load, deps: ["a"] });
    await act(() => render(null, dom.root));
    expect(calls[0].signal.aborted).toBe(true);
  });

  it("new parameters abort the old request, whose late answer never lands", async () => {
    const { load, calls } = controlled();
    await mount({ load, deps: ["a"] });
    await mount({ load, deps: ["b"] });
    expect(calls).toHaveLength(2);
    expect(calls[0].signal.aborted).toBe(true);
    calls[0].resolve("old"); // already rejected by the abort: ignored
    calls[1].resolve("new");
    await settle();
    expect(probe.seen.data).toBe("new");
  });

  it("polls every interval, but never while a request is still on its way", async () => {
    const { load, calls } = controlled();
    await mount({ load, deps: [], opts: { interval: 1000 } });
    await act(() => vi.advanceTimersByTime(5000)); // the first answer is slow
    expect(calls).toHaveLength(1);
    calls[0].resolve(1);
    await settle();
    await act(() => vi.advanceTimersByTime(1000));
    expect(calls).toHaveLength(2);
    expect(calls[1].info).toEqual({ first: false });
    calls[1].resolve(2);
    await settle();
    expect(probe.seen.data).toBe(2);
  });

  it("a request out for STALE_MS is given up and asked again: a lost reply never stops polling", async () => {
    const { load, calls } = controlled();
    await mount({ load, deps: [], opts: { interval: 1000 } });
    calls[0].resolve(1);
    await settle();
    await act(() => vi.advanceTimersByTime(1000));
    expect(calls).toHaveLength(2); // this poll's reply never comes
    await act(() => vi.advanceTimersByTime(STALE_MS - 1000));
    expect(calls).toHaveLength(2); // not yet stale: polls still wait for it
    await act(() => vi.advanceTimersByTime(1000));
    expect(calls).toHaveLength(3);
    expect(calls[1].signal.aborted).toBe(true);
    calls[2].resolve(3);
    await settle();
    expect(probe.seen.data).toBe(3);
  });

  it("a failed first read is an error without data; a failed poll keeps the data", async () => {
    const { load, calls } = controlled();
    await mount({ load, deps: [], opts: 1000 });
    calls[0].reject(new Error("down"));
    await settle();
    expect(probe.seen).toMatchObject({ data: undefined, loading: false });
    expect(probe.seen.error.message).toBe("down");

    await act(() => probe.seen.reload());
    calls[1].resolve("up");
    await settle();
    expect(probe.seen).toMatchObject({ data: "up", error: null });

    await act(() => vi.advanceTimersByTime(1000));
    calls[2].reject(new Error("blip"));
    await settle();
    expect(probe.seen.data).toBe("up");
    expect(probe.seen.error.message).toBe("blip");
  });

  it("keepOnError keeps the data beside a failed reload", async () => {
    const { load, calls } = controlled();
    await mount({ load, deps: [], opts: { keepOnError: true } });
    calls[0].resolve("chart");
    await settle();
    await act(() => probe.seen.reload());
    calls[1].reject(new Error("502"));
    await settle();
    expect(probe.seen.data).toBe("chart");
    expect(probe.seen.error.message).toBe("502");
  });

  it("loads nothing until enabled", async () => {
    const { load, calls } = controlled();
    await mount({ load, deps: [], opts: { enabled: false, interval: 1000 } });
    await act(() => vi.advanceTimersByTime(3000));
    expect(calls).toHaveLength(0);
    expect(probe.seen.loading).toBe(false);
    await mount({ load, deps: [], opts: { enabled: true, interval: 1000 } });
    expect(calls).toHaveLength(1);
  });

  it("finalRead: one more read when polling stops, even behind a poll in flight", async () => {
    const { load, calls } = controlled();
    await mount({ load, deps: [], opts: { interval: 1000, finalRead: true } });
    calls[0].resolve(1);
    await settle();
    await act(() => vi.advanceTimersByTime(1000));
    expect(calls).toHaveLength(2); // a poll, still on its way when the run ends
    await mount({ load, deps: [], opts: { interval: 0, finalRead: true } });
    expect(calls).toHaveLength(3);
    expect(calls[1].signal.aborted).toBe(true);
    calls[2].resolve("last");
    await settle();
    expect(probe.seen.data).toBe("last");
    await act(() => vi.advanceTimersByTime(5000));
    expect(calls).toHaveLength(3); // and no polling after it
  });
});
