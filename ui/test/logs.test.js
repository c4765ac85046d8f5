import { describe, expect, it } from "vitest";
import {
  LineCache, MAX_SCROLL_PX, PAGE, ROW_PX, consoleParams, contentHeight, fmtClock, indexAt,
  missingPages, parseJumpTime, rowRange, rowsInView, scrollTopFor,
} from "../src/lib/logs.js";

describe("the virtual list's scroll map", () => {
  const view = 600;

  it("is exact while the content fits the browser's limits", () => {
    expect(contentHeight(1000)).toBe(1000 * ROW_PX);
    expect(indexAt(0, 1000, view)).toBe(0);
    expect(indexAt(4000, 1000, view)).toBe(4000 / ROW_PX);
    expect(scrollTopFor(200, 1000, view)).toBe(200 * ROW_PX);
    // The last screen: the bottom row is the last line.
    const maxScroll = contentHeight(1000) - view;
    expect(indexAt(maxScroll, 1000, view) + view / ROW_PX).toBe(1000);
  });

  it("scales a million lines into the capped height, end to end", () => {
    const total = 1_000_000;
    expect(contentHeight(total)).toBe(MAX_SCROLL_PX);
    const maxScroll = MAX_SCROLL_PX - view;
    expect(indexAt(0, total, view)).toBe(0);
    expect(indexAt(maxScroll, total, view)).toBe(total - view / ROW_PX);
    expect(indexAt(maxScroll / 2, total, view)).toBeCloseTo((total - view / ROW_PX) / 2, 6);
    for (const i of [0, 1, 12345, 500_000, 999_970]) {
      expect(indexAt(scrollTopFor(i, total, view), total, view)).toBeCloseTo(i, 6);
    }
    // Past the end clamps to the last screen.
    expect(scrollTopFor(5_000_000, total, view)).toBe(maxScroll);
    expect(indexAt(maxScroll + 1e6, total, view)).toBe(total - view / ROW_PX);
  });

  it("does not scroll a log shorter than the view", () => {
    expect(indexAt(100, 10, view)).toBe(0);
    expect(scrollTopFor(5, 10, view)).toBe(0);
    expect(rowsInView(view)).toBe(30);
    expect(rowsInView(5)).toBe(1);
  });

  it("renders the rows in view and fetches the pages they need", () => {
    expect(rowRange(100.5, 1000, view, 10)).toEqual([90, 141]);
    expect(rowRange(0, 5, view, 10)).toEqual([0, 5]);
    const have = new Set([...Array(PAGE).keys()]); // page 0 loaded
    expect(missingPages(0, PAGE, (i) => have.has(i))).toEqual([]);
    expect(missingPages(150, 450, (i) => have.has(i))).toEqual([1, 2]);
    have.delete(170);
    expect(missingPages(150, 250, (i) => have.has(i))).toEqual([0, 1]);
  });
});

describe("the line cache", () => {
  it("holds lines by index and drops the farthest first", () => {
    const c = new LineCache(5);
    c.put(0, ["a", "b", "c"]);
    c.put(100, ["x", "y", "z"], 100);
    expect(c.size).toBe(5);
    expect(c.has(0)).toBe(false); // farthest from 100
    expect(c.get(101)).toBe("y");
    expect(c.get(2)).toBe("c");
    c.clear();
    expect(c.size).toBe(0);
  });
});

describe("console parameters and times", () => {
  it("only what is set", () => {
    expect(consoleParams({ label: "", node: "", stream: "all", q: "  " })).toEqual({});
    expect(consoleParams({ label: "rank-3", node: "", stream: "stderr", q: "nccl" }))
      .toEqual({ label: "rank-3", stream: "stderr", q: "nccl" });
    expect(consoleParams({ node: "0" })).toEqual({ node: "0" });
  });

  it("parses times typed by a person, in local time", () => {
    const ref = new Date(2024, 4, 1, 9, 30, 0).getTime() / 1000;
    expect(parseJumpTime("13:04:05", ref)).toBe(new Date(2024, 4, 1, 13, 4, 5).getTime() / 1000);
    expect(parseJumpTime("13:04", ref)).toBe(new Date(2024, 4, 1, 13, 4, 0).getTime() / 1000);
    expect(parseJumpTime("13:04:05.25", ref)).toBe(new Date(2024, 4, 1, 13, 4, 5).getTime() / 1000 + 0.25);
    expect(parseJumpTime("2024-05-02 01:02:03", ref)).toBe(new Date(2024, 4, 2, 1, 2, 3).getTime() / 1000);
    expect(parseJumpTime("2024-05-02T01:02", null)).toBe(new Date(2024, 4, 2, 1, 2, 0).getTime() / 1000);
    expect(parseJumpTime("13:04", null)).toBe(null);
    expect(parseJumpTime("yesterday", ref)).toBe(null);
    expect(parseJumpTime("<script>", ref)).toBe(null);
    const t = new Date(2024, 4, 1, 13, 4, 5, 123).getTime() / 1000;
    expect(fmtClock(t)).toBe("13:04:05.123");
  });
});
