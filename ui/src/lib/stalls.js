// Stalls on the charts' time line: the watchdog's reports (GET .../stalls, newest first)
// paired with the reports that cleared them, as marks a chart draws under its lines.
//
// By wall time a stall is a span, from when the rank stopped logging (report time less
// its idle seconds) to when it logged again (the clearing report; still open: to the
// chart's right edge). By step it is a line at the step the rank was at when it stopped
// (the API's `step`; a stall without one cannot be placed there and is left out).

/** [{label, rank, x0, x1, seconds, where, open}] for a chart whose x is `xMode`. */
export function stallMarks(events, xMode) {
  const byTime = [...(events ?? [])].sort((a, b) => a.time - b.time);
  const open = new Map();
  const out = [];
  for (const e of byTime) {
    const k = `${e.label}\u0000${e.incarnation}`;
    if (!e.cleared) {
      if (!open.has(k)) open.set(k, e);
      continue;
    }
    const report = open.get(k);
    if (!report) continue;
    open.delete(k);
    out.push(mark(report, e, xMode));
  }
  for (const report of open.values()) out.push(mark(report, null, xMode));
  return out.filter(Boolean).sort((a, b) => a.x0 - b.x0);
}

function mark(report, clear, xMode) {
  const began = report.time - report.idle_seconds;
  const base = {
    label: report.label,
    rank: report.rank,
    seconds: clear ? clear.idle_seconds : null,
    where: report.where,
    open: !clear,
  };
  if (xMode === "time") return { ...base, x0: began, x1: clear ? clear.time : null };
  if (report.step === null || report.step === undefined) return null;
  return { ...base, x0: report.step, x1: report.step };
}

/** "rank 1 stalled 1.5 s (in sleep at train.py:60)" for a hint or a title. */
export function describeMark(m) {
  const who = m.rank >= 0 ? `rank ${m.rank}` : m.label;
  const how = m.open ? "stalled (still)" : `stalled ${m.seconds < 10 ? m.seconds.toFixed(1) : Math.round(m.seconds)} s`;
  return `${who} ${how}${m.where ? ` in ${m.where}` : ""}`;
}

/**
 * Labels that would print over each other, merged: `items` are `{px, text, key}` (the
 * label's x on the canvas, its text, what it counts as: "stall", "NaN"…), any order.
 * Items within `gap` px of the previous one join its group; a group of one keeps its
 * text, a larger one reads "3 stalls" (or "3 NaN", "3 non-finite" when kinds differ).
 * Returns `[{px, text, n}]`, left to right, `px` the group's first.
 */
export function collapseLabels(items, gap) {
  const sorted = [...items].sort((a, b) => a.px - b.px);
  const groups = [];
  for (const it of sorted) {
    const g = groups[groups.length - 1];
    if (g && it.px - g.last < gap) {
      g.items.push(it);
      g.last = it.px;
    } else {
      groups.push({ px: it.px, last: it.px, items: [it] });
    }
  }
  return groups.map((g) => {
    const n = g.items.length;
    if (n === 1) return { px: g.px, text: g.items[0].text, n };
    const kinds = new Set(g.items.map((i) => i.key));
    const kind = kinds.size === 1 ? [...kinds][0] : "non-finite";
    return { px: g.px, text: `${n} ${kind === "stall" ? "stalls" : kind}`, n };
  });
}
