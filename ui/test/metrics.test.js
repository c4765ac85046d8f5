import { describe, expect, it } from "vitest";
import { filterKeys, flatten, numericSummaryKeys, sectionOf, sections, summaryValue } from "../src/lib/metrics.js";

describe("sections", () => {
  it("groups by prefix: train, val, test first, others A–Z, plain keys last", () => {
    const s = sections(["zeta/a", "val/loss", "lr", "train/loss", "test/acc", "train/acc", "alpha/b"]);
    expect(s.map((x) => x.name)).toEqual(["train", "val", "test", "alpha", "zeta", ""]);
    expect(s[0].keys).toEqual(["train/acc", "train/loss"]);
    expect(sectionOf("a/b/c")).toBe("a");
    expect(sectionOf("/x")).toBe("");
  });
});

describe("filterKeys", () => {
  const keys = ["train/loss", "val/loss", "train/lr", "gpu/0/util"];
  it("matches every word, case-insensitively", () => {
    expect(filterKeys(keys, "LOSS")).toEqual(["train/loss", "val/loss"]);
    expect(filterKeys(keys, "train lo")).toEqual(["train/loss"]);
    expect(filterKeys(keys, "  ")).toBe(keys);
  });
  it("accepts /regex/ and falls back to words when it is not valid", () => {
    expect(filterKeys(keys, "/^val|util$/")).toEqual(["val/loss", "gpu/0/util"]);
    expect(filterKeys(["a(b"], "/a(b/")).toEqual([]);
  });
});

describe("flatten and summaries", () => {
  it("flattens nested objects to dotted keys, sorted", () => {
    expect(flatten({ b: 1, a: { y: [1, 2], x: { z: null } }, e: {} })).toEqual([
      ["a.x.z", null], ["a.y", [1, 2]], ["b", 1], ["e", {}],
    ]);
  });
  it("finds numeric summary keys and reads values by dotted key", () => {
    const runs = [{ summary: { "val/acc": 0.9, name: "x", opt: { lr: 0.1 } } }, { summary: { loss: null } }];
    expect(numericSummaryKeys(runs)).toEqual(["loss", "opt.lr", "val/acc"]);
    expect(summaryValue(runs[0], "opt.lr")).toBe(0.1);
    expect(summaryValue(runs[0], "val/acc")).toBe(0.9);
    expect(summaryValue(runs[0], "nope.x")).toBeUndefined();
  });
});
