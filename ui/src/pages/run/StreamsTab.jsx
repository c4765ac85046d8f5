// The run page's Streams tab: one row per process (rank identity, state, progress,
// heartbeat, drops, how it ended); earlier incarnations (restarts) on demand.

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
            {rows.map((s) => (
              <tr key={`${s.label}.${s.incarnation}`} class={s.state === "crashed" || s.error_type ? "bad-row" : ""}>
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
                <td><Ending s={s} /></td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </div>
  );
}

function Ending({ s }) {
  if (s.error_type) {
    return (
      <details class="ending">
        <summary>
          <code>{s.error_type}</code> {s.error_message}
        </summary>
        {s.traceback ? <pre class="traceback">{s.traceback}</pre> : null}
      </details>
    );
  }
  if (s.signal) return <span>signal {s.signal}</span>;
  if (s.exit_code !== null && s.exit_code !== undefined) return <span>exit {s.exit_code}</span>;
  return <span class="muted">–</span>;
}
