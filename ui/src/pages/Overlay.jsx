// Compare (chosen runs) and Group (the runs of one group, e.g. the per-rank runs of
// run_mode="new"): every metric any of the runs logged, one chart each, one line per run
// (its cross-rank mean) in the colour of the legend. When the runs logged media, a Media
// view shows one media key side by side across them at a chosen step; Differences shows
// what differs between their config, git state and packages.

import { useMemo, useState } from "preact/hooks";
import { api } from "../api.js";
import { useChartSettings, useLoad } from "../hooks.js";
import { href, listParam, navigate } from "../router.js";
import { runColor } from "../lib/colors.js";
import { runRank } from "../lib/format.js";
import { createFirstDraw } from "../lib/firstDraw.js";
import { Empty, ErrorBox, Spinner, StateBadge, Tabs } from "../components/common.jsx";
import { CompareMedia } from "../components/CompareMedia.jsx";
import { CompareDiff } from "../components/CompareDiff.jsx";
import { ChartToolbar, MetricSections, useMetricSearch } from "../components/MetricGrid.jsx";
import { OverlayChartCard } from "../components/ChartCards.jsx";

const MAX_RUNS = 64; // the compare endpoint's limit per request

async function withKeys(runs, signal) {
  const [keys, mediaKeys] = await Promise.all([
    Promise.all(runs.map((r) => api.metrics(r.project, r.id, { signal }).then((m) => m.keys, () => []))),
    // Each run's media keys (none from a server without the media routes).
    Promise.all(runs.map((r) => api.mediaKeys(r.project, r.id, { signal }).then((m) => m.keys, () => []))),
  ]);
  const union = new Set();
  keys.forEach((ks) => ks.forEach((k) => union.add(k)));
  return { runs, keys: [...union].sort(), mediaKeys };
}

export function ComparePage({ params }) {
  const refs = listParam(params, "runs").slice(0, MAX_RUNS);
  const sig = JSON.stringify(refs); // the runs asked for, as a dependency
  const loaded = useLoad(
    async (signal) => {
      const runs = await Promise.all(
        JSON.parse(sig).map((ref) => {
          const i = ref.indexOf("/");
          return api.run(ref.slice(0, i), ref.slice(i + 1), { signal });
        }),
      );
      return withKeys(runs, signal);
    },
    [sig],
  );
  const remove = (ref) => navigate(href.compare(refs.filter((r) => r !== ref)), { replace: true });
  if (refs.length === 0) {
    return (
      <main class="main">
        <Empty title="Nothing to compare yet">
          <p>Pick two or more runs in a project's runs table, then press <b>Compare</b>.</p>
          <p><a href={href.projects()}>Go to the runs</a></p>
        </Empty>
      </main>
    );
  }
  return (
    <OverlayBody
      title="Compare"
      subtitle={`${refs.length} runs`}
      back={refs[0] ? { href: href.runs(refs[0].split("/")[0]), label: `runs of ${refs[0].split("/")[0]}` } : null}
      loaded={loaded}
      onRemove={refs.length > 1 ? remove : null}
      withDiff
    />
  );
}

export function GroupPage({ project, group }) {
  const loaded = useLoad(
    async (signal) => {
      const page = await api.runs(project, { group, limit: MAX_RUNS, sort: "name" }, { signal });
      return { ...(await withKeys(page.runs, signal)), total: page.total };
    },
    [project, group],
  );
  const more = loaded.data && loaded.data.total > loaded.data.runs.length;
  return (
    <OverlayBody
      title={group}
      kicker="Group"
      subtitle={loaded.data ? `${loaded.data.total} runs${more ? `; the first ${MAX_RUNS} are overlaid` : ""}` : ""}
      back={{ href: href.runs(project, { group }), label: `these runs in the table` }}
      loaded={loaded}
    />
  );
}

function OverlayBody({ title, kicker, subtitle, back, loaded, onRemove, withDiff = false }) {
  const { settings, set, setZoom } = useChartSettings();
  const runs = useMemo(
    () => (loaded.data?.runs ?? []).map((r, i) => ({ ...r, color: runColor(i) })),
    [loaded.data],
  );
  const live = runs.some((r) => r.state === "running");
  const tracker = useMemo(() => createFirstDraw(), [loaded.data]); // eslint-disable-line react-hooks/exhaustive-deps -- a fresh first-draw count per loaded set of runs
  const { search, setSearch, filtered, grouped } = useMetricSearch(loaded.data?.keys);
  const [view, setView] = useState("charts");
  const hasMedia = (loaded.data?.mediaKeys ?? []).some((ks) => ks.some((k) => k.kind !== "table" && k.kind !== "histogram"));
  const hasDiff = withDiff && runs.length > 1; // the Differences view: config, git, packages
  const other = (hasDiff && view === "diff") || (hasMedia && view === "media");

  return (
    <main class="main overlay-page">
      <header class="run-head">
        <nav class="crumbs">{back ? <a href={back.href}>← {back.label}</a> : null}</nav>
        <div class="run-title">
          {kicker ? <span class="kicker">{kicker}</span> : null}
          <h1>{title}</h1>
          <span class="muted">{subtitle}</span>
        </div>
        {runs.length ? (
          <ul class="run-legend" aria-label="Runs and their colours">
            {runs.map((r) => (
              <li key={`${r.project}/${r.id}`} style={{ "--c": r.color }}>
                <span class="swatch" aria-hidden="true" />
                <a href={href.run(r.project, r.id)}>{r.name || r.id}</a>
                {runRank(r) ? <span class="rank-of" data-rank-of>{runRank(r)}</span> : null}
                <StateBadge state={r.state} crashed={r.crashed} />
                {onRemove ? (
                  <button type="button" class="icon" aria-label={`Remove ${r.name || r.id} from the comparison`} title="Remove from the comparison" onClick={() => onRemove(`${r.project}/${r.id}`)}>
                    ×
                  </button>
                ) : null}
              </li>
            ))}
          </ul>
        ) : null}
      </header>
      {loaded.error ? <ErrorBox error={loaded.error} onRetry={loaded.reload} /> : null}
      {!loaded.data && !loaded.error ? <Spinner /> : null}
      {loaded.data && !runs.length ? <Empty title="No runs in this group">Runs join a group with <code>rankwise.init(group=...)</code>, or by themselves under <code>run_mode="new"</code>.</Empty> : null}
      {hasMedia || hasDiff ? (
        <Tabs
          current={view}
          onSelect={setView}
          tabs={[
            { id: "charts", label: "Charts" },
            ...(hasMedia ? [{ id: "media", label: "Media" }] : []),
            ...(hasDiff ? [{ id: "diff", label: "Differences" }] : []),
          ]}
        />
      ) : null}
      {hasMedia && view === "media" ? <CompareMedia runs={runs} keys={loaded.data.mediaKeys} /> : null}
      {hasDiff && view === "diff" ? <CompareDiff runs={runs} /> : null}
      {other ? null : loaded.data && runs.length && !loaded.data.keys.length ? (
        <Empty title="No metrics logged yet" icon="∿">These runs have not logged any values with <code>run.log()</code>{live ? " yet; charts appear as soon as they do" : ""}.</Empty>
      ) : null}
      {loaded.data && loaded.data.keys.length && !other ? (
        <>
          <ChartToolbar
            settings={settings}
            set={set}
            search={search}
            setSearch={setSearch}
            total={loaded.data.keys.length}
            shown={filtered.length}
          />
          <p class="hint muted small">Each line is one run's mean across its ranks. Drag to zoom, double-click to reset; hover a line to name it.</p>
          <MetricSections
            grouped={grouped}
            search={search}
            onClear={() => setSearch("")}
            renderCard={(k) => (
              <OverlayChartCard
                key={k}
                runs={runs}
                metric={k}
                settings={settings}
                live={live}
                tracker={tracker}
                onZoom={(lo, hi) => setZoom([lo, hi])}
                onResetZoom={() => setZoom(null)}
              />
            )}
          />
        </>
      ) : null}
    </main>
  );
}

