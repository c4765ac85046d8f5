// Data shaping for the rich-data panels (issue #9): which keys go to which tab, which step
// and rank a panel shows, how a table cell is drawn, and a histogram's heatmap grid. Pure
// functions over the server's replies (docs/http-api.md), tested in test/media.test.js.

/** The kinds the Media tab draws, in the order it draws them (pictures first); tables
 * and histograms have their own tabs. */
const MEDIA_ORDER = ["image", "video", "audio", "text", "html"];
export const MEDIA_KINDS = new Set(MEDIA_ORDER);

/** Stream labels in rank order ("rank-2" before "rank-10"), then by name. */
export function sortLabels(labels) {
  const num = (l) => {
    const m = /(\d+)$/.exec(l);
    return m ? Number(m[1]) : Infinity;
  };
  return [...labels].sort((a, b) => num(a) - num(b) || (a < b ? -1 : a > b ? 1 : 0));
}

/**
 * A filter's hint for a column of `type` (the server's rules: numbers take N, !=N, >N,
 * >=N, <N, <=N or A..B; bools true/false; text a case-insensitive substring).
 */
export function filterHint(column, type) {
  if (!column) return "pick a column to filter";
  if (type === "int" || type === "float") return `${column}: N, >N, <=N, A..B`;
  if (type === "bool") return `${column}: true or false`;
  return `${column} contains…`;
}

/**
 * The media keys reply split by tab: `{media, tables, histograms}`, each sorted by key
 * (media by kind first: images, videos, audio, text, html).
 * @param {{key: string, kind: string, steps: number[], labels: string[]}[]} keys
 */
export function splitKeys(keys) {
  const out = { media: [], tables: [], histograms: [] };
  for (const k of keys ?? []) {
    if (k.kind === "table") out.tables.push(k);
    else if (k.kind === "histogram") out.histograms.push(k);
    else if (MEDIA_KINDS.has(k.kind)) out.media.push(k);
  }
  const byKey = (a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0);
  for (const list of Object.values(out)) list.sort(byKey);
  out.media.sort((a, b) => MEDIA_ORDER.indexOf(a.kind) - MEDIA_ORDER.indexOf(b.kind) || byKey(a, b));
  return out;
}

/**
 * The media keys of several runs (`perRun[i]`: run i's keys reply), merged: `[{key, kind, steps, labels, runs: Set}]` (steps and
 * labels are the union over the runs).
 */
export function mergeMediaKeys(perRun) {
  const byKey = new Map();
  perRun.forEach((keys, i) => {
    for (const k of splitKeys(keys).media) {
      const m = byKey.get(k.key) ?? { key: k.key, kind: k.kind, steps: new Set(), labels: new Set(), runs: new Set() };
      k.steps.forEach((s) => m.steps.add(s));
      k.labels.forEach((l) => m.labels.add(l));
      m.runs.add(i);
      byKey.set(k.key, m);
    }
  });
  return [...byKey.values()]
    .map((m) => ({ ...m, steps: [...m.steps].sort((a, b) => a - b), labels: sortLabels(m.labels) }))
    .sort((a, b) => MEDIA_ORDER.indexOf(a.kind) - MEDIA_ORDER.indexOf(b.kind) || (a.key < b.key ? -1 : 1));
}

/**
 * The step of `steps` (ascending) a panel shows when `wanted` was asked for: the same
 * step, else the closest earlier one (what the run had logged by then), else the first.
 * `wanted` null or undefined: the latest. Returns null when there are no steps.
 */
export function pickStep(steps, wanted) {
  if (!steps?.length) return null;
  if (wanted === null || wanted === undefined) return steps[steps.length - 1];
  let best = steps[0];
  for (const s of steps) {
    if (s <= wanted) best = s;
    else break;
  }
  return best;
}

/** The slider position of `step` in `steps` (the index of the step shown). */
export function stepIndex(steps, step) {
  const shown = pickStep(steps, step);
  const i = steps?.indexOf(shown) ?? -1;
  return i < 0 ? 0 : i;
}

/**
 * The label (rank) a panel shows: the one picked if the key has it, else the primary
 * rank's when the key has it (rank 0 logs most often), else the first.
 * @param {string[]} labels
 * @param {string|null|undefined} picked
 * @param {string|null|undefined} primary
 */
export function pickLabel(labels, picked, primary) {
  if (!labels?.length) return null;
  if (picked && labels.includes(picked)) return picked;
  if (primary && labels.includes(primary)) return primary;
  return labels[0];
}

/** A media reply's items in the order they were logged (a gallery's index order). */
export function orderItems(items) {
  return [...(items ?? [])].sort((a, b) => a.step - b.step || a.index - b.index);
}

/** How an item is played: "img" (images and GIFs), "video" (MP4), "audio", "html", "text". */
export function playerFor(item) {
  if (item.kind === "image") return "img";
  if (item.kind === "video") return item.format === "gif" ? "img" : "video";
  if (item.kind === "audio") return "audio";
  if (item.kind === "html") return "html";
  return "text";
}

/** One line describing an item beside its caption (size, frames, length). */
export function describeItem(item) {
  const parts = [];
  if (item.width && item.height) parts.push(`${item.width}×${item.height}`);
  if (item.frames) parts.push(`${item.frames} frames`);
  if (item.fps) parts.push(`${item.fps} fps`);
  if (item.sample_rate) parts.push(`${item.sample_rate} Hz`);
  if (item.duration) parts.push(`${Number(item.duration).toFixed(2)} s`);
  if (item.format) parts.push(item.format.toUpperCase());
  return parts.join(" · ");
}

// ---- tables ---------------------------------------------------------------------------

/** Rows per table page: one request, drawn whole (the server caps a page at 1,000). */
export const TABLE_PAGE = 50;

/**
 * The tables route's query for a view: `{key, label, step, offset, limit, sort, desc,
 * filter_col, filter}` with empty parts left out (api.js drops them).
 */
export function tableParams({ key, label, step, page = 0, sort, desc = false, filterCol, filter }) {
  const text = (filter ?? "").trim();
  return {
    key,
    label: label ?? undefined,
    step: step ?? undefined,
    offset: page * TABLE_PAGE,
    limit: TABLE_PAGE,
    sort: sort || undefined,
    desc: sort ? Boolean(desc) : undefined,
    filter_col: text && filterCol ? filterCol : undefined,
    filter: text && filterCol ? text : undefined,
  };
}

/** The last page index for `total` rows (0 for an empty table). */
export function lastPage(total) {
  return Math.max(0, Math.ceil((total ?? 0) / TABLE_PAGE) - 1);
}

/** "rows 51–100 of 100,000" for a reply's page (`offset`: its first row, from 0). */
export function pageRange(offset, shown, total) {
  if (!total) return "no rows";
  const from = offset + 1;
  const n = (v) => v.toLocaleString("en-US");
  return `rows ${n(from)}–${n(from + shown - 1)} of ${n(total)}`;
}

/**
 * How one cell is drawn: `{image: digest}` for an image cell (a thumbnail of the blob),
 * else `{text}`: numbers with up to 6 significant digits (exponent form below 1e-4),
 * lists as JSON, null as "–".
 */
export function cellView(value, type) {
  if (value === null || value === undefined) return { text: "–" };
  if (type === "image" && typeof value === "string" && /^[0-9a-f]{64}$/.test(value)) return { image: value };
  if (typeof value === "number") {
    if (Number.isInteger(value)) return { text: String(value) };
    const a = Math.abs(value);
    // tiny and huge values in exponent form, so a column of scores stays narrow
    if (a < 1e-4 || a >= 1e9) return { text: value.toExponential(3) };
    return { text: Number(value.toPrecision(6)).toString() };
  }
  if (typeof value === "boolean") return { text: value ? "true" : "false" };
  if (typeof value === "object") return { text: JSON.stringify(value) };
  return { text: String(value) };
}

/**
 * One column of a table at two steps, side by side. Rows are matched by `by` (a column
 * name, e.g. an id, when both steps have it) or else by position. Returns
 * `[{key, a, b, changed}]` in the order of the first step's rows, then rows only the
 * second has.
 */
export function compareColumn(replyA, replyB, column, by) {
  const col = (r) => r?.columns?.indexOf(column) ?? -1;
  const keyCol = (r) => (by ? r?.columns?.indexOf(by) ?? -1 : -1);
  const [ca, cb, ka, kb] = [col(replyA), col(replyB), keyCol(replyA), keyCol(replyB)];
  const byKey = ka >= 0 && kb >= 0;
  const keyOf = (row, i, k) => (byKey ? JSON.stringify(row[k]) : String(i));
  const out = [];
  const seen = new Map();
  (replyA?.rows ?? []).forEach((row, i) => {
    const key = keyOf(row, i, ka);
    seen.set(key, out.length);
    out.push({ key: byKey ? row[ka] : i, a: ca >= 0 ? row[ca] : null, b: null, changed: false });
  });
  (replyB?.rows ?? []).forEach((row, i) => {
    const key = keyOf(row, i, kb);
    const b = cb >= 0 ? row[cb] : null;
    if (seen.has(key)) out[seen.get(key)].b = b;
    else out.push({ key: byKey ? row[kb] : i, a: null, b, changed: false });
  });
  for (const r of out) r.changed = JSON.stringify(r.a) !== JSON.stringify(r.b);
  return out;
}

// ---- histograms -----------------------------------------------------------------------

/**
 * A histogram series as a heatmap grid: columns are the logged steps, rows are `bins`
 * equal slices of the range every step's edges cover (steps may bin differently: each
 * step's counts are spread over the rows its bins overlap, in proportion). Returns
 * `{steps, lo, hi, rows, grid (Float64Array, column-major: grid[c * rows + r], row 0 at
 * lo), max}`, or null for an empty series.
 */
export function heatmapGrid(series, bins = 64) {
  const steps = series?.steps ?? [];
  if (!steps.length) return null;
  let lo = Infinity;
  let hi = -Infinity;
  for (const e of series.edges) {
    if (!e?.length) continue;
    lo = Math.min(lo, e[0]);
    hi = Math.max(hi, e[e.length - 1]);
  }
  if (!Number.isFinite(lo) || !Number.isFinite(hi)) return null;
  if (hi <= lo) hi = lo + 1; // one value everywhere: one band, still drawn
  const rows = bins;
  const width = (hi - lo) / rows;
  const grid = new Float64Array(steps.length * rows);
  let max = 0;
  steps.forEach((_, c) => {
    const edges = series.edges[c] ?? [];
    const counts = series.counts[c] ?? [];
    for (let b = 0; b < counts.length; b++) {
      const left = edges[b];
      const right = edges[b + 1];
      const n = counts[b];
      if (!n || !(right >= left)) continue;
      if (right === left) {
        const r = Math.min(rows - 1, Math.max(0, Math.floor((left - lo) / width)));
        grid[c * rows + r] += n;
        continue;
      }
      const r0 = Math.max(0, Math.floor((left - lo) / width));
      const r1 = Math.min(rows - 1, Math.floor((right - lo) / width - 1e-9));
      for (let r = r0; r <= r1; r++) {
        const overlap = Math.min(right, lo + (r + 1) * width) - Math.max(left, lo + r * width);
        if (overlap > 0) grid[c * rows + r] += (n * overlap) / (right - left);
      }
    }
  });
  for (const v of grid) if (v > max) max = v;
  return { steps, lo, hi, rows, grid, max };
}

/**
 * The colour of a cell holding `v` of at most `max` (a dark-to-bright ramp on a square
 * root scale, so sparse tails stay visible); empty cells are transparent.
 * Returns [r, g, b, a] bytes.
 */
export function heatColor(v, max) {
  if (!v || !max) return [0, 0, 0, 0];
  const t = Math.sqrt(Math.min(1, v / max));
  // from deep blue through teal to pale yellow
  const stops = [
    [22, 31, 84],
    [33, 145, 140],
    [253, 231, 37],
  ];
  const x = t * (stops.length - 1);
  const i = Math.min(stops.length - 2, Math.floor(x));
  const f = x - i;
  const mix = (k) => Math.round(stops[i][k] + (stops[i + 1][k] - stops[i][k]) * f);
  return [mix(0), mix(1), mix(2), 255];
}

/**
 * The step labels under a heatmap of `steps` (one column each): up to `n` columns spread
 * evenly, first and last included, each at its column's centre as a fraction of the
 * width: `[{step, at}]`.
 */
export function heatStepTicks(steps, n = 6) {
  const cols = steps?.length ?? 0;
  if (!cols) return [];
  const k = Math.min(n, cols);
  const picked = new Set();
  for (let i = 0; i < k; i++) picked.add(k === 1 ? 0 : Math.round((i * (cols - 1)) / (k - 1)));
  return [...picked].sort((a, b) => a - b).map((c) => ({ step: steps[c], at: (c + 0.5) / cols }));
}

/**
 * The colour scale's labels: counts at even steps of the ramp (which is a square-root
 * scale, so the middle of the bar is a quarter of the maximum): `[{count, at}]`, `at`
 * from 0 (empty) to 1 (the maximum).
 */
export function heatScaleTicks(max) {
  if (!(max > 0)) return [];
  return [0, 0.5, 1].map((at) => ({ count: max * at * at, at }));
}

/** The ramp of `heatColor` as a CSS gradient, for the colour scale's bar. */
export function heatGradient() {
  const stops = [0, 0.25, 0.5, 0.75, 1].map((t) => {
    const [r, g, b] = heatColor(t * t || 1e-12, 1);
    return `rgb(${r}, ${g}, ${b}) ${Math.round(t * 100)}%`;
  });
  return `linear-gradient(to right, ${stops.join(", ")})`;
}
