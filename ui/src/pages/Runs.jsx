// The Runs page: a project's runs as a table with filters, sorting, grouping, chosen
// summary columns, saved views in the sidebar, and a selection that opens Compare.

import { useEffect, useMemo, useRef, useState } from "preact/hooks";
import { api } from "../api.js";
import { useLoad, useNow, useTypedValue } from "../hooks.js";
import { href, navigate } from "../router.js";
import { fmtDuration, fmtRanks, fmtShortTime, fmtTime, fmtValue, runDuration, runRank } from "../lib/format.js";
import { numericSummaryKeys, summaryValue } from "../lib/metrics.js";
import { cellText, what } from "../lib/failures.js";
import { divergenceNote } from "../lib/diagnosis.js";
import { Empty, ErrorBox, Spinner, StateBadge, Tag } from "../components/common.jsx";
import {
  STATES, apiParams, clientSort, facets, filtersFromParams, filtersFromView, groupRuns,
  aggregate, configKeys, isFiltered, paramsFromFilters, parseFilter, parseSort, searchBody,
  viewFromFilters, withRange,
} from "../lib/runsModel.js";
import { ParallelCoords } from "../components/ParallelCoords.jsx";
import { BulkTags, FilterBuilder, InlineName } from "../components/RunEdit.jsx";
import { DeleteRuns, Trash } from "../components/RunDelete.jsx";
import { canEdit } from "../lib/access.js";

const POLL_MS = 2000;

export function RunsPage({ project, params, who }) {
  // Run edit controls (rename, bulk tags) for writers only (src/lib/access.js).
  const editable = canEdit(who, project);
  const f = useMemo(() => filtersFromParams(params), [params]);
  const set = (patch, { keepView = false } = {}) => {
    const next = { ...f, ...patch };
    if (!keepView) next.view = "";
    navigate(href.runs(project, paramsFromFilters(next)), { replace: true });
  };
  // A filter from the builder goes to the server's search (W&B's MongoDB-style filters).
  const searching = parseFilter(f.filter) !== null;
  const key = JSON.stringify(searching ? searchBody(f) : apiParams(f));
  const runs = useLoad(
    (signal) => (searching ? api.searchRuns(project, JSON.parse(key), { signal }) : api.runs(project, JSON.parse(key), { signal })),
    [project, key, searching],
    POLL_MS,
  );
  // Filter choices come from the project's runs regardless of the current filters.
  const all = useLoad((signal) => api.runs(project, { limit: 1000 }, { signal }), [project], 10000);
  const views = useLoad((signal) => api.views(project, { signal }), [project]);
  const [selected, setSelected] = useState(() => new Set());
  const [showTrash, setShowTrash] = useState(false);
  useEffect(() => setSelected(new Set()), [project]);

  const choices = useMemo(() => facets(all.data?.runs ?? []), [all.data]);
  const summaryKeys = useMemo(() => numericSummaryKeys(all.data?.runs ?? []), [all.data]);
  const cfgKeys = useMemo(() => configKeys(all.data?.runs ?? []), [all.data]);
  const numericCfg = useMemo(() => configKeys(all.data?.runs ?? [], true), [all.data]);

  return (
    <div class="with-sidebar">
      <Sidebar project={project} f={f} views={views} />
      <main class="main runs-page">
        <header class="page-head">
          <div>
            <h1>{project}</h1>
            <p class="muted">
              {runs.data ? `${runs.data.total} run${runs.data.total === 1 ? "" : "s"}` : "\u00a0"}
              {f.view ? <> · view <b>{f.view}</b></> : null}
            </p>
          </div>
          <div class="head-actions">
            <a class="btn" href={href.artifacts(project)} title="The versioned files and models of this project">
              Artifacts
            </a>
            <a class="btn" href={href.reports(project)} title="Pages of text and live charts, shared by URL" data-reports-link>
              Reports
            </a>
            <button
              type="button"
              class={`btn${showTrash ? " active" : ""}`}
              aria-pressed={showTrash}
              onClick={() => setShowTrash(!showTrash)}
              title="Deleted runs, restorable until the server purges them"
              data-trash-toggle
            >
              Trash
            </button>
            <SaveView project={project} f={f} onSaved={(name) => { views.reload(); set({ view: name }, { keepView: true }); }} />
            <a
              class={`btn primary${selected.size >= 2 ? "" : " disabled"}`}
              aria-disabled={selected.size < 2}
              href={selected.size >= 2 ? href.compare([...selected]) : undefined}
              title={selected.size >= 2 ? "Overlay the selected runs" : "Select two or more runs to compare"}
            >
              Compare{selected.size ? ` (${selected.size})` : ""}
            </a>
          </div>
        </header>
        <Filters f={f} set={set} choices={choices} summaryKeys={summaryKeys} />
        <GroupControls f={f} set={set} cfgKeys={cfgKeys} numericCfg={numericCfg} summaryKeys={summaryKeys} />
        {f.pc.length && runs.data ? (
          <ParallelCoords
            runs={runs.data.runs}
            axes={f.pc.filter((k) => k !== "~")}
            metric={f.agg}
            onBrush={(field, lo, hi) => set({ filter: withRange(f.filter, field, lo, hi) }, { keepView: true })}
          />
        ) : null}
        {editable ? <BulkTags project={project} selected={selected} onDone={() => { runs.reload(); all.reload(); }} /> : null}
        {editable ? (
          <DeleteRuns
            project={project}
            selected={selected}
            filters={searching ? parseFilter(f.filter) : null}
            onDone={() => { setSelected(new Set()); runs.reload(); all.reload(); }}
          />
        ) : null}
        {showTrash ? <Trash project={project} onRestored={() => { runs.reload(); all.reload(); }} /> : null}
        <ErrorBox error={runs.error} onRetry={runs.reload} />
        {runs.data === undefined && !runs.error ? <Spinner /> : null}
        {runs.data ? (
          runs.data.runs.length ? (
            <RunsTable
              project={project}
              editable={editable}
              runs={runs.data.runs}
              total={runs.data.total}
              openAlerts={runs.data.open_alerts ?? {}}
              f={f}
              set={set}
              selected={selected}
              setSelected={setSelected}
              reload={runs.reload}
            />
          ) : (
            <NoRuns
              filtered={isFiltered(f)}
              onClear={() => set({ state: [], group: "", job_type: "", tag: [], q: "", filter: "" })}
            />
          )
        ) : null}
      </main>
    </div>
  );
}

function NoRuns({ filtered, onClear }) {
  if (filtered) {
    return (
      <Empty title="No run matches these filters" icon="⌕">
        <button type="button" class="btn" onClick={onClear}>Clear the filters</button>
      </Empty>
    );
  }
  return (
    <Empty title="This project has no runs yet">
      <p>Runs appear here, live, as soon as a training process calls <code>rankwise.init()</code>.</p>
    </Empty>
  );
}

function Sidebar({ project, f, views }) {
  const projects = useLoad((signal) => api.projects({ signal }), []);
  const list = views.data?.views ?? [];
  const quick = [
    { label: "All runs", filters: {} },
    { label: "Running", filters: { state: ["running"] } },
    { label: "Crashed", filters: { state: ["crashed"] } },
    { label: "Failed or killed", filters: { state: ["failed", "killed"] } },
  ];
  const remove = async (name) => {
    if (!window.confirm(`Delete the saved view “${name}”?`)) return;
    await api.deleteView(project, name);
    views.reload();
    if (f.view === name) navigate(href.runs(project, paramsFromFilters({ ...f, view: "" })), { replace: true });
  };
  return (
    <aside class="sidebar" aria-label="Projects and views">
      {projects.data && projects.data.projects.length > 1 ? (
        <nav class="side-block">
          <h2>Projects</h2>
          <ul>
            {projects.data.projects.map((p) => (
              <li key={p.name}>
                <a href={href.runs(p.name)} class={p.name === project ? "active" : ""}>
                  {p.name} <span class="count">{p.runs}</span>
                </a>
              </li>
            ))}
          </ul>
        </nav>
      ) : null}
      <nav class="side-block">
        <h2>Quick filters</h2>
        <ul>
          {quick.map((q) => (
            <li key={q.label}>
              <a href={href.runs(project, paramsFromFilters({ ...filtersFromParams(new URLSearchParams()), ...q.filters }))}>
                {q.label}
              </a>
            </li>
          ))}
        </ul>
      </nav>
      <nav class="side-block" aria-label="Saved views">
        <h2>Saved views</h2>
        {views.error ? <p class="muted small">{views.error.message}</p> : null}
        {views.data && !list.length ? (
          <p class="muted small">None yet. Set filters and columns, then “Save view”.</p>
        ) : null}
        <ul class="views">
          {list.map((v) => (
            <li key={v.name} class={f.view === v.name ? "active" : ""}>
              <a href={href.runs(project, paramsFromFilters(filtersFromView(v)))} data-view={v.name}>
                {v.name}
              </a>
              <button type="button" class="icon" title={`Delete view “${v.name}”`} aria-label={`Delete view ${v.name}`} onClick={() => remove(v.name)}>
                ×
              </button>
            </li>
          ))}
        </ul>
      </nav>
    </aside>
  );
}

function SaveView({ project, f, onSaved }) {
  const [open, setOpen] = useState(false);
  const [name, setName] = useState("");
  const [error, setError] = useState(null);
  const input = useRef(null);
  useEffect(() => {
    if (open) input.current?.focus();
  }, [open]);
  if (!open) {
    return (
      <button type="button" class="btn" onClick={() => { setName(f.view || ""); setError(null); setOpen(true); }}>
        Save view
      </button>
    );
  }
  const submit = async (e) => {
    e.preventDefault();
    const n = name.trim();
    if (!n) return setError("Give the view a name.");
    try {
      await api.saveView(project, viewFromFilters(n, f));
      setOpen(false);
      onSaved(n);
    } catch (err) {
      setError(err.message);
    }
  };
  return (
    <form class="save-view" onSubmit={submit}>
      <input ref={input} aria-label="View name" placeholder="View name, e.g. crashed runs" value={name} maxLength={100} onInput={(e) => setName(e.currentTarget.value)} />
      <button type="submit" class="btn primary">Save</button>
      <button type="button" class="btn" onClick={() => setOpen(false)}>Cancel</button>
      {error ? <span class="error-text">{error}</span> : null}
    </form>
  );
}

function Filters({ f, set, choices, summaryKeys }) {
  const [q, setQ] = useTypedValue(f.q, (typed) => set({ q: typed }));
  const toggleState = (s) =>
    set({ state: f.state.includes(s) ? f.state.filter((x) => x !== s) : [...f.state, s] });
  const toggleTag = (t) => set({ tag: f.tag.includes(t) ? f.tag.filter((x) => x !== t) : [...f.tag, t] });
  return (
    <div class="toolbar filters">
      <label class="search">
        <span class="sr-only">Search runs</span>
        <input type="search" data-search placeholder="Search name or id (press /)" value={q} onInput={(e) => setQ(e.currentTarget.value)} />
      </label>
      <div class="chips" role="group" aria-label="State">
        {STATES.map((s) => (
          <button type="button" key={s} class={`chip state-chip state-${s}`} aria-pressed={f.state.includes(s)} onClick={() => toggleState(s)}>
            <span class="dot" aria-hidden="true" />
            {s}
          </button>
        ))}
      </div>
      <Select label="Group" value={f.group} options={choices.groups} onChange={(group) => set({ group })} />
      <Select label="Job type" value={f.job_type} options={choices.jobTypes} onChange={(job_type) => set({ job_type })} />
      <details class="dropdown">
        <summary class="btn">Tags{f.tag.length ? ` (${f.tag.length})` : ""}</summary>
        <div class="menu">
          {choices.tags.length ? choices.tags.map((t) => (
            <label class="check" key={t}>
              <input type="checkbox" checked={f.tag.includes(t)} onChange={() => toggleTag(t)} />
              {t}
            </label>
          )) : <p class="muted small">No run has tags.</p>}
        </div>
      </details>
      <FilterBuilder value={f.filter} onApply={(filter) => set({ filter })} fields={summaryKeys.map((k) => `summary.${k}`)} />
      <ColumnPicker keys={summaryKeys} chosen={f.cols} onChange={(cols) => set({ cols }, { keepView: true })} />
      <label class="check" title="Group the rows by run group">
        <input type="checkbox" checked={f.by === "group"} onChange={(e) => set({ by: e.currentTarget.checked ? "group" : "" }, { keepView: true })} />
        Group rows
      </label>
    </div>
  );
}

/** Group rows by group, job type or a config key, with a summary metric's mean/min/max
 * per group; and the parallel-coordinates panel's axes (config keys) against it. */
function GroupControls({ f, set, cfgKeys, numericCfg, summaryKeys }) {
  const togglePc = (k) => {
    const now = f.pc.filter((x) => x !== "~");
    const next = now.includes(k) ? now.filter((x) => x !== k) : [...now, k];
    set({ pc: next.length ? next : f.pc.length ? ["~"] : [] }, { keepView: true });
  };
  return (
    <div class="toolbar group-controls">
      <label class="select">
        <span>Group by</span>
        <select aria-label="Group by" value={f.by} onChange={(e) => set({ by: e.currentTarget.value }, { keepView: true })}>
          <option value="">nothing</option>
          <option value="group">run group</option>
          <option value="job_type">job type</option>
          {cfgKeys.map((k) => <option key={k} value={`config.${k}`}>{`config.${k}`}</option>)}
        </select>
      </label>
      <label class="select">
        <span>Metric</span>
        <select aria-label="Aggregate metric" value={f.agg} onChange={(e) => set({ agg: e.currentTarget.value }, { keepView: true })}>
          <option value="">none</option>
          {summaryKeys.map((k) => <option key={k} value={k}>{k}</option>)}
        </select>
      </label>
      <label class="check" title="Parallel coordinates of config keys against the metric">
        <input type="checkbox" aria-label="Parallel coordinates" checked={f.pc.length > 0}
          onChange={(e) => set({ pc: e.currentTarget.checked ? (numericCfg.slice(0, 4).length ? numericCfg.slice(0, 4) : ["~"]) : [] }, { keepView: true })} />
        Parallel coordinates
      </label>
      {f.pc.length ? (
        <details class="dropdown" data-pc-axes>
          <summary class="btn">Axes ({f.pc.filter((x) => x !== "~").length})</summary>
          <div class="menu">
            {numericCfg.map((k) => (
              <label class="check" key={k}>
                <input type="checkbox" checked={f.pc.includes(k)} onChange={() => togglePc(k)} />
                {`config.${k}`}
              </label>
            ))}
          </div>
        </details>
      ) : null}
    </div>
  );
}

function GroupAggregate({ runs, metric }) {
  const a = metric ? aggregate(runs, metric) : null;
  if (!a) return null;
  return (
    <span class="group-agg" data-group-agg>
      {metric}: mean {fmtValue(a.mean)} · min {fmtValue(a.min)} · max {fmtValue(a.max)}
    </span>
  );
}

function Select({ label, value, options, onChange }) {
  const all = value && !options.includes(value) ? [value, ...options] : options;
  return (
    <label class="select">
      <span class="sr-only">{label}</span>
      <select aria-label={label} value={value} onChange={(e) => onChange(e.currentTarget.value)}>
        <option value="">{`Any ${label.toLowerCase()}`}</option>
        {all.map((o) => (
          <option key={o} value={o}>{o}</option>
        ))}
      </select>
    </label>
  );
}

function ColumnPicker({ keys, chosen, onChange }) {
  const [q, setQ] = useState("");
  const shown = keys.filter((k) => k.toLowerCase().includes(q.toLowerCase())).slice(0, 200);
  const toggle = (k) => onChange(chosen.includes(k) ? chosen.filter((c) => c !== k) : [...chosen, k]);
  return (
    <details class="dropdown" data-columns onToggle={(e) => keepInWindow(e.currentTarget)}>
      <summary class="btn">Columns{chosen.length ? ` (${chosen.length})` : ""}</summary>
      <div class="menu">
        <p class="muted small">Summary values as columns</p>
        <input type="search" placeholder="Filter keys" value={q} onInput={(e) => setQ(e.currentTarget.value)} />
        {shown.length ? shown.map((k) => (
          <label class="check" key={k}>
            <input type="checkbox" checked={chosen.includes(k)} onChange={() => toggle(k)} />
            {k}
          </label>
        )) : <p class="muted small">No numeric summary values yet.</p>}
      </div>
    </details>
  );
}

/** An open dropdown's menu moved left as far as needed to end inside the window. */
function keepInWindow(details) {
  const menu = details.querySelector(".menu");
  if (!menu || !details.open) return;
  menu.style.left = "0px";
  const box = menu.getBoundingClientRect();
  const over = box.right - (document.documentElement.clientWidth - 8);
  if (over > 0) menu.style.left = `${-Math.min(over, box.left - 8)}px`;
}

const BASE_COLUMNS = [
  { key: "name", label: "Name", sort: "name" },
  { key: "state", label: "State", sort: "state" },
  { key: "group", label: "Group", sort: "group" },
  { key: "job_type", label: "Job type", sort: "job_type" },
  { key: "tags", label: "Tags" },
  { key: "ranks", label: "Ranks × nodes", sort: "ranks", num: true },
  { key: "created", label: "Created", sort: "created" },
  { key: "duration", label: "Duration", sort: "duration", num: true },
];

function RunsTable({ project, editable, runs, total, f, set, selected, setSelected, openAlerts, reload }) {
  const anyRunning = runs.some((r) => r.state === "running");
  const now = useNow(1000, anyRunning);
  // The clock re-sorts only while a run is running (its duration grows); else it is still.
  const clock = anyRunning ? now : 0;
  const rows = useMemo(() => clientSort(runs, f.sort, clock || undefined), [runs, f.sort, clock]);
  const columns = [...BASE_COLUMNS, ...f.cols.map((k) => ({ key: `s:${k}`, label: k, sort: `s:${k}`, num: true, summary: k }))];
  const { key: sortKey, desc } = parseSort(f.sort);
  const ref = (r) => `${r.project}/${r.id}`;
  const toggle = (r) => {
    const next = new Set(selected);
    if (next.has(ref(r))) next.delete(ref(r));
    else next.add(ref(r));
    setSelected(next);
  };
  const allOn = rows.length > 0 && rows.every((r) => selected.has(ref(r)));
  const header = (
    <tr>
      <th class="sel">
        <input type="checkbox" aria-label="Select all runs" checked={allOn} onChange={() => setSelected(allOn ? new Set() : new Set(rows.map(ref)))} />
      </th>
      {columns.map((c) => (
        <th key={c.key} class={c.num ? "num" : ""} aria-sort={c.sort === sortKey ? (desc ? "descending" : "ascending") : undefined}>
          {c.sort ? (
            <button type="button" class="sort" title={`Sort by ${c.label}`} onClick={() => set({ sort: nextSort(c, sortKey, desc) }, { keepView: true })}>
              {c.label}
              <span class="arrow" aria-hidden="true">{c.sort === sortKey ? (desc ? "↓" : "↑") : ""}</span>
            </button>
          ) : c.label}
        </th>
      ))}
    </tr>
  );
  const row = (r) => (
    <tr key={ref(r)} class={selected.has(ref(r)) ? "selected" : ""} data-run={r.id}>
      <td class="sel">
        <input type="checkbox" aria-label={`Select ${r.name}`} checked={selected.has(ref(r))} onChange={() => toggle(r)} />
      </td>
      {columns.map((c) => (
        <td key={c.key} class={c.num ? "num" : ""}>
          {c.key === "name" && editable ? (
            <InlineName project={project} run={r} onSaved={reload}>{cell(project, r, c, now, openAlerts)}</InlineName>
          ) : cell(project, r, c, now, openAlerts)}
        </td>
      ))}
    </tr>
  );
  const grouped = f.by ? groupRuns(rows, f.by) : null;
  return (
    <div class="table-wrap">
      <table class="runs">
        <thead>{header}</thead>
        {grouped ? grouped.map((g) => (
          <tbody key={g.group || "(none)"} class="group-block">
            <tr class="group-row" data-group={g.group}>
              <th colSpan={columns.length + 1} scope="colgroup">
                {g.group && f.by === "group" ? <a href={href.group(project, g.group)}>{g.group}</a>
                  : g.group ? <span>{f.by === "job_type" ? "" : `${f.by} = `}{g.group}</span>
                  : <span class="muted">{f.by === "group" ? "no group" : `no ${f.by}`}</span>}
                <span class="count">{g.runs.length}</span>
                <GroupStates runs={g.runs} />
                <GroupAggregate runs={g.runs} metric={f.agg} />
              </th>
            </tr>
            {g.runs.map(row)}
          </tbody>
        )) : <tbody>{rows.map(row)}</tbody>}
      </table>
      {total > runs.length ? <p class="muted small">Showing the first {runs.length} of {total} runs; narrow the filters to see the others.</p> : null}
    </div>
  );
}

/** Clicking a header: the same column flips direction; a new one starts A→Z for text,
 * largest first for numbers and times. */
function nextSort(c, sortKey, desc) {
  if (c.sort === sortKey) return desc ? c.sort : `-${c.sort}`;
  return ["name", "group", "job_type", "state"].includes(c.key) ? c.sort : `-${c.sort}`;
}

function GroupStates({ runs }) {
  const counts = {};
  for (const r of runs) counts[r.state] = (counts[r.state] ?? 0) + 1;
  return (
    <span class="group-states">
      {Object.entries(counts).map(([s, n]) => (
        <span key={s} class={`state state-${s} mini`}><span class="dot" aria-hidden="true" />{n} {s}</span>
      ))}
    </span>
  );
}

function cell(project, r, c, now, openAlerts) {
  switch (c.key) {
    case "name":
      return (
        <>
          <a class="run-name" href={href.run(project, r.id)} title={r.name && r.name !== r.id ? `${r.name} (${r.id})` : r.id}>
            <span class="name">{r.name || r.id}</span>
            {runRank(r) ? <span class="rank-of" data-rank-of title="The rank this per-process run recorded">{runRank(r)}</span> : null}
            {r.name && r.name !== r.id ? <span class="muted small id">{r.id}</span> : null}
          </a>
          {openAlerts?.[r.id] ? (
            <a
              class="open-alerts"
              data-open-alerts={openAlerts[r.id]}
              href={href.run(project, r.id)}
              title={`${openAlerts[r.id]} alert${openAlerts[r.id] === 1 ? "" : "s"} not delivered everywhere yet (see the run page)`}
            >
              {openAlerts[r.id]} open alert{openAlerts[r.id] === 1 ? "" : "s"}
            </a>
          ) : null}
        </>
      );
    case "state":
      return (
        <>
          <StateBadge state={r.state} crashed={r.crashed} />
          {r.first_failure && r.state !== "running" && r.state !== "finished" ? (
            <span class="first-failure-cell" data-first-failure-cell title={`first failure: ${r.first_failure.label} ${what(r.first_failure)}`}>
              {cellText(r.first_failure)}
            </span>
          ) : null}
          {r.hang ? (
            <span class="first-failure-cell" data-hang-cell title={r.hang.message}>
              hang: {r.hang.odd?.length ? `${r.hang.odd.join(", ")} elsewhere` : "all waiting"}
            </span>
          ) : null}
          {divergenceNote(r) ? (
            <span class="first-failure-cell" data-nonfinite-cell title={r.divergence?.[0]?.message ?? ""}>
              {divergenceNote(r)}
            </span>
          ) : null}
        </>
      );
    case "group":
      return r.group ? <a href={href.group(project, r.group)}>{r.group}</a> : <span class="muted">–</span>;
    case "job_type":
      return r.job_type ?? <span class="muted">–</span>;
    case "tags":
      return <span class="tags">{(r.tags ?? []).map((t) => <Tag key={t}>{t}</Tag>)}</span>;
    case "ranks":
      return fmtRanks(r);
    case "created":
      return <span title={fmtTime(r.created)}>{fmtShortTime(r.created, now)}</span>;
    case "duration":
      return fmtDuration(runDuration(r, now));
    default: {
      const v = summaryValue(r, c.summary);
      return v === undefined ? <span class="muted">–</span> : fmtValue(v);
    }
  }
}
