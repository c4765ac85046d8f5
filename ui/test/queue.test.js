import { describe, expect, it } from "vitest";
import { createQueue } from "../src/lib/queue.js";

const tick = () => new Promise((r) => setTimeout(r, 0));

describe("priority queue", () => {
  it("runs at most `limit` at once, on-screen work first", async () => {
    const q = createQueue(1);
    const done = [];
    const gate = [];
    const job = (name) => () => new Promise((r) => gate.push(() => { done.push(name); r(name); }));
    const all = [
      q.run(1, job("prefetch-1")),
      q.run(1, job("prefetch-2")),
      q.run(0, job("visible")),
    ];
    await tick();
    expect(q.active).toBe(1);
    while (gate.length || q.waiting) {
      gate.shift()?.();
      await tick();
    }
    await Promise.all(all);
    // Queued in one go: the visible one goes first, then the others in order.
    expect(done).toEqual(["visible", "prefetch-1", "prefetch-2"]);
  });
  it("drops a waiting job whose signal aborts, without running it", async () => {
    const q = createQueue(1);
    let release;
    const first = q.run(0, () => new Promise((r) => (release = r)));
    const ctl = new AbortController();
    let ran = false;
    const second = q.run(0, () => { ran = true; }, ctl.signal);
    ctl.abort();
    await expect(second).rejects.toMatchObject({ name: "AbortError" });
    release();
    await first;
    await tick();
    expect(ran).toBe(false);
    expect(q.waiting).toBe(0);
  });
  it("passes failures through and keeps going", async () => {
    const q = createQueue(2);
    await expect(q.run(0, () => Promise.reject(new Error("boom")))).rejects.toThrow("boom");
    await expect(q.run(0, () => 3)).resolves.toBe(3);
    expect(q.active).toBe(0);
  });
});
