import { describe, expect, it } from "vitest";
import { bandColumns, bandTable, crossValue, lineColumn, lineOf, tableBand } from "../src/lib/series.js";

// Three ranks logging 100, 200, 300 (+ step) samples/s: the reply of a metric defined
// with define_metric(reduce="sum").
const band = {
  x: [0, 1, 2],
  n: [3, 3, 3],
  mean: [200, 201, 202],
  wmean: [200, 201, 202],
  min: [100, 101, 102],
  max: [300, 301, 302],
  sum: [600, 603, 606],
  reduce: "sum",
};

describe("the cross-rank line of a defined metric", () => {
  it("draws the defined sum as the line, with no min..max band on another scale", () => {
    const cols = bandColumns(band);
    expect(cols.line).toBe("sum");
    expect(cols.defined).toBe("sum");
    expect(cols.mean).toEqual([600, 603, 606]);
    expect(cols.min).toBeNull();
    expect(cols.max).toBeNull();
  });

  it("still offers the others: the chart's setting wins over the definition", () => {
    expect(bandColumns(band, { line: "mean" }).mean).toEqual([200, 201, 202]);
    const mn = bandColumns(band, { line: "min" });
    expect(mn.mean).toEqual([100, 101, 102]);
    expect(mn.min).toEqual([100, 101, 102]); // the band is back: min..max
    expect(mn.defined).toBe("sum");
    expect(bandColumns(band, { line: "max" }).mean).toEqual([300, 301, 302]);
  });

  it("keeps today's mean where nothing is defined, and reads wmean as the mean", () => {
    const plain = { ...band, reduce: undefined, wmean: [150, 151, 152] };
    expect(lineOf(plain)).toBe("mean");
    expect(bandColumns(plain).mean).toEqual([150, 151, 152]); // weighted by default
    expect(bandColumns(plain, { weighted: false }).mean).toEqual([200, 201, 202]);
    expect(lineOf({ reduce: "wmean" })).toBe("mean");
    expect(lineOf({ reduce: "median" })).toBe("mean"); // unknown: the mean
  });

  it("leaves partial steps out of a sum too (their total lacks ranks)", () => {
    const cols = bandColumns({ ...band, partial: [false, false, true] });
    expect(cols.mean).toEqual([600, 603, null]);
    expect(cols.pending).toEqual([null, 603, 606]);
    expect(cols.lastComplete).toBe(1);
  });

  it("survives the zoom merge tables and picks each run's line in an overlay", () => {
    const t = bandTable(band);
    expect(t.cols.sum).toEqual([600, 603, 606]);
    expect(tableBand(t, "sum").reduce).toBe("sum");
    expect(lineColumn(t, "sum")).toEqual([600, 603, 606]);
    expect(lineColumn(t, "max")).toEqual([300, 301, 302]);
    expect(lineColumn(t, undefined)).toEqual([200, 201, 202]);
    expect(bandTable({ ...band, sum: [] }).cols.sum).toBeUndefined();
  });

  it("quotes the defined line in the summary", () => {
    const c = { step: 5, n: 3, mean: 205, wmean: 210, sum: 615, min: 105, max: 305, reduce: "sum" };
    expect(crossValue(c)).toBe(615);
    expect(crossValue({ ...c, reduce: "mean" })).toBe(210);
    expect(crossValue({ ...c, reduce: "max" })).toBe(305);
  });
});
