// Small shared pieces: state badges, empty states, errors, tabs, segmented controls.

import { fmtCrashed } from "../lib/format.js";

export function StateBadge({ state, crashed }) {
  const s = state ?? "unknown";
  return (
    <span class={`state state-${s}`} title={crashed?.length ? `crashed: ${crashed.join(", ")}` : s}>
      <span class="dot" aria-hidden="true" />
      {s}
      {s === "crashed" && crashed?.length ? (
        <span class="crashed-ranks">{fmtCrashed(crashed)}</span>
      ) : null}
    </span>
  );
}

export function Empty({ title, children, icon = "◌" }) {
  return (
    <div class="empty" role="status">
      <div class="empty-icon" aria-hidden="true">{icon}</div>
      <h3>{title}</h3>
      <div class="empty-body">{children}</div>
    </div>
  );
}

export function ErrorBox({ error, onRetry }) {
  if (!error) return null;
  return (
    <div class="error-box" role="alert">
      <strong>{error.status === 404 ? "Not found" : error.status === 503 ? "Unavailable" : "Something went wrong"}</strong>
      <span>{String(error.message ?? error)}</span>
      {onRetry ? (
        <button type="button" class="btn small" onClick={onRetry}>
          Retry
        </button>
      ) : null}
    </div>
  );
}

export function Spinner({ label = "Loading…" }) {
  return (
    <div class="spinner" role="status" aria-live="polite">
      <span class="spin" aria-hidden="true" />
      {label}
    </div>
  );
}

/** Tabs as links-like buttons; `tabs` is [{id, label, count?}]. */
export function Tabs({ tabs, current, onSelect }) {
  return (
    <div class="tabs" role="tablist">
      {tabs.map((t) => (
        <button
          type="button"
          role="tab"
          key={t.id}
          id={`tab-${t.id}`}
          aria-selected={t.id === current}
          class={t.id === current ? "tab active" : "tab"}
          onClick={() => onSelect(t.id)}
        >
          {t.label}
          {t.count !== undefined ? <span class="count">{t.count}</span> : null}
        </button>
      ))}
    </div>
  );
}

/** A row of mutually exclusive buttons; `options` is [{value, label, title?}]. */
export function Segmented({ options, value, onChange, label }) {
  return (
    <div class="segmented" role="group" aria-label={label}>
      {options.map((o) => (
        <button
          type="button"
          key={o.value}
          title={o.title}
          aria-pressed={o.value === value}
          class={o.value === value ? "on" : ""}
          onClick={() => onChange(o.value)}
        >
          {o.label}
        </button>
      ))}
    </div>
  );
}

export function Tag({ children }) {
  return <span class="tag">{children}</span>;
}

/** A copy-pasteable code sample for empty states. */
export function Code({ children }) {
  return <pre class="code">{children}</pre>;
}
