// The stall message: "rank 5 stalled for 7 min in all_reduce at train.py:88", one line
// per stalled rank (the longest first), with the full stacks of every Python thread one
// click away. Stacks are asked for only then (GET .../health?stacks=true).

import { useState } from "preact/hooks";
import { api } from "../api.js";
import { href } from "../router.js";
import { orderedStacks, stallsOf } from "../lib/health.js";

const SHOWN = 3;

export function StallBanner({ run, health }) {
  const stalls = stallsOf(health);
  const [open, setOpen] = useState(null); // the label whose stacks are shown
  const [stacks, setStacks] = useState({ label: null, data: null, error: null });
  if (!stalls.length) return null;

  const toggle = (label) => {
    if (open === label) {
      setOpen(null);
      return;
    }
    setOpen(label);
    setStacks({ label, data: null, error: null });
    api.health(run.project, run.id, { stacks: true }).then(
      (h) => {
        const r = (h.ranks ?? []).find((x) => x.label === label);
        setStacks({ label, data: r?.stall?.stacks ?? {}, error: null });
      },
      (error) => setStacks({ label, data: null, error }),
    );
  };
  const more = stalls.length - SHOWN;
  return (
    <div class="callout stall-banner" data-stall-banner role="status">
      {stalls.slice(0, SHOWN).map((s) => (
        <p key={s.label}>
          <span class="stall-icon" aria-hidden="true" />
          <b>{s.message}</b>{" "}
          <button
            type="button"
            class="btn small"
            aria-expanded={open === s.label}
            onClick={() => toggle(s.label)}
          >
            {open === s.label ? "Hide stacks" : "Show stacks"}
            <span class="sr-only"> of {s.label}</span>
          </button>{" "}
          <a href={href.run(run.project, run.id, { tab: "logs", label: s.label })}>its logs</a>
        </p>
      ))}
      {more > 0 ? <p class="muted">and {more} more stalled {more === 1 ? "rank" : "ranks"}</p> : null}
      {open ? <Stacks label={open} state={stacks} /> : null}
    </div>
  );
}

function Stacks({ label, state }) {
  if (state.label !== label || (!state.data && !state.error)) {
    return <p class="muted" data-stall-stacks>Loading the stacks of {label}…</p>;
  }
  if (state.error) return <p class="error-text" data-stall-stacks>{String(state.error.message ?? state.error)}</p>;
  const threads = orderedStacks(state.data);
  if (!threads.length) return <p class="muted" data-stall-stacks>No stacks were recorded for {label}.</p>;
  return (
    <div class="stall-stacks" data-stall-stacks>
      <p class="muted small">
        Every Python thread of {label} when the watchdog reported the stall:
      </p>
      {threads.map(([thread, text]) => (
        <details key={thread} open={/main/i.test(thread)}>
          <summary>{thread}</summary>
          <pre class="traceback">{text}</pre>
        </details>
      ))}
    </div>
  );
}
