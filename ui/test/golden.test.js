// The dashboard's models on the replies the server really sends: tests/data/golden/*.json
// are written and checked against a live app by tests/server/test_golden.py (a fixed run: three
// ranks, six steps of `loss`, rank 1 NaN at step 2, rank 2 +Inf at step 4, and `tput`,
// defined reduce="sum").
import { describe, expect, it } from "vitest";
import health from "../../tests/data/golden/health.json";
import metrics from "../../tests/data/golden/metrics.json";
import run from "../../tests/data/golden/run.json";
import runs from "../../tests/data/golden/runs.json";
import series from "../../tests/data/golden/series.json";
import seriesSum from "../../tests/data/golden/series_sum.json";
import { divergenceNote, nonfiniteByLabel } from "../src/lib/diagnosis.js";
import { fmtRanks } from "../src/lib/format.js";
import { healthCells, stateCounts } from "../src/lib/health.js";
import { sections } from "../src/lib/metrics.js";
import { facets, groupRuns } from "../src/lib/runsModel.js";
import {
  bandColumns, bandMarks, crossValue, lineOf, nonfiniteMarks, nonfiniteNote,
} from "../src/lib/series.js";

describe("the golden replies", () => {
  it("lists the run with its ranks", () => {
    expect(runs.runs.map((r) => r.id)).toEqual(["r"]);
    expect(groupRuns(runs.runs)).toEqual([{ group: "", runs: runs.runs }]);
    expect(facets(runs.runs)).toEqual({ groups: [], jobTypes: [], tags: [] });
    expect(fmtRanks(run)).toBe("3 × 1");
    expect(run.state).toBe("finished");
  });

  it("names the rank that went non-finite first", () => {
    expect(divergenceNote(run)).toBe("NaN on rank 1 from step 2");
    expect(divergenceNote(runs.runs[0])).toBe("NaN on rank 1 from step 2");
    expect(run.divergence[0].message).toBe("loss: rank 1 NaN at step 2; rank 2 followed at 4");
    expect(nonfiniteByLabel(run).get("rank-2")).toMatchObject({ step: 4, value: "+Inf" });
    expect(run.hang).toBeUndefined();
  });

  it("draws the cross-rank band and each rank's non-finite points", () => {
    expect(series.key).toBe("loss");
    const c = bandColumns(series.band);
    expect(c.x).toEqual([0, 1, 2, 3, 4, 5]);
    expect(c.lastComplete).toBe(5);
    expect(c.n).toEqual([3, 3, 2, 3, 2, 3]);
    // No step lost every rank to NaN or ±Inf: no band mark, but the hover says who.
    expect(bandMarks(series.band)).toEqual([]);
    expect(nonfiniteNote(c.nonfinite, 2)).toBe("NaN on 1");
    expect(nonfiniteNote(c.nonfinite, 4)).toBe("∞ on 1");
    const byLabel = Object.fromEntries(series.series.map((s) => [s.label, s]));
    expect(Object.keys(byLabel).sort()).toEqual(["rank-0", "rank-1", "rank-2"]);
    expect(nonfiniteMarks(byLabel["rank-1"]).map((m) => `${m.x}:${m.text}`)).toEqual(["2:NaN"]);
    expect(nonfiniteMarks(byLabel["rank-2"]).map((m) => `${m.x}:${m.text}`)).toEqual(["4:∞"]);
    expect(nonfiniteMarks(byLabel["rank-0"])).toEqual([]);
  });

  it("draws a metric defined reduce=\"sum\" as the ranks' total, with no band", () => {
    expect(run.defined_metrics).toEqual({ tput: { reduce: "sum" } });
    expect(lineOf(seriesSum.band)).toBe("sum");
    const c = bandColumns(seriesSum.band);
    expect(c.line).toBe("sum");
    expect(c.mean).toEqual([600, 603, 606, 609, 612, 615]);
    expect(c.min).toBeNull();
    expect(crossValue(run.summary_cross_rank.tput)).toBe(615);
    // The chart's line setting can still show the mean, with its band.
    const mean = bandColumns(seriesSum.band, { line: "mean" });
    expect(mean.mean[5]).toBe(205);
    expect(mean.max[5]).toBe(305);
    // loss has no definition: its line is the mean.
    expect(lineOf(series.band)).toBe("mean");
    expect(crossValue(run.summary_cross_rank.loss)).toBe(run.summary_cross_rank.loss.wmean);
  });

  it("shows every rank's health cell", () => {
    const cells = healthCells(health);
    expect(cells.map((c) => c.label)).toEqual(["rank-0", "rank-1", "rank-2"]);
    expect(stateCounts(cells)).toEqual([["finished", 3]]);
    expect(cells[1].summary).toBe("rank 1 finished, step 5");
  });

  it("groups the metric keys", () => {
    expect(metrics.keys).toEqual(["loss", "tput"]);
    expect(sections(metrics.keys).length).toBe(1);
  });
});
