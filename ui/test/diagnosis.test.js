import { describe, expect, it } from "vitest";
import { firstBad, hangRows, kindText, nonfiniteByLabel, divergenceNote } from "../src/lib/diagnosis.js";

const f = (label, rank, step, value = "NaN", time = step) => ({ label, rank, step, time, value });
const run = {
  first_nonfinite: {
    "train/loss": [f("rank-1", 1, 40), f("rank-0", 0, 41)],
    "grad/norm": [f("rank-0", 0, 39, "+Inf")],
  },
  divergence: [
    { metric: "grad/norm", first: [f("rank-0", 0, 39, "+Inf")], then: [], message: "grad/norm: rank 0 +Inf at step 39" },
    { metric: "train/loss", first: [f("rank-1", 1, 40)], then: [f("rank-0", 0, 41)], message: "..." },
  ],
};

describe("diagnosis", () => {
  it("says which rank went non-finite first, and from which step", () => {
    expect(firstBad(run)).toMatchObject({ label: "rank-0", step: 39, metric: "grad/norm" });
    expect(divergenceNote(run)).toBe("Inf on rank 0 from step 39");
    expect(divergenceNote({ ...run, divergence: [run.divergence[1]] })).toBe("NaN on rank 1 from step 40");
    expect(divergenceNote({})).toBe("");
    expect(kindText("-Inf")).toBe("-Inf");
  });
  it("keeps each rank's earliest over the metrics", () => {
    const byLabel = nonfiniteByLabel(run);
    expect(byLabel.get("rank-0")).toMatchObject({ step: 39, metric: "grad/norm" });
    expect(byLabel.get("rank-1")).toMatchObject({ step: 40, metric: "train/loss" });
  });
  it("puts the odd ones out of a hang report first", () => {
    const r = (label, rank) => ({ label, rank });
    const hang = {
      odd: ["rank-2", "rank-4"],
      waiting: { where: "all_reduce at t.py:9", ranks: [r("rank-0", 0), r("rank-1", 1)] },
      elsewhere: [{ where: "sleep at t.py:5", ranks: [r("rank-2", 2)] }],
      logging: [r("rank-4", 4)],
    };
    expect(hangRows(hang).map((x) => [x.where, x.odd, x.ranks.length])).toEqual([
      ["still logging", true, 1],
      ["sleep at t.py:5", true, 1],
      ["all_reduce at t.py:9", false, 2],
    ]);
    expect(hangRows(null)).toEqual([]);
  });
});
