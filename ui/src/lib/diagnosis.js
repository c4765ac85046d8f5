// A run's cross-rank diagnosis in words (docs/http-api.md): the hang report (`hang`,
// rankwise/hang.py) and the first non-finite values (`first_nonfinite`, `divergence`,
// rankwise/divergence.py). The server words the sentences; this only picks and shapes.

/** "NaN" / "Inf" / "-Inf" as people write them. */
export function kindText(value) {
  return value === "+Inf" ? "Inf" : value;
}

/**
 * The run's earliest first non-finite value over every metric — {label, rank, step,
 * time, value, metric} — or null. The divergence list is ordered by its first step.
 */
export function firstBad(run) {
  const d = run?.divergence?.[0];
  const f = d?.first?.[0];
  return f ? { ...f, metric: d.metric } : null;
}

/** "NaN on rank 1 from step 40" (the state line, the runs table), or "". */
export function divergenceNote(run) {
  const f = firstBad(run);
  if (!f) return "";
  const who = f.rank >= 0 ? `rank ${f.rank}` : f.label;
  return `${kindText(f.value)} on ${who} from step ${f.step.toLocaleString("en-US")}`;
}

/** label → the first non-finite value of that rank, over every metric (earliest). */
export function nonfiniteByLabel(run) {
  const out = new Map();
  for (const [metric, ranks] of Object.entries(run?.first_nonfinite ?? {})) {
    for (const r of ranks) {
      const held = out.get(r.label);
      if (!held || r.step < held.step || (r.step === held.step && r.time < held.time)) {
        out.set(r.label, { ...r, metric });
      }
    }
  }
  return out;
}

/** The hang report's groups as rows, the odd ones out first: {where, ranks, odd}. */
export function hangRows(hang) {
  if (!hang) return [];
  const odd = new Set(hang.odd ?? []);
  const rows = [];
  for (const g of hang.elsewhere ?? []) rows.push({ where: g.where, ranks: g.ranks, odd: true });
  if (hang.waiting) rows.push({ where: hang.waiting.where, ranks: hang.waiting.ranks, odd: false });
  const logging = (hang.logging ?? []).filter((r) => odd.has(r.label));
  if (logging.length) rows.unshift({ where: "still logging", ranks: logging, odd: true });
  return rows;
}
