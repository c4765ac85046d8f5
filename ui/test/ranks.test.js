import { describe, expect, it } from "vitest";
import {
  MAX_LINES, capLines, cellColor, colorRange, decodeCells, deviations, healthGrid, isOdd,
  colorTable, foldRows, outliers, paint, pickRanks, quantile,
} from "../src/lib/ranks.js";

const cell = (rank, over = {}) => ({
  label: `rank-${rank}`, rank, node: Math.floor(rank / 8), host: `gpu-${Math.floor(rank / 8)}`,
  state: "finished", slow: false, lag: 0, ...over,
});

describe("healthGrid", () => {
  const cells = Array.from({ length: 1024 }, (_, r) => cell(r));
  cells[700] = cell(700, { state: "failed" });
  cells[1000] = cell(1000, { state: "crashed" });
  cells[300] = cell(300, { slow: true });

  it("has a row per node, local ranks in order, the odd nodes first and worst first", () => {
    const g = healthGrid(cells);
    expect(g.nodes).toHaveLength(128);
    expect(g.cols).toBe(8);
    expect(g.nodes.slice(0, 3).map((n) => n.node)).toEqual([125, 87, 37]); // crashed, failed, slow
    expect(g.nodes[3].node).toBe(0);
    expect(g.nodes.find((n) => n.node === 125).cells.map((c) => c.rank)).toEqual([1000, 1001, 1002, 1003, 1004, 1005, 1006, 1007]);
    expect(g.odd.map((c) => c.rank)).toEqual([1000, 700, 300]);
  });

  it("counts lagging, non-finite and unusual states as odd, healthy ones not", () => {
    expect(isOdd(cell(1))).toBe(false);
    expect(isOdd(cell(1, { state: "running", lag: 0.2 }))).toBe(false);
    expect(isOdd(cell(1, { state: "running", lag: 0.6 }))).toBe(true);
    expect(isOdd(cell(1, { nonfinite: "NaN from step 4" }))).toBe(true);
    expect(isOdd(cell(1, { state: "killed" }))).toBe(true);
  });
});

describe("heatmap cells", () => {
  it("decode base64 float32 row-major, and refuse a wrong size", () => {
    const f = new Float32Array([1, 2, NaN, 4, 5, 6]);
    const b64 = btoa(String.fromCharCode(...new Uint8Array(f.buffer)));
    const got = decodeCells(b64, 2, 3);
    expect(Array.from(got.slice(0, 2))).toEqual([1, 2]);
    expect(Number.isNaN(got[2])).toBe(true);
    expect(() => decodeCells(b64, 3, 3)).toThrow(/6 cells for 3 × 3/);
  });

  it("deviate from their bucket's median; a missing median is NaN", () => {
    const d = deviations(new Float32Array([1, 5, 3, 9]), [2, null], 2);
    expect(d[0]).toBe(-1);
    expect(Number.isNaN(d[1])).toBe(true);
    expect(d[2]).toBe(1);
  });

  it("colour by percentile ranges; deviations symmetric around zero", () => {
    const v = Float32Array.from({ length: 101 }, (_, i) => i);
    v[100] = 1e9; // one spike does not wash the rest out
    const [lo, hi] = colorRange(v, "value");
    expect(lo).toBe(1);
    expect(hi).toBe(99);
    expect(colorRange(Float32Array.from([-3, 1, 2]), "deviation")).toEqual([-20, 20]); // 10 × median |dev|
    expect(colorRange(Float32Array.from([0, 0, 0, 5]), "deviation")).toEqual([-5, 5]); // most are 0
    expect(colorRange(new Float32Array([NaN]), "value")).toEqual([0, 1]);
    expect(quantile([NaN, 2, 1], 0)).toBe(1);
    const big = Float32Array.from({ length: 1_000_000 }, (_, i) => i);
    expect(Math.abs(quantile(big, 0.5) - 500_000)).toBeLessThan(100); // sampled, near enough
    expect(cellColor(NaN, 0, 1, "value")).toBeNull();
    expect(cellColor(0, -1, 1, "deviation")).toEqual([247, 247, 247]);
    expect(cellColor(5, 0, 1, "value")).toEqual([253, 231, 37]); // clamped to the top
  });
});

describe("the rank picker", () => {
  const ranks = Array.from({ length: 64 }, (_, r) => cell(r));

  it("finds ranks, ranges, nodes and hosts", () => {
    expect(pickRanks("17", ranks)).toEqual(["rank-17"]);
    expect(pickRanks("0-3, 62", ranks)).toEqual(["rank-0", "rank-1", "rank-2", "rank-3", "rank-62"]);
    expect(pickRanks("node 2", ranks)).toEqual(Array.from({ length: 8 }, (_, i) => `rank-${16 + i}`));
    expect(pickRanks("n7", ranks)).toHaveLength(8);
    expect(pickRanks("node 1-2", ranks)).toHaveLength(16);
    expect(pickRanks("gpu-3", ranks)).toHaveLength(8);
    expect(pickRanks("5-3", ranks)).toEqual(["rank-3", "rank-4", "rank-5"]);
    expect(pickRanks("zzz", ranks)).toEqual([]);
    expect(pickRanks("  ", ranks)).toEqual([]);
  });

  it("orders outliers by score and caps the lines drawn", () => {
    const rows = [{ label: "a", rank: 0, score: 0.7 }, { label: "b", rank: 1, score: 40 },
      { label: "c", rank: 2, score: null }, { label: "d", rank: 3, score: 3 }];
    expect(outliers(rows, 2)).toEqual(["b", "d"]);
    const many = Array.from({ length: 50 }, (_, i) => `rank-${i}`);
    expect(capLines(many)).toEqual({ shown: many.slice(0, MAX_LINES), dropped: 50 - MAX_LINES });
    expect(capLines(["x"])).toEqual({ shown: ["x"], dropped: 0 });
  });
});

describe("foldRows", () => {
  it("keeps the rank furthest from the median in each squeezed pixel row", () => {
    // 4 ranks, 2 buckets, into 2 pixel rows: ranks 0-1 and 2-3.
    const shown = Float32Array.from([1, 1, 1, 9, 1, NaN, 1, 1]);
    const dev = Float32Array.from([0, 0, 0, 8, 0, NaN, 0, 0]);
    const f = foldRows(shown, dev, 4, 2, 2);
    expect(f.rows).toBe(2);
    expect(Array.from(f.values)).toEqual([1, 9, 1, 1]);
    expect(Array.from(f.pick)).toEqual([0, 1, 2, 3]);
    const same = foldRows(shown, dev, 4, 2, 100); // room for every rank: unchanged
    expect(same.rows).toBe(4);
    expect(Array.from(same.pick)).toEqual([0, 0, 1, 1, 2, -1, 3, 3]);
  });
});

describe("paint", () => {
  it("looks colours up in the table, as cellColor mixes them, and greys out NaN", () => {
    const lut = colorTable("deviation");
    const px = new Uint8ClampedArray(4 * 3);
    paint(Float32Array.from([-1, 0, NaN]), -1, 1, lut, px);
    expect(Array.from(px.slice(0, 4))).toEqual([...cellColor(-1, -1, 1, "deviation"), 255]);
    expect(Array.from(px.slice(4, 7))).toEqual(cellColor(0.0039, -1, 1, "deviation")); // index 128 of 255
    expect(Array.from(px.slice(8))).toEqual([128, 128, 128, 60]);
  });
});
