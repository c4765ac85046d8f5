import { describe, expect, it } from "vitest";
import { asNumber, fmtAgo, fmtCrashed, fmtDuration, fmtRanks, fmtShortTime, fmtTicks, fmtValue, runDuration } from "../src/lib/format.js";
import { createFirstDraw } from "../src/lib/firstDraw.js";
import { parseHash, href } from "../src/router.js";

describe("format", () => {
  it("values", () => {
    expect(fmtValue(1234567)).toBe("1,234,567");
    expect(fmtValue(0.000012345)).toBe("1.234e-5");
    expect(fmtValue(0.123456789)).toBe("0.12346");
    expect(fmtValue(null)).toBe("–");
    expect(fmtValue(true)).toBe("true");
    expect(fmtValue(NaN)).toBe("NaN");
    expect(fmtValue(Infinity)).toBe("∞");
    expect(fmtValue(-Infinity)).toBe("−∞");
  });
  it("short times: month-day this year, the date before", () => {
    const now = new Date(2024, 5, 1, 12).getTime() / 1000;
    expect(fmtShortTime(new Date(2024, 0, 2, 3, 4, 5).getTime() / 1000, now)).toBe("01-02 03:04");
    expect(fmtShortTime(new Date(2023, 11, 31, 23, 0).getTime() / 1000, now)).toBe("2023-12-31");
  });
  it("durations and ages", () => {
    expect(fmtDuration(42)).toBe("42s");
    expect(fmtDuration(725)).toBe("12m 05s");
    expect(fmtDuration(3 * 3600 + 240)).toBe("3h 04m");
    expect(fmtDuration(-1)).toBe("–");
    expect(fmtAgo(95, 100)).toBe("5 s ago");
  });
  it("runs", () => {
    expect(fmtRanks({ world_size: 64, num_nodes: 8 })).toBe("64 × 8");
    expect(fmtRanks({ world_size: 64, num_nodes: 8, run_ranks: 64, run_nodes: 8 })).toBe("64 × 8");
    expect(fmtRanks({ world_size: 64, num_nodes: 8, run_ranks: 1, run_nodes: 1 })).toBe("1 × 1 (job 64 × 8)");
    expect(fmtCrashed(["rank-1", "rank-2", "rank-3", "rank-4"])).toBe("rank-1, rank-2, rank-3 +1");
    expect(runDuration({ state: "running", created: 10 }, 70)).toBe(60);
    expect(runDuration({ state: "finished", created: 10, updated: 30, duration: 20 }, 70)).toBe(20);
  });
});

describe("routes", () => {
  it("round-trips user names through links", () => {
    const h = href.run("my proj", "r/1?x", { tab: "streams" });
    const r = parseHash(h);
    expect(r).toMatchObject({ page: "run", project: "my proj", run: "r/1?x" });
    expect(r.params.get("tab")).toBe("streams");
    expect(parseHash(href.group("p", "g#1"))).toMatchObject({ page: "group", group: "g#1" });
    expect(parseHash(href.compare(["p/a", "p/b"])).params.get("runs")).toBe("p/a,p/b");
    expect(parseHash("").page).toBe("projects");
    expect(parseHash(href.alerts()).page).toBe("alerts");
    expect(parseHash("#/p/alerts").page).toBe("runs"); // a project named "alerts"
  });
});

describe("first-draw tracker", () => {
  const perf = () => {
    const marks = [];
    return { marks, mark: (n) => marks.push(n), measure: (n) => marks.push(`measure:${n}`) };
  };
  it("marks once every chart visible at first layout has drawn", () => {
    const p = perf();
    const t = createFirstDraw(p);
    t.expect("a");
    t.expect("b");
    expect(t.drawn("a")).toBe(false);
    t.expect("c"); // laid out after the first draw: not waited for
    expect(t.drawn("b")).toBe(true);
    expect(t.drawn("c")).toBe(false);
    expect(p.marks).toEqual(["rankwise:page-open", "rankwise:first-charts", "measure:rankwise:open-to-first-charts"]);
  });
});

describe("ticks and spelled numbers", () => {
  it("gives short, distinct, unclipped tick labels", () => {
    expect(fmtTicks([2 ** 70, 2 * 2 ** 70])).toEqual(["1.18e21", "2.36e21"]);
    expect(fmtTicks([1200, 3.4e6, 0.0012, 0.00012])).toEqual(["1200", "3.4M", "0.0012", "1.2e-4"]);
    // Thousands from 10,000 on: 10000 is "10k", never "1k" (a sum of ranks' throughputs).
    expect(fmtTicks([0, 2500, 5000, 7500, 10000])).toEqual(["0", "2500", "5000", "7500", "10k"]);
    expect(fmtTicks([12345, 250000])).toEqual(["12.3k", "250k"]);
    const mem = [74.61e9, 74.62e9, 74.63e9, 74.64e9];
    expect(fmtTicks(mem)).toEqual(["74.61G", "74.62G", "74.63G", "74.64G"]);
    expect(new Set(fmtTicks([1e15, 1.0001e15, 1.0002e15])).size).toBe(3);
  });
  it("reads the spelled NaN and ±Inf of a JSON reply", () => {
    expect(asNumber("NaN")).toBeNaN();
    expect(asNumber("-Infinity")).toBe(-Infinity);
    expect(asNumber("nan")).toBeUndefined();
    expect(fmtValue("Infinity")).toBe("∞");
    expect(fmtValue("text")).toBe("text");
  });
});
