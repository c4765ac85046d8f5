// Parallel coordinates of the runs table: one vertical axis per chosen config key and
// one for a summary metric, one line per run (SVG, no library). Dragging along an axis
// brushes a range: it becomes that field's $gte/$lte in the filter builder's filter, so
// the table (and the URL, and a saved view) filter to it; a click on the axis clears it.

import { useRef, useState } from "preact/hooks";
import { configValue } from "../lib/runsModel.js";
import { runColor } from "../lib/colors.js";

const W = 760;
const H = 240;
const PAD = { top: 24, bottom: 28, left: 40, right: 40 };

function scaleOf(values) {
  const xs = values.filter((v) => typeof v === "number" && Number.isFinite(v));
  if (!xs.length) return null;
  let lo = Math.min(...xs);
  let hi = Math.max(...xs);
  if (lo === hi) { lo -= 0.5; hi += 0.5; }
  const span = H - PAD.top - PAD.bottom;
  return {
    lo, hi,
    y: (v) => PAD.top + (1 - (v - lo) / (hi - lo)) * span,
    v: (y) => lo + (1 - (y - PAD.top) / span) * (hi - lo),
  };
}

const fmt = (v) => (Math.abs(v) >= 1e4 || (Math.abs(v) < 1e-3 && v !== 0) ? v.toExponential(2) : String(+v.toPrecision(4)));

export function ParallelCoords({ runs, axes, metric, onBrush }) {
  const fields = [...axes.map((k) => ({ key: k, field: `config.${k}`, get: (r) => configValue(r, k) }))];
  if (metric) fields.push({ key: metric, field: `summary.${metric}`, get: (r) => r.summary?.[metric] });
  const [drag, setDrag] = useState(null);
  const svg = useRef(null);
  if (fields.length < 2) {
    return <p class="muted small" data-parcoords-empty>Choose at least two axes: config keys and a summary metric.</p>;
  }
  const step = (W - PAD.left - PAD.right) / (fields.length - 1);
  const axisX = (i) => PAD.left + i * step;
  const scales = fields.map((f) => scaleOf(runs.map(f.get)));
  // A brush ending within a few pixels of an axis's end snaps to it (its extreme run).
  const yOf = (e) => {
    const box = svg.current.getBoundingClientRect();
    const y = ((e.clientY - box.top) / box.height) * H;
    if (y < PAD.top + 4) return PAD.top;
    if (y > H - PAD.bottom - 4) return H - PAD.bottom;
    return y;
  };
  const end = (e) => {
    if (!drag) return;
    const sc = scales[drag.i];
    const y1 = yOf(e);
    setDrag(null);
    if (!sc) return;
    if (Math.abs(y1 - drag.y0) < 3) return onBrush(fields[drag.i].field, null, null);
    const a = sc.v(Math.max(drag.y0, y1));
    const b = sc.v(Math.min(drag.y0, y1));
    onBrush(fields[drag.i].field, +a.toPrecision(6), +b.toPrecision(6));
  };
  return (
    <div class="parcoords" data-parcoords>
      <svg ref={svg} viewBox={`0 0 ${W} ${H}`} role="img" aria-label="Parallel coordinates of the runs"
        onPointerUp={end} onPointerLeave={() => setDrag(null)}>
        <g class="lines">
          {runs.map((r, idx) => {
            const pts = fields.map((f, i) => {
              const v = f.get(r);
              return scales[i] && typeof v === "number" && Number.isFinite(v) ? `${axisX(i)},${scales[i].y(v)}` : null;
            });
            if (pts.some((p) => p === null)) return null;
            return <polyline key={r.id} data-line={r.id} points={pts.join(" ")} fill="none" stroke={runColor(idx)} stroke-width="1.5" opacity="0.8" />;
          })}
        </g>
        {fields.map((f, i) => (
          <g key={f.field} class="axis" data-axis={f.field}>
            <line x1={axisX(i)} x2={axisX(i)} y1={PAD.top} y2={H - PAD.bottom} stroke="currentColor" />
            <text x={axisX(i)} y={H - 8} text-anchor="middle" class="axis-label">{f.key}</text>
            {scales[i] ? (
              <>
                <text x={axisX(i) + 4} y={PAD.top - 6} class="tick">{fmt(scales[i].hi)}</text>
                <text x={axisX(i) + 4} y={H - PAD.bottom + 12} class="tick">{fmt(scales[i].lo)}</text>
              </>
            ) : null}
            <rect x={axisX(i) - 12} y={PAD.top} width="24" height={H - PAD.top - PAD.bottom} fill="transparent"
              class="brush" data-brush={f.field} style="cursor: crosshair"
              onPointerDown={(e) => { e.preventDefault(); setDrag({ i, y0: yOf(e) }); }} />
          </g>
        ))}
      </svg>
    </div>
  );
}
