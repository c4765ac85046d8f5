// Editing runs from the dashboard: the run page's edit form, the runs table's inline
// rename and bulk tags, and the filter builder (W&B's MongoDB-style filters, kept in the
// URL and saved views). Notes are shown as text (white space kept), never as HTML.

import { useEffect, useState } from "preact/hooks";
import { api } from "../api.js";
import { FILTER_OPS, filterOfRows, rowsOfFilter } from "../lib/runsModel.js";

const splitTags = (text) => [...new Set(text.split(",").map((t) => t.trim()).filter(Boolean))];

/** The run page's "Edit" button and form: name, tags, notes, group, job type. */
export function EditRun({ run, onSaved }) {
  const [open, setOpen] = useState(false);
  const [form, setForm] = useState(null);
  const [error, setError] = useState(null);
  const start = () => {
    setForm({
      name: run.name || run.id,
      tags: (run.tags ?? []).join(", "),
      notes: run.notes ?? "",
      group: run.group ?? "",
      job_type: run.job_type ?? "",
    });
    setError(null);
    setOpen(true);
  };
  if (!open) {
    return <button type="button" class="btn" data-edit-run onClick={start}>Edit</button>;
  }
  const field = (k) => ({ value: form[k], onInput: (e) => setForm({ ...form, [k]: e.currentTarget.value }) });
  const submit = async (e) => {
    e.preventDefault();
    const body = { name: form.name.trim(), tags: splitTags(form.tags), clear: [] };
    for (const k of ["notes", "group", "job_type"]) {
      const v = k === "notes" ? form[k] : form[k].trim();
      if (v) body[k] = v;
      else if (run[k]) body.clear.push(k);
    }
    try {
      await api.editRun(run.project, run.id, body);
      setOpen(false);
      onSaved();
    } catch (err) {
      setError(err.message);
    }
  };
  return (
    <form class="edit-run" data-edit-form onSubmit={submit}>
      <label>Name <input aria-label="Run name" {...field("name")} maxLength={256} /></label>
      <label>Tags <input aria-label="Tags" placeholder="comma, separated" {...field("tags")} /></label>
      <label>Group <input aria-label="Group" {...field("group")} /></label>
      <label>Job type <input aria-label="Job type" {...field("job_type")} /></label>
      <label class="wide">Notes (Markdown) <textarea aria-label="Notes" rows={4} {...field("notes")} /></label>
      <div class="actions">
        <button type="submit" class="btn primary">Save</button>
        <button type="button" class="btn" onClick={() => setOpen(false)}>Cancel</button>
        {error ? <span class="error-text" role="alert">{error}</span> : null}
      </div>
    </form>
  );
}

/** A run name in the runs table that can be renamed in place (the ✎ button). */
export function InlineName({ project, run, onSaved, children }) {
  const [editing, setEditing] = useState(false);
  const [name, setName] = useState("");
  const [error, setError] = useState(null);
  if (!editing) {
    return (
      <span class="inline-name">
        {children}
        <button type="button" class="icon" data-rename={run.id} title="Rename" aria-label={`Rename ${run.name || run.id}`}
          onClick={() => { setName(run.name || run.id); setError(null); setEditing(true); }}>✎</button>
      </span>
    );
  }
  const submit = async (e) => {
    e.preventDefault();
    try {
      await api.editRun(project, run.id, { name: name.trim() });
      setEditing(false);
      onSaved();
    } catch (err) {
      setError(err.message);
    }
  };
  return (
    <form class="inline-rename" onSubmit={submit}>
      <input aria-label={`New name of ${run.id}`} value={name} onInput={(e) => setName(e.currentTarget.value)}
        onKeyDown={(e) => e.key === "Escape" && setEditing(false)} />
      <button type="submit" class="btn">Save</button>
      {error ? <span class="error-text" role="alert">{error}</span> : null}
    </form>
  );
}

/** Add or remove a tag on the selected runs. */
export function BulkTags({ project, selected, onDone }) {
  const [tag, setTag] = useState("");
  const [msg, setMsg] = useState(null);
  const ids = [...selected].filter((r) => r.startsWith(`${project}/`)).map((r) => r.slice(project.length + 1));
  if (!ids.length) return null;
  const go = async (how) => {
    const tags = splitTags(tag);
    if (!tags.length) return setMsg("Type a tag first.");
    try {
      const got = await api.bulkTags(project, { runs: ids, [how]: tags });
      setMsg(`${how === "add" ? "Tagged" : "Untagged"} ${got.edited.length} run${got.edited.length === 1 ? "" : "s"}.`);
      onDone();
    } catch (err) {
      setMsg(err.message);
    }
  };
  return (
    <div class="toolbar bulk-tags" data-bulk-tags>
      <span>{ids.length} selected:</span>
      <input aria-label="Tag for the selected runs" placeholder="tag" value={tag} onInput={(e) => setTag(e.currentTarget.value)} />
      <button type="button" class="btn" onClick={() => go("add")}>Add tag</button>
      <button type="button" class="btn" onClick={() => go("remove")}>Remove tag</button>
      {msg ? <span class="muted small" role="status">{msg}</span> : null}
    </div>
  );
}

const FIELD_HINTS = ["state", "tags", "group", "job_type", "display_name", "created_at", "config.", "summary.", "summary_cross_rank."];

/** Rows of field, operator and value that write one W&B-style filter (``$and``). */
export function FilterBuilder({ value, onApply, fields }) {
  const [rows, setRows] = useState(() => rowsOfFilter(value));
  useEffect(() => setRows(rowsOfFilter(value)), [value]);
  const put = (i, patch) => setRows(rows.map((r, j) => (j === i ? { ...r, ...patch } : r)));
  const apply = (next) => onApply(filterOfRows(next));
  return (
    <details class="dropdown filter-builder" data-filter-builder open={rows.length > 0 || undefined}>
      <summary class="btn">Filter{value ? " (on)" : ""}</summary>
      <div class="menu">
        <datalist id="filter-fields">
          {[...FIELD_HINTS, ...fields].map((k) => <option key={k} value={k} />)}
        </datalist>
        {rows.map((r, i) => (
          <div class="filter-row" key={i}>
            <input list="filter-fields" aria-label={`Field ${i + 1}`} placeholder="config.lr" value={r.field}
              onInput={(e) => put(i, { field: e.currentTarget.value })} />
            <select aria-label={`Operator ${i + 1}`} value={r.op} onChange={(e) => put(i, { op: e.currentTarget.value })}>
              {FILTER_OPS.map((o) => <option key={o} value={o}>{o}</option>)}
            </select>
            <input aria-label={`Value ${i + 1}`} placeholder="0.01" value={r.value}
              onInput={(e) => put(i, { value: e.currentTarget.value })} />
            <button type="button" class="icon" aria-label={`Remove condition ${i + 1}`}
              onClick={() => { const next = rows.filter((_, j) => j !== i); setRows(next); apply(next); }}>×</button>
          </div>
        ))}
        <div class="actions">
          <button type="button" class="btn" onClick={() => setRows([...rows, { field: "", op: "$eq", value: "" }])}>
            Add condition
          </button>
          <button type="button" class="btn primary" onClick={() => apply(rows)}>Apply</button>
        </div>
      </div>
    </details>
  );
}
