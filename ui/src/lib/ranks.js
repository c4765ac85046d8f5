// Many ranks on the run page (issue 26): the health grid's layout, the rank × step
// heatmap's cells and colours, and the rank picker's search, outliers and line cap.
// Pure functions only; the components are HealthStrip.jsx, RankHeatmap.jsx and
// RankPicker.jsx.

/** Per-rank lines drawn at most on a chart: more than this, and the picker chooses. */
export const MAX_LINES = 32;

/** A health cell that is not plain healthy: drawn first, outlined. */
export function isOdd(c) {
  return !(c.state === "running" || c.state === "finished") || c.slow || !!c.nonfinite || c.lag >= 0.5;
}

const SEVERITY = ["crashed", "stalled", "failed", "killed", "running", "finished"];

function severity(c) {
  const s = SEVERITY.indexOf(c.state);
  return (s < 0 ? SEVERITY.length : s) * 4 - (c.slow ? 2 : 0) - (c.nonfinite ? 1 : 0);
}

/**
 * The health grid: one row per node (its ranks in local-rank order, by rank within the
 * node), the nodes holding an odd cell first (worst first), then by node. `odd` is every
 * odd cell, worst first: the strip's "needs attention" row.
 */
export function healthGrid(cells) {
  const byNode = new Map();
  for (const c of cells) {
    const key = c.node ?? -1;
    if (!byNode.has(key)) byNode.set(key, []);
    byNode.get(key).push(c);
  }
  const nodes = [...byNode.entries()].map(([node, list]) => {
    const sorted = [...list].sort((a, b) => a.rank - b.rank || (a.label < b.label ? -1 : 1));
    const odd = sorted.filter(isOdd);
    const worst = odd.length ? Math.min(...odd.map(severity)) : Infinity;
    return { node, host: sorted[0]?.host ?? "", cells: sorted, odd: odd.length, worst };
  });
  nodes.sort((a, b) => (a.odd ? 0 : 1) - (b.odd ? 0 : 1) || a.worst - b.worst || a.node - b.node);
  const odd = cells.filter(isOdd).sort((a, b) => severity(a) - severity(b) || a.rank - b.rank);
  const cols = Math.max(1, ...nodes.map((n) => n.cells.length));
  return { nodes, odd, cols };
}

/** The heatmap's cells (base64 float32, row-major) as a Float32Array of rows × buckets. */
export function decodeCells(b64, rows, buckets) {
  const bin = atob(b64 ?? "");
  const bytes = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
  const out = new Float32Array(bytes.buffer, 0, Math.floor(bytes.length / 4));
  if (out.length !== rows * buckets) {
    throw new Error(`heatmap: ${out.length} cells for ${rows} × ${buckets}`);
  }
  return out;
}

/** Each cell minus its bucket's cross-rank median (NaN where either is missing). */
export function deviations(cells, median, buckets) {
  const out = new Float32Array(cells.length);
  for (let i = 0; i < cells.length; i++) {
    const m = median[i % buckets];
    out[i] = m === null || m === undefined ? NaN : cells[i] - m;
  }
  return out;
}

/** Entries a quantile looks at, at most: a heatmap's million cells are sampled evenly. */
export const QUANTILE_SAMPLE = 20000;

/** The value at quantile q (0..1) of the finite entries of `a` (NaN when none); over
 * QUANTILE_SAMPLE entries, of an even sample of them (a colour range needs no more). */
export function quantile(a, q) {
  const step = Math.max(1, Math.floor(a.length / QUANTILE_SAMPLE));
  const v = [];
  for (let i = 0; i < a.length; i += step) if (Number.isFinite(a[i])) v.push(a[i]);
  v.sort((x, y) => x - y);
  if (!v.length) return NaN;
  return v[Math.min(v.length - 1, Math.max(0, Math.round(q * (v.length - 1))))];
}

/**
 * The colour range of a heatmap: by value, the 1st..99th percentile (one spike does not
 * wash the rest out); by deviation, symmetric around 0 at ten times the median |dev|
 * (about seven standard deviations of the crowd's noise: the crowd stays pale, a rank
 * well off the median saturates), or the 99th percentile of |dev| when most are 0.
 */
export function colorRange(values, mode) {
  if (mode === "deviation") {
    const abs = new Float32Array(values.length);
    for (let i = 0; i < values.length; i++) abs[i] = Math.abs(values[i]);
    const mid = quantile(abs, 0.5);
    const m = Number.isFinite(mid) && mid > 0 ? 10 * mid : quantile(abs, 0.99);
    const r = Number.isFinite(m) && m > 0 ? m : 1;
    return [-r, r];
  }
  const lo = quantile(values, 0.01);
  const hi = quantile(values, 0.99);
  if (!Number.isFinite(lo)) return [0, 1];
  return hi > lo ? [lo, hi] : [lo - 1, lo + 1];
}

// Viridis at 9 stops (perceptually even, readable with colour-blindness), for values.
const VIRIDIS = [
  [68, 1, 84], [71, 44, 122], [59, 81, 139], [44, 113, 142], [33, 144, 141],
  [39, 173, 129], [92, 200, 99], [170, 220, 50], [253, 231, 37],
];
// Blue – white – red (ColorBrewer RdBu ends), for deviations: below and above the median.
const DIVERGING = [[33, 102, 172], [247, 247, 247], [178, 24, 43]];

function ramp(stops, t) {
  const x = Math.min(1, Math.max(0, t)) * (stops.length - 1);
  const i = Math.min(stops.length - 2, Math.floor(x));
  const f = x - i;
  const a = stops[i];
  const b = stops[i + 1];
  return [0, 1, 2].map((k) => Math.round(a[k] + (b[k] - a[k]) * f));
}

/** [r, g, b] of a value in [lo, hi]; null for NaN (drawn as the empty-cell colour). */
export function cellColor(v, lo, hi, mode) {
  if (!Number.isFinite(v)) return null;
  const t = hi > lo ? (v - lo) / (hi - lo) : 0.5;
  return ramp(mode === "deviation" ? DIVERGING : VIRIDIS, t);
}

/**
 * A 256-entry colour table of [lo, hi] for a mode (flat RGB, index = round(t × 255)):
 * painting a million cells looks colours up instead of mixing each.
 */
export function colorTable(mode) {
  const lut = new Uint8ClampedArray(256 * 3);
  for (let i = 0; i < 256; i++) {
    const rgb = ramp(mode === "deviation" ? DIVERGING : VIRIDIS, i / 255);
    lut.set(rgb, 3 * i);
  }
  return lut;
}

/** Paint `values` into RGBA `pixels` through `lut` over [lo, hi]; NaN as faint grey. */
export function paint(values, lo, hi, lut, pixels) {
  const span = hi > lo ? 255 / (hi - lo) : 0;
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    const o = 4 * i;
    if (!Number.isFinite(v)) {
      pixels[o] = pixels[o + 1] = pixels[o + 2] = 128;
      pixels[o + 3] = 60;
      continue;
    }
    const j = 3 * Math.min(255, Math.max(0, Math.round(span ? (v - lo) * span : 127.5)));
    pixels[o] = lut[j];
    pixels[o + 1] = lut[j + 1];
    pixels[o + 2] = lut[j + 2];
    pixels[o + 3] = 255;
  }
}

/** The ranks furthest from the median (highest score first), at most n labels. */
export function outliers(rows, n) {
  return rows
    .filter((r) => r.score !== null && r.score !== undefined)
    .sort((a, b) => b.score - a.score || a.rank - b.rank)
    .slice(0, n)
    .map((r) => r.label);
}

/**
 * The ranks a picker query names, as labels in rank order. A query is comma- or
 * space-separated terms: a rank ("17"), a range ("0-63"), a node ("node 5", "n5",
 * "node 4-7"), or text found in a label or host ("gpu-node-005", "child"). Unknown terms
 * match nothing. `ranks` are {label, rank, node, host}.
 */
export function pickRanks(query, ranks) {
  const text = (query ?? "").trim().toLowerCase();
  if (!text) return [];
  const hit = new Set();
  const terms = text.replace(/\bnode\s+/g, "n").split(/[\s,]+/).filter(Boolean);
  for (const term of terms) {
    let m = /^(\d+)(?:-(\d+))?$/.exec(term);
    if (m) {
      const [a, b] = [Number(m[1]), Number(m[2] ?? m[1])];
      ranks.forEach((r) => { if (r.rank >= Math.min(a, b) && r.rank <= Math.max(a, b)) hit.add(r.label); });
      continue;
    }
    m = /^n(\d+)(?:-(\d+))?$/.exec(term);
    if (m) {
      const [a, b] = [Number(m[1]), Number(m[2] ?? m[1])];
      ranks.forEach((r) => { if (r.node >= Math.min(a, b) && r.node <= Math.max(a, b)) hit.add(r.label); });
      continue;
    }
    ranks.forEach((r) => {
      if (r.label.toLowerCase().includes(term) || (r.host ?? "").toLowerCase().includes(term)) hit.add(r.label);
    });
  }
  return ranks.filter((r) => hit.has(r.label)).sort((a, b) => a.rank - b.rank).map((r) => r.label);
}

/** The labels whose lines are drawn: the chosen ones up to `max`, and how many were left out. */
export function capLines(chosen, max = MAX_LINES) {
  return { shown: chosen.slice(0, max), dropped: Math.max(0, chosen.length - max) };
}

/**
 * The heatmap's picture rows: with more ranks than `height` pixel rows, each pixel row
 * stands for a run of ranks and shows, per bucket, the one furthest from the median (a
 * single straggler's stripe survives the squeeze). Returns `{values, pick, rows}`:
 * `rows` × buckets values of `shown` (the mode's numbers) and the rank row each came from.
 */
export function foldRows(shown, dev, rows, buckets, height) {
  const h = Math.max(1, Math.min(rows, height));
  const values = new Float32Array(h * buckets).fill(NaN);
  const pick = new Int32Array(h * buckets).fill(-1);
  for (let y = 0; y < h; y++) {
    const a = Math.floor((y * rows) / h);
    const b = Math.max(a + 1, Math.floor(((y + 1) * rows) / h));
    for (let x = 0; x < buckets; x++) {
      let best = -1;
      let far = -1;
      for (let r = a; r < b; r++) {
        const i = r * buckets + x;
        if (!Number.isFinite(shown[i])) continue;
        const d = Number.isFinite(dev[i]) ? Math.abs(dev[i]) : 0;
        if (d > far) {
          far = d;
          best = r;
        }
      }
      if (best >= 0) {
        values[y * buckets + x] = shown[best * buckets + x];
        pick[y * buckets + x] = best;
      }
    }
  }
  return { values, pick, rows: h };
}
