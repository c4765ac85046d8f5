// Chart cards: one metric each, fetched only once scrolled near (IntersectionObserver),
// refreshed while live and visible, and refined when zoomed: the server is asked for the
// zoomed x range at full chart resolution and the answer is merged into the coarse one.

import { useEffect, useMemo, useState } from "preact/hooks";
import { api } from "../api.js";
import { LIVE_MS, useInView, useLoad } from "../hooks.js";
import {
  LINES, alignSeries, bandColumns, bandTable, gaps, lineColumn, markAt, mergeRange, mergeSeriesList,
  nonfiniteMarks, nonfiniteNote, pointsFor, pointsPerRank, positiveOnly, smooth, tableBand,
} from "../lib/series.js";
import { fmtTime, fmtValue, runTitle } from "../lib/format.js";
import { charts, priorityOf } from "../lib/queue.js";
import { href } from "../router.js";
import { Chart } from "./Chart.jsx";

const HEIGHT = 190;

/**
 * A card's data (useLoad): fetched once the card has been scrolled near, again when its
 * parameters change and every LIVE_MS while the run is live and the card on screen. The
 * chart stays on screen while the next answer loads and beside an error; when the run
 * stops being live, one last read, so the chart ends where the run did.
 */
const cardLoad = (seen, liveHere) => ({
  enabled: seen, interval: liveHere ? LIVE_MS : 0, keepOnError: true, finalRead: true,
});

/**
 * After each draw the card's element says what is on it (for tests and the curious):
 * data-state="drawn", data-lines (per-rank or per-run lines drawn), data-xmin/xmax (the
 * x window), data-lastx (the last x of the data).
 */
function noteDrawn(el, u, lines) {
  if (!el) return;
  el.dataset.state = "drawn";
  el.dataset.lines = String(lines);
  el.dataset.xmin = String(u.scales.x.min);
  el.dataset.xmax = String(u.scales.x.max);
  const xs = u.data[0];
  el.dataset.lastx = xs.length ? String(xs[xs.length - 1]) : "";
}

/** Card chrome: title, readout, body; registers with the first-draw tracker. */
function useCard(metric, tracker) {
  const [ref, seen, visible] = useInView();
  useEffect(() => {
    if (!seen || !tracker) return;
    const r = ref.current?.getBoundingClientRect();
    if (r && r.top < window.innerHeight && r.bottom > 0) tracker.expect(metric);
  }, [seen, tracker, metric, ref]);
  return [ref, seen, visible];
}

/** "Add to report": the project's reports page, asked to add this chart (lib/reports.js). */
function AddToReport({ project, runs, metric, settings, ranks }) {
  const to = href.reports(project, {
    add: "chart", runs: runs.join(","), metric, x: settings.x === "time" ? "time" : "", mode: ranks ? "ranks" : "",
  });
  return <a class="chart-add-report" href={to} title="Add this chart to a report" aria-label="Add to report" data-add-to-report>＋ report</a>;
}

function CardFrame({ cardRef, metric, readout, children, status, tools = null, report = null }) {
  return (
    <div class="chart-card" ref={cardRef} data-metric={metric}>
      <div class="chart-head">
        <h4 title={metric}>{metric}</h4>
        {tools}
        <div class="readout">{readout}</div>
      </div>
      <div class="chart-body" style={{ height: `${HEIGHT}px` }}>
        {children}
        {status ? <div class="chart-status">{status}</div> : null}
        {report}
      </div>
    </div>
  );
}

/** The Chart props both cards share: settings, zoom, hover, and the note of each draw. */
function chartProps({ model, settings, props, cardRef, lines, metric, tracker, onHover }) {
  return {
    model,
    xMode: settings.x,
    log: settings.log,
    height: HEIGHT,
    xRange: settings.zoom,
    onZoom: props.onZoom,
    onResetZoom: props.onResetZoom,
    onHover,
    onDrawn: (u) => {
      noteDrawn(cardRef.current, u, lines);
      tracker?.drawn(metric);
    },
  };
}

function xText(x, xMode) {
  if (x === null || x === undefined) return "";
  return xMode === "time" ? fmtTime(x) : `step ${fmtValue(x)}`;
}

/**
 * The chart's line setting: the metric's defined line (`define_metric(reduce=)`, the
 * mean unless defined) is drawn first; the others are offered here.
 */
function LineSelect({ model, onChange }) {
  return (
    <select
      class="line-kind"
      aria-label="cross-rank line"
      title={`The line across ranks; this metric's is the ${model.defined} (run.define_metric(reduce=))`}
      value={model.line}
      data-defined={model.defined}
      onChange={(e) => onChange(e.currentTarget.value)}
    >
      {LINES.map((k) => (
        <option key={k} value={k}>{k === model.defined && k !== "mean" ? `${k} (defined)` : k}</option>
      ))}
    </select>
  );
}

/**
 * The line's name in the readout: "sum", "min", "max", or for the mean "weighted mean"
 * or "mean", a button switching the two where weights were logged.
 */
function MeanLabel({ model, onToggle }) {
  if (model.line && model.line !== "mean") return <span class="muted">{model.line}</span>;
  if (!model.hasWeights) return <span class="muted">mean</span>;
  const name = model.weighted ? "weighted mean" : "unweighted mean";
  return (
    <button
      type="button"
      class="linklike mean-kind"
      title={`Show the ${model.weighted ? "unweighted" : "weighted"} mean instead`}
      onClick={onToggle}
    >
      {name}
    </button>
  );
}

/**
 * "2 of 3 ranks" at a partial point: of the ranks there so far while the run is live;
 * of all its ranks once it ended (they ended at different steps, and for good).
 */
function partialOf(n, live, nRanks) {
  if (live) return `${n} of the live ranks so far`;
  return nRanks ? `${n} of ${nRanks} ranks` : `${n} ranks`;
}

/** The readout line of a run chart: hovered values, else the last complete mean. */
function RunReadout({ hover, model, xMode, multi, onToggleMean, live, nRanks }) {
  if (!model) return null;
  const label = multi ? <><MeanLabel model={model} onToggle={onToggleMean} />{" "}</> : null;
  if (!hover) {
    const mean = model.lines.find((l) => l.key === "mean")?.y ?? [];
    let i = multi ? model.lastComplete : mean.length - 1;
    // The last value logged may be NaN or ±Inf (in a shared run: every rank's value at
    // the last complete step): say so, rather than quote an older one.
    const lastMark = i >= 0 ? markAt(model.marks, model.x[i]) : null;
    if (lastMark && (mean[i] === null || mean[i] === undefined)) {
      const note = multi ? nonfiniteNote(model.nonfinite, i) : "";
      return (
        <span class="muted" data-readout-step={String(model.x[i])}>
          {label}
          <b class="nonfinite">{lastMark.text}</b> at {xText(model.x[i], xMode)}
          {note ? <span class="nonfinite-note"> · {note}</span> : null}
        </span>
      );
    }
    while (!multi && i >= 0 && (mean[i] === null || mean[i] === undefined)) i--;
    const pending = model.pendingSteps;
    return (
      <span class="muted" data-readout-step={i >= 0 ? String(model.x[i]) : ""}>
        {i >= 0 ? (
          <>
            {label}
            <b>{fmtValue(mean[i])}</b> at {xText(model.x[i], xMode)}
          </>
        ) : null}
        {pending && live ? (
          <span class="partial-note" data-partial title={`${pending} step${pending === 1 ? "" : "s"} not every live rank has reached yet: their mean (of the ranks there so far) is drawn dashed and not quoted`}>
            {" "}· {pending} partial
          </span>
        ) : null}
        {pending && !live ? (
          <span class="partial-note" data-partial title={`${pending} step${pending === 1 ? "" : "s"} not every rank reached (its ranks ended at different steps): their mean, of the ranks that got there, is drawn dashed and not quoted; hover it for its values`}>
            {" "}· {pending} partial: {partialOf(model.n?.[model.n.length - 1], false, nRanks)}
          </span>
        ) : null}
      </span>
    );
  }
  const idx = hover.idx;
  const partial = multi && model.partial?.[idx];
  const mark = markAt(model.marks, hover.x);
  let v = partial ? model.pendingY?.[idx] : hover.values[model.lines.findIndex((l) => l.key === "mean")];
  if ((v === null || v === undefined) && mark) v = mark.text;
  // Ranks whose value here was NaN or ±Inf are left out of the mean: say how many.
  const note = multi ? nonfiniteNote(model.nonfinite, idx) : "";
  return (
    <span>
      <span class="muted">{xText(hover.x, xMode)}</span>{" "}
      {label}
      <b>{fmtValue(v)}</b>
      {note ? (
        <span class="nonfinite-note">
          {model.n?.[idx] > 0 ? (
            <span class="muted"> ({model.n[idx]} rank{model.n[idx] === 1 ? "" : "s"})</span>
          ) : null}
          {" "}· {note}
        </span>
      ) : null}
      {partial ? (
        <span class="partial-note"> partial: {partialOf(model.n?.[idx], live, nRanks)}</span>
      ) : null}
      {multi && hover.lo !== null ? (
        <span class="muted">
          {" "}[{fmtValue(hover.lo)}, {fmtValue(hover.hi)}]
        </span>
      ) : null}
      {hover.rank ? (
        <span class="rank-readout" style={{ "--c": hover.rank.color }}>
          {" "}
          {hover.rank.label} <b>{fmtValue(hover.rank.y)}</b>
        </span>
      ) : null}
    </span>
  );
}

/**
 * One metric of one run. In a run with several streams the chart shows the cross-rank
 * line (the metric's defined `reduce`, the mean unless defined; the others in the
 * card's line setting) with its min–max band (none under a sum) and, on demand, every
 * rank as a line; a single-stream run shows its one series.
 */
/** The chart's marker for the metric's first non-finite value (Chart.jsx drawFirstBad). */
function firstBadMark(f, xMode, rankInfo) {
  if (!f) return null;
  const who = f.rank >= 0 ? `r${f.rank}` : f.label;
  const kind = f.value === "+Inf" ? "Inf" : f.value;
  return {
    x: xMode === "time" ? f.time : f.step,
    label: `${kind} ${who} first`,
    text: `${kind} on ${f.rank >= 0 ? `rank ${f.rank}` : f.label} at step ${f.step}`,
    color: rankInfo?.get(f.label)?.color,
  };
}

export function RunChartCard(props) {
  const { project, runId, metric, settings, multi, showRanks, rankInfo, live, tracker } = props;
  // The labels whose lines are drawn (a big run's picker); null: every rank's.
  const lineLabels = props.lineLabels ?? null;
  const linesKey = lineLabels ? lineLabels.join(",") : "all";
  const [ref, seen, visible] = useCard(metric, tracker);
  const [hover, setHover] = useState(null);
  const [weighted, setWeighted] = useState(true);
  const [line, setLine] = useState(null); // null: the metric's defined line
  const zoom = settings.zoom;

  const nRanks = lineLabels ? lineLabels.length : rankInfo.size;
  const { data, error } = useLoad(
    async (signal) => {
      const width = ref.current?.clientWidth || 600;
      const base = { key: metric, x: settings.x };
      const main = multi ? { streams: "none", band: true } : { streams: "all", band: false };
      const prio = priorityOf(ref.current);
      const ask = (extra) =>
        charts.run(prio, () => api.series(project, runId, { ...base, ...extra }, { signal }), signal);
      const range = zoom ? { from: zoom[0], to: zoom[1] } : {};
      const P = pointsFor(width);
      const PR = pointsPerRank(width, nRanks);
      const wantRanks = multi && showRanks && nRanks > 0;
      const [c, f, rc, rf] = await Promise.all([
        ask({ ...main, max_points: P }),
        zoom ? ask({ ...main, ...range, max_points: P }) : null,
        wantRanks ? ask({ streams: linesKey, band: false, max_points: PR }) : null,
        wantRanks && zoom ? ask({ streams: linesKey, band: false, ...range, max_points: PR }) : null,
      ]);
      const [lo, hi] = zoom ?? [0, 0];
      return {
        band: multi ? tableBand(zoom ? mergeRange(bandTable(c.band), bandTable(f.band), lo, hi)
          : bandTable(c.band), c.band?.reduce) : null,
        series: zoom ? mergeSeriesList(c.series, f.series, lo, hi) : c.series,
        ranks: rc ? (rf ? mergeSeriesList(rc.series, rf.series, lo, hi) : rc.series) : null,
      };
    },
    [project, runId, metric, settings.x, zoom, showRanks, multi, nRanks, linesKey, ref],
    cardLoad(seen, live && visible),
  );

  const { smoothing, log } = settings;
  const model = useMemo(
    () => data && runModel(data, { smoothing, log }, multi, rankInfo, weighted, line),
    [data, smoothing, log, multi, rankInfo, weighted, line],
  );

  const badMark = useMemo(
    () => firstBadMark(props.firstBad, settings.x, rankInfo),
    [props.firstBad, settings.x, rankInfo],
  );
  const empty = model && !model.x.length && !(model.overlay?.length);
  useEffect(() => {
    if (tracker && (empty || error)) tracker.drawn(metric);
  }, [empty, error, tracker, metric]);

  let status = null;
  if (error) status = <span class="error-text">{error.message}</span>;
  else if (!model) status = seen ? <span class="muted">Loading…</span> : null;
  else if (empty) status = <span class="muted">No values{zoom ? " in this range" : " yet"}</span>;
  useEffect(() => {
    if (ref.current && (error || empty)) ref.current.dataset.state = error ? "error" : "empty";
  }, [error, empty, ref]);

  return (
    <CardFrame
      cardRef={ref}
      metric={metric}
      status={status}
      tools={multi && model?.line ? <LineSelect model={model} onChange={setLine} /> : null}
      report={<AddToReport project={project} runs={[`${project}/${runId}`]} metric={metric} settings={settings} ranks={showRanks} />}
      readout={
        <RunReadout
          hover={hover}
          model={model}
          xMode={settings.x}
          multi={multi}
          onToggleMean={() => setWeighted((w) => !w)}
          live={live}
          nRanks={nRanks}
        />
      }
    >
      {model && !empty ? (
        <Chart
          {...chartProps({
            model, settings, props, cardRef: ref, lines: model.overlay?.length ?? 0, metric, tracker,
            onHover: setHover,
          })}
          highlight={props.highlight}
          marks={props.marks}
          firstBad={badMark}
        />
      ) : null}
    </CardFrame>
  );
}

function runModel(data, settings, multi, rankInfo, weighted = true, line = null) {
  const { smoothing, log } = settings;
  const fix = log ? positiveOnly : gaps;
  let x = [];
  const lines = [];
  let band = null;
  const extra = {};
  if (multi) {
    const cols = bandColumns(data.band, { smoothing, log, weighted, line });
    if (cols) {
      x = cols.x;
      if (cols.raw) lines.push({ key: "raw", color: "raw", y: fix(cols.raw), width: 1 });
      // Among coloured rank lines the mean is drawn in the text colour, to stand apart.
      const ink = data.ranks ? "ink" : "accent";
      lines.push({ key: "mean", color: ink, y: cols.mean, width: 2 });
      if (cols.pending) {
        // Steps not every live rank has reached: faint and dashed, never the mean line.
        lines.push({ key: "partial", color: ink, y: cols.pending, width: 1.5, dash: [4, 4], alpha: 0.55 });
      }
      band = cols.min ? { lo: cols.min, hi: cols.max } : null; // none under a sum
      Object.assign(extra, {
        line: cols.line,
        defined: cols.defined,
        partial: cols.partial,
        pendingY: cols.pending,
        pendingSteps: cols.partial.filter(Boolean).length,
        lastComplete: cols.lastComplete,
        n: cols.n,
        marks: cols.marks,
        nonfinite: cols.nonfinite,
        hasWeights: cols.hasWeights,
        weighted: cols.hasWeights && weighted,
      });
    }
  } else if (data.series.length) {
    // One stream (or a run whose streams logged this key alone): its values, as logged.
    const s = data.series[0];
    x = s.x;
    extra.marks = nonfiniteMarks(s);
    const raw = fix(s.y);
    if (smoothing > 0) lines.push({ key: "raw", color: "raw", y: raw, width: 1 });
    lines.push({ key: "mean", color: "accent", y: fix(smooth(raw, smoothing)), width: 2 });
  }
  let overlay = null;
  if (data.ranks) {
    // The mean's own marks (steps where every rank was non-finite) first, as the readout
    // looks there; a rank's mark at such a step would only repeat it.
    const own = extra.marks ?? [];
    const at = new Set(own.map((m) => m.x));
    extra.marks = own.concat(
      data.ranks
        .flatMap((s) => nonfiniteMarks(s, rankInfo.get(s.label)?.color ?? null))
        .filter((m) => !at.has(m.x)),
    );
    overlay = data.ranks
      .map((s) => {
        const info = rankInfo.get(s.label) ?? { rank: 0, name: s.label, color: "#888" };
        return {
          key: s.label, label: info.name, color: info.color, rank: info.rank,
          x: s.x, y: fix(smooth(fix(s.y), smoothing)),
        };
      })
      .sort((a, b) => a.rank - b.rank);
  }
  return { x, lines, band, overlay, ...extra };
}

/**
 * One metric of several runs (Compare, Group): each run's cross-rank mean (its only
 * series when it has one stream), in the run's colour, aligned on one x axis.
 */
export function OverlayChartCard(props) {
  const { runs, metric, settings, live, tracker } = props;
  const [ref, seen, visible] = useCard(metric, tracker);
  const [hover, setHover] = useState(null);
  const [focusLine, setFocusLine] = useState(null);
  const zoom = settings.zoom;
  const refs = runs.map((r) => `${r.project}/${r.id}`);
  const runList = JSON.stringify(refs); // the request's runs, as a dependency

  const { data, error } = useLoad(
    async (signal) => {
      const width = ref.current?.clientWidth || 600;
      const body = {
        runs: JSON.parse(runList), key: metric, x: settings.x, max_points: pointsFor(width),
        streams: "none", band: true,
      };
      const prio = priorityOf(ref.current);
      const ask = (b) => charts.run(prio, () => api.compare(b, { signal }), signal);
      const [c, f] = await Promise.all([
        ask(body),
        zoom ? ask({ ...body, from: zoom[0], to: zoom[1] }) : null,
      ]);
      return c.runs.map((r, i) => {
        const t = bandTable(r.band);
        const merged = zoom ? mergeRange(t, bandTable(f.runs[i].band), zoom[0], zoom[1]) : t;
        return merged && { ...merged, reduce: r.band?.reduce };
      });
    },
    [metric, settings.x, zoom, runList, ref],
    cardLoad(seen, live && visible),
  );

  const model = useMemo(() => {
    if (!data) return null;
    const fix = settings.log ? positiveOnly : gaps;
    const present = [];
    data.forEach((t, i) => {
      if (t && t.x.length) {
        // A run's partial steps (not every live rank there yet) are not its mean.
        const part = t.cols.partial;
        // Each run's own line: its defined reduce (the weighted mean unless defined).
        const y = fix(lineColumn(t, t.reduce)).map((v, j) => (part?.[j] ? null : v));
        present.push({ run: runs[i], x: t.x, y: fix(smooth(y, settings.smoothing)) });
      }
    });
    const cols = alignSeries(present);
    return {
      x: cols[0],
      lines: present.map((p, i) => ({
        key: `${p.run.project}/${p.run.id}`, label: runTitle(p.run), color: p.run.color,
        y: cols[i + 1], width: 1.75,
      })),
      band: null,
      overlay: null,
      spanGaps: true,
      focus: true,
    };
  }, [data, settings.smoothing, settings.log, runs]);

  const empty = model && !model.x.length;
  useEffect(() => {
    if (tracker && (empty || error)) tracker.drawn(metric);
  }, [empty, error, tracker, metric]);

  let status = null;
  if (error) status = <span class="error-text">{error.message}</span>;
  else if (!model) status = seen ? <span class="muted">Loading…</span> : null;
  else if (empty) status = <span class="muted">None of these runs logged this metric{zoom ? " in this range" : ""}</span>;

  let readout = null;
  if (model && hover) {
    const i = focusLine ?? null;
    const line = i !== null ? model.lines[i] : null;
    readout = (
      <span>
        <span class="muted">{xText(hover.x, settings.x)}</span>
        {line ? (
          <span class="rank-readout" style={{ "--c": line.color }}>
            {" "}
            {line.label} <b>{fmtValue(hover.values[i])}</b>
          </span>
        ) : (
          <span class="muted"> · point at a line</span>
        )}
      </span>
    );
  } else if (model && !empty) {
    readout = <span class="muted">{model.lines.length} of {runs.length} runs</span>;
  }

  return (
    <CardFrame
      cardRef={ref}
      metric={metric}
      status={status}
      readout={readout}
      report={runs.length ? <AddToReport project={runs[0].project} runs={refs} metric={metric} settings={settings} ranks={false} /> : null}
    >
      {model && !empty ? (
        <Chart
          {...chartProps({
            model, settings, props, cardRef: ref, lines: model.lines.length, metric, tracker,
            onHover: setHover,
          })}
          onFocusLine={setFocusLine}
        />
      ) : null}
    </CardFrame>
  );
}
