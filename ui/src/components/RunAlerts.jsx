// The run page's alerts: the events the run raised (failed, hang, nonfinite, ...) and, per
// destination, whether each was delivered (docs/alerts.md). Hidden for a run without any,
// and on a server without the route (older: 404). User text is rendered as text only.

import { api } from "../api.js";
import { useLoad } from "../hooks.js";
import { fmtTime } from "../lib/format.js";

const ALERTS_MS = 5000;

export function RunAlerts({ run }) {
  const alerts = useLoad(
    (signal) => api.runAlerts(run.project, run.id, { signal }).catch((e) => (e.status === 404 ? { alerts: [] } : Promise.reject(e))),
    [run.project, run.id],
    // Asked again while anything may change: a running run raises more, a pending
    // delivery may go through long after the run ended.
    { interval: ALERTS_MS, keepOnError: true },
  );
  const list = alerts.data?.alerts ?? [];
  if (!list.length) return null;
  return (
    <section class="callout run-alerts" data-alerts aria-label="Alerts">
      <p class="ra-head"><b>Alerts</b> <span class="muted small">{list.length} raised</span></p>
      <ul>
        {list.map((a) => (
          <li key={a.id} data-alert={a.kind} class={`ra-${a.level.toLowerCase()}`}>
            <span class="ra-kind">{a.kind}</span> <b>{a.title}</b>{" "}
            <span class="muted small">{fmtTime(a.time)}</span>
            {a.text ? <div class="small ra-text">{a.text}</div> : null}
            <span class="ra-deliveries">
              {a.deliveries.map((d) => (
                <span key={d.destination} class={`ra-delivery ra-${d.state}`} data-delivery={d.state}
                  title={d.last_error ? `last error: ${d.last_error}` : undefined}>
                  {d.kind} {d.target}: {d.state}
                  {d.state !== "delivered" && d.attempts ? ` (${d.attempts} attempt${d.attempts === 1 ? "" : "s"})` : ""}
                </span>
              ))}
              {a.deliveries.length ? null : <span class="muted small">no destination wanted it</span>}
            </span>
          </li>
        ))}
      </ul>
    </section>
  );
}
