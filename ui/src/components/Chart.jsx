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
import { extentInRange, isolated, lowerBound, nearestIndex, upperBound } from "../lib/series.js";
import { fmtTicks } from "../lib/format.js";
import { themeColors } from "../lib/colors.js";
import { collapseLabels } from "../lib/stalls.js";

const AXIS_FONT = "11px system-ui, -apple-system, Segoe UI, Roboto, sans-serif";
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
  }, [signature, height]); // eslint-disable-line react-hooks/exhaustive-deps -- the plot is rebuilt only when its shape changes; new data and props reach it through the effects below

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
  }, [props.xRange]); // eslint-disable-line react-hooks/exhaustive-deps -- a new zoom moves the window; new data alone must not reset the user's view

  useEffect(() => {
    plot.current?.redraw(false);
  }, [props.highlight, props.marks, props.firstBad]);

  return (
    <div
      class="chart-canvas"
      ref={wrap}
      style={{ height: `${height}px` }}
      data-stall-marks={props.marks?.length ?? 0}
      data-first-nonfinite={props.firstBad?.text}
    />
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
    font: AXIS_FONT,
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
      // A value with no neighbour to join (a metric logged once, a point between gaps)
      // is drawn as a dot: a line of one point would draw nothing.
      points: {
        show: false,
        size: 7,
        fill: color(l.color),
        filter: (u, si) => isolated(u.data[si], !!live.current.model.spanGaps),
      },
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
    // One x value: uPlot pads it before asking (step 0 came back as 0..100); centre it
    // in a step (a minute by time) either side instead.
    const xs = live.current.model.x;
    if (xs.length && xs[0] === xs[xs.length - 1]) {
      const pad = xMode === "time" ? 60 : 1;
      return [xs[0] - pad, xs[0] + pad];
    }
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
    // Right: room for half the last x tick's label, centred on the plot's right edge
    // (8 px would clip "1,200" or "12:04:05" there).
    padding: [8, rightPad, 0, 0],
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
      // Time ticks take two lines (the time, then the date under the first of a day).
      { ...axis, space: 60, size: xMode === "time" ? 44 : 28 },
      { ...axis, size: yAxisSize, values: (u, vals) => fmtTicks(vals) },
    ],
    series,
    bands,
    hooks: {
      drawAxes: [
        (u) => drawStalls(u, live.current.marks),
        (u) => drawOverlay(u, live.current, hoverKey.current, log),
        (u) => drawMarks(u, live.current.model.marks, c),
        (u) => drawFirstBad(u, live.current.firstBad),
      ],
      draw: [
        (u) => {
          noteAxes(u, live.current.model);
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

/**
 * What was drawn, on the canvas wrapper (for tests and the curious): the axes' tick
 * labels (data-yticks, data-xticks, JSON), the x axis height (data-xsize), the dots of
 * lone points (data-dots: "x,y" CSS px within the wrapper) and the NaN/±Inf marks
 * (data-marks).
 */
function noteAxes(u, model) {
  const el = u.root?.parentElement;
  if (!el) return;
  el.dataset.yticks = JSON.stringify(u.axes[1]?._values ?? []);
  el.dataset.xticks = JSON.stringify(u.axes[0]?._values ?? []);
  el.dataset.xsize = String(u.axes[0]?._size ?? "");
  el.dataset.xclip = String(Math.round(lastTickOverflow(u)));
  const dots = [];
  const over = u.over.getBoundingClientRect();
  const wrap = el.getBoundingClientRect();
  u.series.forEach((s, si) => {
    if (si === 0 || !s.points?.filter) return;
    for (const i of isolated(u.data[si], !!model.spanGaps) ?? []) {
      const x = u.valToPos(u.data[0][i], "x") + over.left - wrap.left;
      const y = u.valToPos(u.data[si][i], "y") + over.top - wrap.top;
      dots.push(`${Math.round(x)},${Math.round(y)}`);
    }
  });
  el.dataset.dots = dots.join(" ");
  el.dataset.marks = (model.marks ?? []).map((m) => `${m.x}:${m.text}`).join(" ");
}

let measurer = null;

/** How far (CSS px) the last x tick label runs past the canvas's right edge (<= 0: not). */
function lastTickOverflow(u) {
  const vals = u.axes[0]?._values ?? [];
  const splits = u.axes[0]?._splits ?? [];
  if (!vals.length || vals.length !== splits.length) return 0;
  const i = vals.length - 1;
  measurer ??= document.createElement("canvas").getContext("2d");
  if (!measurer) return 0;
  measurer.font = AXIS_FONT;
  const text = String(vals[i] ?? "").split("\n");
  const w = Math.max(...text.map((t) => measurer.measureText(t).width));
  const x = u.bbox.left / uPlot.pxRatio + u.valToPos(splits[i], "x");
  return x + w / 2 - u.width;
}

/** Right padding: half the last x tick's label, which uPlot centres on its tick (the
 * right edge at most): 8 px would clip "1,200" or "12:04:05". uPlot asks again once the
 * ticks exist. */
function rightPad(u) {
  const vals = u.axes?.[0]?._values;
  if (!vals || !vals.length) return 16;
  measurer ??= document.createElement("canvas").getContext("2d");
  if (!measurer) return 16;
  measurer.font = AXIS_FONT;
  const lines = String(vals[vals.length - 1] ?? "").split("\n");
  return Math.max(8, Math.ceil(Math.max(...lines.map((t) => measurer.measureText(t).width)) / 2) + 3);
}

/** The y axis as wide as its longest tick label needs (labels never clipped). */
function yAxisSize(u, values) {
  if (!values || !values.length) return 52;
  const longest = Math.max(...values.map((v) => String(v ?? "").length));
  return Math.max(40, Math.ceil(longest * 6.6) + 14);
}

/**
 * NaN and ±Inf values, which have no place on a y axis: a dashed tick at their x and
 * "NaN", "∞" or "−∞" at the top (NaN, ∞) or bottom (−∞) of the plot.
 */
function drawMarks(u, marks, c) {
  if (!marks || !marks.length) return;
  const { ctx, left, top, width, height, px } = plotCanvas(u);
  ctx.font = `${Math.round(11 * px)}px system-ui, sans-serif`;
  const upper = [];
  const bottom = [];
  for (const m of marks) {
    if (m.x < u.scales.x.min || m.x > u.scales.x.max) continue;
    const cx = u.valToPos(m.x, "x", true);
    const low = m.text === "−∞";
    ctx.strokeStyle = m.color ?? c.bad ?? "#c0392b";
    ctx.fillStyle = m.color ?? c.bad ?? "#c0392b";
    ctx.globalAlpha = 0.8;
    ctx.setLineDash([3 * px, 3 * px]);
    ctx.lineWidth = px;
    ctx.beginPath();
    ctx.moveTo(cx, top);
    ctx.lineTo(cx, top + height);
    ctx.stroke();
    ctx.setLineDash([]);
    (low ? bottom : upper).push({ px: cx, text: m.text, key: m.text === "∞" || m.text === "−∞" ? "Inf" : m.text, color: m.color });
  }
  // One label per cluster of nearby marks (many ranks' NaN at close steps would print
  // over each other as a band): "5 NaN" at the cluster's first mark.
  const gap = ctx.measureText("NaN").width + 8 * px;
  for (const [items, low] of [[upper, false], [bottom, true]]) {
    for (const g of collapseLabels(items, gap)) {
      const one = items.find((i) => i.px === g.px);
      ctx.fillStyle = (g.n === 1 && one?.color) || c.bad || "#c0392b";
      ctx.textBaseline = low ? "bottom" : "top";
      // Near an edge the label is set inside the plot, never cut by it.
      const edge = 14 * px;
      const cx = g.px;
      ctx.textAlign = cx > left + width - edge * (g.n > 1 ? 3 : 1) ? "right" : g.n > 1 || cx < left + edge ? "left" : "center";
      const tx = ctx.textAlign === "right" ? cx - 3 * px : ctx.textAlign === "left" ? cx + 3 * px : cx;
      ctx.fillText(g.text, tx, low ? top + height - 2 * px : top + 2 * px);
    }
  }
  noteLabels(u, "nonfiniteLabels", [...upper, ...bottom], gap);
  ctx.restore();
}

/** The labels drawn, on the canvas wrapper, for tests: ["5 NaN", "∞"]. */
function noteLabels(u, name, items, gap) {
  const el = u.root?.parentElement;
  if (el) el.dataset[name] = JSON.stringify(collapseLabels(items, gap).map((g) => g.text));
}

/** The canvas, saved and clipped to the plot area (restore it when done), with the
 * plot's box, x range and pixel ratio. */
function plotCanvas(u) {
  const ctx = u.ctx;
  const { left, top, width, height } = u.bbox;
  ctx.save();
  ctx.beginPath();
  ctx.rect(left, top, width, height);
  ctx.clip();
  return { ctx, left, top, width, height, xmin: u.scales.x.min, xmax: u.scales.x.max, px: uPlot.pxRatio };
}

const STALL = "#8e44ad"; // the health strip's stalled colour

/** Stalls (lib/stalls.js): a shaded span by time, a dashed line by step, under the lines. */
function drawStalls(u, marks) {
  if (!marks || !marks.length) return;
  const { ctx, top, height, xmin, xmax, px } = plotCanvas(u);
  const labels = [];
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
    labels.push({ px: a, text: m.rank >= 0 ? `stall r${m.rank}` : "stall", key: "stall" });
  }
  // Stalls at nearly the same place share one label ("3 stalls"), never overprinted.
  ctx.font = `${10 * px}px sans-serif`;
  ctx.globalAlpha = 0.85;
  ctx.fillStyle = STALL;
  ctx.textAlign = "left"; // uPlot's axes leave theirs set
  ctx.textBaseline = "alphabetic";
  const gap = Math.max(...labels.map((l) => ctx.measureText(l.text).width), 0) + 6 * px;
  for (const g of collapseLabels(labels, gap)) ctx.fillText(g.text, g.px + 3 * px, top + 11 * px);
  noteLabels(u, "stallLabels", labels, gap);
  ctx.restore();
}

const BAD = "#c8352b"; // the theme's --bad

/**
 * The metric's first non-finite value (rankwise/divergence.py): a marker at its x on the
 * line of the rank that went first — a triangle at the top edge (the value itself cannot
 * be placed on the y axis) over a dotted line, labelled "NaN r3".
 */
function drawFirstBad(u, mark) {
  if (!mark) return;
  const { ctx, top, height, xmin, xmax, px } = plotCanvas(u);
  if (mark.x >= xmin && mark.x <= xmax) {
    const x = u.valToPos(mark.x, "x", true);
    ctx.strokeStyle = mark.color || BAD;
    ctx.fillStyle = BAD;
    ctx.globalAlpha = 0.9;
    ctx.lineWidth = 1.5 * px;
    ctx.setLineDash([2 * px, 2 * px]);
    ctx.beginPath();
    ctx.moveTo(x, top);
    ctx.lineTo(x, top + height);
    ctx.stroke();
    ctx.setLineDash([]);
    ctx.beginPath();
    ctx.moveTo(x - 5 * px, top);
    ctx.lineTo(x + 5 * px, top);
    ctx.lineTo(x, top + 8 * px);
    ctx.closePath();
    ctx.fill();
    ctx.font = `${10 * px}px sans-serif`;
    ctx.fillText(mark.label, x + 6 * px, top + 20 * px);
  }
  ctx.restore();
}

function drawOverlay(u, props, hovered, log) {
  const overlay = props.model.overlay;
  if (!overlay || !overlay.length) return;
  const focus = hovered ?? props.highlight ?? null;
  const { ctx, xmin, xmax, px } = plotCanvas(u);
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
    for (const i of isolated(ys) ?? []) {
      if (i < a || i >= b || (log && ys[i] <= 0)) continue;
      ctx.beginPath();
      ctx.arc(u.valToPos(xs[i], "x", true), u.valToPos(ys[i], "y", true), 3 * px, 0, 2 * Math.PI);
      ctx.fillStyle = line.color;
      ctx.fill();
    }
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
    idx,
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
  }, []); // eslint-disable-line react-hooks/exhaustive-deps -- mq is the same media query each render: subscribe once
  return dark ? "dark" : "light";
}
