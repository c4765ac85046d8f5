// Deleting runs from the dashboard: a confirmation that names the count ("Delete 12
// runs?"), from the run page, a selection of the runs table or the runs a filter picks;
// and the trash, where deleted runs wait (restorable) until the server purges them.

import { useState } from "preact/hooks";
import { api } from "../api.js";
import { useLoad } from "../hooks.js";
import { fmtTime } from "../lib/format.js";
import { ErrorBox, Spinner } from "./common.jsx";

const plural = (n) => `${n} run${n === 1 ? "" : "s"}`;

/** The confirmation: which runs (by id, or a filter the server counts first), the
 * count, and whether to purge for good. `onDone(reply)` after a delete. */
export function ConfirmDelete({ project, runs, filters, onCancel, onDone }) {
  const [purge, setPurge] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState(null);
  // What was asked when the dialog opened (a poll re-rendering the page changes nothing).
  const [pick] = useState(() => (filters ? { filters } : { runs }));
  // A filter is counted by the server first (a dry run), so the dialog names the number.
  const counted = useLoad(
    () => (pick.filters ? api.deleteRuns(project, { ...pick, dry_run: true }) : Promise.resolve({ runs: pick.runs, count: pick.runs.length })),
    [project, pick],
  );
  const n = counted.data?.count;
  const go = async () => {
    setBusy(true);
    setError(null);
    try {
      // A filter's runs as counted: the dialog deletes what it named, nothing that
      // started to match since.
      const body = { runs: counted.data.runs };
      onDone(await api.deleteRuns(project, { ...body, purge }));
    } catch (err) {
      setError(err);
      setBusy(false);
    }
  };
  const title = n === undefined ? "Delete runs?" : n === 1 && !pick.filters ? `Delete run ${pick.runs[0]}?` : `Delete ${plural(n)}?`;
  return (
    <div class="lightbox confirm-delete" role="dialog" aria-modal="true" aria-labelledby="confirm-delete-title" data-confirm-delete>
      <div class="lightbox-body dialog">
        <h2 id="confirm-delete-title">{title}</h2>
        {counted.data === undefined ? <Spinner label="Counting…" /> : null}
        <ErrorBox error={counted.error || error} />
        {counted.data ? (
          <>
            <p class="muted small ids" data-delete-ids>
              {counted.data.runs.slice(0, 12).join(", ")}
              {counted.data.runs.length > 12 ? `, and ${counted.data.runs.length - 12} more` : ""}
            </p>
            <p>
              {purge
                ? "They are removed for good, with their metrics, media and files no other run or artifact uses. This cannot be undone."
                : "They go to the trash: hidden from every list, restorable until the server purges them."}
            </p>
            <label class="check">
              <input type="checkbox" checked={purge} onChange={(e) => setPurge(e.currentTarget.checked)} data-purge />
              Purge for good (skip the trash)
            </label>
          </>
        ) : null}
        <div class="actions">
          <button type="button" class="btn" onClick={onCancel}>Cancel</button>
          <button type="button" class="btn danger" disabled={busy || !n} onClick={go} data-confirm>
            {purge ? "Purge" : "Delete"}{n ? ` ${plural(n)}` : ""}
          </button>
        </div>
      </div>
    </div>
  );
}

/** The runs table's delete control: the selection, else every run the filter picks. */
export function DeleteRuns({ project, selected, filters, onDone }) {
  const [open, setOpen] = useState(false);
  const [msg, setMsg] = useState(null);
  const ids = [...selected].filter((r) => r.startsWith(`${project}/`)).map((r) => r.slice(project.length + 1));
  const byFilter = !ids.length && filters ? filters : null;
  if (!ids.length && !byFilter) return msg ? <p class="muted small" role="status">{msg}</p> : null;
  return (
    <div class="toolbar delete-runs" data-delete-runs>
      <button type="button" class="btn danger" onClick={() => setOpen(true)}>
        {ids.length ? `Delete ${plural(ids.length)}…` : "Delete the runs this filter picks…"}
      </button>
      {msg ? <span class="muted small" role="status">{msg}</span> : null}
      {open ? (
        <ConfirmDelete
          project={project}
          runs={ids}
          filters={byFilter}
          onCancel={() => setOpen(false)}
          onDone={(got) => {
            setOpen(false);
            setMsg(`${got.purged ? "Purged" : "Deleted"} ${plural(got.count)}${got.purged ? "" : " (in the trash)"}.`);
            onDone();
          }}
        />
      ) : null}
    </div>
  );
}

/** The project's trash: deleted runs, when each is purged, and Restore. */
export function Trash({ project, onRestored }) {
  const trash = useLoad((signal) => api.trash(project, { signal }), [project]);
  const [msg, setMsg] = useState(null);
  const restore = async (ids) => {
    try {
      const got = await api.restoreRuns(project, { runs: ids });
      setMsg(`Restored ${plural(got.restored.length)}.`);
      trash.reload();
      onRestored();
    } catch (err) {
      setMsg(err.message);
    }
  };
  return (
    <section class="trash" data-trash aria-label="Trash">
      <h2>Trash</h2>
      <ErrorBox error={trash.error} onRetry={trash.reload} />
      {trash.data === undefined && !trash.error ? <Spinner /> : null}
      {msg ? <p class="muted small" role="status">{msg}</p> : null}
      {trash.data ? (
        trash.data.runs.length ? (
          <table class="runs-table">
            <thead>
              <tr><th>Run</th><th>Deleted</th><th>By</th><th>Purged after</th><th /></tr>
            </thead>
            <tbody>
              {trash.data.runs.map((t) => (
                <tr key={t.id} data-trashed={t.id}>
                  <td>{t.name}{t.name !== t.id ? <span class="muted small"> {t.id}</span> : null}</td>
                  <td>{fmtTime(t.deleted_at)}</td>
                  <td>{t.deleted_by ?? "–"}</td>
                  <td>{fmtTime(t.purge_after)}</td>
                  <td><button type="button" class="btn" onClick={() => restore([t.id])}>Restore</button></td>
                </tr>
              ))}
            </tbody>
          </table>
        ) : (
          <p class="muted">The trash is empty. Deleted runs wait here {trash.data.retention_days} days before they are purged.</p>
        )
      ) : null}
    </section>
  );
}
