// The System tab's model: the run's system charts (one per quantity, from /system)
// grouped into sections, their titles and units, and one chart's lines (from
// /system/series) as a Chart model. Lines of different nodes are sampled at different
// times, so they are drawn as the chart's overlay, each with its own x column.

import { runColor } from "./colors.js";

const SECTIONS = [
  { prefix: "node/", title: "Node", hint: "one line per node" },
  { prefix: "gpu/", title: "GPUs", hint: "one line per GPU of each node" },
  { prefix: "proc/", title: "Processes", hint: "one line per recording process (rank)" },
];

/** [{title, hint, keys}] of the chart keys, in section order; unknown prefixes last. */
export function systemSections(keys) {
  const out = SECTIONS.map((s) => ({ ...s, keys: [] }));
  const other = { prefix: "", title: "Other", hint: "", keys: [] };
  for (const k of [...(keys ?? [])].sort()) {
    const s = out.find((sec) => k.startsWith(sec.prefix));
    (s ?? other).keys.push(k);
  }
  return [...out, other].filter((s) => s.keys.length);
}

const UNITS = [
  [/_bytes_per_s$/, "bytes/s", "bytes"],
  [/_bytes$/, "bytes", "bytes"],
  [/_percent$/, "%", "plain"],
  [/_per_s$/, "/s", "plain"],
  [/_c$/, "°C", "plain"],
  [/_w$/, "W", "plain"],
  [/_mhz$/, "MHz", "plain"],
];

/** A chart's title and unit: "node/mem_used_bytes" → {title: "mem used", unit: "bytes"}. */
export function describeKey(key) {
  const name = key.split("/").pop();
  for (const [re, unit, kind] of UNITS) {
    if (re.test(name)) return { title: name.replace(re, "").replace(/_/g, " "), unit, kind };
  }
  return { title: name.replace(/_/g, " "), unit: "", kind: "plain" };
}

/** 1536 → "1.50 KiB": bytes in binary units, three significant digits (the CLI's
 * `rankwise artifact ls` writes the same: rankwise/cli/_format.py `size`). */
export function fmtBytes(v) {
  if (v === null || v === undefined || !Number.isFinite(v)) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
  let a = Math.abs(v);
  let i = 0;
  while (a >= 1024 && i < units.length - 1) {
    a /= 1024;
    i++;
  }
  if (i === 0) return `${v.toFixed(0)} B`;
  const r = Number(a.toPrecision(3)); // 1023 KiB: "1020 KiB", never "1.02e+3 KiB"
  return `${v < 0 ? "-" : ""}${r.toFixed(r < 10 ? 2 : r < 100 ? 1 : 0)} ${units[i]}`;
}

/** A value with the chart's unit. */
export function fmtSystemValue(v, key) {
  if (v === null || v === undefined || !Number.isFinite(v)) return "–";
  const { unit, kind } = describeKey(key);
  if (kind === "bytes") return unit === "bytes/s" ? `${fmtBytes(v)}/s` : fmtBytes(v);
  const num = Math.abs(v) >= 100 ? v.toFixed(0) : Math.abs(v) >= 1 ? v.toFixed(1) : v.toPrecision(2);
  return unit ? `${num} ${unit}` : num;
}

/**
 * A Chart model of one /system/series reply: every line in the overlay with a stable
 * colour; `x` holds the time extent (so the chart has an x range and a cursor) and an
 * invisible line keeps a y scale for the overlay to be drawn on.
 */
export function systemModel(reply) {
  const series = reply?.series ?? [];
  let lo = Infinity;
  let hi = -Infinity;
  const overlay = series.map((s, i) => {
    if (s.x.length) {
      lo = Math.min(lo, s.x[0]);
      hi = Math.max(hi, s.x[s.x.length - 1]);
    }
    return { key: `${s.label}|${s.key}`, label: s.name, color: runColor(i), x: s.x, y: s.y };
  });
  if (lo === Infinity) return { x: [], lines: [], band: null, overlay: [] };
  const x = lo === hi ? [lo - 1, hi + 1] : [lo, hi];
  return { x, lines: [{ key: "_", label: "", color: "transparent", y: [null, null] }], band: null, overlay };
}
