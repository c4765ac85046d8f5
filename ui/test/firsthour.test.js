// Issue 22's dashboard details: per-process runs named by rank, a rank's child processes
// told apart in the health strip, overprinted chart labels merged, the heatmap's scales.
import { describe, expect, it } from "vitest";
import { fmtMode, runRank, runTitle } from "../src/lib/format.js";
import { cellTexts, healthCells } from "../src/lib/health.js";
import { collapseLabels } from "../src/lib/stalls.js";
import { heatGradient, heatScaleTicks, heatStepTicks } from "../src/lib/media.js";

const run = (over) => ({ id: "r", name: "r", run_mode: "shared", world_size: 2, run_ranks: 2, ...over });

describe("per-process runs", () => {
  it("name their rank in tables and legends", () => {
    const own = run({ id: "base-rank-1", name: "fuzzy-otter-7", run_mode: "new", run_ranks: 1, label: "rank-1" });
    expect(runRank(own)).toBe("rank-1");
    expect(runTitle(own)).toBe("fuzzy-otter-7 · rank-1");
    expect(runTitle({ ...own, name: "base-rank-1" })).toBe("base-rank-1"); // already says it
    expect(runRank(run({}))).toBe(""); // several ranks: no label
    expect(runRank(run({ world_size: 1, run_ranks: 1, label: "rank-0" }))).toBe(""); // one process
  });

  it("say what the mode recorded", () => {
    expect(fmtMode(run({ run_mode: "new", run_ranks: 1, label: "rank-1" }))).toBe("new: one run per process (this is rank-1)");
    expect(fmtMode(run({ run_ranks: 1, label: "rank-0" }))).toBe("rank-0 only, of 2 ranks");
    expect(fmtMode(run({}))).toBe("shared: every rank");
    expect(fmtMode(run({ world_size: 4, run_ranks: 3 }))).toBe("shared: 3 of 4 ranks");
    expect(fmtMode(run({ world_size: 1, run_ranks: 1 }))).toBe("shared: every rank");
  });
});

describe("health cells", () => {
  it("tell a rank's child processes apart", () => {
    const r = (label, rank) => ({ label, rank, node: 0, state: "finished" });
    const ranks = [r("rank-0", 0), r("rank-0-child-77", 0), r("rank-0-child-99", 0), r("rank-1", 1)];
    expect(cellTexts(ranks)).toEqual(["0", "0c1", "0c2", "1"]);
    expect(cellTexts([r("rank-0-child-5", 0)])).toEqual(["0c1"]);
    expect(cellTexts([r("x", -1)])).toEqual(["?"]);
    const cells = healthCells({ ranks: [ranks[2], ranks[0], ranks[1]], median_rate: null });
    expect(cells.map((c) => c.text)).toEqual(["0", "0c1", "0c2"]);
  });
});

describe("chart labels", () => {
  it("merge when they would print over each other", () => {
    const s = (px, rank) => ({ px, text: `stall r${rank}`, key: "stall" });
    expect(collapseLabels([s(100, 12), s(104, 13), s(300, 1)], 50)).toEqual([
      { px: 100, text: "2 stalls", n: 2 },
      { px: 300, text: "stall r1", n: 1 },
    ]);
    // A chain of close marks is one group; kinds that differ are "non-finite".
    const nan = (px, key = "NaN") => ({ px, text: key, key });
    expect(collapseLabels([nan(0), nan(20), nan(40), nan(60)], 25).map((g) => g.text)).toEqual(["4 NaN"]);
    expect(collapseLabels([nan(0), nan(10, "Inf")], 25).map((g) => g.text)).toEqual(["2 non-finite"]);
    expect(collapseLabels([], 25)).toEqual([]);
  });
});

describe("heatmap scales", () => {
  it("label several steps, first and last included", () => {
    const steps = Array.from({ length: 11 }, (_, i) => i * 10);
    const ticks = heatStepTicks(steps, 6);
    expect(ticks.map((t) => t.step)).toEqual([0, 20, 40, 60, 80, 100]);
    expect(ticks[0].at).toBeCloseTo(0.5 / 11);
    expect(ticks[5].at).toBeCloseTo(10.5 / 11);
    expect(heatStepTicks([0, 10, 20], 6).map((t) => t.step)).toEqual([0, 10, 20]);
    expect(heatStepTicks([5], 6)).toEqual([{ step: 5, at: 0.5 }]);
    expect(heatStepTicks([], 6)).toEqual([]);
  });

  it("give the colour scale's counts on its square-root ramp", () => {
    expect(heatScaleTicks(64)).toEqual([{ count: 0, at: 0 }, { count: 16, at: 0.5 }, { count: 64, at: 1 }]);
    expect(heatScaleTicks(0)).toEqual([]);
    expect(heatGradient()).toMatch(/^linear-gradient\(to right, rgb\(22, 31, 84\) 0%, .*rgb\(253, 231, 37\) 100%\)$/);
  });
});
