// Rank health as the run page shows it: the /health reply (docs/http-api.md) shaped into
// the strip's cells (state, lag shade, hover text) and the stall messages.
//
// A cell's state is what matters most about the rank, in this order: crashed, stalled,
// failed, then the stream's own state (a stall still open when a rank failed or was
// killed is usually why: a collective timing out, the launcher tearing the job down).
// "Slow" is a flag on top (an outline), and the lag behind the median rank shades a live
// cell from healthy to warning.

import { fmtDuration, fmtInt } from "./format.js";

const ORDER = ["crashed", "stalled", "failed", "killed", "running", "finished"];

/** The one state a rank's cell shows. */
export function cellState(r) {
  if (r.state === "crashed") return r.state;
  if (r.stalled) return "stalled";
  return r.state;
}

/**
 * How far behind a rank is, 0 (on par or ahead) .. 1 (LAG_FULL seconds or more behind
 * the median rank at the median rate). Ranks without a rate yet count as on par.
 */
export const LAG_FULL = 30;
export function lagShade(r) {
  if (r.lag_seconds === null || r.lag_seconds === undefined || !(r.lag_seconds > 0)) return 0;
  return Math.min(1, r.lag_seconds / LAG_FULL);
}

function rate(v) {
  if (v === null || v === undefined) return "–";
  return v >= 100 ? v.toFixed(0) : v >= 1 ? v.toFixed(2) : v.toPrecision(2);
}

/** The lines of a cell's hover card: plain text, one fact each. */
export function cellDetails(r, medianRate) {
  const out = [`${r.label} · rank ${r.rank} · node ${r.node}${r.host ? ` (${r.host})` : ""}`];
  out.push(`state: ${r.state}${r.stalled ? ", stalled" : ""}${r.slow ? ", slow" : ""}`);
  const lag = r.lag_steps > 0 ? `${fmtInt(r.lag_steps)} behind the median`
    : r.lag_steps < 0 ? `${fmtInt(-r.lag_steps)} ahead of the median` : "on the median";
  out.push(`step ${fmtInt(r.last_step)} (${lag})`);
  out.push(`${rate(r.step_rate)} steps/s (median ${rate(medianRate)})`);
  if (r.stalled && r.stall) {
    const where = r.stall.where ? ` in ${r.stall.where}` : "";
    out.push(`stalled for ${fmtDuration(r.stall.seconds)}${where}`);
  }
  return out;
}

/** The strip's cells, in rank order, with what each needs to render. */
export function healthCells(health) {
  const ranks = [...(health?.ranks ?? [])].sort((a, b) => a.rank - b.rank || (a.label < b.label ? -1 : 1));
  const texts = cellTexts(ranks);
  return ranks.map((r, i) => ({
    label: r.label,
    rank: r.rank,
    text: texts[i],
    node: r.node,
    state: cellState(r),
    slow: !!r.slow,
    lag: lagShade(r),
    details: cellDetails(r, health.median_rate),
    summary: r.message,
  }));
}

/**
 * What each cell says: its rank, unless several streams share one (a rank's child
 * processes, "rank-0-child-4242"): then the rank's own stream keeps the number and the
 * others read "0c1", "0c2"… so no two cells look alike. Input sorted by rank, label.
 */
export function cellTexts(ranks) {
  const seen = new Map();
  return ranks.map((r) => {
    if (r.rank < 0) return "?";
    const n = seen.get(r.rank) ?? 0;
    seen.set(r.rank, n + 1);
    const child = /-child-\d+$/.test(r.label);
    return n === 0 && !child ? String(r.rank) : `${r.rank}c${child ? n || 1 : n}`;
  });
}

/** Counts per cell state (for the strip's legend), most severe first. */
export function stateCounts(cells) {
  const counts = new Map();
  for (const c of cells) counts.set(c.state, (counts.get(c.state) ?? 0) + 1);
  const slow = cells.filter((c) => c.slow).length;
  const out = [...counts.entries()].sort((a, b) => ORDER.indexOf(a[0]) - ORDER.indexOf(b[0]));
  if (slow) out.push(["slow", slow]);
  return out;
}

/** The open stalls, longest first: {label, rank, message, where, seconds}. */
export function stallsOf(health) {
  return (health?.ranks ?? [])
    .filter((r) => r.stalled)
    .map((r) => ({
      label: r.label,
      rank: r.rank,
      message: r.message,
      where: r.stall?.where ?? "",
      seconds: r.stall?.seconds ?? 0,
      stacks: r.stall?.stacks ?? null,
    }))
    .sort((a, b) => b.seconds - a.seconds || a.rank - b.rank);
}

/** Thread stacks in a stable order: the main thread first, then by name. */
export function orderedStacks(stacks) {
  return Object.entries(stacks ?? {}).sort(([a], [b]) => {
    const ma = /main/i.test(a) ? 0 : 1;
    const mb = /main/i.test(b) ? 0 : 1;
    return ma - mb || (a < b ? -1 : a > b ? 1 : 0);
  });
}
