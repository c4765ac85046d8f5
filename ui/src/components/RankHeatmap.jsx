// The rank × step heatmap of one metric (issue 26): ranks down, steps across, each cell
// the rank's mean over the bucket (GET .../heatmap, downsampled on the server), coloured
// by value or by deviation from the bucket's cross-rank median. Stragglers, a drifting
// loss, a node's hot GPUs show as stripes. Drawn on a canvas: one pixel per cell, scaled
// without smoothing; with more ranks than pixel rows each row shows, per bucket, the rank
// furthest from the median (lib/ranks.js foldRows). Hover for the cell; click to add the
// rank to the lines drawn. A run of more than PAGE ranks is shown a window of PAGE ranks
// at a time (the route's offset/limit), paged with the head's buttons; the window's median
// and scores are its own.

import { useEffect, useMemo, useRef, useState } from "preact/hooks";
import { api } from "../api.js";
import { useLoad } from "../hooks.js";
import { fmtInt } from "../lib/format.js";
import { cellColor, colorRange, colorTable, decodeCells, deviations, foldRows, paint } from "../lib/ranks.js";
import { ErrorBox, Segmented, Spinner } from "./common.jsx";
import "./ranks.css";

const MODES = [
  { value: "deviation", label: "Deviation", title: "Each cell minus the step bucket's cross-rank median: blue below, red above" },
  { value: "value", label: "Value", title: "Each cell's value (the rank's mean over the bucket)" },
];
/** Pixel rows at most: more ranks than this fold (see foldRows). */
const MAX_HEIGHT = 512;
/** Buckets asked for: about one per two CSS pixels, at most this many. */
const MAX_BUCKETS = 1000;
/** Ranks a window (the route's most a reply). */
export const PAGE = 1024;

function fmtValue(v) {
  if (!Number.isFinite(v)) return "–";
  const a = Math.abs(v);
  return a !== 0 && (a >= 1e5 || a < 1e-3) ? v.toExponential(3) : Number(v.toPrecision(5)).toString();
}

export function RankHeatmap({ project, runId, metrics, metric, setMetric, onPick, onRows }) {
  const box = useRef(null);
  const canvas = useRef(null);
  const [mode, setMode] = useState("deviation");
  const [hover, setHover] = useState(null);
  const [offset, setOffset] = useState(0);
  useEffect(() => setOffset(0), [project, runId]);
  const heat = useLoad(
    async (signal) => {
      const width = box.current?.clientWidth || 1000;
      const buckets = Math.max(16, Math.min(MAX_BUCKETS, Math.floor(width / 2)));
      const params = { key: metric, buckets, offset, limit: PAGE };
      const got = await api.heatmap(project, runId, params, { signal });
      const cells = decodeCells(got.values, got.rows.length, got.buckets);
      return { ...got, cells, dev: deviations(cells, got.median, got.buckets) };
    },
    [project, runId, metric, offset],
  );
  const data = heat.data;
  const total = data?.total_rows ?? 0;
  useEffect(() => {
    if (data) onRows?.(data.rows);
  }, [data]); // eslint-disable-line react-hooks/exhaustive-deps -- onRows is a fresh closure each render
  const picture = useMemo(() => {
    if (!data) return null;
    const shown = mode === "deviation" ? data.dev : data.cells;
    const [lo, hi] = colorRange(shown, mode);
    return { ...foldRows(shown, data.dev, data.rows.length, data.buckets, MAX_HEIGHT), lo, hi };
  }, [data, mode]);

  useEffect(() => {
    const c = canvas.current;
    if (!c || !picture || !data) return;
    const { values, rows, lo, hi } = picture;
    const img = new ImageData(data.buckets, rows);
    paint(values, lo, hi, colorTable(mode), img.data);
    const off = document.createElement("canvas");
    off.width = data.buckets;
    off.height = rows;
    off.getContext("2d").putImageData(img, 0, 0);
    const dpr = window.devicePixelRatio || 1;
    const w = c.clientWidth;
    const h = c.clientHeight;
    c.width = Math.round(w * dpr);
    c.height = Math.round(h * dpr);
    const g = c.getContext("2d");
    g.imageSmoothingEnabled = false;
    g.clearRect(0, 0, c.width, c.height);
    g.drawImage(off, 0, 0, c.width, c.height);
    c.parentElement?.setAttribute("data-state", "drawn");
    c.parentElement?.setAttribute("data-drawn", `${data.key}:${mode}`); // what the picture shows
    c.parentElement?.setAttribute("data-drawn-rows", `${data.offset}-${data.offset + data.rows.length - 1}`);
    if (!performance.getEntriesByName("rankwise:heatmap").length) performance.mark("rankwise:heatmap");
  }, [picture, data, mode]);

  const at = (ev) => {
    if (!data || !picture) return null;
    const r = ev.currentTarget.getBoundingClientRect();
    const x = Math.min(data.buckets - 1, Math.max(0, Math.floor(((ev.clientX - r.left) / r.width) * data.buckets)));
    const y = Math.min(picture.rows - 1, Math.max(0, Math.floor(((ev.clientY - r.top) / r.height) * picture.rows)));
    const row = picture.pick[y * data.buckets + x];
    const rowIdx = row >= 0 ? row : Math.floor((y * data.rows.length) / picture.rows);
    const width = (data.hi - data.lo) / data.buckets;
    const i = rowIdx * data.buckets + x;
    // On the step axis a bucket is `width` whole steps and `hi` ends the last one: the
    // cell holds steps from .. from + width - 1.
    const last = data.lo + (x + 1) * width - (data.x === "step" ? 1 : 0);
    return {
      row: data.rows[rowIdx], from: data.lo + x * width, to: last,
      value: data.cells[i], dev: data.dev[i], median: data.median[x],
      left: ev.clientX - r.left, top: ev.clientY - r.top,
    };
  };
  const height = data ? Math.max(96, Math.min(MAX_HEIGHT, data.rows.length * (data.rows.length < 64 ? 8 : 1))) : 160;
  return (
    <section class="rank-heatmap card" data-heatmap aria-label="Rank × step heatmap">
      <div class="heatmap-head">
        <h3>Rank × {data?.x ?? "step"} heatmap</h3>
        <label class="small">
          Metric{" "}
          <select value={metric} onChange={(e) => setMetric(e.currentTarget.value)} data-heatmap-metric>
            {metrics.map((k) => <option key={k} value={k}>{k}</option>)}
          </select>
        </label>
        <Segmented label="Colour by" options={MODES} value={mode} onChange={setMode} />
        {data ? (
          <span class="muted small" data-heatmap-size>
            {fmtInt(data.rows.length)} ranks × {fmtInt(data.buckets)} buckets
            {picture && picture.rows < data.rows.length ? `; ${(data.rows.length / picture.rows).toFixed(0)} ranks a pixel row, the furthest from the median shown` : ""}
          </span>
        ) : null}
        {total > PAGE ? (
          <Pager offset={offset} total={total} rows={data?.rows} loading={heat.loading} setOffset={setOffset} />
        ) : null}
      </div>
      {heat.error ? <ErrorBox error={heat.error} onRetry={heat.reload} /> : null}
      {!data && !heat.error ? <Spinner /> : null}
      {data ? (
        <div class="heatmap-body">
          <div class="heatmap-y muted small" aria-hidden="true">
            <span>rank {data.rows[0]?.rank ?? "–"}</span>
            <span>rank {data.rows[data.rows.length - 1]?.rank ?? "–"}</span>
          </div>
          <div class="heatmap-plot" style={{ height: `${height}px` }}>
            <canvas
              ref={canvas}
              data-heatmap-canvas
              role="img"
              aria-label={`${metric}: ${data.rows.length} ranks by ${data.buckets} ${data.x} buckets, coloured by ${mode}`}
              onMouseMove={(e) => setHover(at(e))}
              onMouseLeave={() => setHover(null)}
              onClick={(e) => {
                const h = at(e);
                if (h?.row) onPick?.(h.row.label);
              }}
            />
            {hover?.row ? (
              <div class="heatmap-tip" data-heatmap-tip style={{ left: `${hover.left + 12}px`, top: `${hover.top + 12}px` }}>
                <div><b>{hover.row.label}</b> · rank {hover.row.rank} · node {hover.row.node}{hover.row.host ? ` (${hover.row.host})` : ""}</div>
                <div>{data.x} {fmtInt(Math.ceil(hover.from))}–{fmtInt(Math.floor(hover.to))}</div>
                <div>mean {fmtValue(hover.value)} · median {fmtValue(hover.median ?? NaN)} · Δ {fmtValue(hover.dev)}</div>
                <div class="muted">click: draw this rank's lines</div>
              </div>
            ) : null}
          </div>
          <div class="heatmap-x muted small" aria-hidden="true">
            <span>{data.x} {fmtInt(data.lo)}</span>
            <Scale lo={picture?.lo} hi={picture?.hi} mode={mode} />
            <span>{data.x} {fmtInt(data.x === "step" ? data.hi - 1 : data.hi)}</span>
          </div>
        </div>
      ) : null}
    </section>
  );
}

/**
 * The rank window's controls, for a run of more than PAGE ranks: previous and next
 * window, a list of every window, and which rows of how many are shown (rows in rank
 * order; the label names the ranks of the window's first and last rows).
 */
function Pager({ offset, total, rows, loading, setOffset }) {
  const pages = Math.ceil(total / PAGE);
  const page = Math.floor(offset / PAGE);
  const end = Math.min(total, offset + PAGE);
  const first = rows?.[0]?.rank;
  const last = rows?.[rows.length - 1]?.rank;
  // The window's ranks when its rows have them (a rank per row), else its rows' numbers.
  const shown = first >= 0 && last >= 0 && !loading ? `ranks ${fmtInt(first)}–${fmtInt(last)}` : `rows ${fmtInt(offset)}–${fmtInt(end - 1)}`;
  return (
    <span class="heatmap-pager small" data-heatmap-pager role="group" aria-label="Rank window">
      <button type="button" data-heatmap-prev disabled={page === 0} onClick={() => setOffset(offset - PAGE)} title={`The previous ${fmtInt(PAGE)} ranks`}>
        ‹ Prev
      </button>
      <select
        value={page}
        data-heatmap-window
        aria-label="Ranks shown"
        onChange={(e) => setOffset(Number(e.currentTarget.value) * PAGE)}
      >
        {Array.from({ length: pages }, (_, i) => (
          <option key={i} value={i}>
            {fmtInt(i * PAGE)}–{fmtInt(Math.min(total, (i + 1) * PAGE) - 1)}
          </option>
        ))}
      </select>
      <button type="button" data-heatmap-next disabled={page >= pages - 1} onClick={() => setOffset(offset + PAGE)} title={`The next ${fmtInt(PAGE)} ranks`}>
        Next ›
      </button>
      <span class="muted" data-heatmap-window-label aria-live="polite">
        {shown} shown of {fmtInt(total)}{loading ? " · loading…" : ""}
      </span>
    </span>
  );
}

/** The colour key: the mode's ramp from lo to hi. */
function Scale({ lo, hi, mode }) {
  if (lo === undefined) return null;
  const stops = [0, 0.25, 0.5, 0.75, 1].map((t) => {
    const rgb = cellColor(lo + t * (hi - lo), lo, hi, mode);
    return `rgb(${rgb.join(",")}) ${t * 100}%`;
  });
  return (
    <span class="heatmap-scale" data-heatmap-scale>
      {fmtValue(lo)}
      <span class="heatmap-ramp" style={{ background: `linear-gradient(to right, ${stops.join(", ")})` }} />
      {fmtValue(hi)}
      {mode === "deviation" ? " (Δ from the median)" : ""}
    </span>
  );
}
