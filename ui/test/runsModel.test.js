import { describe, expect, it } from "vitest";
import {
  apiParams, clientSort, facets, filtersFromParams, filtersFromView, groupRuns, isFiltered,
  paramsFromFilters, viewFromFilters,
} from "../src/lib/runsModel.js";

describe("filters ⇄ URL ⇄ saved view", () => {
  const params = new URLSearchParams("state=crashed,bogus&tag=a,b&q=x&sort=-s:val/acc&cols=val/acc&by=group&view=mine");
  const f = filtersFromParams(params);
  it("reads the URL, dropping unknown states", () => {
    expect(f).toMatchObject({ state: ["crashed"], tag: ["a", "b"], q: "x", sort: "-s:val/acc", cols: ["val/acc"], by: "group", view: "mine" });
  });
  it("round-trips through a saved view", () => {
    const v = viewFromFilters("mine", f);
    expect(v).toEqual({
      name: "mine",
      filters: { state: ["crashed"], group: "", job_type: "", tag: ["a", "b"], q: "x", sort: "-s:val/acc", by: "group" },
      columns: ["val/acc"],
    });
    expect(filtersFromView(JSON.parse(JSON.stringify(v)))).toEqual(f);
  });
  it("tolerates views written by hand", () => {
    expect(filtersFromView({ name: "n", filters: { state: "crashed", tag: "x" } })).toMatchObject({ state: ["crashed"], tag: ["x"], cols: [] });
  });
  it("knows when filters hide runs", () => {
    expect(isFiltered(filtersFromParams(new URLSearchParams("sort=name&by=group&cols=a")))).toBe(false);
    expect(isFiltered(filtersFromParams(new URLSearchParams("tag=x")))).toBe(true);
  });
  it("leaves the default sort out of the URL", () => {
    expect(paramsFromFilters({ ...f, sort: "-created" }).sort).toBe("");
  });
  it("asks the server to sort only by what it can", () => {
    expect(apiParams(f).sort).toBe("-created");
    expect(apiParams({ ...f, sort: "name" }).sort).toBe("name");
    expect(apiParams(f).state).toEqual(["crashed"]);
    expect(apiParams({ ...f, group: "" }).group).toBeUndefined();
  });
});

describe("client-side sorting and grouping", () => {
  const runs = [
    { id: "a", group: "g1", summary: { acc: 0.5 }, world_size: 2 },
    { id: "b", group: null, summary: {}, world_size: 8 },
    { id: "c", group: "g1", summary: { acc: 0.9 }, world_size: 4 },
    { id: "d", group: "g0", summary: { acc: 0.1 }, world_size: 1 },
  ];
  it("sorts by summary values, missing ones last either way", () => {
    expect(clientSort(runs, "-s:acc").map((r) => r.id)).toEqual(["c", "a", "d", "b"]);
    expect(clientSort(runs, "s:acc").map((r) => r.id)).toEqual(["d", "a", "c", "b"]);
    expect(clientSort(runs, "-ranks").map((r) => r.id)).toEqual(["b", "c", "a", "d"]);
  });
  it("leaves server sorts alone", () => {
    expect(clientSort(runs, "-created")).toBe(runs);
  });
  it("groups rows, ungrouped last", () => {
    expect(groupRuns(runs).map((g) => [g.group, g.runs.map((r) => r.id)])).toEqual([
      ["g1", ["a", "c"]], ["g0", ["d"]], ["", ["b"]],
    ]);
  });
  it("collects filter choices", () => {
    expect(facets([{ group: "g", job_type: "train", tags: ["x", "a"] }, { tags: ["x"] }])).toEqual({
      groups: ["g"], jobTypes: ["train"], tags: ["a", "x"],
    });
  });
});
