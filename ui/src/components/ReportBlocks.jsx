// The blocks of a report, drawn: Markdown text (rendered by lib/markdown.js, sanitized)
// and live panels. Every panel reads its data through api.block with the requests
// lib/reports.js declares, so the same components draw a report in the dashboard and
// in an exported file (whose replies are inline). User text (titles, captions, labels,
// Markdown) reaches the page as text nodes and Preact elements only: no HTML is built.

import { useMemo, useState } from "preact/hooks";
import { api, blobUrl } from "../api.js";
import { useLoad } from "../hooks.js";
import { markdown } from "../lib/markdown.js";
import { blockProblem, blockRequests, canonical, itemsAt, KIND_NAMES } from "../lib/reports.js";
import { alignSeries, bandTable, gaps, lineColumn, positiveOnly, smooth } from "../lib/series.js";
import { runColor, rankColor } from "../lib/colors.js";
import { cellView } from "../lib/media.js";
import { fmtValue } from "../lib/format.js";
import { Chart } from "./Chart.jsx";
import { ErrorBox, Spinner } from "./common.jsx";
import { FailureBanner } from "./FailureBanner.jsx";
import { HangBanner } from "./HangBanner.jsx";
import { HealthStrip } from "./HealthStrip.jsx";
import { MediaItemView } from "./MediaPanels.jsx";
import { Lineage } from "./ArtifactParts.jsx";

const HEIGHT = 220;
const LIVE = 15000; // a report's panels are read again this often (ms) in the dashboard

/** A block's replies, one per request of blockRequests, read again every LIVE ms. */
function useBlockData(block, project, { record, live }) {
  const reqs = blockRequests(block, project);
  const sig = canonical(reqs);
  return useLoad(
    (signal) => Promise.all(JSON.parse(sig).map((r) => api.block(r, { signal, record }))),
    [sig, record],
    { interval: live ? LIVE : 0, keepOnError: true },
  );
}

/** A report's title and blocks, drawn (the dashboard's page and the exported file). */
export function ReportView({ report, ctx }) {
  return (
    <article class="report" data-report={report.name} data-version={report.version}>
      <h1 class="report-title" data-report-title>{report.title || report.name}</h1>
      {report.blocks.length ? (
        report.blocks.map((b) => <ReportBlock key={b.id ?? JSON.stringify(b)} block={b} ctx={ctx} />)
      ) : (
        <p class="muted">This report has no blocks yet.</p>
      )}
    </article>
  );
}

export function Markdown({ text }) {
  const nodes = useMemo(() => markdown(text), [text]);
  return <div class="md" data-markdown>{nodes}</div>;
}

/** One block of a report, drawn. `ctx`: {project, record, live}. */
export function ReportBlock({ block, ctx }) {
  const problem = blockProblem(block);
  let body;
  if (block.type === "text") body = <Markdown text={block.text} />;
  else if (problem) body = <p class="muted small" data-block-problem>Not drawn yet: {problem}.</p>;
  else body = <Panel block={block} ctx={ctx} />;
  return (
    <section class={`report-block report-${block.type}`} data-block={block.type} data-block-id={block.id}>
      {body}
      {block.caption ? <p class="report-caption" data-caption>{block.caption}</p> : null}
    </section>
  );
}

function Panel({ block, ctx }) {
  const loaded = useBlockData(block, ctx.project, ctx);
  if (loaded.error && !loaded.data) return <ErrorBox error={loaded.error} onRetry={loaded.reload} />;
  if (!loaded.data) return <Spinner />;
  const data = loaded.data;
  switch (block.type) {
    case "chart":
      return <ChartPanel block={block} replies={data} />;
    case "media":
      return <MediaPanel block={block} reply={data[0]} />;
    case "table":
      return <TablePanel block={block} reply={data[0]} />;
    case "histogram":
      return <HistogramPanel block={block} reply={data[0]} />;
    case "health":
      return <HealthStrip run={data[0]} health={data[1]} />;
    case "failure":
      return <FailurePanel run={data[0]} />;
    case "lineage":
      return <LineagePanel info={data[0]} />;
    default:
      return <p class="muted">{KIND_NAMES[block.type] ?? block.type}</p>;
  }
}

const runRef = (r) => `${r.project}/${r.run}`;

/**
 * The lines of one metric of a chart block, from its compare reply: per run its cross-rank
 * line (mode "band") or one line per stream (mode "ranks"), aligned on one x axis.
 */
export function chartModel(block, reply) {
  const fix = block.log ? positiveOnly : gaps;
  const present = [];
  const single = block.runs.length === 1;
  reply.runs.forEach((r, i) => {
    const name = `${r.project}/${r.run}`;
    if (block.mode === "ranks") {
      r.series.forEach((s, k) => {
        present.push({
          key: `${name}:${s.label}`,
          label: single ? s.label : `${r.run} · ${s.label}`,
          color: single ? rankColor(k) : runColor(i),
          x: s.x,
          y: fix(smooth(s.y, block.smoothing ?? 0)),
        });
      });
      return;
    }
    const t = bandTable(r.band);
    if (!t || !t.x.length) return;
    const part = t.cols.partial;
    const y = fix(lineColumn(t, r.band?.reduce)).map((v, j) => (part?.[j] ? null : v));
    present.push({ key: name, label: r.run, color: runColor(i), x: t.x, y: fix(smooth(y, block.smoothing ?? 0)) });
  });
  const cols = alignSeries(present);
  return {
    x: cols[0],
    lines: present.map((p, i) => ({ key: p.key, label: p.label, color: p.color, y: cols[i + 1], width: 1.75 })),
    band: null,
    overlay: null,
    spanGaps: true,
    focus: true,
  };
}

function ChartPanel({ block, replies }) {
  return (
    <div class="report-charts">
      {block.metrics.map((metric, i) => (
        <ChartCard key={metric} block={block} metric={metric} reply={replies[i]} />
      ))}
    </div>
  );
}

function ChartCard({ block, metric, reply }) {
  const model = useMemo(() => chartModel(block, reply), [block, reply]);
  const [hover, setHover] = useState(null);
  // What is drawn, for tests and the curious: every line's points as handed to uPlot.
  const drawn = useMemo(
    () => canonical(model.lines.map((l) => ({ label: l.label, x: model.x, y: l.y }))),
    [model],
  );
  const onDrawn = (u) => {
    const el = u.root.closest("[data-report-chart]");
    if (el) el.dataset.state = "drawn";
  };
  const empty = !model.x.length;
  return (
    <div class="chart-card report-chart" data-report-chart data-metric={metric} data-lines={model.lines.length} data-series={drawn}>
      <div class="chart-head">
        <h4 title={metric}>{metric}</h4>
        <div class="readout">
          {hover ? (
            <span class="muted">
              {block.x === "time" ? new Date(hover.x * 1000).toLocaleTimeString() : `step ${hover.x}`}
            </span>
          ) : null}
        </div>
      </div>
      <ul class="report-legend">
        {model.lines.map((l) => (
          <li key={l.key} style={{ "--c": l.color }}><span class="legend-dot" aria-hidden="true" />{l.label}</li>
        ))}
      </ul>
      <div class="chart-body" style={{ height: `${HEIGHT}px` }}>
        {empty ? (
          <div class="chart-status"><span class="muted">None of these runs logged {metric}</span></div>
        ) : (
          <Chart model={model} xMode={block.x ?? "step"} log={!!block.log} height={HEIGHT} xRange={null} onHover={setHover} onDrawn={onDrawn} />
        )}
      </div>
      <p class="muted small report-runs">{block.runs.map(runRef).join(", ")}</p>
    </div>
  );
}

function MediaPanel({ block, reply }) {
  const items = itemsAt(reply, block.step);
  if (!items.length) return <p class="muted">No {block.key} logged{block.step !== null && block.step !== undefined ? ` at step ${block.step}` : ""}.</p>;
  const labels = [...new Set(items.map((it) => it.label))];
  return (
    <div class="report-media" data-step={items[0].step}>
      <h4>{block.key} <span class="muted small">· {runRef(block.run)} · step {items[0].step}</span></h4>
      {labels.map((label) => (
        <div key={label} class="report-media-rank" data-label={label}>
          {labels.length > 1 ? <p class="muted small">{label}</p> : null}
          <div class="media-grid">
            {items.filter((it) => it.label === label).map((it) => (
              <MediaItemView key={`${it.label}/${it.index}`} project={block.run.project} item={it} />
            ))}
          </div>
        </div>
      ))}
    </div>
  );
}

function TablePanel({ block, reply }) {
  return (
    <div class="report-table" data-rows={reply.rows.length}>
      <h4>{block.key} <span class="muted small">· {runRef(block.run)} · step {reply.step} · {reply.total} rows</span></h4>
      <div class="table-wrap">
        <table class="media-table">
          <thead>
            <tr>{reply.columns.map((c) => <th key={c}>{c}</th>)}</tr>
          </thead>
          <tbody>
            {reply.rows.map((row, i) => (
              <tr key={i}>
                {row.map((v, j) => {
                  const cell = cellView(v, reply.types[j]);
                  return (
                    <td key={j}>
                      {cell.image ? <img class="cell-image" src={blobUrl(block.run.project, cell.image)} alt={reply.columns[j]} /> : cell.text}
                    </td>
                  );
                })}
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      {reply.total > reply.rows.length ? <p class="muted small">The first {reply.rows.length} of {reply.total} rows.</p> : null}
    </div>
  );
}

/** The histogram at the block's step (else the latest) of the first series, as bars. */
function HistogramPanel({ block, reply }) {
  const series = reply.series[0];
  if (!series || !series.steps.length) return <p class="muted">No {block.key} logged.</p>;
  let at = series.steps.length - 1;
  if (block.step !== null && block.step !== undefined) {
    const i = series.steps.indexOf(block.step);
    if (i >= 0) at = i;
  }
  const counts = series.counts[at];
  const edges = series.edges[at];
  const max = Math.max(1, ...counts);
  const W = 600;
  const H = 160;
  const bw = W / Math.max(1, counts.length);
  return (
    <div class="report-histogram" data-step={series.steps[at]}>
      <h4>{block.key} <span class="muted small">· {runRef(block.run)} · {series.label} · step {series.steps[at]}</span></h4>
      <svg viewBox={`0 0 ${W} ${H}`} class="histogram-bars" role="img" aria-label={`${counts.length} bins from ${fmtValue(edges[0])} to ${fmtValue(edges[edges.length - 1])}`}>
        {counts.map((c, i) => (
          <rect key={i} x={i * bw} y={H - (c / max) * H} width={Math.max(1, bw - 1)} height={(c / max) * H} fill="var(--accent)" />
        ))}
      </svg>
      <p class="muted small">{fmtValue(edges[0])} … {fmtValue(edges[edges.length - 1])}</p>
    </div>
  );
}

function FailurePanel({ run }) {
  const quiet = !run.first_failure && !run.hang;
  return (
    <div class="report-failure">
      <h4>{run.name || run.id} <span class="muted small">· {run.state}</span></h4>
      <HangBanner run={run} />
      <FailureBanner run={run} />
      {quiet ? <p class="muted">No hang or failure: the run is {run.state}.</p> : null}
    </div>
  );
}

function LineagePanel({ info }) {
  const view = { ...info, used_by: info.used_by ?? [] };
  return (
    <div class="report-lineage">
      <h4>{info.name}:{info.version} <span class="muted small">· {info.type}</span></h4>
      <Lineage info={view} />
    </div>
  );
}
