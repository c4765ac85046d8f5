// The rank picker of a run with more ranks than a chart draws lines for (issue 26):
// search by rank, range, node or host, or take the ranks furthest from the cross-rank
// median ("outliers", from GET .../heatmap's scores); the charts draw the chosen ranks'
// lines, at most MAX_LINES of them, and say so when more are chosen.

import { useState } from "preact/hooks";
import { MAX_LINES, capLines, outliers, pickRanks } from "../lib/ranks.js";
import "./ranks.css";

export function RankPicker({ info, chosen, setChosen, pinned, setPinned, setHover, loadOutliers, outlierKey }) {
  const [query, setQuery] = useState("");
  const [n, setN] = useState(8);
  const [note, setNote] = useState("");
  const ranks = [...info.entries()].map(([label, r]) => ({ label, rank: r.rank, node: r.node, host: r.host }));
  const { shown, dropped } = capLines(chosen);
  const choose = (labels, add) => {
    const next = add ? [...new Set([...chosen, ...labels])] : labels;
    setChosen(next);
    return next;
  };
  const search = (add) => {
    const got = pickRanks(query, ranks);
    setNote(got.length ? "" : `No rank matches “${query}”.`);
    if (got.length) choose(got, add);
  };
  const takeOutliers = async () => {
    setNote("Finding the ranks furthest from the median…");
    try {
      const rows = await loadOutliers();
      const got = outliers(rows, n);
      setNote(got.length ? `The ${got.length} ranks furthest from the median of ${outlierKey}.` : "No rank has values to compare.");
      choose(got, false);
    } catch (e) {
      setNote(`Could not read the outliers: ${e.message ?? e}`);
    }
  };
  return (
    <div class="rank-chooser" data-rank-picker aria-label="Ranks to draw">
      <form
        class="rank-search"
        onSubmit={(e) => {
          e.preventDefault();
          search(false);
        }}
      >
        <input
          type="search"
          value={query}
          placeholder="Ranks: 17, 0-63, node 5, a host…"
          aria-label="Find ranks by number, range, node or host"
          data-rank-search
          onInput={(e) => setQuery(e.currentTarget.value)}
        />
        <button type="submit" data-rank-show>Show</button>
        <button type="button" data-rank-add onClick={() => search(true)}>Add</button>
        <span class="rank-outliers">
          <button type="button" data-rank-outliers onClick={takeOutliers} title={`The ranks whose ${outlierKey} sits furthest from the cross-rank median`}>
            Outliers
          </button>
          <input
            type="number"
            min="1"
            max={MAX_LINES}
            value={n}
            aria-label="How many outliers"
            data-rank-outliers-n
            onInput={(e) => setN(Math.max(1, Math.min(MAX_LINES, Number(e.currentTarget.value) || 1)))}
          />
        </span>
        {chosen.length ? <button type="button" data-rank-clear onClick={() => { setChosen([]); setNote(""); }}>Clear</button> : null}
      </form>
      <p class="muted small" data-rank-note>
        {note ? `${note} ` : ""}
        {chosen.length
          ? `Drawing ${shown.length} of ${ranks.length} ranks' lines.`
          : `${ranks.length} ranks: choose the ones whose lines to draw (at most ${MAX_LINES} a chart); the band shows them all.`}
        {dropped ? <span class="rank-cap" data-rank-cap> {dropped} more chosen are not drawn: at most {MAX_LINES} lines a chart.</span> : null}
      </p>
      {shown.length ? (
        <div class="rank-chips">
          {shown.map((label) => {
            const r = info.get(label);
            return (
              <span key={label} class={pinned === label ? "rank-chip on" : "rank-chip"} style={{ "--c": r?.color }}>
                <button
                  type="button"
                  class="rank-chip-name"
                  aria-pressed={pinned === label}
                  title={r ? `${label} · node ${r.node} · ${r.host}` : label}
                  onMouseEnter={() => setHover(label)}
                  onMouseLeave={() => setHover(null)}
                  onClick={() => setPinned(pinned === label ? null : label)}
                  data-chosen={label}
                >
                  <span class="swatch" aria-hidden="true" />
                  {label}
                </button>
                <button type="button" class="rank-chip-x" aria-label={`Stop drawing ${label}`} onClick={() => setChosen(chosen.filter((l) => l !== label))}>×</button>
              </span>
            );
          })}
        </div>
      ) : null}
    </div>
  );
}
