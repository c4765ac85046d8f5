// The run page's Histograms tab: each histogram key over its steps as a heatmap (steps
// left to right, value bins bottom to top, the count as colour), for one rank of a shared
// run at a time. Gradient norms from `run.watch` are plain scalars: they chart on the
// Charts tab like any other metric, with the cross-rank band.

import { useEffect, useMemo, useRef, useState } from "preact/hooks";
import { api } from "../../api.js";
import { useInView, useLoad } from "../../hooks.js";
import { heatColor, heatGradient, heatmapGrid, heatScaleTicks, heatStepTicks, pickLabel, sortLabels } from "../../lib/media.js";
import { Empty, ErrorBox, Spinner } from "../../components/common.jsx";
import { RankPicker } from "../../components/MediaPanels.jsx";

export function HistogramsTab({ run, keys, primary, live }) {
  const [rank, setRank] = useState("");
  if (!keys.length) {
    return (
      <Empty title="No histograms logged" icon="▥">
        Log one with <code>run.log({"{"}"weights": rankwise.Histogram(values){"}"})</code>, or
        watch a model's gradients with <code>run.watch(model)</code>.
      </Empty>
    );
  }
  const labels = sortLabels(new Set(keys.flatMap((k) => k.labels)));
  const label = pickLabel(labels, rank, primary);
  return (
    <div class="histograms-tab">
      <div class="toolbar">
        <span class="muted small">{keys.length} histogram{keys.length === 1 ? "" : "s"}</span>
        <span class="spacer" />
        <RankPicker labels={labels} value={label} onChange={setRank} />
      </div>
      <div class="heatmap-grid">
        {keys.map((k) => (
          <HistogramCard key={k.key} run={run} mkey={k} label={pickLabel(k.labels, label, primary)} live={live} />
        ))}
      </div>
    </div>
  );
}

function HistogramCard({ run, mkey, label, live }) {
  const [ref, seen, visible] = useInView();
  const loaded = useLoad(
    (signal) => api.histograms(run.project, run.id, { key: mkey.key, label }, { signal }),
    [run.project, run.id, mkey.key, label],
    { enabled: seen, interval: live && visible ? 5000 : 0, keepOnError: true },
  );
  const series = loaded.data?.series?.find((s) => s.label === label) ?? loaded.data?.series?.[0];
  const grid = useMemo(() => heatmapGrid(series), [series]);
  return (
    <section ref={ref} class="chart-card heatmap-card" data-histogram-key={mkey.key} data-label={label ?? ""} aria-label={mkey.key}>
      <header class="media-card-head">
        <h3 class="media-key">{mkey.key}</h3>
        <span class="muted small">rank {label}</span>
      </header>
      {loaded.error ? <ErrorBox error={loaded.error} onRetry={loaded.reload} /> : null}
      {!loaded.data && !loaded.error ? <Spinner /> : null}
      {grid ? <Heatmap grid={grid} /> : loaded.data ? <p class="muted small">Nothing logged by rank {label}.</p> : null}
      {series ? <NonFinite series={series} /> : null}
    </section>
  );
}

/** NaN and ±Inf are left out of the bins and counted: say so when any step had some. */
function NonFinite({ series }) {
  const sum = (xs) => (xs ?? []).reduce((a, b) => a + b, 0);
  const [nan, pos, neg] = [sum(series.nan), sum(series.posinf), sum(series.neginf)];
  if (!nan && !pos && !neg) return null;
  return (
    <p class="warn small" data-nonfinite>
      Left out of the bins: {nan ? `${nan} NaN ` : ""}{pos ? `${pos} +Inf ` : ""}{neg ? `${neg} −Inf` : ""}
    </p>
  );
}

/** The grid painted on a canvas, one pixel per cell, scaled up by CSS (crisp cells). */
function Heatmap({ grid }) {
  const canvas = useRef(null);
  const [hover, setHover] = useState(null);
  useEffect(() => {
    const el = canvas.current;
    if (!el) return;
    const cols = grid.steps.length;
    el.width = cols;
    el.height = grid.rows;
    const ctx = el.getContext("2d");
    if (!ctx) return;
    const img = ctx.createImageData(cols, grid.rows);
    for (let c = 0; c < cols; c++) {
      for (let r = 0; r < grid.rows; r++) {
        const [R, G, B, A] = heatColor(grid.grid[c * grid.rows + r], grid.max);
        const at = ((grid.rows - 1 - r) * cols + c) * 4; // row 0 (lowest values) at the bottom
        img.data[at] = R;
        img.data[at + 1] = G;
        img.data[at + 2] = B;
        img.data[at + 3] = A;
      }
    }
    ctx.putImageData(img, 0, 0);
  }, [grid]);
  const onMove = (e) => {
    const box = e.currentTarget.getBoundingClientRect();
    const c = Math.min(grid.steps.length - 1, Math.floor(((e.clientX - box.left) / box.width) * grid.steps.length));
    const r = Math.min(grid.rows - 1, Math.floor(((box.bottom - e.clientY) / box.height) * grid.rows));
    const w = (grid.hi - grid.lo) / grid.rows;
    setHover({ step: grid.steps[c], lo: grid.lo + r * w, hi: grid.lo + (r + 1) * w, n: grid.grid[c * grid.rows + r] });
  };
  const fmt = (v) => Number(v.toPrecision(3)).toString();
  return (
    <div class="heatmap">
      <span class="axis-y muted small">{fmt(grid.hi)}</span>
      <canvas
        ref={canvas}
        class="heatmap-canvas"
        role="img"
        aria-label={`${grid.steps.length} steps × ${grid.rows} bins, values ${fmt(grid.lo)} to ${fmt(grid.hi)}`}
        onMouseMove={onMove}
        onMouseLeave={() => setHover(null)}
      />
      <span class="axis-y-lo muted small">{fmt(grid.lo)}</span>
      <div class="axis-x muted small" data-step-ticks>
        {heatStepTicks(grid.steps).map((t, i, all) => (
          <span
            key={t.step}
            class="tick"
            style={i === 0 ? { left: 0 } : i === all.length - 1 ? { right: 0 } : { left: `${t.at * 100}%`, transform: "translateX(-50%)" }}
          >
            {i === 0 ? `step ${t.step}` : t.step}
          </span>
        ))}
      </div>
      <div class="heat-foot small">
        <span class="readout">{hover ? `step ${hover.step}: [${fmt(hover.lo)}, ${fmt(hover.hi)}) ${fmt(hover.n)}` : ""}</span>
        <HeatScale max={grid.max} fmt={fmt} />
      </div>
    </div>
  );
}

/** The colour scale: the ramp as a bar, counts per bin under it (square-root scale). */
function HeatScale({ max, fmt }) {
  const ticks = heatScaleTicks(max);
  if (!ticks.length) return null;
  return (
    <div class="heat-scale" data-heat-scale title="Values per bin (square-root colour scale)">
      <span class="muted">count</span>
      <div class="heat-scale-bar">
        <span class="heat-ramp" style={{ background: heatGradient() }} />
        <div class="heat-scale-ticks muted">
          {ticks.map((t) => (
            <span key={t.at} style={{ left: `${t.at * 100}%` }}>{fmt(t.count)}</span>
          ))}
        </div>
      </div>
    </div>
  );
}
