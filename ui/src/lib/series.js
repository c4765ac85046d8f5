// Data shaping between the HTTP API's chart columns and uPlot.
//
// The server answers a chart request with columns already sorted by x and downsampled
// per x bucket to its first, last, minimum and maximum point (M4), so every point here
// is a real logged point. That is what makes the operations below safe:
//
// * aligning several series on the union of their x values only inserts gaps (null);
// * merging a finer answer for a zoomed range into the coarse one only swaps which real
//   points are drawn inside that range, so a spike can never disappear;
// * JSON nulls (NaN, ±Inf, or "no value at this x") stay gaps all the way to the canvas.

/** Index of the first element of sorted `xs` that is >= v (xs.length when none). */
export function lowerBound(xs, v) {
  let lo = 0;
  let hi = xs.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (xs[mid] < v) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** Index of the first element of sorted `xs` that is > v (xs.length when none). */
export function upperBound(xs, v) {
  let lo = 0;
  let hi = xs.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (xs[mid] <= v) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** Index of the element of sorted `xs` closest to v, or -1 for an empty array. */
export function nearestIndex(xs, v) {
  if (!xs.length) return -1;
  const i = lowerBound(xs, v);
  if (i === 0) return 0;
  if (i === xs.length) return xs.length - 1;
  return v - xs[i - 1] <= xs[i] - v ? i - 1 : i;
}

const finite = (v) => typeof v === "number" && Number.isFinite(v);

/**
 * Exponential moving average with TensorBoard's debiasing, so the first points are not
 * dragged towards zero. `weight` is 0 (off) to <1. Gaps stay gaps and do not reset the
 * average; the output has the input's length.
 */
export function smooth(ys, weight) {
  if (!(weight > 0)) return ys;
  const w = Math.min(weight, 0.999);
  const out = new Array(ys.length);
  let last = 0;
  let n = 0;
  for (let i = 0; i < ys.length; i++) {
    const y = ys[i];
    if (!finite(y)) {
      out[i] = null;
      continue;
    }
    last = last * w + (1 - w) * y;
    n++;
    out[i] = last / (1 - Math.pow(w, n));
  }
  return out;
}

/** For a log-scale axis: values that are not > 0 become gaps. */
export function positiveOnly(ys) {
  return ys.map((y) => (finite(y) && y > 0 ? y : null));
}

/** Non-finite values as gaps (MessagePack can carry NaN; JSON already has null). */
export function gaps(ys) {
  return ys.map((y) => (finite(y) ? y : null));
}

/** True where the band's mean is weighted: every value at that x carried a weight. */
export function weightedAt(band) {
  const n = band.n ?? [];
  const nw = band.nw ?? [];
  return n.map((k, i) => k > 0 && nw[i] === k);
}

/** The cross-rank lines a chart can draw (`define_metric(reduce=)`'s choices). */
export const LINES = ["mean", "sum", "min", "max"];

/**
 * The line a band draws: `line` when the chart's settings chose one, else the metric's
 * defined `reduce` (the band's, "mean" by default). "wmean" and "mean" are one choice,
 * the mean, drawn weighted where every rank gave a weight unless `weighted` is false.
 */
export function lineOf(band, line = null) {
  const chosen = line ?? band?.reduce ?? "mean";
  return chosen === "wmean" ? "mean" : LINES.includes(chosen) ? chosen : "mean";
}

/**
 * A run's cross-rank summary value (`summary_cross_rank[key]`) as the chart's header
 * quotes it: its defined line's value, the (weighted) mean unless defined.
 */
export function crossValue(c) {
  const kind = lineOf(c);
  return kind === "mean" ? (c.wmean ?? c.mean) : (c[kind] ?? c.wmean);
}

/**
 * The cross-rank band of a series reply as uPlot columns: `[x, mean, min, max]`, plus
 * `raw` (the unsmoothed line) when smoothing is on. The line (called `mean` here) is
 * `line` (`lineOf`): the mean (`weighted` picks `wmean`, the weighted mean where every
 * rank gave a weight and the plain mean elsewhere, or `mean`), the `sum`, the `min` or
 * the `max`. The band is min..max, except under a sum: the ranks' own values are on
 * another scale than their total, so no band is drawn (`min`/`max` are null) and the
 * ranks are one click away as lines.
 *
 * A *partial* step (one not every live rank has reached yet) holds only the ranks that
 * got there first, so it is not drawn as the line: `mean` has a gap there and `pending`
 * holds those values (joined to the last complete one) for a faint dashed line.
 * `lastComplete` is the index the header quotes (-1 when none).
 */
export function bandColumns(band, { smoothing = 0, log = false, weighted = true, line = null } = {}) {
  if (!band || !band.x || band.x.length === 0) return null;
  const fix = log ? positiveOnly : gaps;
  const kind = lineOf(band, line);
  const partial = band.partial ?? band.x.map(() => false);
  const column = kind === "mean"
    ? (weighted ? (band.wmean ?? band.mean) : band.mean)
    : (band[kind] ?? band.mean);
  const all = fix(column);
  const mean = all.map((y, i) => (partial[i] ? null : y));
  const smoothed = fix(smooth(mean, smoothing));
  const marks = bandMarks(band);
  const marked = new Set(marks.map((m) => m.x));
  let lastComplete = -1;
  for (let i = mean.length - 1; i >= 0; i--) {
    // A step whose every value was NaN or ±Inf is complete too: the header says NaN.
    if (!partial[i] && (mean[i] !== null || marked.has(band.x[i]))) {
      lastComplete = i;
      break;
    }
  }
  let pending = null;
  if (partial.some(Boolean)) {
    pending = all.map((y, i) => (partial[i] ? y : null));
    if (lastComplete >= 0) pending[lastComplete] = smoothed[lastComplete];
  }
  const banded = kind !== "sum";
  return {
    x: band.x,
    line: kind,
    defined: lineOf(band),
    mean: smoothed,
    raw: smoothing > 0 ? mean : null,
    min: banded ? fix(band.min) : null,
    max: banded ? fix(band.max) : null,
    n: band.n,
    partial,
    pending,
    lastComplete,
    hasWeights: weightedAt(band).some(Boolean),
    marks,
    nonfinite: { nan: band.nan ?? null, posinf: band.posinf ?? null, neginf: band.neginf ?? null },
  };
}

/** What a step with no finite value stands for: NaN (a NaN, or both infinities), ∞ or −∞. */
function nonfiniteText(nan, posinf, neginf) {
  if (posinf > 0 && !(nan > 0) && !(neginf > 0)) return "∞";
  if (neginf > 0 && !(nan > 0) && !(posinf > 0)) return "−∞";
  return "NaN";
}

/**
 * The band's steps whose every value was NaN or ±Inf (n = 0, a count above 0), as chart
 * marks `{x, text}` like `nonfiniteMarks`: the mean has no value there to draw.
 */
export function bandMarks(band, color = null) {
  const out = [];
  if (!band?.x || !band.n) return out;
  const { nan, posinf, neginf } = band;
  band.x.forEach((x, i) => {
    const a = nan?.[i] ?? 0;
    const b = posinf?.[i] ?? 0;
    const c = neginf?.[i] ?? 0;
    if (band.n[i] === 0 && a + b + c > 0) out.push({ x, text: nonfiniteText(a, b, c), color });
  });
  return out;
}

/**
 * "NaN on 1 · ∞ on 2": the non-finite values a band point left out of its mean, by
 * kind (`nonfinite` as `bandColumns` returns it); "" when there were none.
 */
export function nonfiniteNote(nonfinite, i) {
  if (!nonfinite) return "";
  const parts = [];
  for (const [key, text] of [["nan", "NaN"], ["posinf", "∞"], ["neginf", "−∞"]]) {
    const k = nonfinite[key]?.[i] ?? 0;
    if (k > 0) parts.push(`${text} on ${k}`);
  }
  return parts.join(" · ");
}

/**
 * Several series with their own sorted x columns, aligned on the union of their x
 * values for uPlot: returns `[x, ys0, ys1, ...]` with null where a series has no point.
 * A series with repeated x keeps its last value there.
 */
export function alignSeries(list) {
  const total = list.reduce((acc, s) => acc + s.x.length, 0);
  const all = new Float64Array(total);
  let k = 0;
  for (const s of list) for (const v of s.x) all[k++] = v;
  all.sort();
  const xs = [];
  for (let i = 0; i < all.length; i++) {
    if (i === 0 || all[i] !== all[i - 1]) xs.push(all[i]);
  }
  const cols = [xs];
  for (const s of list) {
    const col = new Array(xs.length).fill(null);
    let j = 0;
    for (let i = 0; i < s.x.length; i++) {
      const x = s.x[i];
      while (xs[j] < x) j++;
      const y = s.y[i];
      col[j] = finite(y) ? y : null;
    }
    cols.push(col);
  }
  return cols;
}

/**
 * Merges a finer answer for [lo, hi] into a coarse one. Both are `{x, cols: {name: []}}`
 * with columns aligned to their x. The result keeps the coarse points outside the range
 * and the fine points inside it; columns missing from `fine` become gaps inside.
 */
export function mergeRange(coarse, fine, lo, hi) {
  if (!fine || !fine.x.length) return coarse;
  if (!coarse || !coarse.x.length) return fine;
  const a = lowerBound(coarse.x, lo);
  const b = upperBound(coarse.x, hi);
  // The fine answer is only trusted inside [lo, hi].
  const fa = lowerBound(fine.x, lo);
  const fb = upperBound(fine.x, hi);
  const x = coarse.x.slice(0, a).concat(fine.x.slice(fa, fb), coarse.x.slice(b));
  const cols = {};
  for (const name of Object.keys(coarse.cols)) {
    const c = coarse.cols[name];
    const f = fine.cols[name];
    const mid = f ? f.slice(fa, fb) : new Array(fb - fa).fill(null);
    cols[name] = c.slice(0, a).concat(mid, c.slice(b));
  }
  return { x, cols };
}

/** A band reply as the `{x, cols}` shape `mergeRange` works on (null when empty). */
export function bandTable(band) {
  if (!band || !band.x || !band.x.length) return null;
  const cols = { n: band.n, mean: band.mean, wmean: band.wmean ?? band.mean, min: band.min, max: band.max };
  for (const k of ["std", "nw", "partial", "step", "nan", "posinf", "neginf"]) {
    if (band[k]) cols[k] = band[k];
  }
  if (band.sum?.length) cols.sum = band.sum; // a server before define_metric has none
  return { x: band.x, cols };
}

/** And back: a `{x, cols}` table as a band object; `reduce` is the metric's line. */
export function tableBand(table, reduce = undefined) {
  if (!table) return null;
  return { x: table.x, ...table.cols, ...(reduce ? { reduce } : {}) };
}

/** A band table's line column for an overlay of runs: each run's defined line. */
export function lineColumn(table, reduce) {
  const kind = lineOf({ reduce });
  if (kind === "mean") return table.cols.wmean ?? table.cols.mean;
  return table.cols[kind] ?? table.cols.wmean ?? table.cols.mean;
}

/** Per-stream series merged label by label (a label absent from `fine` is kept coarse). */
export function mergeSeriesList(coarse, fine, lo, hi) {
  const byLabel = new Map(fine.map((s) => [s.label, s]));
  return coarse.map((s) => {
    const f = byLabel.get(s.label);
    if (!f) return s;
    const m = mergeRange({ x: s.x, cols: { y: s.y } }, { x: f.x, cols: { y: f.y } }, lo, hi);
    return { ...s, x: m.x, y: m.cols.y };
  }).concat(fine.filter((f) => !coarse.some((s) => s.label === f.label)));
}

/** [min, max] of the finite ys whose x lies in [lo, hi]; null when there are none. */
export function extentInRange(xs, ys, lo, hi, log = false) {
  let a = lo === null || lo === undefined ? 0 : lowerBound(xs, lo);
  const b = hi === null || hi === undefined ? xs.length : upperBound(xs, hi);
  let mn = Infinity;
  let mx = -Infinity;
  for (; a < b; a++) {
    const y = ys[a];
    if (!finite(y) || (log && y <= 0)) continue;
    if (y < mn) mn = y;
    if (y > mx) mx = y;
  }
  return mn <= mx ? [mn, mx] : null;
}

/** Points a chart of `width` CSS pixels asks for: about two per pixel, as the API suggests. */
export function pointsFor(width) {
  return Math.max(200, Math.min(4000, Math.round(2 * width)));
}

/**
 * Points per rank when every rank is drawn: the band keeps the extremes, so with many
 * ranks each line gets fewer points and the whole chart stays about the same weight.
 */
export function pointsPerRank(width, ranks) {
  const full = pointsFor(width);
  if (ranks <= 8) return full;
  return Math.max(160, Math.round((full * 8) / ranks));
}

const SHOWN = { NaN: "NaN", Infinity: "∞", "-Infinity": "−∞" };

/**
 * A series' NaN and ±Inf points (the reply's `nonfinite`, or non-finite numbers in `y`
 * from MessagePack) as chart marks `{x, text}`; `color` is given to each.
 */
export function nonfiniteMarks(series, color = null) {
  const out = [];
  const nf = series?.nonfinite;
  if (nf && nf.x) {
    nf.x.forEach((x, i) => out.push({ x, text: SHOWN[nf.value[i]] ?? nf.value[i], color }));
  } else if (series?.y) {
    series.y.forEach((y, i) => {
      if (typeof y === "number" && !Number.isFinite(y)) {
        out.push({ x: series.x[i], text: Number.isNaN(y) ? "NaN" : y > 0 ? "∞" : "−∞", color });
      }
    });
  }
  return out;
}

/** The mark at `x`, if any (for the hover readout). */
export function markAt(marks, x) {
  return marks?.find((m) => m.x === x) ?? null;
}

/** Indices of the non-null values with no non-null neighbour (every one when alone). */
export function isolated(ys, spanGaps = false) {
  if (!ys) return null;
  const out = [];
  const has = (i) => i >= 0 && i < ys.length && ys[i] !== null && ys[i] !== undefined;
  let count = 0;
  for (let i = 0; i < ys.length; i++) {
    if (!has(i)) continue;
    count++;
    if (!spanGaps && !has(i - 1) && !has(i + 1)) out.push(i);
  }
  if (spanGaps) {
    if (count !== 1) return null;
    for (let i = 0; i < ys.length; i++) if (has(i)) return [i];
  }
  return out.length ? out : null;
}
