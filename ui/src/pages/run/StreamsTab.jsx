// The run page's Streams tab: one row per process (rank identity, state, progress,
// heartbeat, drops, how it ended); earlier incarnations (restarts) on demand.

import { Fragment } from "preact";
import { useState } from "preact/hooks";
import { useNow } from "../../hooks.js";
import { fmtAgo, fmtInt, fmtTime } from "../../lib/format.js";
import { latestStreams } from "../../lib/streams.js";
import { Empty, StateBadge } from "../../components/common.jsx";

export function StreamsTab({ run }) {
  const streams = run.streams ?? [];
  const live = run.state === "running";
  const now = useNow(1000, live);
  const [all, setAll] = useState(false);
  const [opened, setOpened] = useState(() => new Set());
  const toggle = (key) => {
    const next = new Set(opened);
    if (next.has(key)) next.delete(key);
    else next.add(key);
    setOpened(next);
  };
  const latest = latestStreams(streams);
  const rows = all ? [...streams].sort((a, b) => a.rank - b.rank || a.incarnation - b.incarnation) : latest;
  const restarted = streams.length > latest.length;
  if (!streams.length) {
    return <Empty title="No streams">No process has written to this run yet.</Empty>;
  }
  return (
    <div class="streams-tab">
      {restarted ? (
        <label class="check">
          <input type="checkbox" checked={all} onChange={(e) => setAll(e.currentTarget.checked)} />
          Show earlier incarnations (restarts) too
        </label>
      ) : null}
      <div class="table-wrap">
        <table class="runs streams">
          <thead>
            <tr>
              <th>Label</th>
              <th class="num">Rank</th>
              <th class="num">Node</th>
              <th>Host</th>
              <th>State</th>
              <th class="num">Last step</th>
              <th>Last heartbeat</th>
              <th class="num">Points</th>
              <th class="num">Dropped</th>
              <th>Ended</th>
            </tr>
          </thead>
          <tbody>
            {rows.map((s) => {
              const key = `${s.label}.${s.incarnation}`;
              const shown = opened.has(key) && s.traceback;
              return (
              <Fragment key={key}>
              <tr class={s.state === "crashed" || s.error_type ? "bad-row" : ""}>
                <td>
                  {s.label}
                  {s.is_primary ? <span class="pill" title="Decides the run's final state">primary</span> : null}
                  {s.incarnation > 0 ? <span class="muted small"> #{s.incarnation}</span> : null}
                </td>
                <td class="num">{s.rank}</td>
                <td class="num">{s.node}</td>
                <td>{s.host}{s.pid ? <span class="muted small"> pid {s.pid}</span> : null}</td>
                <td><StateBadge state={s.state} /></td>
                <td class="num">{fmtInt(s.last_step)}</td>
                <td title={fmtTime(s.last_seen)}>{fmtAgo(s.last_seen, now)}</td>
                <td class="num">{fmtInt(s.points)}</td>
                <td class={s.dropped ? "num warn" : "num"}>{fmtInt(s.dropped)}</td>
                <td><Ending s={s} open={!!shown} onToggle={() => toggle(key)} /></td>
              </tr>
              {shown ? (
                // The traceback spans the whole row below, and scrolls inside its box.
                <tr class="traceback-row" data-traceback={s.label}>
                  <td colSpan={COLUMNS}>
                    <pre class="traceback">{s.traceback}</pre>
                  </td>
                </tr>
              ) : null}
              </Fragment>
              );
            })}
          </tbody>
        </table>
      </div>
    </div>
  );
}

const COLUMNS = 10;

function Ending({ s, open, onToggle }) {
  if (s.error_type) {
    const what = <><code>{s.error_type}</code> {s.error_message}</>;
    if (!s.traceback) return <span class="ending">{what}</span>;
    return (
      <button type="button" class="ending linkish" aria-expanded={open} title={open ? "Hide the traceback" : "Show the traceback"} onClick={onToggle}>
        <span class="caret" aria-hidden="true">{open ? "▾" : "▸"}</span> {what}
      </button>
    );
  }
  if (s.signal) return <span>signal {s.signal}</span>;
  if (s.exit_code !== null && s.exit_code !== undefined) return <span>exit {s.exit_code}</span>;
  return <span class="muted">–</span>;
}
