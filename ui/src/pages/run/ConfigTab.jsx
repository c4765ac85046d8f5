// The Run page's tables: config and summary (flattened, searchable), and streams (one
// row per process: rank identity, state, progress, heartbeat, drops, how it ended).

import { useMemo, useState } from "preact/hooks";
import { useNow } from "../../hooks.js";
import { displayText } from "../../lib/escape.js";
import { asNumber, fmtAgo, fmtInt, fmtTime, fmtValue } from "../../lib/format.js";
import { flatten } from "../../lib/metrics.js";
import { Empty, StateBadge } from "../../components/common.jsx";

/** The latest incarnation of each stream label (earlier ones are restarts). */
export function latestStreams(streams) {
  const byLabel = new Map();
  for (const s of streams) {
    const prev = byLabel.get(s.label);
    if (!prev || s.incarnation > prev.incarnation) byLabel.set(s.label, s);
  }
  return [...byLabel.values()].sort((a, b) => a.rank - b.rank || (a.label < b.label ? -1 : 1));
}

function KeyValueTable({ title, rows, filter, emptyText }) {
  const shown = filter ? rows.filter(([k, v]) => `${k} ${displayText(v)}`.toLowerCase().includes(filter)) : rows;
  return (
    <section class="kv">
      <h2>
        {title} <span class="count">{rows.length}</span>
      </h2>
      {rows.length === 0 ? (
        <p class="muted">{emptyText}</p>
      ) : (
        <table class="kv-table">
          <tbody>
            {shown.map(([k, v]) => (
              <tr key={k}>
                <th scope="row">{k}</th>
                <td class={asNumber(v) !== undefined ? "num" : ""}>{asNumber(v) !== undefined ? fmtValue(v) : displayText(v)}</td>
              </tr>
            ))}
            {shown.length === 0 ? (
              <tr><td colSpan={2} class="muted">Nothing matches.</td></tr>
            ) : null}
          </tbody>
        </table>
      )}
    </section>
  );
}

/**
 * A shared run's summary, per key: the cross-rank line's last complete value (what the
 * chart header quotes) and each rank's own last value.
 */
function RankSummaryTable({ run, filter }) {
  const ranks = run.summary_ranks ?? {};
  const labels = latestStreams(run.streams ?? []).map((s) => s.label).filter((l) => l in ranks);
  const cross = run.summary_cross_rank ?? {};
  const keys = [...new Set([...Object.keys(cross), ...labels.flatMap((l) => Object.keys(ranks[l]))])].sort();
  const shown = filter ? keys.filter((k) => k.toLowerCase().includes(filter)) : keys;
  const cell = (v) => (asNumber(v) !== undefined ? fmtValue(v) : v === undefined ? "–" : displayText(v));
  return (
    <section class="kv rank-summary">
      <h2>
        Summary by rank <span class="count">{keys.length}</span>
      </h2>
      <p class="muted small">
        Cross-rank: the chart's line at its last complete step (every live rank there), weighted
        where every rank logged a weight. Each rank column: that rank's last value or what it set.
      </p>
      <div class="table-scroll">
        <table class="kv-table">
          <thead>
            <tr>
              <th scope="col">key</th>
              <th scope="col">cross-rank</th>
              {labels.map((l) => <th scope="col" key={l}>{l}</th>)}
            </tr>
          </thead>
          <tbody>
            {shown.map((k) => {
              const c = cross[k];
              return (
                <tr key={k}>
                  <th scope="row">{k}</th>
                  <td class="num" data-cross={k}>
                    {c ? (
                      <span title={`${c.n} values at step ${c.step}; mean ${fmtValue(c.mean)}, weighted ${fmtValue(c.wmean)}, min ${fmtValue(c.min)}, max ${fmtValue(c.max)}`}>
                        {fmtValue(c.wmean)} <span class="muted">@ {fmtInt(c.step)}</span>
                      </span>
                    ) : "–"}
                  </td>
                  {labels.map((l) => <td class="num" key={l}>{cell(ranks[l][k])}</td>)}
                </tr>
              );
            })}
          </tbody>
        </table>
      </div>
    </section>
  );
}

export function ConfigTab({ run }) {
  const [q, setQ] = useState("");
  const config = useMemo(() => flatten(run.config ?? {}), [run.config]);
  const summary = useMemo(() => flatten(run.summary ?? {}), [run.summary]);
  const shared = Object.keys(run.summary_ranks ?? {}).length > 1;
  const envRows = useMemo(() => {
    const env = run.environment ?? {};
    const rows = [];
    if (env.command?.length) rows.push(["command", env.command.join(" ")]);
    for (const k of ["python", "platform", "launcher", "rankwise_version", "host"]) {
      if (env[k]) rows.push([k === "rankwise_version" ? "rankwise" : k, env[k]]);
    }
    return rows;
  }, [run.environment]);
  const f = q.trim().toLowerCase();
  return (
    <div class="config-tab">
      <div class="toolbar">
        <label class="search">
          <span class="sr-only">Filter config and summary</span>
          <input type="search" data-search placeholder="Filter keys and values (press /)" value={q} onInput={(e) => setQ(e.currentTarget.value)} />
        </label>
      </div>
      <div class="two-col">
        <KeyValueTable title="Config" rows={config} filter={f} emptyText="No config: pass config= to rankwise.init() or set run.config[...]." />
        <KeyValueTable title={shared ? "Summary (primary rank)" : "Summary"} rows={summary} filter={f} emptyText="No summary yet: it holds each metric's last value and what you set in run.summary." />
      </div>
      {shared ? <RankSummaryTable run={run} filter={f} /> : null}
      <div class="env-table">
        <KeyValueTable title="Environment" rows={envRows} filter={f} emptyText="Not recorded (a run written before rankwise recorded it)." />
      </div>
    </div>
  );
}

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
