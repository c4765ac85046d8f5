// The run page's failure banner: the run's first failure — the cause — leads, the ranks
// that failed after it follow as "then" (docs/http-api.md, `first_failure`). User text
// (labels, messages) is rendered as text only.

import { href } from "../router.js";
import { fmtTime } from "../lib/format.js";
import { after, what, who } from "../lib/failures.js";

export function FailureBanner({ run }) {
  const first = run.first_failure;
  if (!first) return null;
  const when = first.state === "crashed" || first.state === "silent" ? "last sign of life" : "at";
  return (
    <div class="callout bad failure-banner" data-first-failure data-label={first.label}>
      <p data-cause>
        <span class="ff-tag">first failure</span> <b>{who(first)}</b> {what(first)}{" "}
        <span class="muted small">({when} {fmtTime(first.time)})</span>
      </p>
      {first.then?.length ? (
        <div class="ff-then">
          <span class="muted">then</span>
          <ul data-then>
            {first.then.map((f) => (
              <li key={f.label} data-label={f.label} title={`${who(f)} ${what(f)}`}>
                <b>{who(f)}</b> <span class="muted small">{after(first, f)}</span> {what(f)}
              </li>
            ))}
          </ul>
        </div>
      ) : null}
      {run.unsynced ? (
        <p class="ff-unsynced" data-unsynced>
          Crashed streams may hold records not yet uploaded
          {run.unsynced.hosts?.length ? ` (their files are on ${run.unsynced.hosts.join(", ")})` : ""}. Upload them with{" "}
          <code>{run.unsynced.command}</code>
        </p>
      ) : null}
      <p class="ff-links">
        <a href={href.run(run.project, run.id, { tab: "logs", label: first.label })}>{who(first)}'s logs</a>
        <a href={href.run(run.project, run.id, { tab: "streams" })}>Details in Streams</a>
      </p>
    </div>
  );
}
