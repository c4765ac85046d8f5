import { describe, expect, it } from "vitest";
import { describeKey, fmtBytes, fmtSystemValue, systemModel, systemSections } from "../src/lib/system.js";

describe("system charts", () => {
  it("group into node, GPU and process sections", () => {
    const got = systemSections(["proc/rss_bytes", "gpu/util_percent", "node/cpu_percent", "node/load1", "x/y"]);
    expect(got.map((s) => [s.title, s.keys])).toEqual([
      ["Node", ["node/cpu_percent", "node/load1"]],
      ["GPUs", ["gpu/util_percent"]],
      ["Processes", ["proc/rss_bytes"]],
      ["Other", ["x/y"]],
    ]);
    expect(systemSections([])).toEqual([]);
  });

  it("name quantities and their units", () => {
    expect(describeKey("node/mem_used_bytes")).toEqual({ title: "mem used", unit: "bytes", kind: "bytes" });
    expect(describeKey("gpu/pcie_tx_bytes_per_s")).toEqual({ title: "pcie tx", unit: "bytes/s", kind: "bytes" });
    expect(describeKey("gpu/temp_c").unit).toBe("°C");
    expect(describeKey("gpu/power_w").unit).toBe("W");
    expect(describeKey("node/load1")).toEqual({ title: "load1", unit: "", kind: "plain" });
    expect(fmtBytes(1536)).toBe("1.50 KiB");
    expect(fmtBytes(3 * 1024 ** 3)).toBe("3.00 GiB");
    expect(fmtBytes(12)).toBe("12 B");
    // the CLI's sizes (tests/sdk/test_artifacts_sync_cli.py) are these same strings
    expect(fmtBytes(21400)).toBe("20.9 KiB");
    expect(fmtBytes(1023 * 1024)).toBe("1020 KiB");
    expect(fmtBytes(10235)).toBe("10.0 KiB");
    expect(fmtSystemValue(2.5 * 1024 ** 2, "node/disk_read_bytes_per_s")).toBe("2.50 MiB/s");
    expect(fmtSystemValue(87.25, "gpu/util_percent")).toBe("87.3 %");
    expect(fmtSystemValue(null, "gpu/util_percent")).toBe("–");
  });

  it("draw every line in the overlay, over the time extent of all", () => {
    const reply = {
      key: "gpu/util_percent",
      series: [
        { key: "gpu/0/util_percent", name: "node 0 · gpu 0", label: "rank-0", x: [10, 20], y: [1, 2] },
        { key: "gpu/0/util_percent", name: "node 1 · gpu 0", label: "rank-8", x: [5, 30], y: [3, null] },
        { key: "gpu/1/util_percent", name: "node 1 · gpu 1", label: "rank-8", x: [], y: [] },
      ],
    };
    const m = systemModel(reply);
    expect(m.x).toEqual([5, 30]);
    expect(m.overlay.map((l) => [l.key, l.label, l.x, l.y])).toEqual([
      ["rank-0|gpu/0/util_percent", "node 0 · gpu 0", [10, 20], [1, 2]],
      ["rank-8|gpu/0/util_percent", "node 1 · gpu 0", [5, 30], [3, null]],
      ["rank-8|gpu/1/util_percent", "node 1 · gpu 1", [], []],
    ]);
    expect(new Set(m.overlay.map((l) => l.color)).size).toBe(3);
    expect(m.lines).toHaveLength(1); // invisible: keeps the y scale
    expect(systemModel({ series: [] })).toEqual({ x: [], lines: [], band: null, overlay: [] });
    expect(systemModel({ series: [{ key: "a", name: "a", label: "r", x: [7], y: [1] }] }).x).toEqual([6, 8]);
  });
});
