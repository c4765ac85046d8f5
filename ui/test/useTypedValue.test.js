// @vitest-environment happy-dom
// useTypedValue: the runs page's search box. It commits after typing stops and follows
// the URL, but the URL's late echo of what it committed never drops keys typed since.

import { describe, expect, it, vi } from "vitest";
import { h, render } from "preact";
import { act } from "preact/test-utils";
import { freshRoot } from "./freshRoot.js";
import { useTypedValue } from "../src/hooks.js";

const dom = freshRoot({ fakeTimers: true });
const probe = { value: null, set: null };
function Box({ external, commit }) {
  const [value, setValue] = useTypedValue(external, commit, 250);
  probe.value = value;
  probe.set = setValue;
  return null;
}
const show = (props) => act(() => render(h(Box, props), dom.root));
const type = (text) => act(() => probe.set(text));


describe("useTypedValue", () => {
  it("keeps what was typed when the URL catches up with an earlier value", async () => {
    const commit = vi.fn();
    await show({ external: "", commit });
    await type("trial");
    await act(() => vi.advanceTimersByTime(250)); // a pause: "trial" is committed
    expect(commit).toHaveBeenLastCalledWith("trial");
    await type("trial-"); // typed before the URL changed
    await show({ external: "trial", commit }); // the URL's echo arrives now
    expect(probe.value).toBe("trial-");
    await type("trial-a");
    await act(() => vi.advanceTimersByTime(250));
    expect(commit).toHaveBeenLastCalledWith("trial-a");
    await show({ external: "trial-a", commit });
    expect(probe.value).toBe("trial-a");
    expect(commit).toHaveBeenCalledTimes(2);
  });

  it("follows the URL when it changes from elsewhere", async () => {
    const commit = vi.fn();
    await show({ external: "a", commit });
    expect(probe.value).toBe("a");
    await show({ external: "saved view", commit }); // back, a saved view, Clear
    expect(probe.value).toBe("saved view");
    await type("saved view 2");
    await act(() => vi.advanceTimersByTime(100));
    await show({ external: "", commit }); // cleared while typing: the URL wins
    expect(probe.value).toBe("");
    await act(() => vi.advanceTimersByTime(1000));
    expect(commit).not.toHaveBeenCalled();
  });
});
