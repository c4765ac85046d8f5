// A run's first failure (the API's `first_failure`, rankwise/failures.py) in words: the
// cause first, then what followed, with times relative to the cause.

/** "rank 1" (or the stream's label when it has no rank). */
export function who(f) {
  return f.rank >= 0 ? `rank ${f.rank}` : f.label;
}

/** What happened to the stream, without its name: "failed: RuntimeError: boom". */
export function what(f) {
  // A rank still called running that went quiet before a peer's "connection closed"
  // (rankwise/failures.py): the likely cause, until its death is known.
  if (f.state === "silent") return "no sign of life since its last record — checking";
  if (f.state === "crashed") return "crashed: its process ended with no exit recorded (SIGKILL, out of memory?)";
  if (f.error_type) return `${f.state}: ${f.error_type}${f.message ? `: ${f.message}` : ""}`;
  if (f.signal) return `${f.state} by signal ${f.signal}`;
  if (f.exit_code !== null && f.exit_code !== undefined) return `${f.state} with exit code ${f.exit_code}`;
  return f.state;
}

/** "+0.4 s" after the first failure ("" when a time is unknown). */
export function after(first, f) {
  if (first.time === null || first.time === undefined || f.time === null || f.time === undefined) return "";
  const d = Math.max(0, f.time - first.time);
  return d < 60 ? `+${d.toFixed(1)} s` : `+${Math.round(d / 60)} min`;
}

/** The short form for a table cell: "rank-1 RuntimeError" / "rank-1 crashed". */
export function cellText(f) {
  if (f.state === "silent") return `${f.label} silent?`;
  return `${f.label} ${f.state === "crashed" ? "crashed" : f.error_type || f.state}`;
}
