import { describe, expect, it } from "vitest";
import {
  bandColumns, bandMarks, bandTable, markAt, mergeRange, nonfiniteNote, tableBand,
} from "../src/lib/series.js";

// A 3-rank band as the API sends it (JSON: null where the mean has no finite value).
const band = {
  x: [0, 1, 2, 3, 4, 5],
  n: [3, 2, 3, 0, 0, 0],
  mean: [1, 0.41, 0.5, null, null, null],
  wmean: [1, 0.41, 0.5, null, null, null],
  min: [1, 0.4, 0.5, null, null, null],
  max: [1, 0.42, 0.5, null, null, null],
  nan: [0, 1, 0, 3, 1, 0],
  posinf: [0, 0, 0, 0, 1, 0],
  neginf: [0, 0, 0, 0, 0, 2],
  partial: [false, false, false, false, false, false],
};

describe("non-finite values in the cross-rank band", () => {
  it("marks the steps whose every value was NaN or ±Inf, saying which", () => {
    expect(bandMarks(band)).toEqual([
      { x: 3, text: "NaN", color: null },
      { x: 4, text: "NaN", color: null }, // NaN and ∞ together: the mean is NaN
      { x: 5, text: "−∞", color: null },
    ]);
    expect(bandMarks({ ...band, posinf: [0, 0, 0, 0, 0, 2], nan: [0, 0, 0, 0, 0, 0], neginf: undefined })
      .map((m) => m.text)).toEqual(["∞"]);
    // A band from before the counts (no nan/posinf/neginf): nothing to mark.
    expect(bandMarks({ x: [0], n: [0] })).toEqual([]);
  });

  it("quotes the last complete step even when it holds no finite value", () => {
    const c = bandColumns(band);
    expect(c.lastComplete).toBe(5);
    expect(markAt(c.marks, c.x[c.lastComplete]).text).toBe("−∞");
    expect(c.mean.slice(3)).toEqual([null, null, null]);
    // Still partial (not every live rank there): neither drawn nor quoted.
    const live = bandColumns({ ...band, partial: [false, false, false, false, true, true] });
    expect(live.lastComplete).toBe(3);
  });

  it("says how many ranks were non-finite where the mean left them out", () => {
    const c = bandColumns(band);
    expect(nonfiniteNote(c.nonfinite, 0)).toBe("");
    expect(nonfiniteNote(c.nonfinite, 1)).toBe("NaN on 1");
    expect(nonfiniteNote(c.nonfinite, 4)).toBe("NaN on 1 · ∞ on 1");
    expect(nonfiniteNote(bandColumns({ ...band, nan: undefined }).nonfinite, 1)).toBe("");
  });

  it("keeps the counts through a zoomed merge", () => {
    const fine = { ...band, x: [3, 3.5, 4], n: [0, 1, 0], mean: [null, 2, null], wmean: [null, 2, null],
      min: [null, 2, null], max: [null, 2, null], nan: [3, 0, 1], posinf: [0, 0, 1], neginf: [0, 0, 0],
      partial: [false, false, false] };
    const merged = tableBand(mergeRange(bandTable(band), bandTable(fine), 3, 4));
    expect(merged.x).toEqual([0, 1, 2, 3, 3.5, 4, 5]);
    expect(merged.nan).toEqual([0, 1, 0, 3, 0, 1, 0]);
    expect(bandMarks(merged).map((m) => `${m.x}:${m.text}`)).toEqual(["3:NaN", "4:NaN", "5:−∞"]);
  });
});
