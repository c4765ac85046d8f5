// Rank health on the run page: a strip with one cell per rank, coloured by state and by
// how far the rank lags behind the median, with details on hover (or focus); clicking a
// cell focuses that rank: its lines in Charts, its logs in Logs. Below it, the stall banner (StallBanner.jsx).
// Over 64 ranks the strip is a grid (HealthGrid): a row per node, a column per local rank,
// states told by colour and pattern, the odd ranks first ("needs attention") and their
// nodes at the top.
//
// Everything shown comes from GET .../health (docs/http-api.md), re-read while the run
// is live. User text (labels, hosts, where, stacks) is only ever rendered as text.

import { useMemo, useState } from "preact/hooks";
import { api } from "../api.js";
import { LIVE_MS, useLoad } from "../hooks.js";
import { href, navigate } from "../router.js";
import { healthCells, stateCounts } from "../lib/health.js";
import { kindText, nonfiniteByLabel } from "../lib/diagnosis.js";
import { healthGrid } from "../lib/ranks.js";
import { StallBanner } from "./StallBanner.jsx";
import "./health.css";

/** The strip and the stall banner, sharing one /health read. */
export function RunHealth({ run, tab }) {
  const live = run.state === "running";
  const { project, id } = run;
  const health = useLoad(
    (signal) => api.health(project, id, {}, { signal }),
    [project, id],
    { interval: live ? 2 * LIVE_MS : 0, finalRead: true }, // and once more when the run ends
  );
  if (!health.data) return null; // loading, or a server without rank health: no strip
  return (
    <>
      <HealthStrip run={run} health={health.data} tab={tab} />
      <StallBanner run={run} health={health.data} />
    </>
  );
}

const STATE_TEXT = {
  crashed: "crashed",
  failed: "failed",
  stalled: "stalled",
  killed: "killed",
  running: "running",
  finished: "finished",
  slow: "slow",
};

export function HealthStrip({ run, health, tab }) {
  // Shaped once per reply, not per hover (a 1,024-rank grid re-renders on each).
  const cells = useMemo(() => {
    const bad = nonfiniteByLabel(run);
    return healthCells(health).map((c) => {
      const f = bad.get(c.label);
      if (!f) return c;
      const note = `${kindText(f.value)} from step ${f.step.toLocaleString("en-US")} (${f.metric})`;
      return { ...c, nonfinite: note, details: [...c.details, note] };
    });
  }, [run, health]);
  const [hover, setHover] = useState(null);
  if (!cells.length) return null;
  const big = cells.length > 64;
  const shown = hover ? cells.find((c) => c.label === hover) : null;
  // A click focuses the rank: its lines picked out in Charts, only its lines in Logs
  // (whichever of the two is open; Charts from the other tabs).
  const open = (c) =>
    navigate(href.run(run.project, run.id, { tab: tab === "logs" ? "logs" : "", label: c.label }));
  return (
    <section class="rank-health" data-health-strip aria-label="Rank health">
      <div class="rh-head">
        <h2>Rank health</h2>
        <ul class="rh-legend">
          {stateCounts(cells).map(([state, n]) => (
            <li key={state} class={`rh-key rh-${state}`}>
              <span class="rh-dot" aria-hidden="true" />
              {n} {STATE_TEXT[state] ?? state}
            </li>
          ))}
        </ul>
      </div>
      {big ? (
        <HealthGrid cells={cells} setHover={setHover} open={open} />
      ) : (
        <div class="rh-cells" role="list">
          {cells.map((c) => <Cell key={c.label} c={c} setHover={setHover} open={open} text={c.text} />)}
        </div>
      )}
      <div class="rh-card" aria-hidden="true">
        {shown ? (
          shown.details.map((line, i) => <div key={i} class={i ? "" : "rh-card-title"}>{line}</div>)
        ) : (
          <span class="muted">Hover a rank for its state, step rate and lag; click it for its lines and logs.</span>
        )}
      </div>
    </section>
  );
}

function cellClass(c) {
  return `rh-cell rh-${c.state}${c.slow ? " rh-slow" : ""}${c.nonfinite ? " rh-nonfinite" : ""}`;
}

/** One rank's cell: its state by colour and pattern, details on hover, focus on click.
 * `odd` marks a copy in the grid's "needs attention" row (the grid keeps data-label). */
function Cell({ c, setHover, open, text, odd = false }) {
  return (
    <button
      type="button"
      role="listitem"
      class={odd ? `${cellClass(c)} rh-odd-cell` : cellClass(c)}
      data-nonfinite={c.nonfinite || undefined}
      style={{ "--lag": String(c.lag) }}
      data-rank={c.rank}
      data-label={odd ? undefined : c.label}
      data-odd-label={odd ? c.label : undefined}
      data-state={c.state}
      data-slow={String(c.slow)}
      aria-label={c.details.join("; ")}
      onMouseEnter={() => setHover(c.label)}
      onMouseLeave={() => setHover(null)}
      onFocus={() => setHover(c.label)}
      onBlur={() => setHover(null)}
      onClick={() => open(c)}
    >
      {text}
    </button>
  );
}

/** How many odd ranks the "needs attention" row lists before "and N more". */
const ODD_SHOWN = 48;

/** The strip of a big run: a row per node (the nodes with odd ranks first), a column per
 * local rank; the odd ranks themselves, worst first, in a row above. */
function HealthGrid({ cells, setHover, open }) {
  const grid = useMemo(() => healthGrid(cells), [cells]);
  return (
    <div class="rh-grid-wrap" data-health-grid>
      {grid.odd.length ? (
        <div class="rh-odd" data-health-odd>
          <span class="muted small">Needs attention ({grid.odd.length}):</span>
          <div class="rh-cells" role="list" aria-label="Ranks that need attention">
            {grid.odd.slice(0, ODD_SHOWN).map((c) => (
              <Cell key={c.label} c={c} setHover={setHover} open={open} text={c.text} odd />
            ))}
          </div>
          {grid.odd.length > ODD_SHOWN ? <span class="muted small">and {grid.odd.length - ODD_SHOWN} more (outlined below)</span> : null}
        </div>
      ) : null}
      <div class="rh-grid" role="list" aria-label="Ranks by node and local rank" style={{ "--cols": String(grid.cols) }}>
        {grid.nodes.map((n) => (
          <div
            key={n.node}
            class={n.odd ? "rh-node rh-node-odd" : "rh-node"}
            data-node={n.node}
            title={`node ${n.node}${n.host ? ` (${n.host})` : ""}: ${n.cells.length} ranks${n.odd ? `, ${n.odd} need attention` : ""}`}
          >
            <span class="rh-node-name" aria-hidden="true">{n.node >= 0 ? `n${n.node}` : "?"}</span>
            {n.cells.map((c) => <Cell key={c.label} c={c} setHover={setHover} open={open} text={null} />)}
          </div>
        ))}
      </div>
    </div>
  );
}
