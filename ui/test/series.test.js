import { describe, expect, it } from "vitest";
import {
  alignSeries, bandColumns, bandTable, isolated, markAt, nonfiniteMarks, weightedAt, extentInRange, lowerBound, mergeRange, mergeSeriesList,
  nearestIndex, pointsFor, pointsPerRank, positiveOnly, smooth, tableBand, upperBound,
} from "../src/lib/series.js";

describe("binary searches", () => {
  const xs = [0, 2, 2, 5, 9];
  it("bounds", () => {
    expect(lowerBound(xs, 2)).toBe(1);
    expect(upperBound(xs, 2)).toBe(3);
    expect(lowerBound(xs, -1)).toBe(0);
    expect(upperBound(xs, 10)).toBe(5);
  });
  it("nearest", () => {
    expect(nearestIndex(xs, 6)).toBe(3);
    expect(nearestIndex(xs, 8)).toBe(4);
    expect(nearestIndex(xs, -5)).toBe(0);
    expect(nearestIndex([], 1)).toBe(-1);
  });
});

describe("alignSeries", () => {
  it("puts series with their own x on the union of x, gaps as null", () => {
    const cols = alignSeries([
      { x: [0, 2, 4], y: [1, 2, 3] },
      { x: [1, 2, 5], y: [10, 20, 30] },
    ]);
    expect(cols).toEqual([
      [0, 1, 2, 4, 5],
      [1, null, 2, 3, null],
      [null, 10, 20, null, 30],
    ]);
  });
  it("keeps the last of repeated x and turns non-finite values into gaps", () => {
    const cols = alignSeries([{ x: [1, 1, 3], y: [5, 6, NaN] }]);
    expect(cols).toEqual([[1, 3], [6, null]]);
  });
  it("handles no series and empty series", () => {
    expect(alignSeries([])).toEqual([[]]);
    expect(alignSeries([{ x: [], y: [] }, { x: [2], y: [1] }])).toEqual([[2], [null], [1]]);
  });
});

describe("bandColumns", () => {
  const band = { x: [0, 1, 2], n: [2, 2, 2], mean: [1, 2, 3], wmean: [1.5, 2.5, 3.5], min: [0, 1, null], max: [2, 3, 4] };
  it("uses the weighted mean and keeps min/max as the band, gaps intact", () => {
    const c = bandColumns(band);
    expect(c.x).toEqual([0, 1, 2]);
    expect(c.mean).toEqual([1.5, 2.5, 3.5]);
    expect(c.min).toEqual([0, 1, null]);
    expect(c.max).toEqual([2, 3, 4]);
    expect(c.raw).toBeNull();
  });
  it("falls back to the plain mean and smooths only the mean", () => {
    const c = bandColumns({ ...band, wmean: undefined }, { smoothing: 0.5 });
    expect(c.raw).toEqual([1, 2, 3]);
    expect(c.mean[0]).toBeCloseTo(1);
    expect(c.mean[1]).toBeCloseTo((0.25 * 1 + 0.5 * 2) / 0.75);
    expect(c.min).toEqual([0, 1, null]);
  });
  it("drops non-positive values on a log axis", () => {
    const c = bandColumns({ ...band, min: [0, -1, 2] }, { log: true });
    expect(c.min).toEqual([null, null, 2]);
  });
  it("keeps partial steps out of the mean line and quotes the last complete one", () => {
    const live = {
      x: [0, 1, 2, 3], n: [3, 3, 2, 1], nw: [0, 0, 0, 0], mean: [1, 2, 2247, 3000],
      wmean: [1, 2, 2247, 3000], min: [0, 1, 2, 3000], max: [2, 3, 4492, 3000],
      partial: [false, false, true, true],
    };
    const c = bandColumns(live);
    expect(c.mean).toEqual([1, 2, null, null]);
    expect(c.pending).toEqual([null, 2, 2247, 3000]);
    expect(c.lastComplete).toBe(1);
    expect(c.hasWeights).toBe(false);
    const done = bandColumns({ ...live, partial: [false, false, false, false] });
    expect(done.pending).toBeNull();
    expect(done.lastComplete).toBe(3);
  });
  it("offers the weighted or the unweighted mean", () => {
    const w = { ...band, nw: [2, 2, 2] };
    expect(bandColumns(w).hasWeights).toBe(true);
    expect(bandColumns(w).mean).toEqual([1.5, 2.5, 3.5]);
    expect(bandColumns(w, { weighted: false }).mean).toEqual([1, 2, 3]);
    expect(weightedAt({ n: [2, 2, 0], nw: [2, 1, 0] })).toEqual([true, false, false]);
  });
  it("is null for an empty band", () => {
    expect(bandColumns(null)).toBeNull();
    expect(bandColumns({ x: [] })).toBeNull();
  });
});

describe("smooth", () => {
  it("is the identity at 0", () => {
    const ys = [1, 2, 3];
    expect(smooth(ys, 0)).toBe(ys);
  });
  it("is debiased: a constant stays constant from the first point", () => {
    expect(smooth([4, 4, 4, 4], 0.9).every((v) => Math.abs(v - 4) < 1e-12)).toBe(true);
  });
  it("keeps gaps as gaps without resetting the average", () => {
    const s = smooth([0, null, 10], 0.5);
    expect(s[1]).toBeNull();
    // after two finite points: (0.5*0.5*0 ... ) debiased EMA of [0, 10]
    expect(s[2]).toBeCloseTo((0.5 * 0.5 * 0 + 0.5 * 10) / (1 - 0.25));
  });
  it("treats NaN and Infinity as gaps", () => {
    const s = smooth([1, NaN, Infinity, 1], 0.3);
    expect(s.slice(0, 3)).toEqual([1, null, null]);
    expect(s[3]).toBeCloseTo(1, 12);
  });
});

describe("mergeRange (zoomed data into coarse data)", () => {
  const coarse = { x: [0, 10, 20, 30, 40], cols: { y: [0, 1, 2, 3, 4], z: [5, 5, 5, 5, 5] } };
  it("keeps coarse points outside [lo, hi] and fine points inside", () => {
    const fine = { x: [12, 14, 16, 18, 20, 22], cols: { y: [9, 8, 7, 6, 5, 4], z: [1, 1, 1, 1, 1, 1] } };
    const m = mergeRange(coarse, fine, 12, 20);
    expect(m.x).toEqual([0, 10, 12, 14, 16, 18, 20, 30, 40]);
    expect(m.cols.y).toEqual([0, 1, 9, 8, 7, 6, 5, 3, 4]);
    expect(m.cols.z).toEqual([5, 5, 1, 1, 1, 1, 1, 5, 5]);
  });
  it("never loses an extreme: every output point is an input point", () => {
    const fine = { x: [15, 17], cols: { y: [100, -100], z: [0, 0] } };
    const m = mergeRange(coarse, fine, 11, 29);
    expect(Math.max(...m.cols.y)).toBe(100);
    expect(Math.min(...m.cols.y)).toBe(-100);
    for (let i = 0; i < m.x.length; i++) {
      const inFine = fine.x.indexOf(m.x[i]);
      const inCoarse = coarse.x.indexOf(m.x[i]);
      expect(inFine >= 0 || inCoarse >= 0).toBe(true);
    }
    expect(m.x).toEqual([...m.x].sort((a, b) => a - b));
  });
  it("ignores fine points outside the range and columns it lacks become gaps", () => {
    const fine = { x: [5, 15, 35], cols: { y: [50, 60, 70] } };
    const m = mergeRange(coarse, fine, 11, 29);
    expect(m.x).toEqual([0, 10, 15, 30, 40]);
    expect(m.cols.z).toEqual([5, 5, null, 5, 5]);
  });
  it("returns the other side when one is empty", () => {
    expect(mergeRange(coarse, { x: [], cols: {} }, 0, 1)).toBe(coarse);
    expect(mergeRange(null, coarse, 0, 1)).toBe(coarse);
  });
  it("round-trips bands through tables", () => {
    const band = { x: [1, 2], n: [2, 2], mean: [1, 2], wmean: [1, 2], min: [0, 1], max: [2, 3], std: [1, 1] };
    expect(tableBand(bandTable(band))).toEqual(band);
    expect(bandTable({ x: [] })).toBeNull();
  });
  it("merges per-stream series label by label", () => {
    const c = [{ label: "rank-0", x: [0, 10, 20], y: [1, 2, 3] }, { label: "rank-1", x: [0, 20], y: [4, 5] }];
    const f = [{ label: "rank-0", x: [11, 12], y: [7, 8] }, { label: "rank-2", x: [11], y: [9] }];
    const m = mergeSeriesList(c, f, 11, 19);
    expect(m.map((s) => s.label)).toEqual(["rank-0", "rank-1", "rank-2"]);
    expect(m[0].x).toEqual([0, 10, 11, 12, 20]);
    expect(m[0].y).toEqual([1, 2, 7, 8, 3]);
    expect(m[1]).toBe(c[1]);
  });
});

describe("extents and budgets", () => {
  it("extentInRange looks only inside the range and skips gaps", () => {
    const xs = [0, 1, 2, 3];
    const ys = [100, null, -3, 7];
    expect(extentInRange(xs, ys, 1, 3)).toEqual([-3, 7]);
    expect(extentInRange(xs, ys, null, null)).toEqual([-3, 100]);
    expect(extentInRange(xs, ys, 1, 1)).toBeNull();
    expect(extentInRange(xs, ys, 1, 3, true)).toEqual([7, 7]);
  });
  it("positiveOnly", () => {
    expect(positiveOnly([1, 0, -1, null, 2])).toEqual([1, null, null, null, 2]);
  });
  it("asks for about two points per pixel, fewer per rank when there are many", () => {
    expect(pointsFor(600)).toBe(1200);
    expect(pointsFor(10)).toBe(200);
    expect(pointsPerRank(600, 4)).toBe(1200);
    expect(pointsPerRank(600, 64)).toBe(160);
    expect(pointsPerRank(600, 16)).toBe(600);
  });
});

describe("every value visible", () => {
  it("finds the points a line cannot draw: alone, or between gaps", () => {
    expect(isolated([5])).toEqual([0]);
    expect(isolated([null, 1, null, 2, 3])).toEqual([1]);
    expect(isolated([1, 2, 3])).toBeNull();
    expect(isolated([null, 4, null], true)).toEqual([1]);
    expect(isolated([1, null, 2], true)).toBeNull();
  });
  it("marks NaN and ±Inf from a JSON reply or MessagePack numbers", () => {
    const json = { x: [0, 1, 2], y: [null, null, 1], nonfinite: { x: [0, 1], value: ["NaN", "-Infinity"] } };
    expect(nonfiniteMarks(json)).toEqual([{ x: 0, text: "NaN", color: null }, { x: 1, text: "−∞", color: null }]);
    const packed = { x: [3, 4], y: [Infinity, 2] };
    expect(nonfiniteMarks(packed, "red")).toEqual([{ x: 3, text: "∞", color: "red" }]);
    expect(markAt(nonfiniteMarks(json), 1).text).toBe("−∞");
    expect(markAt([], 1)).toBeNull();
  });
});
