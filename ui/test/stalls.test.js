import { describe, expect, it } from "vitest";
import { describeMark, stallMarks } from "../src/lib/stalls.js";

const report = { label: "rank-1", incarnation: 0, rank: 1, time: 110, idle_seconds: 10, where: "sleep at t.py:5", cleared: false, step: 42 };
const clear = { ...report, time: 125, idle_seconds: 25, cleared: true, step: 42 };

describe("stall marks", () => {
  it("pairs a report with its clear, newest-first input", () => {
    expect(stallMarks([clear, report], "time")).toEqual([
      { label: "rank-1", rank: 1, seconds: 25, where: "sleep at t.py:5", open: false, x0: 100, x1: 125 },
    ]);
    expect(stallMarks([clear, report], "step")[0]).toMatchObject({ x0: 42, x1: 42, open: false });
  });
  it("keeps an open stall open and leaves out what cannot be placed", () => {
    expect(stallMarks([report], "time")[0]).toMatchObject({ x0: 100, x1: null, open: true });
    expect(stallMarks([{ ...report, step: null }], "step")).toEqual([]);
    expect(stallMarks([clear], "time")).toEqual([]);
  });
  it("says what happened", () => {
    expect(describeMark(stallMarks([clear, report], "step")[0])).toBe("rank 1 stalled 25 s in sleep at t.py:5");
  });
});
