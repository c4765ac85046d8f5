import { describe, expect, it } from "vitest";
import {
  LAG_FULL, cellDetails, cellState, healthCells, lagShade, orderedStacks,
  stallsOf, stateCounts,
} from "../src/lib/health.js";

const rank = (over) => ({
  label: "rank-0", rank: 0, node: 0, host: "n0", state: "running", last_step: 100,
  last_seen: 10, step_rate: 10, lag_steps: 0, lag_seconds: 0, slow: false, stalled: false,
  stall: null, message: "rank 0 running, step 100", ...over,
});

describe("rank health cells", () => {
  it("show the most telling state: crashed, then an open stall, then the stream's", () => {
    expect(cellState(rank({ state: "crashed", stalled: true }))).toBe("crashed");
    expect(cellState(rank({ state: "failed", stalled: true }))).toBe("stalled");
    expect(cellState(rank({ state: "killed", stalled: true }))).toBe("stalled");
    expect(cellState(rank({ state: "failed" }))).toBe("failed");
    expect(cellState(rank({ state: "running" }))).toBe("running");
  });

  it("shade by lag, from on par to LAG_FULL seconds behind", () => {
    expect(lagShade(rank({ lag_seconds: null }))).toBe(0);
    expect(lagShade(rank({ lag_seconds: -5 }))).toBe(0);
    expect(lagShade(rank({ lag_seconds: LAG_FULL / 2 }))).toBe(0.5);
    expect(lagShade(rank({ lag_seconds: 10 * LAG_FULL }))).toBe(1);
  });

  it("describe a rank in plain lines", () => {
    const r = rank({
      label: "rank-5", rank: 5, node: 1, host: "gpu-7", state: "running", last_step: 1200,
      step_rate: 0.5, lag_steps: 30, slow: true, stalled: true,
      stall: { where: "all_reduce at train.py:88", since: 0, seconds: 420 },
    });
    expect(cellDetails(r, 2)).toEqual([
      "rank-5 · rank 5 · node 1 (gpu-7)",
      "state: running, stalled, slow",
      "step 1,200 (30 behind the median)",
      "0.50 steps/s (median 2.00)",
      "stalled for 7m 00s in all_reduce at train.py:88",
    ]);
    expect(cellDetails(rank({ lag_steps: -3, step_rate: null }), null)[2]).toBe("step 100 (3 ahead of the median)");
    expect(cellDetails(rank({ step_rate: null }), null)[3]).toBe("– steps/s (median –)");
  });

  it("come in rank order with counts, most severe first", () => {
    const health = {
      median_rate: 1,
      ranks: [
        rank({ label: "rank-2", rank: 2, state: "crashed" }),
        rank({ label: "rank-0", rank: 0 }),
        rank({ label: "rank-1", rank: 1, slow: true, lag_seconds: 3 }),
        rank({ label: "rank-3", rank: 3, state: "killed", stalled: true, stall: { where: "x", seconds: 1 } }),
      ],
    };
    const cells = healthCells(health);
    expect(cells.map((c) => [c.label, c.state, c.slow, c.lag])).toEqual([
      ["rank-0", "running", false, 0],
      ["rank-1", "running", true, 3 / LAG_FULL],
      ["rank-2", "crashed", false, 0],
      ["rank-3", "stalled", false, 0],
    ]);
    expect(stateCounts(cells)).toEqual([["crashed", 1], ["stalled", 1], ["running", 2], ["slow", 1]]);
    expect(healthCells({ ranks: [] })).toEqual([]);
    expect(healthCells(undefined)).toEqual([]);
  });
});

describe("stalls", () => {
  it("longest first, with what the banner says", () => {
    const health = {
      ranks: [
        rank({ label: "rank-1", rank: 1, stalled: true, message: "rank 1 stalled for 2 min",
               stall: { where: "recv at a.py:1", seconds: 120 } }),
        rank({ label: "rank-5", rank: 5, stalled: true, message: "rank 5 stalled for 7 min in all_reduce at train.py:88",
               stall: { where: "all_reduce at train.py:88", seconds: 420, stacks: { MainThread: "..." } } }),
        rank({ label: "rank-0" }),
      ],
    };
    expect(stallsOf(health).map((s) => [s.label, s.message, s.where, s.stacks])).toEqual([
      ["rank-5", "rank 5 stalled for 7 min in all_reduce at train.py:88", "all_reduce at train.py:88", { MainThread: "..." }],
      ["rank-1", "rank 1 stalled for 2 min", "recv at a.py:1", null],
    ]);
    expect(stallsOf({ ranks: [rank({})] })).toEqual([]);
  });

  it("stacks: the main thread first, then by name", () => {
    const got = orderedStacks({ "rankwise-writer (2)": "w", "MainThread (1)": "m", "loader (3)": "l" });
    expect(got.map(([k]) => k)).toEqual(["MainThread (1)", "loader (3)", "rankwise-writer (2)"]);
    expect(orderedStacks(null)).toEqual([]);
  });
});
