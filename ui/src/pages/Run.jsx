// The Run page: header (state, ranks, nodes, duration, group), rank health (strip and
// stall banner), then tabs: Charts (one per metric, cross-rank band, per-rank lines on
// demand), Logs, System, Config & summary, Streams.

import { useEffect, useMemo, useState } from "preact/hooks";
import { api, prefetchMetrics, takeMetrics } from "../api.js";
import { LIVE_MS, useLoad, useNow, useStored } from "../hooks.js";
import { href, navigate } from "../router.js";
import { fmtDuration, fmtRanks, fmtTime, runDuration } from "../lib/format.js";
import { rankColor } from "../lib/colors.js";
import { createFirstDraw } from "../lib/firstDraw.js";
import { Code, Empty, ErrorBox, Segmented, Spinner, StateBadge, Tabs, Tag } from "../components/common.jsx";
import { ChartToolbar, MetricSections, useMetricSearch } from "../components/MetricGrid.jsx";
import { RunChartCard } from "../components/ChartCards.jsx";
import { ConfigTab, StreamsTab, latestStreams } from "./run/ConfigTab.jsx";
import { RunHealth } from "../components/HealthStrip.jsx";
import { FailureBanner } from "../components/FailureBanner.jsx";
import { runApiPath } from "../lib/health.js";
import { describeMark, stallMarks } from "../lib/stalls.js";
import { LogsTab } from "./run/LogsTab.jsx";
import { SystemTab } from "./run/SystemTab.jsx";

export function RunPage({ project, runId, params }) {
  // A running run is re-read every LIVE_MS; polling stops with the reply that says it ended.
  const [running, setRunning] = useState(false);
  useState(() => prefetchMetrics(project, runId)); // once, on mount
  // An unknown run is asked for again too: a link may be opened before the run's first
  // records reached the server.
  const run = useLoad(
    (signal) => api.run(project, runId, { signal }),
    [project, runId],
    running ? LIVE_MS : 0,
  );
  const data = run.data;
  const isRunning = data?.state === "running" || (!data && run.error?.status === 404);
  useEffect(() => setRunning(isRunning), [isRunning]);
  const tab = params.get("tab") || "charts";
  // A rank picked in the health strip (or the Logs filter) stays picked across tabs: its
  // lines in Charts, its lines in Logs.
  const focus = params.get("label") || "";
  const setTab = (t) =>
    navigate(href.run(project, runId, { tab: t === "charts" ? "" : t, label: focus }), { replace: true });

  if (run.error && !data) {
    return (
      <main class="main">
        <ErrorBox error={run.error} onRetry={run.reload} />
        {run.error.status === 404 ? (
          <p class="muted">This page checks again every second: a run appears once its first
            records reach the server.</p>
        ) : null}
        <p><a href={href.runs(project)}>← all runs of {project}</a></p>
      </main>
    );
  }
  if (!data) return <main class="main"><Spinner /></main>;
  return (
    <main class="main run-page">
      <RunHeader run={data} />
      <RunHealth run={data} tab={tab} />
      <Tabs
        current={tab}
        onSelect={setTab}
        tabs={[
          { id: "charts", label: "Charts" },
          { id: "logs", label: "Logs" },
          { id: "system", label: "System" },
          { id: "config", label: "Config & summary" },
          { id: "streams", label: "Streams", count: latestStreams(data.streams ?? []).length },
        ]}
      />
      <div class="tab-body" role="tabpanel" aria-labelledby={`tab-${tab}`}>
        {tab === "charts" ? <ChartsTab run={data} live={data.state === "running"} focus={focus} /> : null}
        {tab === "logs" ? <LogsTab run={data} params={params} /> : null}
        {tab === "system" ? <SystemTab run={data} /> : null}
        {tab === "config" ? <ConfigTab run={data} /> : null}
        {tab === "streams" ? <StreamsTab run={data} /> : null}
      </div>
    </main>
  );
}

function RunHeader({ run }) {
  const now = useNow(1000, run.state === "running");
  return (
    <header class="run-head">
      <nav class="crumbs" aria-label="Breadcrumb">
        <a href={href.runs(run.project)}>{run.project}</a>
        <span aria-hidden="true">/</span>
        {run.group ? (
          <>
            <a href={href.group(run.project, run.group)} title="The runs of this group, overlaid">{run.group}</a>
            <span aria-hidden="true">/</span>
          </>
        ) : null}
        <span>{run.id}</span>
      </nav>
      <div class="run-title">
        <h1>{run.name || run.id}</h1>
        <StateBadge state={run.state} crashed={run.crashed} />
      </div>
      <dl class="facts">
        <div><dt>Ranks × nodes</dt><dd data-ranks>{fmtRanks(run)}</dd></div>
        <div><dt>Duration</dt><dd>{fmtDuration(runDuration(run, now))}</dd></div>
        <div><dt>Steps</dt><dd>{run.steps >= 0 ? run.steps.toLocaleString("en-US") : "–"}</dd></div>
        <div><dt>Created</dt><dd>{fmtTime(run.created)}</dd></div>
        {run.run_mode ? <div><dt>Mode</dt><dd>{run.run_mode}</dd></div> : null}
        {run.job_type ? <div><dt>Job type</dt><dd>{run.job_type}</dd></div> : null}
        <div>
          <dt>Group</dt>
          <dd>{run.group ? <a href={href.group(run.project, run.group)}>{run.group}</a> : <span class="muted">none</span>}</dd>
        </div>
        {run.tags?.length ? (
          <div><dt>Tags</dt><dd class="tags">{run.tags.map((t) => <Tag key={t}>{t}</Tag>)}</dd></div>
        ) : null}
      </dl>
      {run.notes ? <p class="notes">{run.notes}</p> : null}
      <FailureBanner run={run} />
    </header>
  );
}

const RANK_MODES = [
  { value: "off", label: "Mean", title: "Cross-rank mean with its min–max band" },
  { value: "all", label: "Ranks", title: "Every rank as its own line (hover one to pick it out)" },
];

/** label → {rank, name, color} for the run's latest stream incarnations. */
function useRankInfo(streams) {
  const sig = (streams ?? []).map((s) => `${s.label}:${s.rank}`).join(",");
  return useMemo(() => {
    const dark = window.matchMedia?.("(prefers-color-scheme: dark)").matches ?? false;
    const map = new Map();
    latestStreams(streams ?? []).forEach((s) => {
      map.set(s.label, { rank: s.rank, name: s.label, color: rankColor(s.rank >= 0 ? s.rank : map.size, dark), node: s.node, host: s.host });
    });
    return map;
  }, [sig]); // eslint-disable-line react-hooks/exhaustive-deps
}

function ChartsTab({ run, live, focus }) {
  const keys = useLoad(
    async (signal) =>
      (await takeMetrics(run.project, run.id)) ?? api.metrics(run.project, run.id, { signal }),
    [run.project, run.id, live], // read once more when the run ends
    live ? 2 * LIVE_MS : 0,
  );
  const [prefs, setPrefs] = useStored("chart-prefs", { x: "step", log: false, smoothing: 0 });
  const [zoom, setZoom] = useState(null);
  const settings = useMemo(() => ({ ...prefs, zoom }), [prefs, zoom]);
  const set = (patch) => {
    if ("zoom" in patch) setZoom(patch.zoom);
    const { zoom: _z, ...rest } = patch;
    if (Object.keys(rest).length) setPrefs({ ...prefs, ...rest });
  };
  const rankInfo = useRankInfo(run.streams);
  const multi = rankInfo.size > 1;
  const [rankMode, setRankMode] = useState(focus ? "all" : "off");
  const [pinned, setPinned] = useState(focus || null);
  useEffect(() => {
    if (focus) {
      setRankMode("all"); // the focused rank's lines, picked out over the others
      setPinned(focus);
    }
  }, [focus]);
  const [legendHover, setLegendHover] = useState(null);
  const tracker = useMemo(() => createFirstDraw(), [run.project, run.id]);
  const { search, setSearch, filtered, grouped } = useMetricSearch(keys.data?.keys);
  useEffect(() => setZoom(null), [run.id]);
  const stalls = useLoad(
    (signal) => api.get(runApiPath(run, "/stalls"), { limit: 1000 }, { signal }),
    [run.project, run.id, run.state],
    live ? 5 * LIVE_MS : 0,
  );
  const marks = useMemo(() => stallMarks(stalls.data?.stalls, settings.x), [stalls.data, settings.x]);

  if (keys.error) return <ErrorBox error={keys.error} onRetry={keys.reload} />;
  if (!keys.data) return <Spinner />;
  if (!keys.data.keys.length) {
    return (
      <Empty title="No metrics logged yet" icon="∿">
        {live ? <p>This run is running: its charts appear here as soon as it logs its first values.</p> : <p>This run finished without logging metrics.</p>}
        <p>Metrics come from <code>run.log()</code> on any rank:</p>
        <Code>{`run.log({"train/loss": loss, "train/lr": lr}, step=step)`}</Code>
        <p>Config, summary and streams are in the other tabs.</p>
      </Empty>
    );
  }
  const highlight = legendHover ?? pinned;
  return (
    <div class="charts-tab">
      <ChartToolbar
        settings={settings}
        set={set}
        search={search}
        setSearch={setSearch}
        total={keys.data.keys.length}
        shown={filtered.length}
      >
        {multi ? <Segmented label="Lines" options={RANK_MODES} value={rankMode} onChange={setRankMode} /> : null}
      </ChartToolbar>
      {multi && rankMode === "all" ? (
        <RankLegend info={rankInfo} pinned={pinned} setPinned={setPinned} setHover={setLegendHover} />
      ) : null}
      <p class="hint muted small">
        Drag across a chart to zoom (all charts follow, with finer data); double-click to reset.
        {multi && rankMode === "off" ? " The line is the mean across ranks, the band their min–max." : ""}
      </p>
      {marks.length ? (
        <p class="hint muted small stall-key" data-stall-key>
          <span class="stall-swatch" aria-hidden="true" /> Stalls: {marks.slice(0, 4).map(describeMark).join("; ")}
          {marks.length > 4 ? `; ${marks.length - 4} more` : ""}
        </p>
      ) : null}
      <MetricSections
        grouped={grouped}
        search={search}
        onClear={() => setSearch("")}
        renderCard={(k) => (
          <RunChartCard
            key={k}
            project={run.project}
            runId={run.id}
            metric={k}
            settings={settings}
            multi={multi}
            showRanks={rankMode === "all"}
            rankInfo={rankInfo}
            live={live}
            highlight={rankMode === "all" ? highlight : null}
            marks={marks}
            tracker={tracker}
            onZoom={(lo, hi) => setZoom([lo, hi])}
            onResetZoom={() => setZoom(null)}
          />
        )}
      />
    </div>
  );
}

function RankLegend({ info, pinned, setPinned, setHover }) {
  const entries = [...info.entries()].sort((a, b) => a[1].rank - b[1].rank);
  return (
    <div class="rank-legend" aria-label="Ranks">
      <span class="muted small">Hover a line or a rank to pick it out; click a rank to keep it highlighted.</span>
      <div class="rank-chips">
        {entries.map(([label, r]) => (
          <button
            type="button"
            key={label}
            class={pinned === label ? "rank-chip on" : "rank-chip"}
            aria-pressed={pinned === label}
            title={`${label} · node ${r.node} · ${r.host}`}
            style={{ "--c": r.color }}
            onMouseEnter={() => setHover(label)}
            onMouseLeave={() => setHover(null)}
            onClick={() => setPinned(pinned === label ? null : label)}
          >
            <span class="swatch" aria-hidden="true" />
            {label}
          </button>
        ))}
      </div>
    </div>
  );
}
