// One uPlot chart. uPlot draws the aligned columns (a mean line, its min–max band, the
// runs of a comparison); the per-rank lines are an *overlay* drawn in uPlot's drawAxes
// hook, each with its own x column. Ranks' downsampled points rarely share x values, so
// aligning 64 of them on one x axis would multiply the cells by up to 64; drawn
// separately, each line costs only its own points and hovering can find the nearest line.
//
// The chart never touches the DOM with user text: uPlot's legend is off and readouts
// are rendered by the caller.

import { useEffect, useRef, useState } from "preact/hooks";
import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";
import { extentInRange, lowerBound, nearestIndex, upperBound } from "../lib/series.js";
import { themeColors } from "../lib/colors.js";

const HOVER_PX = 24; // how close (CSS px) the pointer must be to a rank line to pick it

/**
 * props:
 *   model    {x, lines: [{key, label, color, y, width?, alpha?, dash?}],
 *             band: {lo, hi, color}|null, overlay: [{key, label, color, x, y}]|null,
 *             spanGaps?, focus?}   colours may be "accent" or "raw" (theme colours)
 *   xMode    "step" | "time";  log  boolean;  height  number
 *   xRange   [lo, hi] | null   (controlled zoom)
 *   highlight  overlay key drawn on top (pinned), or null
 *   onZoom(lo, hi), onResetZoom(), onHover(readout|null), onDrawn(), onFocusLine(i|null)
 */
export function Chart(props) {
  const { model, xMode, log, height = 200 } = props;
  const wrap = useRef(null);
  const plot = useRef(null);
  const live = useRef(props);
  live.current = props;
  const hoverKey = useRef(null);
  const shown = useRef({ model: null, xRange: null });
  const theme = useTheme();

  const signature = [
    xMode, log ? "log" : "lin", model.lines.map((l) => `${l.key}:${l.color}`).join(","),
    model.band ? "band" : "", model.spanGaps ? "span" : "", model.focus ? "focus" : "", theme,
  ].join("|");

  // (Re)create the plot when its structure changes; otherwise only its data.
  useEffect(() => {
    const el = wrap.current;
    const width = Math.max(200, el.clientWidth);
    const u = new uPlot(makeOpts(live, hoverKey, model, xMode, log, width, height), toData(model), el);
    plot.current = u;
    shown.current = { model, xRange: props.xRange }; // drawn with these: no second draw
    const onDbl = () => live.current.onResetZoom?.();
    u.over.addEventListener("dblclick", onDbl);
    const onLeave = () => {
      if (hoverKey.current !== null) {
        hoverKey.current = null;
        u.redraw(false);
      }
    };
    u.over.addEventListener("mouseleave", onLeave);
    const ro = new ResizeObserver(() => {
      const w = Math.max(200, el.clientWidth);
      if (Math.abs(w - u.width) > 1) u.setSize({ width: w, height });
    });
    ro.observe(el);
    return () => {
      ro.disconnect();
      u.over.removeEventListener("dblclick", onDbl);
      u.destroy();
      plot.current = null;
    };
  }, [signature, height]); // eslint-disable-line react-hooks/exhaustive-deps

  useEffect(() => {
    const u = plot.current;
    if (!u || shown.current.model === model) return;
    shown.current.model = model;
    u.setData(toData(model), true);
  }, [model]);

  useEffect(() => {
    const u = plot.current;
    if (!u || shown.current.xRange === props.xRange) return;
    shown.current.xRange = props.xRange;
    const [lo, hi] = xWindow(props.xRange, model);
    if (lo !== null) u.setScale("x", { min: lo, max: hi });
  }, [props.xRange]); // eslint-disable-line react-hooks/exhaustive-deps

  useEffect(() => {
    plot.current?.redraw(false);
  }, [props.highlight, props.marks]);

  return (
    <div class="chart-canvas" ref={wrap} style={{ height: `${height}px` }} data-stall-marks={props.marks?.length ?? 0} />
  );
}

function toData(model) {
  const data = [model.x, ...model.lines.map((l) => l.y)];
  if (model.band) data.push(model.band.lo, model.band.hi);
  return data;
}

/** The x window to show: the zoom when set, else the data's extent. */
function xWindow(xRange, model) {
  if (xRange) return xRange;
  const x = model.x;
  if (!x.length) return [null, null];
  return [x[0], x[x.length - 1]];
}

function makeOpts(live, hoverKey, model, xMode, log, width, height) {
  // Readouts reach the caller (a Preact state) at most once per frame.
  let pending;
  let queued = false;
  const hoverOut = (readout) => {
    pending = readout;
    if (queued) return;
    queued = true;
    requestAnimationFrame(() => {
      queued = false;
      live.current.onHover?.(pending);
    });
  };
  const c = themeColors();
  const axis = {
    stroke: c.text,
    grid: { stroke: c.grid, width: 1 },
    ticks: { stroke: c.grid, width: 1, size: 4 },
    font: "11px system-ui, -apple-system, Segoe UI, Roboto, sans-serif",
  };
  const color = (v) => ({ accent: c.accent, raw: c.raw, ink: c.ink })[v] ?? v;
  const series = [{}];
  for (const l of model.lines) {
    series.push({
      label: "", // labels live in the caller's legend, never in uPlot's DOM
      stroke: color(l.color),
      width: l.width ?? 1.5,
      alpha: l.alpha ?? 1,
      dash: l.dash,
      spanGaps: !!model.spanGaps,
      points: { show: false },
    });
  }
  const bands = [];
  if (model.band) {
    const lo = series.length;
    series.push({ stroke: "transparent", width: 0, points: { show: false } });
    series.push({ stroke: "transparent", width: 0, points: { show: false } });
    bands.push({ series: [lo + 1, lo], fill: color(model.band.color) ?? c.band });
  }

  const xRange = (u, dmin, dmax) => {
    const r = live.current.xRange;
    if (r) return [r[0], r[1]];
    if (dmin === null || dmax === null) return [0, 1];
    if (dmin === dmax) return [dmin - 1, dmax + 1];
    return [dmin, dmax];
  };

  const yRange = (u, dmin, dmax) => {
    let lo = Number.isFinite(dmin) ? dmin : null;
    let hi = Number.isFinite(dmax) ? dmax : null;
    const overlay = live.current.model.overlay;
    if (overlay && overlay.length) {
      const [a, b] = xWindow(live.current.xRange, live.current.model);
      for (const line of overlay) {
        const e = extentInRange(line.x, line.y, a, b, log);
        if (!e) continue;
        lo = lo === null || e[0] < lo ? e[0] : lo;
        hi = hi === null || e[1] > hi ? e[1] : hi;
      }
    }
    if (lo === null || hi === null) {
      return log ? [1, 10] : [0, 1];
    }
    if (log) return uPlot.rangeLog(Math.max(lo, 1e-300), Math.max(hi, 1e-300), 10, true);
    if (lo === hi) {
      const pad = Math.abs(lo) * 0.1 || 1;
      return [lo - pad, hi + pad];
    }
    const pad = (hi - lo) * 0.06;
    return [lo - pad, hi + pad];
  };

  return {
    width,
    height,
    legend: { show: false },
    padding: [8, 8, 0, 0],
    cursor: {
      drag: { x: true, y: false, setScale: false },
      points: { show: false },
      y: false,
      // Comparisons: the line nearest the pointer is focused, the others dimmed.
      focus: { prox: model.focus ? 30 : -1 },
    },
    focus: { alpha: model.focus ? 0.25 : 1 },
    select: { show: true },
    scales: {
      x: { time: xMode === "time", range: xRange },
      y: { distr: log ? 3 : 1, log: 10, range: yRange },
    },
    axes: [
      { ...axis, space: 60, size: 28 },
      { ...axis, size: 52, values: (u, vals) => vals.map(fmtTick) },
    ],
    series,
    bands,
    hooks: {
      drawAxes: [(u) => drawMarks(u, live.current.marks), (u) => drawOverlay(u, live.current, hoverKey.current, log)],
      draw: [
        (u) => {
          if (u.data[0].length || live.current.model.overlay?.length) live.current.onDrawn?.(u);
        },
      ],
      setSelect: [
        (u) => {
          const s = u.select;
          if (s.width > 4) {
            const lo = u.posToVal(s.left, "x");
            const hi = u.posToVal(s.left + s.width, "x");
            live.current.onZoom?.(lo, hi);
          }
          u.setSelect({ left: 0, top: 0, width: 0, height: 0 }, false);
        },
      ],
      setCursor: [(u) => onCursor(u, live.current, hoverKey, hoverOut)],
      setSeries: [
        (u, idx, opts) => {
          if (opts && "focus" in opts) live.current.onFocusLine?.(idx ? idx - 1 : null);
        },
      ],
    },
  };
}

/** Short tick labels: 1.2k, 3.4M, 0.0012 → 1.2e-3. */
export function fmtTick(v) {
  if (v === null || v === undefined) return "";
  const a = Math.abs(v);
  if (a === 0) return "0";
  if (a >= 1e9) return `${+(v / 1e9).toPrecision(3)}G`;
  if (a >= 1e6) return `${+(v / 1e6).toPrecision(3)}M`;
  if (a >= 1e4) return `${+(v / 1e3).toPrecision(3)}k`;
  if (a < 1e-3) return v.toExponential(1);
  return `${+v.toPrecision(4)}`;
}

const STALL = "#8e44ad"; // the health strip's stalled colour

/** Stalls (lib/stalls.js): a shaded span by time, a dashed line by step, under the lines. */
function drawMarks(u, marks) {
  if (!marks || !marks.length) return;
  const ctx = u.ctx;
  const { left, top, width, height } = u.bbox;
  const xmin = u.scales.x.min;
  const xmax = u.scales.x.max;
  const px = uPlot.pxRatio;
  ctx.save();
  ctx.beginPath();
  ctx.rect(left, top, width, height);
  ctx.clip();
  for (const m of marks) {
    const x1 = m.x1 ?? xmax;
    if (x1 < xmin || m.x0 > xmax) continue;
    const a = u.valToPos(Math.max(m.x0, xmin), "x", true);
    const b = u.valToPos(Math.min(x1, xmax), "x", true);
    ctx.fillStyle = STALL;
    ctx.strokeStyle = STALL;
    if (b - a >= 2 * px) {
      ctx.globalAlpha = 0.14;
      ctx.fillRect(a, top, b - a, height);
    }
    ctx.globalAlpha = 0.85;
    ctx.lineWidth = 1.5 * px;
    ctx.setLineDash([4 * px, 3 * px]);
    ctx.beginPath();
    ctx.moveTo(a, top);
    ctx.lineTo(a, top + height);
    ctx.stroke();
    ctx.setLineDash([]);
    ctx.font = `${10 * px}px sans-serif`;
    ctx.fillText(m.rank >= 0 ? `stall r${m.rank}` : "stall", a + 3 * px, top + 11 * px);
  }
  ctx.restore();
}

function drawOverlay(u, props, hovered, log) {
  const overlay = props.model.overlay;
  if (!overlay || !overlay.length) return;
  const focus = hovered ?? props.highlight ?? null;
  const ctx = u.ctx;
  const { left, top, width, height } = u.bbox;
  const xmin = u.scales.x.min;
  const xmax = u.scales.x.max;
  const px = uPlot.pxRatio;
  ctx.save();
  ctx.beginPath();
  ctx.rect(left, top, width, height);
  ctx.clip();
  ctx.lineJoin = "round";
  const ordered = focus === null ? overlay : [
    ...overlay.filter((l) => l.key !== focus),
    ...overlay.filter((l) => l.key === focus),
  ];
  for (const line of ordered) {
    const on = line.key === focus;
    ctx.globalAlpha = focus === null ? 0.7 : on ? 1 : 0.12;
    ctx.lineWidth = (on ? 2.25 : 1) * px;
    ctx.strokeStyle = line.color;
    const xs = line.x;
    const ys = line.y;
    const a = Math.max(0, lowerBound(xs, xmin) - 1);
    const b = Math.min(xs.length, upperBound(xs, xmax) + 1);
    ctx.beginPath();
    let pen = false;
    for (let i = a; i < b; i++) {
      const y = ys[i];
      if (y === null || !Number.isFinite(y) || (log && y <= 0)) {
        pen = false;
        continue;
      }
      const cx = u.valToPos(xs[i], "x", true);
      const cy = u.valToPos(y, "y", true);
      if (pen) ctx.lineTo(cx, cy);
      else ctx.moveTo(cx, cy);
      pen = true;
    }
    ctx.stroke();
  }
  ctx.restore();
}

function onCursor(u, props, hoverKey, emit) {
  const { left, top, idx } = u.cursor;
  if (left === undefined || left < 0 || idx === null || idx === undefined) {
    if (hoverKey.current !== null) {
      hoverKey.current = null;
      u.redraw(false);
    }
    emit(null);
    return;
  }
  const xv = u.posToVal(left, "x");
  let best = null;
  const overlay = props.model.overlay;
  if (overlay && overlay.length) {
    let bestD = HOVER_PX;
    for (const line of overlay) {
      const i = nearestIndex(line.x, xv);
      if (i < 0) continue;
      const y = line.y[i];
      if (y === null || !Number.isFinite(y)) continue;
      if (Math.abs(u.valToPos(line.x[i], "x") - left) > HOVER_PX * 2) continue;
      const d = Math.abs(u.valToPos(y, "y") - top);
      if (d < bestD) {
        bestD = d;
        best = { key: line.key, label: line.label, color: line.color, x: line.x[i], y };
      }
    }
  }
  const key = best ? best.key : null;
  if (key !== hoverKey.current) {
    hoverKey.current = key;
    u.redraw(false);
  }
  const x = u.data[0][idx];
  emit({
    x,
    values: props.model.lines.map((l) => l.y[idx]),
    lo: props.model.band ? props.model.band.lo[idx] : null,
    hi: props.model.band ? props.model.band.hi[idx] : null,
    rank: best,
  });
}

/** "light" or "dark", following the system setting live. */
function useTheme() {
  const mq = typeof window !== "undefined" && window.matchMedia
    ? window.matchMedia("(prefers-color-scheme: dark)")
    : null;
  const [dark, setDark] = useState(mq ? mq.matches : false);
  useEffect(() => {
    if (!mq) return undefined;
    const on = (e) => setDark(e.matches);
    mq.addEventListener("change", on);
    return () => mq.removeEventListener("change", on);
  }, []); // eslint-disable-line react-hooks/exhaustive-deps
  return dark ? "dark" : "light";
}
