// The run page's Tables tab: one logged table at a time, read page by page from the
// tables route (the server sorts, filters and pages with DuckDB over the table's Parquet
// file, so a 100,000-row table never reaches the browser whole); image cells are lazy
// thumbnails of the blob route. Below it, one column compared across two steps.

import { useState } from "preact/hooks";
import { api, blobUrl } from "../../api.js";
import { useLoad } from "../../hooks.js";
import { TABLE_PAGE, cellView, compareColumn, filterHint, lastPage, pageRange, pickLabel, pickStep, tableParams } from "../../lib/media.js";
import { Empty, ErrorBox, Spinner } from "../../components/common.jsx";
import { RankPicker, StepSlider } from "../../components/MediaPanels.jsx";

export function TablesTab({ run, keys, primary }) {
  const [chosen, setChosen] = useState("");
  if (!keys.length) {
    return (
      <Empty title="No tables logged" icon="▤">
        Log one with <code>run.log({"{"}"predictions": rankwise.Table(columns=[…], data=[…]){"}"})</code>.
      </Empty>
    );
  }
  const mkey = keys.find((k) => k.key === chosen) ?? keys[0];
  return (
    <div class="tables-tab">
      {keys.length > 1 ? (
        <label class="table-key-pick">
          <span class="muted small">Table</span>
          <select value={mkey.key} aria-label="Table" onChange={(e) => setChosen(e.currentTarget.value)}>
            {keys.map((k) => <option key={k.key} value={k.key}>{k.key}</option>)}
          </select>
        </label>
      ) : null}
      <TableView key={mkey.key} run={run} mkey={mkey} primary={primary} />
    </div>
  );
}

function TableView({ run, mkey, primary }) {
  const [rank, setRank] = useState("");
  const [picked, setPicked] = useState(null);
  const [page, setPage] = useState(0);
  const [sort, setSort] = useState({ col: "", desc: false });
  const [filterCol, setFilterCol] = useState("");
  const [filter, setFilter] = useState("");
  const label = pickLabel(mkey.labels, rank, primary);
  // The reply's steps are this rank's (the key's are every rank's): the slider uses them.
  const [rankSteps, setRankSteps] = useState(null);
  const steps = rankSteps ?? mkey.steps;
  const step = pickStep(steps, picked);
  const params = tableParams({ key: mkey.key, label, step, page, sort: sort.col, desc: sort.desc, filterCol, filter });
  const sig = JSON.stringify(params);
  const table = useLoad(
    async (signal) => {
      const reply = await api.table(run.project, run.id, JSON.parse(sig), { signal });
      setRankSteps(reply.steps?.length ? reply.steps : null);
      return reply;
    },
    [run.project, run.id, sig],
    { keepOnError: true },
  );
  const data = table.data;
  const columns = data?.columns ?? [];
  const reset = (fn) => (...a) => {
    fn(...a);
    setPage(0);
  };
  const sortBy = (col) => {
    setSort((s) => (s.col === col ? (s.desc ? { col: "", desc: false } : { col, desc: true }) : { col, desc: false }));
    setPage(0);
  };
  const last = lastPage(data?.total);
  return (
    <section class="table-card card" data-table-key={mkey.key} aria-label={mkey.key}>
      <header class="media-card-head">
        <h3 class="media-key">{mkey.key}</h3>
        <span class="spacer" />
        <RankPicker labels={mkey.labels} value={label} onChange={reset((l) => { setRank(l); setRankSteps(null); })} />
        <StepSlider steps={steps} step={step} onChange={reset(setPicked)} />
      </header>
      <div class="toolbar table-tools">
        <label>
          <span class="muted small">Filter</span>{" "}
          <select value={filterCol} aria-label="Filter column" onChange={(e) => { setFilterCol(e.currentTarget.value); setPage(0); }}>
            <option value="">column…</option>
            {columns.map((c, i) => (data.types[i] === "image" ? null : <option key={c} value={c}>{c}</option>))}
          </select>
        </label>
        <input
          type="search"
          class="table-filter"
          placeholder={filterHint(filterCol, data?.types?.[columns.indexOf(filterCol)])}
          aria-label="Filter text"
          disabled={!filterCol}
          value={filter}
          onInput={(e) => { setFilter(e.currentTarget.value); setPage(0); }}
        />
        <span class="spacer" />
        <span class="muted small page-range">{data ? pageRange(data.offset ?? page * TABLE_PAGE, data.rows.length, data.total) : ""}</span>
        <button type="button" class="btn small" disabled={page === 0} onClick={() => setPage(0)} aria-label="First page">«</button>
        <button type="button" class="btn small" disabled={page === 0} onClick={() => setPage(page - 1)} aria-label="Previous page">‹</button>
        <button type="button" class="btn small" disabled={page >= last} onClick={() => setPage(page + 1)} aria-label="Next page">›</button>
        <button type="button" class="btn small" disabled={page >= last} onClick={() => setPage(last)} aria-label="Last page">»</button>
      </div>
      {table.error ? <ErrorBox error={table.error} onRetry={table.reload} /> : null}
      {!data && !table.error ? <Spinner /> : null}
      {data ? (
        <div class="table-wrap rich-table-wrap">
          <table class="rich-table" aria-busy={table.loading ? "true" : "false"}>
            <thead>
              <tr>
                {columns.map((c, i) => (
                  <th key={c} scope="col" aria-sort={sort.col === c ? (sort.desc ? "descending" : "ascending") : "none"}>
                    {data.types[i] === "image" ? c : (
                      <button type="button" class="sort" onClick={() => sortBy(c)} title={`Sort by ${c}`} aria-label={`Sort by ${c}`}>
                        {c}
                        {sort.col === c ? <span class="arrow" aria-hidden="true">{sort.desc ? "▼" : "▲"}</span> : null}
                      </button>
                    )}
                  </th>
                ))}
              </tr>
            </thead>
            <tbody>
              {data.rows.map((row, r) => (
                <tr key={page * 1000 + r}>
                  {row.map((v, i) => <Cell key={i} project={run.project} value={v} type={data.types[i]} />)}
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      ) : null}
      {data && steps.length > 1 ? (
        <CompareSteps run={run} mkey={mkey} steps={steps} label={label} columns={columns} types={data.types} step={step} />
      ) : null}
    </section>
  );
}

function Cell({ project, value, type }) {
  const view = cellView(value, type);
  if (view.image) {
    return (
      <td class="img-cell">
        <img src={blobUrl(project, view.image)} loading="lazy" alt="" class="thumb" />
      </td>
    );
  }
  return <td>{view.text}</td>;
}

/**
 * One column of this table at two of its steps, side by side: rows matched by the
 * first column (an id, in the usual predictions table), first page of each.
 */
function CompareSteps({ run, mkey, steps, label, columns, types, step }) {
  const choices = columns.filter((_, i) => types[i] !== "image");
  const [column, setColumn] = useState("");
  const [other, setOther] = useState(null);
  const [open, setOpen] = useState(false); // asks only once opened
  const col = choices.includes(column) ? column : choices[choices.length - 1] ?? "";
  // Against the first step by default (the last when this is the first).
  const stepB = pickStep(steps, other ?? (step === steps[0] ? steps[steps.length - 1] : steps[0]));
  const by = columns[0];
  const loaded = useLoad(
    async (signal) => {
      if (!col) return null;
      const ask = (s) => api.table(run.project, run.id, { key: mkey.key, label, step: s, offset: 0, limit: 100, sort: by }, { signal });
      const [a, b] = await Promise.all([ask(step), ask(stepB)]);
      return compareColumn(a, b, col, by);
    },
    [run.project, run.id, mkey.key, label, step, stepB, col, by],
    { enabled: open },
  );
  return (
    <details class="compare-steps" onToggle={(e) => setOpen(e.currentTarget.open)}>
      <summary>Compare a column across steps</summary>
      <div class="toolbar">
        <label>
          <span class="muted small">Column</span>{" "}
          <select value={col} aria-label="Column to compare" onChange={(e) => setColumn(e.currentTarget.value)}>
            {choices.map((c) => <option key={c} value={c}>{c}</option>)}
          </select>
        </label>
        <StepSlider steps={steps} step={stepB} onChange={setOther} label="Against step" />
      </div>
      {loaded.error ? <ErrorBox error={loaded.error} /> : null}
      {loaded.data ? (
        <div class="table-wrap">
          <table class="rich-table compare-table">
            <thead>
              <tr><th scope="col">{by}</th><th scope="col">{col} @ {step}</th><th scope="col">{col} @ {stepB}</th></tr>
            </thead>
            <tbody>
              {loaded.data.map((r) => (
                <tr key={JSON.stringify(r.key)} class={r.changed ? "changed" : ""}>
                  <td>{cellView(r.key, "").text}</td>
                  <td>{cellView(r.a, "").text}</td>
                  <td>{cellView(r.b, "").text}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      ) : null}
    </details>
  );
}
