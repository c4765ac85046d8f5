// The rich-data panels' data shaping, on fixture replies shaped as docs/http-api.md says.
import { describe, expect, it } from "vitest";
import {
  cellView,
  compareColumn,
  describeItem,
  heatColor,
  heatmapGrid,
  lastPage,
  orderItems,
  pageRange,
  pickLabel,
  pickStep,
  playerFor,
  splitKeys,
  stepIndex,
  tableParams,
} from "../src/lib/media.js";

const KEYS = {
  keys: [
    { key: "samples", kind: "image", steps: [0, 10, 20], labels: ["0", "1"] },
    { key: "predictions", kind: "table", steps: [5], labels: ["0"] },
    { key: "grad/fc1.weight", kind: "histogram", steps: [0, 1], labels: ["0", "1", "2"] },
    { key: "clip", kind: "audio", steps: [3], labels: ["1"] },
    { key: "anim", kind: "video", steps: [3], labels: ["0"] },
    { key: "report", kind: "html", steps: [3], labels: ["0"] },
    { key: "someday", kind: "point_cloud", steps: [1], labels: ["0"] },
  ],
};

describe("media keys by tab", () => {
  it("splits kinds into the Media, Tables and Histograms tabs, sorted, unknown kinds left out", () => {
    const s = splitKeys(KEYS.keys);
    // pictures first, then video, audio, html
    expect(s.media.map((k) => k.key)).toEqual(["samples", "anim", "clip", "report"]);
    expect(s.tables.map((k) => k.key)).toEqual(["predictions"]);
    expect(s.histograms.map((k) => k.key)).toEqual(["grad/fc1.weight"]);
  });

  it("copes with no reply", () => {
    expect(splitKeys(undefined)).toEqual({ media: [], tables: [], histograms: [] });
  });
});

describe("step and rank choice", () => {
  it("shows the latest step by default, the step asked for, or the one logged before it", () => {
    expect(pickStep([0, 10, 20], undefined)).toBe(20);
    expect(pickStep([0, 10, 20], 10)).toBe(10);
    expect(pickStep([0, 10, 20], 15)).toBe(10);
    expect(pickStep([5, 10], 2)).toBe(5);
    expect(pickStep([], 3)).toBeNull();
    expect(stepIndex([0, 10, 20], 15)).toBe(1);
    expect(stepIndex([0, 10, 20], null)).toBe(2);
  });

  it("keeps the picked rank, falls back to the primary's, then the first", () => {
    expect(pickLabel(["0", "1"], "1", "0")).toBe("1");
    expect(pickLabel(["1", "2"], "5", "0")).toBe("1");
    expect(pickLabel(["1", "0"], "", "0")).toBe("0");
    expect(pickLabel([], "1", "0")).toBeNull();
  });
});

describe("media items", () => {
  const items = [
    { step: 20, label: "0", kind: "image", index: 1, digest: "b", format: "png", caption: "two", width: 8, height: 8 },
    { step: 20, label: "0", kind: "image", index: 0, digest: "a", format: "png", caption: "<b>one</b>", width: 8, height: 8 },
  ];

  it("orders a gallery by its logged index", () => {
    expect(orderItems(items).map((i) => i.digest)).toEqual(["a", "b"]);
  });

  it("plays GIF videos as images, MP4 in a video element, html only as html", () => {
    expect(playerFor({ kind: "image", format: "png" })).toBe("img");
    expect(playerFor({ kind: "video", format: "gif" })).toBe("img");
    expect(playerFor({ kind: "video", format: "mp4" })).toBe("video");
    expect(playerFor({ kind: "audio", format: "wav" })).toBe("audio");
    expect(playerFor({ kind: "html", format: "html" })).toBe("html");
    expect(playerFor({ kind: "text", format: "txt" })).toBe("text");
  });

  it("describes an item in one line", () => {
    expect(describeItem(items[0])).toBe("8×8 · PNG");
    expect(describeItem({ kind: "audio", format: "wav", sample_rate: 16000, duration: 1.5 })).toBe(
      "16000 Hz · 1.50 s · WAV",
    );
  });
});

describe("tables", () => {
  it("builds the tables route's query, leaving out what is not set", () => {
    expect(tableParams({ key: "t", page: 2 })).toEqual({
      key: "t",
      label: undefined,
      step: undefined,
      offset: 100,
      limit: 50,
      sort: undefined,
      desc: undefined,
      filter_col: undefined,
      filter: undefined,
    });
    const q = tableParams({ key: "t", label: "1", step: 5, sort: "score_3", desc: true, filterCol: "guess", filter: " 7 " });
    expect(q).toMatchObject({ label: "1", step: 5, sort: "score_3", desc: true, filter_col: "guess", filter: "7" });
    expect(tableParams({ key: "t", filterCol: "guess", filter: "  " }).filter).toBeUndefined();
  });

  it("pages 100,000 rows 50 at a time", () => {
    expect(lastPage(100000)).toBe(1999);
    expect(lastPage(0)).toBe(0);
    expect(pageRange(50, 50, 100000)).toBe("rows 51–100 of 100,000");
    expect(pageRange(0, 0, 0)).toBe("no rows");
  });

  it("draws image cells as thumbnails and everything else as text", () => {
    const d = "ab".repeat(32);
    expect(cellView(d, "image")).toEqual({ image: d });
    expect(cellView("not-a-digest", "image")).toEqual({ text: "not-a-digest" });
    expect(cellView(d, "str")).toEqual({ text: d });
    expect(cellView(0.123456789, "float")).toEqual({ text: "0.123457" });
    expect(cellView(7, "int")).toEqual({ text: "7" });
    expect(cellView(0.00000342957, "float")).toEqual({ text: "3.430e-6" });
    expect(cellView(null, "int")).toEqual({ text: "–" });
    expect(cellView(false, "bool")).toEqual({ text: "false" });
    expect(cellView([1, 2], "list")).toEqual({ text: "[1,2]" });
    expect(cellView("<img src=x onerror=alert(1)>", "str")).toEqual({ text: "<img src=x onerror=alert(1)>" });
  });

  it("compares a column at two steps, matching rows by an id column", () => {
    const a = { columns: ["id", "guess"], rows: [[1, 3], [2, 5], [3, 9]] };
    const b = { columns: ["id", "guess"], rows: [[2, 5], [1, 7], [4, 0]] };
    expect(compareColumn(a, b, "guess", "id")).toEqual([
      { key: 1, a: 3, b: 7, changed: true },
      { key: 2, a: 5, b: 5, changed: false },
      { key: 3, a: 9, b: null, changed: true },
      { key: 4, a: null, b: 0, changed: true },
    ]);
    // No id column: by position.
    expect(compareColumn(a, b, "guess", "nope").map((r) => [r.a, r.b])).toEqual([
      [3, 5],
      [5, 7],
      [9, 0],
    ]);
  });
});

describe("histogram heatmap", () => {
  it("puts each step's counts in the rows its bins cover", () => {
    const g = heatmapGrid(
      {
        label: "0",
        steps: [0, 1],
        edges: [
          [0, 1, 2],
          [0, 2, 4],
        ],
        counts: [
          [3, 1],
          [4, 2],
        ],
      },
      4,
    );
    expect(g.lo).toBe(0);
    expect(g.hi).toBe(4);
    expect(g.rows).toBe(4);
    // step 0: bins [0,1) [1,2) land in rows 0 and 1
    expect(Array.from(g.grid.slice(0, 4))).toEqual([3, 1, 0, 0]);
    // step 1: [0,2) spreads over rows 0-1, [2,4) over rows 2-3
    expect(Array.from(g.grid.slice(4, 8))).toEqual([2, 2, 1, 1]);
    expect(g.max).toBe(3);
    // every count is kept
    expect(g.grid.reduce((s, v) => s + v, 0)).toBeCloseTo(10);
  });

  it("draws a constant tensor as one band, and nothing for no steps", () => {
    const g = heatmapGrid({ steps: [0], edges: [[1, 1]], counts: [[5]] }, 8);
    expect(g.grid.reduce((s, v) => s + v, 0)).toBe(5);
    expect(heatmapGrid({ steps: [], edges: [], counts: [] })).toBeNull();
  });

  it("colours empty cells transparent and full ones bright", () => {
    expect(heatColor(0, 10)).toEqual([0, 0, 0, 0]);
    expect(heatColor(10, 10)).toEqual([253, 231, 37, 255]);
    expect(heatColor(1, 10)[3]).toBe(255);
  });
});

describe("labels and filters", () => {
  it("orders ranks by number", async () => {
    const { sortLabels, filterHint } = await import("../src/lib/media.js");
    expect(sortLabels(["rank-10", "rank-2", "rank-0"])).toEqual(["rank-0", "rank-2", "rank-10"]);
    expect(filterHint("guess", "int")).toBe("guess: N, >N, <=N, A..B");
    expect(filterHint("name", "str")).toBe("name contains…");
    expect(filterHint("", "str")).toBe("pick a column to filter");
  });
});

describe("compare page media keys", () => {
  it("merges the runs' media keys: steps and ranks are the union, runs that have each", async () => {
    const { mergeMediaKeys } = await import("../src/lib/media.js");
    const m = mergeMediaKeys([
      [{ key: "samples", kind: "image", steps: [0, 10], labels: ["rank-0"] }, { key: "t", kind: "table", steps: [1], labels: ["rank-0"] }],
      [{ key: "samples", kind: "image", steps: [5, 10], labels: ["rank-1", "rank-0"] }, { key: "clip", kind: "audio", steps: [2], labels: ["rank-0"] }],
    ]);
    expect(m.map((k) => k.key)).toEqual(["samples", "clip"]); // pictures first
    expect(m[0].steps).toEqual([0, 5, 10]);
    expect(m[0].labels).toEqual(["rank-0", "rank-1"]);
    expect([...m[0].runs]).toEqual([0, 1]);
    expect([...m[1].runs]).toEqual([1]);
  });
});
