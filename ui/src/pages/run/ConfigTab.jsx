// The run page's Config & summary tab: config, summary (the primary rank's, and by rank
// for a shared run) and the environment, flattened and searchable.

import { useMemo, useState } from "preact/hooks";
import { api } from "../../api.js";
import { LIVE_MS, useLoad } from "../../hooks.js";
import { displayText } from "../../lib/escape.js";
import { asNumber, fmtInt, fmtValue } from "../../lib/format.js";
import { flatten } from "../../lib/metrics.js";
import { crossValue, lineOf } from "../../lib/series.js";
import { Spinner } from "../../components/common.jsx";
import { latestStreams } from "../../lib/streams.js";

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
        Cross-rank: the chart's line at its last complete step (every live rank there): the
        metric's defined line (sum, min, max), else the mean, weighted where every rank logged
        a weight. Each rank column: that rank's last value or what it set.
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
                      <span data-reduce={lineOf(c)} title={`${c.n} values at step ${c.step}; mean ${fmtValue(c.mean)}, weighted ${fmtValue(c.wmean)}, sum ${fmtValue(c.sum)}, min ${fmtValue(c.min)}, max ${fmtValue(c.max)}`}>
                        {fmtValue(crossValue(c))}{lineOf(c) !== "mean" ? <span class="muted"> {lineOf(c)}</span> : null}{" "}
                        <span class="muted">@ {fmtInt(c.step)}</span>
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
  // The run page reads the run without each rank's own summary (summary_ranks=false:
  // the bulk of a many-rank run's reply); this tab asks for the whole run.
  const full = useLoad(
    (signal) => api.run(run.project, run.id, { signal }),
    [run.project, run.id],
    { interval: run.state === "running" ? 2 * LIVE_MS : 0, keepOnError: true, finalRead: true },
  );
  const ranked = full.data ?? null;
  const shared = ranked
    ? Object.keys(ranked.summary_ranks ?? {}).length > 1
    : latestStreams(run.streams ?? []).length > 1;
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
      {shared && ranked ? <RankSummaryTable run={ranked} filter={f} /> : null}
      {shared && !ranked ? (
        full.error ? <p class="muted" data-rank-summary-error>Summary by rank: {full.error.message}</p> : <Spinner />
      ) : null}
      <div class="env-table">
        <KeyValueTable title="Environment" rows={envRows} filter={f} emptyText="Not recorded (a run written before rankwise recorded it)." />
      </div>
    </div>
  );
}
