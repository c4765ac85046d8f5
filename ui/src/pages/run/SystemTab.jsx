// The System tab: one chart per quantity (GET .../system), one line per node, GPU or
// recording process (GET .../system/series, M4-downsampled to the chart's width), x =
// time. The charts in view load first; the rest follow a moment later (EAGER_MS), so a
// page read whole (printed, captured) has every chart, not "loading…" below the fold.
// Only the charts in view refresh while the run is live. Line names reach the page only
// as text (the legend and the readout).

import { useEffect, useMemo, useState } from "preact/hooks";
import { api } from "../../api.js";
import { LIVE_MS, useInView, useLoad } from "../../hooks.js";
import { fmtClock } from "../../lib/logs.js";
import { describeKey, fmtSystemValue, systemModel, systemSections } from "../../lib/system.js";
import { Chart } from "../../components/Chart.jsx";
import { Empty, ErrorBox, Spinner } from "../../components/common.jsx";
import "../../components/health.css";

const HEIGHT = 170;
const REFRESH_MS = 5 * LIVE_MS; // samples come every 10 s by default
const LEGEND_MAX = 16;
const EAGER_MS = 1000; // then the charts out of view load too (a few dozen at most)

function useLater(ms) {
  const [done, setDone] = useState(false);
  useEffect(() => {
    const t = setTimeout(() => setDone(true), ms);
    return () => clearTimeout(t);
  }, [ms]);
  return done;
}

export function SystemTab({ run }) {
  const live = run.state === "running";
  const { project, id } = run;
  const keys = useLoad(
    (signal) => api.system(project, id, { signal }),
    [project, id],
    { interval: live ? REFRESH_MS : 0, finalRead: true }, // and once more when the run ends
  );
  const eager = useLater(EAGER_MS);
  if (keys.error) return <ErrorBox error={keys.error} onRetry={keys.reload} />;
  if (!keys.data) return <Spinner />;
  const sections = systemSections(keys.data.keys);
  if (!sections.length) {
    return (
      <Empty title="No system metrics" icon="▥">
        <p>
          Each node's CPU, memory, disk and network, each GPU (through NVML) and each
          recording process are sampled every 10 s by default; the first sample of this
          run has not arrived{live ? " yet" : ""}.
        </p>
        <p>
          <code>rankwise.init(system=False)</code> turns sampling off;
          {" "}<code>{'settings={"system_interval": 2}'}</code> samples more often.
        </p>
      </Empty>
    );
  }
  return (
    <div class="system-tab">
      {sections.map((s) => (
        <section class="metric-section" key={s.title}>
          <h3>
            {s.title} <span class="muted small">{s.hint}</span>
          </h3>
          <div class="chart-grid">
            {s.keys.map((k) => <SystemChart key={k} run={run} chartKey={k} live={live} eager={eager} />)}
          </div>
        </section>
      ))}
    </div>
  );
}

function SystemChart({ run, chartKey, live, eager }) {
  const [ref, inView, visible] = useInView();
  const seen = inView || eager;
  const { project, id } = run;
  const state = useLoad(
    (signal) => {
      const width = ref.current?.clientWidth ?? 600;
      const params = { key: chartKey, max_points: Math.max(200, Math.round(2 * width)) };
      return api.systemSeries(project, id, params, { signal });
    },
    [project, id, chartKey, ref],
    { enabled: seen, interval: visible && live ? REFRESH_MS : 0, keepOnError: true },
  );

  const model = useMemo(() => systemModel(state.data), [state.data]);
  const [hover, setHover] = useState(null);
  const desc = describeKey(chartKey);
  const lines = model.overlay;
  let readout = null;
  if (hover?.rank) {
    readout = (
      <span class="rank-readout" style={{ "--c": hover.rank.color }}>
        {hover.rank.label}: {fmtSystemValue(hover.rank.y, chartKey)} at {fmtClock(hover.rank.x)}
      </span>
    );
  } else if (lines.length) {
    readout = <span class="muted">{lines.length} {lines.length === 1 ? "line" : "lines"}</span>;
  }
  return (
    <div class="chart-card system-chart" ref={ref} data-system-chart={chartKey}>
      <div class="chart-head">
        <h4 title={chartKey}>
          {desc.title}
          {desc.unit ? <span class="muted unit"> ({desc.unit})</span> : null}
        </h4>
        <div class="readout">{readout}</div>
      </div>
      <div class="chart-body" style={{ height: `${HEIGHT}px` }}>
        {seen && lines.length ? (
          <Chart model={model} xMode="time" log={false} height={HEIGHT} onHover={setHover} />
        ) : null}
        {state.error ? <div class="chart-status error-text">{String(state.error.message)}</div> : null}
        {!state.error && !state.data ? <div class="chart-status muted">loading…</div> : null}
        {state.data && !lines.length ? <div class="chart-status muted">no samples in range</div> : null}
      </div>
      {lines.length ? (
        <ul class="sys-legend">
          {lines.slice(0, LEGEND_MAX).map((l) => (
            <li key={l.key} style={{ "--c": l.color }}>
              <span class="swatch" aria-hidden="true" />
              {l.label}
            </li>
          ))}
          {lines.length > LEGEND_MAX ? <li class="muted">+{lines.length - LEGEND_MAX} more</li> : null}
        </ul>
      ) : null}
    </div>
  );
}
