// The run page's diagnosis banners, above the health strip (docs/http-api.md): the hang
// report — who waits where, the odd ones out first, which collective — with each rank one
// click from its stacks; and the divergence — the rank that went non-finite first, per
// metric. User text (labels, places, stacks) is rendered as text only.

import { useState } from "preact/hooks";
import { api } from "../api.js";
import { orderedStacks } from "../lib/health.js";
import { hangRows } from "../lib/diagnosis.js";

function who(r) {
  return r.rank >= 0 ? `rank ${r.rank}` : r.label;
}

export function HangBanner({ run }) {
  const hang = run.hang;
  const [open, setOpen] = useState(null); // {label, stacks, error}
  if (!hang) return null;
  const show = (label) => {
    if (open?.label === label) return setOpen(null);
    setOpen({ label, stacks: null, error: null });
    api.stalls(run.project, run.id, { label, limit: 1 }).then(
      (r) => setOpen({ label, stacks: r.stalls?.[0]?.stacks ?? {}, error: null }),
      (error) => setOpen({ label, stacks: null, error }),
    );
  };
  const rest = hang.lines.slice(1).filter((l) => l.startsWith("collective #") || l.startsWith("still logging") || / (failed|crashed|killed|finished)$/.test(l));
  return (
    <div class="callout bad hang-banner" data-hang-report role="status">
      <p data-hang-message>
        <span class="ff-tag">hang</span> <b>{hang.message}</b>
      </p>
      <ul class="hang-rows">
        {hangRows(hang).map((row) => (
          <li key={row.where} class={row.odd ? "hang-odd" : ""}>
            {row.ranks.map((r, i) => (
              <span key={r.label} data-odd={row.odd ? r.label : undefined} data-rank-label={r.label}>
                {i ? ", " : ""}
                <button
                  type="button"
                  class="linkish"
                  title={`Show the stacks of ${who(r)}`}
                  aria-expanded={open?.label === r.label}
                  onClick={() => show(r.label)}
                >
                  {who(r)}
                </button>
              </span>
            ))}{" "}
            <span class="muted">{row.odd ? (row.where === "still logging" ? "still logging" : `in ${row.where}`) : `wait in ${row.where}`}</span>
          </li>
        ))}
      </ul>
      {rest.map((line) => <p key={line} class="small" data-hang-line>{line}</p>)}
      {open ? <HangStacks state={open} /> : null}
    </div>
  );
}

function HangStacks({ state }) {
  if (state.error) return <p class="error-text" data-hang-stack>{String(state.error.message ?? state.error)}</p>;
  if (!state.stacks) return <p class="muted" data-hang-stack>Loading the stacks of {state.label}…</p>;
  const threads = orderedStacks(state.stacks);
  if (!threads.length) return <p class="muted" data-hang-stack>No stacks were recorded for {state.label}.</p>;
  return (
    <div class="stall-stacks" data-hang-stack data-label={state.label}>
      <p class="muted small">Every Python thread of {state.label} when it stalled:</p>
      {threads.map(([thread, text]) => (
        <details key={thread} open={/main/i.test(thread)}>
          <summary>{thread}</summary>
          <pre class="traceback">{text}</pre>
        </details>
      ))}
    </div>
  );
}

export function DivergenceBanner({ run }) {
  const list = run.divergence ?? [];
  if (!list.length) return null;
  return (
    <div class="callout bad divergence-banner" data-divergence role="status">
      {list.slice(0, 4).map((d) => (
        <p key={d.metric} data-metric={d.metric}>
          <span class="ff-tag">non-finite</span> {d.message}
        </p>
      ))}
      {list.length > 4 ? <p class="muted small">and {list.length - 4} more metrics</p> : null}
    </div>
  );
}
