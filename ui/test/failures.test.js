import { describe, expect, it } from "vitest";
import { after, cellText, what, who } from "../src/lib/failures.js";

const first = { label: "rank-1", rank: 1, state: "failed", error_type: "RuntimeError", message: "boom", time: 100, exit_code: 1, signal: null };

describe("failures", () => {
  it("names the rank, or the label without one", () => {
    expect(who(first)).toBe("rank 1");
    expect(who({ ...first, rank: -1 })).toBe("rank-1");
  });
  it("says what happened", () => {
    expect(what(first)).toBe("failed: RuntimeError: boom");
    expect(what({ ...first, state: "crashed", error_type: null })).toMatch(/^crashed: .*no exit recorded/);
    expect(what({ ...first, state: "killed", error_type: null, signal: 15 })).toBe("killed by signal 15");
    expect(what({ ...first, error_type: null, exit_code: 3 })).toBe("failed with exit code 3");
    // A rank silent since before a peer's "connection closed" leads until its death is known.
    expect(what({ ...first, state: "silent", error_type: null })).toBe("no sign of life since its last record — checking");
  });
  it("times the later failures from the first", () => {
    expect(after(first, { ...first, time: 100.42 })).toBe("+0.4 s");
    expect(after(first, { ...first, time: 220 })).toBe("+2 min");
    expect(after(first, { ...first, time: null })).toBe("");
  });
  it("fits a table cell", () => {
    expect(cellText(first)).toBe("rank-1 RuntimeError");
    expect(cellText({ ...first, state: "crashed", error_type: null })).toBe("rank-1 crashed");
    expect(cellText({ ...first, state: "silent", error_type: null })).toBe("rank-1 silent?");
  });
});
