import { describe, expect, it } from "vitest";
import {
  conditionOf, filterOfRows, filtersFromParams, filtersFromView, paramsFromFilters, rowsOfFilter,
  searchBody, viewFromFilters,
} from "../src/lib/runsModel.js";

describe("the filter builder's filter", () => {
  it("reads values as JSON when they parse, else as strings", () => {
    expect(conditionOf({ field: "config.lr", op: "$gt", value: "0.01" })).toEqual({ "config.lr": { $gt: 0.01 } });
    expect(conditionOf({ field: "config.opt", op: "$eq", value: "adam" })).toEqual({ "config.opt": { $eq: "adam" } });
    expect(conditionOf({ field: "tags", op: "$in", value: "a, b" })).toEqual({ tags: { $in: ["a", "b"] } });
    expect(conditionOf({ field: "name", op: "$regex", value: "^1" })).toEqual({ name: { $regex: "^1" } });
    expect(conditionOf({ field: "group", op: "$exists", value: "false" })).toEqual({ group: { $exists: false } });
  });

  it("round-trips rows through the URL", () => {
    const rows = [{ field: "config.lr", op: "$gte", value: "0.1" }, { field: "tags", op: "$eq", value: "\"x\"" }];
    const text = filterOfRows(rows);
    expect(JSON.parse(text)).toEqual({ $and: [{ "config.lr": { $gte: 0.1 } }, { tags: { $eq: "x" } }] });
    expect(rowsOfFilter(text)).toEqual(rows);
    expect(filterOfRows([{ field: " ", op: "$eq", value: "1" }])).toBe("");
  });

  it("is kept in the URL and in saved views", () => {
    const f = filtersFromParams(new URLSearchParams({ filter: '{"config.lr":{"$gt":1}}' }));
    expect(paramsFromFilters(f).filter).toBe('{"config.lr":{"$gt":1}}');
    const back = filtersFromView(viewFromFilters("v", f));
    expect(back.filter).toBe(f.filter);
  });

  it("joins the chips and the builder in one search", () => {
    const f = { ...filtersFromParams(new URLSearchParams()), filter: '{"config.lr":{"$gt":1}}', state: ["crashed"], tag: ["a"], q: "x.y", sort: "name" };
    expect(searchBody(f)).toEqual({
      filters: { $and: [{ "config.lr": { $gt: 1 } }, { state: { $in: ["crashed"] } }, { tags: "a" }, { display_name: { $regex: "(?i)x\\.y" } }] },
      order: "+display_name",
      limit: 500,
    });
  });
});
