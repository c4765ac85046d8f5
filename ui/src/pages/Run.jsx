// The Run page: header (state, ranks, nodes, duration, group, first failure, alerts),
// rank health (strip and stall banner), then tabs: Charts (one per metric, cross-rank band, per-rank lines on
// demand), Media, Tables and Histograms (shown once the run logged any), Artifacts
// (shown once it logged or used one), Logs, System, Overview (what ran), Config & summary,
// Streams.

import { useEffect, useMemo, useState } from "preact/hooks";
import { api, askAhead } from "../api.js";
import { LIVE_MS, useLoad, useNow } from "../hooks.js";
import { href, navigate } from "../router.js";
import { fmtDuration, fmtMode, fmtRanks, fmtTime, runDuration } from "../lib/format.js";
import { ErrorBox, Spinner, StateBadge, Tabs, Tag } from "../components/common.jsx";
import { latestStreams } from "../lib/streams.js";
import { ConfigTab } from "./run/ConfigTab.jsx";
import { StreamsTab } from "./run/StreamsTab.jsx";
import { RunHealth } from "../components/HealthStrip.jsx";
import { FailureBanner } from "../components/FailureBanner.jsx";
import { RunAlerts } from "../components/RunAlerts.jsx";
import { DivergenceBanner, HangBanner } from "../components/HangBanner.jsx";
import { divergenceNote } from "../lib/diagnosis.js";
import { ChartsTab } from "./run/ChartsTab.jsx";
import { LogsTab } from "./run/LogsTab.jsx";
import { SystemTab } from "./run/SystemTab.jsx";
import { MediaTab } from "./run/MediaTab.jsx";
import { TablesTab } from "./run/TablesTab.jsx";
import { HistogramsTab } from "./run/HistogramsTab.jsx";
import { ArtifactsTab } from "./run/ArtifactsTab.jsx";
import { OverviewTab } from "./run/OverviewTab.jsx";
import { splitKeys } from "../lib/media.js";
import { EditRun } from "../components/RunEdit.jsx";
import { ConfirmDelete } from "../components/RunDelete.jsx";
import { canEdit } from "../lib/access.js";
import { markdown } from "../lib/markdown.js";

/** How often a running run's rich-data keys are asked for again (ms): they change slowly. */
const MEDIA_KEYS_MS = 5000;

export function RunPage({ project, runId, params, who }) {
  // A running run is re-read every LIVE_MS; polling stops with the reply that says it ended.
  const [running, setRunning] = useState(false);
  // The metric keys are asked for with the run, not after it arrives: the Charts tab
  // takes this first answer (once) instead of asking again.
  const [keysAhead, setKeysAhead] = useState(null);
  useEffect(() => setKeysAhead(askAhead(() => api.metrics(project, runId))), [project, runId]);
  // An unknown run is asked for again too: a link may be opened before the run's first
  // records reached the server.
  // Without each rank's own summary (a 1,024-rank run's reply would be 1.9 MB instead of
  // 0.4 MB, read before any chart can ask for its data): the Config tab asks for them.
  const run = useLoad(
    (signal) => api.run(project, runId, { signal, params: { summary_ranks: false } }),
    [project, runId],
    running ? LIVE_MS : 0,
  );
  const data = run.data;
  const isRunning = data?.state === "running" || (!data && run.error?.status === 404);
  useEffect(() => setRunning(isRunning), [isRunning]);
  // The rich-data keys decide which of Media / Tables / Histograms show. A server without
  // the routes (older) answers 404: the tabs stay hidden and nothing else changes.
  const mediaKeys = useLoad(
    (signal) => api.mediaKeys(project, runId, { signal }).catch((e) => (e.status === 404 ? { keys: [] } : Promise.reject(e))),
    [project, runId],
    { interval: running ? MEDIA_KEYS_MS : 0, keepOnError: true, finalRead: true },
  );
  // The artifacts the run logged and used decide whether the Artifacts tab shows; a
  // server without the route (older) answers 404: the tab stays hidden.
  const artifacts = useLoad(
    (signal) => api.runArtifacts(project, runId, { signal })
      .catch((e) => (e.status === 404 ? { logged: [], used: [] } : Promise.reject(e))),
    [project, runId],
    { interval: running ? MEDIA_KEYS_MS : 0, keepOnError: true, finalRead: true },
  );
  const nArtifacts = (artifacts.data?.logged.length ?? 0) + (artifacts.data?.used.length ?? 0);
  const rich = useMemo(() => splitKeys(mediaKeys.data?.keys), [mediaKeys.data]);
  const primary = useMemo(() => (data?.streams ?? []).find((s) => s.is_primary)?.label ?? null, [data]);
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
      <RunHeader run={data} onEdited={run.reload} editable={canEdit(who, project)} />
      <HangBanner run={data} />
      <DivergenceBanner run={data} />
      <RunHealth run={data} tab={tab} />
      <Tabs
        current={tab}
        onSelect={setTab}
        tabs={[
          { id: "charts", label: "Charts" },
          ...(rich.media.length || tab === "media" ? [{ id: "media", label: "Media", count: rich.media.length }] : []),
          ...(rich.tables.length || tab === "tables" ? [{ id: "tables", label: "Tables", count: rich.tables.length }] : []),
          ...(rich.histograms.length || tab === "histograms"
            ? [{ id: "histograms", label: "Histograms", count: rich.histograms.length }]
            : []),
          ...(nArtifacts || tab === "artifacts" ? [{ id: "artifacts", label: "Artifacts", count: nArtifacts }] : []),
          { id: "logs", label: "Logs" },
          { id: "system", label: "System" },
          { id: "overview", label: "Overview" },
          { id: "config", label: "Config & summary" },
          { id: "streams", label: "Streams", count: latestStreams(data.streams ?? []).length },
        ]}
      />
      <div class="tab-body" role="tabpanel" aria-labelledby={`tab-${tab}`}>
        {tab === "charts" ? <ChartsTab run={data} live={data.state === "running"} focus={focus} keysAhead={keysAhead} heat={params.get("heat") || ""} /> : null}
        {tab === "media" ? <MediaTab run={data} keys={rich.media} primary={primary} live={data.state === "running"} /> : null}
        {tab === "tables" ? <TablesTab run={data} keys={rich.tables} primary={primary} /> : null}
        {tab === "histograms" ? <HistogramsTab run={data} keys={rich.histograms} primary={primary} live={data.state === "running"} /> : null}
        {tab === "logs" ? <LogsTab run={data} params={params} /> : null}
        {tab === "system" ? <SystemTab run={data} /> : null}
        {tab === "overview" ? <OverviewTab run={data} /> : null}
        {tab === "config" ? <ConfigTab run={data} /> : null}
        {tab === "streams" ? <StreamsTab run={data} /> : null}
        {tab === "artifacts" ? <ArtifactsTab run={data} artifacts={artifacts} /> : null}
      </div>
    </main>
  );
}

function RunHeader({ run, onEdited, editable }) {
  const now = useNow(1000, run.state === "running");
  const [deleting, setDeleting] = useState(false);
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
        {divergenceNote(run) ? <span class="nonfinite-note" data-nonfinite-note>{divergenceNote(run)}</span> : null}
        {editable ? <EditRun run={run} onSaved={onEdited} /> : null}
        {editable ? (
          <button type="button" class="btn danger" onClick={() => setDeleting(true)} data-delete-run>Delete</button>
        ) : null}
        {deleting ? (
          <ConfirmDelete
            project={run.project}
            runs={[run.id]}
            onCancel={() => setDeleting(false)}
            onDone={() => navigate(href.runs(run.project))}
          />
        ) : null}
      </div>
      <dl class="facts">
        <div><dt>Ranks × nodes</dt><dd data-ranks>{fmtRanks(run)}</dd></div>
        <div><dt>Duration</dt><dd>{fmtDuration(runDuration(run, now))}</dd></div>
        <div><dt>Steps</dt><dd>{run.steps >= 0 ? run.steps.toLocaleString("en-US") : "–"}</dd></div>
        <div><dt>Created</dt><dd>{fmtTime(run.created)}</dd></div>
        {run.run_mode ? <div><dt>Mode</dt><dd data-mode>{fmtMode(run)}</dd></div> : null}
        {run.job_type ? <div><dt>Job type</dt><dd>{run.job_type}</dd></div> : null}
        <div>
          <dt>Group</dt>
          <dd>{run.group ? <a href={href.group(run.project, run.group)}>{run.group}</a> : <span class="muted">none</span>}</dd>
        </div>
        {run.tags?.length ? (
          <div><dt>Tags</dt><dd class="tags">{run.tags.map((t) => <Tag key={t}>{t}</Tag>)}</dd></div>
        ) : null}
      </dl>
      {run.notes ? <div class="notes" data-notes>{markdown(run.notes)}</div> : null}
      <FailureBanner run={run} />
      <RunAlerts run={run} />
    </header>
  );
}
