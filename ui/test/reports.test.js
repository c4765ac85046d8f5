import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import {
  blockProblem, blockRequests, canonical, insertBlock, itemsAt, mediaDigests, moveBlock, newBlock, removeBlock,
  requestKey,
} from "../src/lib/reports.js";

// The requests each block makes, pinned for the dashboard and the Python exporter alike
// (tests/server/test_reports_export.py reads the same file).
const fixture = JSON.parse(readFileSync(new URL("../../tests/data/report_requests.json", import.meta.url), "utf8"));

describe("blockRequests", () => {
  for (const c of fixture.cases) {
    it(`${c.block.type} ${c.block.id}`, () => {
      const reqs = blockRequests(c.block, fixture.project);
      expect(reqs).toEqual(c.requests);
      if (c.key) expect(requestKey(reqs[0])).toBe(c.key);
    });
  }
});

describe("block edits", () => {
  const a = { id: "a", type: "text", text: "" };
  const b = { id: "b", type: "text", text: "" };
  const c = { id: "c", type: "text", text: "" };
  it("moves, clamps, removes and inserts", () => {
    expect(moveBlock([a, b, c], 0, 1).map((x) => x.id)).toEqual(["b", "a", "c"]);
    expect(moveBlock([a, b, c], 2, -5).map((x) => x.id)).toEqual(["c", "a", "b"]);
    const same = [a, b];
    expect(moveBlock(same, 1, 1)).toBe(same);
    expect(removeBlock([a, b, c], 1).map((x) => x.id)).toEqual(["a", "c"]);
    expect(insertBlock([a, c], 1, b).map((x) => x.id)).toEqual(["a", "b", "c"]);
  });
  it("new blocks say what they still need", () => {
    expect(blockProblem(newBlock("chart", { project: "p" }))).toBe("pick at least one run");
    expect(blockProblem(newBlock("chart", { project: "p", run: "a", key: "loss" }))).toBe(null);
    expect(blockProblem(newBlock("media", { project: "p", run: "a" }))).toBe("pick a key");
    expect(blockProblem(newBlock("lineage"))).toBe("name an artifact");
    const x = newBlock("text");
    const y = newBlock("text");
    expect(x.id).not.toBe(y.id);
  });
  it("canonical JSON sorts keys at every level", () => {
    expect(canonical({ b: 1, a: { d: [1, { z: 0, y: "é" }], c: null } })).toBe('{"a":{"c":null,"d":[1,{"y":"é","z":0}]},"b":1}');
  });
  it("a media panel shows its step, else the latest", () => {
    const reply = { items: [{ step: 1, index: 0 }, { step: 4, index: 0 }, { step: 4, index: 1 }] };
    expect(itemsAt(reply, null).map((i) => i.step)).toEqual([4, 4]);
    expect(itemsAt(reply, 1)).toHaveLength(1);
    expect(itemsAt({ items: [] }, null)).toEqual([]);
    const kinds = { items: [{ step: 2, kind: "image", digest: "a" }, { step: 2, kind: "html", digest: "b" }, { step: 1, kind: "image", digest: "c" }] };
    expect(mediaDigests(kinds, null)).toEqual(["a"]); // an export inlines what is shown
    expect(mediaDigests(kinds, 1)).toEqual(["c"]);
  });
});
