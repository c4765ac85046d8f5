// The chart area shared by the Run, Group and Compare pages: a toolbar (metric search,
// x axis, log scale, smoothing, optionally per-rank lines), then one section per key
// prefix ("train/", "val/"), each a grid of lazily drawn chart cards.

import { useMemo, useState } from "preact/hooks";
import { filterKeys, sections } from "../lib/metrics.js";
import { Empty, Segmented } from "./common.jsx";

export const X_OPTIONS = [
  { value: "step", label: "Step" },
  { value: "time", label: "Wall time" },
];

/** The chart settings every card reads; `set(patch)` updates them. */
export function ChartToolbar({ settings, set, search, setSearch, total, shown, children }) {
  return (
    <div class="toolbar chart-toolbar">
      <label class="search">
        <span class="sr-only">Search metrics</span>
        <input
          type="search"
          data-search
          placeholder="Search metrics (press /)"
          value={search}
          onInput={(e) => setSearch(e.currentTarget.value)}
        />
      </label>
      <span class="muted small" aria-live="polite">
        {shown === total ? `${total} metrics` : `${shown} of ${total} metrics`}
      </span>
      <span class="spacer" />
      {children}
      <Segmented
        label="x axis"
        options={X_OPTIONS}
        value={settings.x}
        onChange={(x) => set({ x, zoom: null })}
      />
      <label class="check" title="Logarithmic y axis">
        <input
          type="checkbox"
          checked={settings.log}
          onChange={(e) => set({ log: e.currentTarget.checked })}
        />
        Log
      </label>
      <label class="smoothing" title="Exponential moving average of the lines (0 = off)">
        Smoothing
        <input
          type="range"
          min="0"
          max="0.99"
          step="0.01"
          value={settings.smoothing}
          onInput={(e) => set({ smoothing: Number(e.currentTarget.value) })}
        />
        <output>{settings.smoothing.toFixed(2)}</output>
      </label>
      {settings.zoom ? (
        <button type="button" class="btn small" onClick={() => set({ zoom: null })}>
          Reset zoom
        </button>
      ) : null}
    </div>
  );
}

/** Search state plus the filtered, sectioned keys. */
export function useMetricSearch(keys) {
  const [search, setSearch] = useState("");
  const filtered = useMemo(() => filterKeys(keys ?? [], search), [keys, search]);
  const grouped = useMemo(() => sections(filtered), [filtered]);
  return { search, setSearch, filtered, grouped };
}

/** Sections of cards; `renderCard(key)` draws one metric. Sections can be folded. */
export function MetricSections({ grouped, renderCard, search, onClear }) {
  const [folded, setFolded] = useState(() => new Set());
  if (!grouped.length) {
    return (
      <Empty title={`No metric matches “${search}”`} icon="⌕">
        <p>Search matches every word anywhere in a metric's name; /regex/ works too.</p>
        <button type="button" class="btn" onClick={onClear}>
          Clear the search
        </button>
      </Empty>
    );
  }
  const toggle = (name) => {
    const next = new Set(folded);
    if (next.has(name)) next.delete(name);
    else next.add(name);
    setFolded(next);
  };
  return (
    <div class="sections">
      {grouped.map((s) => (
        <section class="metric-section" key={s.name || "(other)"} data-section={s.name}>
          <h3>
            <button
              type="button"
              class="fold"
              aria-expanded={!folded.has(s.name)}
              onClick={() => toggle(s.name)}
            >
              <span class="chev" aria-hidden="true">{folded.has(s.name) ? "▸" : "▾"}</span>
              {s.name ? `${s.name}/` : "other"}
              <span class="count">{s.keys.length}</span>
            </button>
          </h3>
          {folded.has(s.name) ? null : (
            <div class="chart-grid">{s.keys.map((k) => renderCard(k))}</div>
          )}
        </section>
      ))}
    </div>
  );
}
