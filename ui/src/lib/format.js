// Numbers, times and durations as the dashboard shows them.

const SPELLED = { NaN: NaN, Infinity: Infinity, "-Infinity": -Infinity };

/**
 * The number a JSON reply spelled out ("NaN", "Infinity", "-Infinity": JSON has no
 * such numbers), or the number itself; undefined for anything else.
 */
export function asNumber(v) {
  if (typeof v === "number") return v;
  if (typeof v === "string" && Object.prototype.hasOwnProperty.call(SPELLED, v)) return SPELLED[v];
  return undefined;
}

/** A metric value: compact but exact enough to compare neighbours. */
export function fmtValue(v) {
  if (v === null || v === undefined) return "–";
  if (typeof v === "string" && asNumber(v) !== undefined) v = asNumber(v);
  if (typeof v === "boolean") return v ? "true" : "false";
  if (typeof v !== "number") return String(v);
  if (Number.isNaN(v)) return "NaN";
  if (!Number.isFinite(v)) return v > 0 ? "∞" : "−∞";
  if (Number.isInteger(v) && Math.abs(v) < 1e15) return v.toLocaleString("en-US");
  const a = Math.abs(v);
  if (a !== 0 && (a < 1e-3 || a >= 1e6)) return v.toExponential(3);
  return Number(v.toPrecision(5)).toString();
}

/** An integer with thousands separators ("12,345"). */
export function fmtInt(v) {
  return v === null || v === undefined || v < 0 ? "–" : Math.round(v).toLocaleString("en-US");
}

/** A duration in seconds as "3h 04m", "12m 05s" or "42s". */
export function fmtDuration(s) {
  if (s === null || s === undefined || !Number.isFinite(s) || s < 0) return "–";
  const t = Math.round(s);
  const d = Math.floor(t / 86400);
  const h = Math.floor((t % 86400) / 3600);
  const m = Math.floor((t % 3600) / 60);
  const sec = t % 60;
  const two = (n) => String(n).padStart(2, "0");
  if (d) return `${d}d ${two(h)}h`;
  if (h) return `${h}h ${two(m)}m`;
  if (m) return `${m}m ${two(sec)}s`;
  return `${sec}s`;
}

/** Unix seconds as local "2024-05-01 13:04:05". */
export function fmtTime(ts) {
  if (ts === null || ts === undefined) return "–";
  const d = new Date(ts * 1000);
  const two = (n) => String(n).padStart(2, "0");
  return (
    `${d.getFullYear()}-${two(d.getMonth() + 1)}-${two(d.getDate())} ` +
    `${two(d.getHours())}:${two(d.getMinutes())}:${two(d.getSeconds())}`
  );
}

/** Unix seconds, short: "11-22 13:04" this year, "2023-11-22" before. */
export function fmtShortTime(ts, now = Date.now() / 1000) {
  if (ts === null || ts === undefined) return "–";
  const full = fmtTime(ts);
  return new Date(ts * 1000).getFullYear() === new Date(now * 1000).getFullYear()
    ? full.slice(5, 16)
    : full.slice(0, 10);
}

/** How long ago, relative to `now` (Unix seconds): "4 s ago", "3 min ago", "2 h ago". */
export function fmtAgo(ts, now = Date.now() / 1000) {
  if (ts === null || ts === undefined) return "–";
  const s = Math.max(0, now - ts);
  if (s < 60) return `${Math.round(s)} s ago`;
  if (s < 3600) return `${Math.round(s / 60)} min ago`;
  if (s < 86400) return `${Math.round(s / 3600)} h ago`;
  return `${Math.round(s / 86400)} d ago`;
}

/** A run's duration: finished runs end at `updated`, running ones at `now`. */
export function runDuration(run, now = Date.now() / 1000) {
  if (!run || run.created === null || run.created === undefined) return null;
  if (run.state === "running") return Math.max(0, now - run.created);
  return run.duration ?? (run.updated !== null ? run.updated - run.created : null);
}

/**
 * "64 × 8": the run's own ranks by nodes, and the job's in brackets where they differ
 * (a worker-scope run of a 64-rank job holds one rank: "1 × 1 (job 64 × 8)").
 */
export function fmtRanks(run) {
  const job = `${run.world_size ?? 1} × ${run.num_nodes ?? 1}`;
  if (run.run_ranks === undefined) return job;
  const own = `${run.run_ranks} × ${run.run_nodes ?? 1}`;
  return own === job ? own : `${own} (job ${job})`;
}

/** Crashed stream labels as a short phrase: "rank-3, rank-7 +2". */
export function fmtCrashed(labels, max = 3) {
  if (!labels || !labels.length) return "";
  const shown = labels.slice(0, max).join(", ");
  return labels.length > max ? `${shown} +${labels.length - max}` : shown;
}

function tickAt(v, digits) {
  if (v === null || v === undefined) return "";
  const a = Math.abs(v);
  if (a === 0) return "0";
  const exp = () => v.toExponential(Math.max(0, digits - 1)).replace("e+", "e").replace(/\.?0+e/, "e");
  if (a >= 1e15 || a < 1e-3) return exp();
  // From 10,000 on, thousands are "k" (below it, 1200 reads better than 1.2k).
  for (const [from, size, unit] of [[1e12, 1e12, "T"], [1e9, 1e9, "G"], [1e6, 1e6, "M"], [1e4, 1e3, "k"]]) {
    if (a >= from) return `${+(v / size).toPrecision(digits)}${unit}`;
  }
  return `${+v.toPrecision(Math.max(digits, 4))}`;
}

/**
 * Axis tick labels: short (1.2k, 3.4M, 74.6G, 1.18e21), and distinct: where three
 * digits would repeat a label ("74.6G" four times), more digits are used.
 */
export function fmtTicks(vals) {
  for (let digits = 3; digits <= 12; digits++) {
    const out = vals.map((v) => tickAt(v, digits));
    if (new Set(out).size === out.length) return out;
  }
  return vals.map((v) => tickAt(v, 15));
}

/**
 * Which rank a run of one rank is ("rank-3"), for a per-process run (run_mode="new", or
 * W&B's run per process) of a multi-process job; "" for a run of several ranks.
 */
export function runRank(run) {
  if (!run?.label) return "";
  return run.run_mode === "new" || (run.world_size ?? 1) > 1 ? run.label : "";
}

/** A run's name for legends: "fuzzy-otter-7 · rank-3" when it is one rank of a job. */
export function runTitle(run) {
  const name = run.name || run.id;
  const rank = runRank(run);
  return rank && !name.endsWith(rank) ? `${name} · ${rank}` : name;
}

/** The run mode in words, as what was recorded: "shared" alone reads wrong for a
 * script whose rank 0 alone called init (W&B's default). */
export function fmtMode(run) {
  const world = run.world_size ?? 1;
  if (run.run_mode === "new") return `new: one run per process${run.label ? ` (this is ${run.label})` : ""}`;
  if (world > 1 && run.run_ranks === 1) return `${run.label ?? "one rank"} only, of ${world} ranks`;
  if (run.run_mode === "shared") return world > 1 && run.run_ranks < world ? `shared: ${run.run_ranks} of ${world} ranks` : "shared: every rank";
  return run.run_mode ?? "";
}
