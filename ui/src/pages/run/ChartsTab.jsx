// The run page's Charts tab: one chart per metric (its cross-rank line, the mean unless
// define_metric chose another, and the min–max band; every rank as a line on demand), the chart toolbar, the rank legend and stall marks.

import { useEffect, useMemo, useState } from "preact/hooks";
import { api } from "../../api.js";
import { LIVE_MS, useChartSettings, useLoad } from "../../hooks.js";
import { rankColor } from "../../lib/colors.js";
import { createFirstDraw } from "../../lib/firstDraw.js";
import { describeMark, stallMarks } from "../../lib/stalls.js";
import { Code, Empty, ErrorBox, Segmented, Spinner } from "../../components/common.jsx";
import { ChartToolbar, MetricSections, useMetricSearch } from "../../components/MetricGrid.jsx";
import { RunChartCard } from "../../components/ChartCards.jsx";
import { latestStreams } from "../../lib/streams.js";
import { MAX_LINES, capLines } from "../../lib/ranks.js";
import { RankHeatmap } from "../../components/RankHeatmap.jsx";
import { RankPicker } from "../../components/RankPicker.jsx";

const RANK_MODES = [
  { value: "off", label: "Mean", title: "Each metric's cross-rank line (the mean unless defined) with the ranks' min–max band" },
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
  }, [sig]); // eslint-disable-line react-hooks/exhaustive-deps -- a new streams array each poll; the map changes only with the labels and ranks (sig)
}

/** The metric a heatmap opens on: the first loss, else the first key. */
function defaultHeatKey(keys) {
  return keys.find((k) => /(^|\/)loss$/.test(k)) ?? keys.find((k) => /loss/.test(k)) ?? keys[0];
}

export function ChartsTab({ run, live, focus, keysAhead, heat }) {
  const { project, id } = run;
  const keys = useLoad(
    async (signal, { first }) =>
      (first && (await keysAhead?.take())) || api.metrics(project, id, { signal }),
    [project, id, keysAhead],
    { interval: live ? 2 * LIVE_MS : 0, finalRead: true }, // and once more when the run ends
  );
  const { settings, set, setZoom } = useChartSettings();
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
  // Over MAX_LINES ranks the picker chooses whose lines the charts draw (issue 26).
  const many = rankInfo.size > MAX_LINES;
  const [chosen, setChosen] = useState(focus ? [focus] : []);
  useEffect(() => {
    if (focus) setChosen((c) => (c.includes(focus) ? c : [focus, ...c]));
  }, [focus]);
  const [heatKey, setHeatKey] = useState(heat || null);
  const [heatOpen, setHeatOpen] = useState(!!heat);
  const [heatRows, setHeatRows] = useState(null);
  const tracker = useMemo(() => createFirstDraw(), [project, id]); // eslint-disable-line react-hooks/exhaustive-deps -- a fresh first-draw count per run
  const { search, setSearch, filtered, grouped } = useMetricSearch(keys.data?.keys);
  useEffect(() => setZoom(null), [id, setZoom]);
  const stalls = useLoad(
    (signal) => api.stalls(project, id, { limit: 1000 }, { signal }),
    [project, id],
    { interval: live ? 5 * LIVE_MS : 0, finalRead: true },
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
  const heatMetric = heatKey && keys.data.keys.includes(heatKey) ? heatKey : defaultHeatKey(keys.data.keys);
  const lineLabels = many ? capLines(chosen).shown : null;
  const pick = (label) => {
    setChosen((c) => (c.includes(label) ? c : [...c, label]));
    setRankMode("all");
    setPinned(label);
  };
  const loadOutliers = async () =>
    heatRows && heatRows.key === heatMetric
      ? heatRows.rows
      : (await api.heatmap(project, id, { key: heatMetric, buckets: 200 })).rows;
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
        {multi ? (
          <button
            type="button"
            class={heatOpen ? "on" : ""}
            aria-pressed={heatOpen}
            data-heatmap-toggle
            title="Ranks down, steps across: stragglers and drifting ranks show as stripes"
            onClick={() => setHeatOpen(!heatOpen)}
          >
            Heatmap
          </button>
        ) : null}
      </ChartToolbar>
      {multi && heatOpen ? (
        <RankHeatmap
          project={project}
          runId={id}
          metrics={keys.data.keys}
          metric={heatMetric}
          setMetric={setHeatKey}
          onPick={pick}
          onRows={(rows) => setHeatRows({ key: heatMetric, rows })}
        />
      ) : null}
      {multi && rankMode === "all" && many ? (
        <RankPicker
          info={rankInfo}
          chosen={chosen}
          setChosen={setChosen}
          pinned={pinned}
          setPinned={setPinned}
          setHover={setLegendHover}
          loadOutliers={loadOutliers}
          outlierKey={heatMetric}
        />
      ) : null}
      {multi && rankMode === "all" && !many ? (
        <RankLegend info={rankInfo} pinned={pinned} setPinned={setPinned} setHover={setLegendHover} />
      ) : null}
      <p class="hint muted small">
        Drag across a chart to zoom (all charts follow, with finer data); double-click to reset.
        {multi && rankMode === "off" ? " The line is each metric's cross-rank line (the mean unless define_metric chose another; each chart can show the others), the band the ranks' min–max." : ""}
      </p>
      {marks.length ? (
        <p class="hint muted small stall-key" data-stall-key>
          <span class="stall-swatch" aria-hidden="true" /> Stalls: {marks.slice(0, 4).map(describeMark).join("; ")}
          {marks.length > 4 ? `; ${marks.length - 4} more` : ""}
        </p>
      ) : null}
      {run.divergence?.length ? (
        <p class="hint muted small" data-nonfinite-key>
          First non-finite: {run.divergence.slice(0, 3).map((d) => d.message).join("; ")}
          {run.divergence.length > 3 ? `; ${run.divergence.length - 3} more` : ""}
        </p>
      ) : null}
      <MetricSections
        grouped={grouped}
        search={search}
        onClear={() => setSearch("")}
        renderCard={(k) => (
          <RunChartCard
            key={k}
            project={project}
            runId={id}
            metric={k}
            settings={settings}
            multi={multi}
            showRanks={rankMode === "all"}
            lineLabels={lineLabels}
            rankInfo={rankInfo}
            live={live}
            highlight={rankMode === "all" ? highlight : null}
            marks={marks}
            firstBad={run.first_nonfinite?.[k]?.[0] ?? null}
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
