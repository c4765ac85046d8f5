// Reports (docs/reports.md): the project's list, and one report, read or edited. A report
// is a title and blocks (Markdown text, live panels); saving adds a version, older ones
// are read with ?version=N. Only a writer of the project (a write or admin token of it, or
// the local `rankwise ui`) sees the edit controls; the server refuses anyone else anyway.

import { useState } from "preact/hooks";
import { api, blobUrl } from "../api.js";
import { useLoad } from "../hooks.js";
import { href, navigate } from "../router.js";
import { canEdit } from "../lib/access.js";
import { fmtTime } from "../lib/format.js";
import {
  blockRequests, KIND_NAMES, KINDS, insertBlock, mediaDigests, moveBlock, newBlock, removeBlock,
  replaceBlock, requestKey,
} from "../lib/reports.js";
import { Empty, ErrorBox, Spinner } from "../components/common.jsx";
import { ReportBlock, ReportView } from "../components/ReportBlocks.jsx";

export { canEdit };

export function ReportsPage({ project, params, who }) {
  const list = useLoad((signal) => api.reports(project, { signal }), [project]);
  const [name, setName] = useState("");
  const add = params.get("add") ? addedBlock(project, params) : null;
  const editor = canEdit(who, project);
  return (
    <main class="main reports-page">
      <header class="page-head">
        <div>
          <p class="kicker"><a href={href.runs(project)}>{project}</a></p>
          <h1>Reports</h1>
        </div>
      </header>
      {add ? <AddToReport project={project} block={add} list={list.data?.reports ?? []} editor={editor} /> : null}
      {editor ? (
        <form
          class="new-report"
          onSubmit={(e) => {
            e.preventDefault();
            const n = name.trim();
            if (!n) return;
            const taken = list.data?.reports.some((r) => r.name === n);
            navigate(href.report(project, n, taken ? { edit: 1 } : { edit: 1, new: 1 }));
          }}
        >
          <input
            value={name}
            placeholder="new-report-name"
            aria-label="New report name"
            title="letters, digits, '.', '_' and '-'"
            maxLength={100}
            onInput={(e) => setName(e.currentTarget.value)}
          />
          <button type="submit" class="btn primary" disabled={!name.trim()}>New report</button>
        </form>
      ) : null}
      {list.error ? <ErrorBox error={list.error} onRetry={list.reload} /> : null}
      {!list.data && !list.error ? <Spinner /> : null}
      {list.data && !list.data.reports.length ? (
        <Empty title="No reports yet" icon="▤">
          A report is a page of text and live charts, media and tables, shared by its URL.
        </Empty>
      ) : null}
      {list.data?.reports.length ? (
        <ul class="report-list" data-report-list>
          {list.data.reports.map((r) => (
            <li key={r.name}>
              <a href={href.report(project, r.name)} data-report-link={r.name}>{r.title || r.name}</a>{" "}
              <span class="muted small">{r.name} · v{r.version} · {r.blocks} blocks · {fmtTime(r.updated)}</span>
            </li>
          ))}
        </ul>
      ) : null}
    </main>
  );
}

/** The block a chart's "Add to report" asks for (#/p/P/reports?add=chart&runs=p/r,..&metric=K). */
function addedBlock(project, params) {
  const kind = params.get("add");
  if (!KINDS.includes(kind)) return null;
  const runs = (params.get("runs") ?? "").split(",").filter(Boolean).map((ref) => {
    const i = ref.indexOf("/");
    return { project: ref.slice(0, i), run: ref.slice(i + 1) };
  });
  const block = newBlock(kind, { project, run: runs[0]?.run ?? "", key: params.get("metric") ?? "" });
  if (kind === "chart") {
    block.runs = runs;
    if (params.get("mode") === "ranks") block.mode = "ranks";
    if (params.get("x") === "time") block.x = "time";
  }
  return block;
}

function AddToReport({ project, block, list, editor }) {
  const [target, setTarget] = useState("");
  const [error, setError] = useState(null);
  if (!editor) return <p class="callout warn">Only a writer of {project} can add to its reports.</p>;
  const add = async (e) => {
    e.preventDefault();
    const name = target.trim();
    if (!name) return;
    try {
      let base = 0; // a new report: refused (409) if someone made one of that name since
      let title = name;
      let blocks = [];
      if (list.some((r) => r.name === name)) {
        const cur = await api.report(project, name);
        base = cur.version;
        title = cur.title;
        blocks = cur.blocks;
      }
      await api.saveReport(project, name, { title, blocks: [...blocks, block], base });
      navigate(href.report(project, name));
    } catch (err) {
      setError(err);
    }
  };
  return (
    <form class="callout add-to-report" onSubmit={add} data-add-to-report>
      <p>
        Add the {KIND_NAMES[block.type].toLowerCase()} of <b>{block.metrics?.join(", ") || block.key}</b> to a report:
      </p>
      <input list="report-names" value={target} aria-label="Report name" placeholder="report name (new or existing)" onInput={(e) => setTarget(e.currentTarget.value)} />
      <datalist id="report-names">
        {list.map((r) => <option key={r.name} value={r.name} />)}
      </datalist>
      <button type="submit" class="btn primary" disabled={!target.trim()}>Add</button>
      {error ? <p class="error-text">{error.message}</p> : null}
    </form>
  );
}

export function ReportPage({ project, name, params, who }) {
  const version = params.get("version") ? Number(params.get("version")) : undefined;
  const editor = canEdit(who, project);
  const fresh = editor && params.get("new") && version === undefined; // not saved yet
  const loaded = useLoad(
    async (signal) => (fresh ? null : api.report(project, name, version, { signal })),
    [project, name, version, fresh],
  );
  const [record] = useState(() => new Map());
  const [exporting, setExporting] = useState(null);
  if (loaded.error) return <main class="main"><ErrorBox error={loaded.error} onRetry={loaded.reload} /></main>;
  if (loaded.data === undefined) return <main class="main"><Spinner /></main>;
  const report = loaded.data;
  const editing = editor && (params.get("edit") || report === null) && version === undefined;
  if (editing) {
    return (
      <ReportEditor
        project={project}
        name={name}
        initial={report ?? { project, name, title: name, blocks: [], version: 0, latest: 0 }}
        onSaved={() => { loaded.reload(); navigate(href.report(project, name)); }}
      />
    );
  }
  const ctx = { project, record, live: version === undefined };
  const doExport = async () => {
    setExporting("Exporting…");
    try {
      await exportInBrowser(report, record);
      setExporting(null);
    } catch (err) {
      setExporting(`Export failed: ${err.message}`);
    }
  };
  return (
    <main class="main report-page">
      <header class="page-head">
        <div>
          <p class="kicker">
            <a href={href.runs(project)}>{project}</a> · <a href={href.reports(project)}>Reports</a>
          </p>
          <p class="muted small" data-report-version>
            version {report.version}{report.version !== report.latest ? ` (latest is ${report.latest})` : ""} · saved {fmtTime(report.created)}
            {report.author ? <> by {report.author}</> : null}
          </p>
        </div>
        <div class="head-actions">
          <Versions key={report.latest} project={project} name={name} current={report.version} />
          <button type="button" class="btn" onClick={doExport} data-export title="One HTML file with the data inline: opens offline">
            Export HTML
          </button>
          {editor && version === undefined ? (
            <a class="btn primary" href={href.report(project, name, { edit: 1 })} data-edit>Edit</a>
          ) : null}
        </div>
      </header>
      {exporting ? <p class="muted small" data-export-status>{exporting}</p> : null}
      <ReportView report={report} ctx={ctx} />
    </main>
  );
}

function Versions({ project, name, current }) {
  // keyed by the latest version: read again after each save
  const list = useLoad((signal) => api.reportVersions(project, name, { signal }), [project, name]);
  const versions = list.data?.versions ?? [];
  if (versions.length < 2) return null;
  return (
    <select
      aria-label="Version"
      data-versions
      value={String(current)}
      onChange={(e) => {
        const v = Number(e.currentTarget.value);
        navigate(href.report(project, name, v === versions[0].version ? {} : { version: v }));
      }}
    >
      {versions.map((v) => (
        <option key={v.version} value={String(v.version)}>
          v{v.version} · {fmtTime(v.created)}{v.author ? ` · ${v.author}` : ""}
        </option>
      ))}
    </select>
  );
}

const refText = (r) => (r?.project ? `${r.project}/${r.run}` : "");
function parseRef(text, project) {
  const t = text.trim();
  if (!t) return { project, run: "" };
  const i = t.indexOf("/");
  return i > 0 ? { project: t.slice(0, i), run: t.slice(i + 1) } : { project, run: t };
}
const listText = (xs) => (xs ?? []).join(", ");
const parseList = (t) => t.split(",").map((s) => s.trim()).filter(Boolean);

function BlockEditor({ block, project, onChange }) {
  const set = (patch) => onChange({ ...block, ...patch });
  const field = (label, value, onInput, props = {}) => (
    <label class="field">
      <span class="muted small">{label}</span>
      <input value={value ?? ""} onInput={(e) => onInput(e.currentTarget.value)} {...props} />
    </label>
  );
  const fields = [];
  if (block.type === "text") {
    fields.push(
      <label class="field wide" key="text">
        <span class="muted small">Markdown</span>
        <textarea rows={6} value={block.text} data-text-input onInput={(e) => set({ text: e.currentTarget.value })} />
      </label>,
    );
  } else if (block.type === "chart") {
    fields.push(field("Runs (project/run, comma-separated)", listText(block.runs.map(refText)), (v) => set({ runs: parseList(v).map((s) => parseRef(s, project)) }), { key: "runs", "data-runs-input": true }));
    fields.push(field("Metrics (comma-separated)", listText(block.metrics), (v) => set({ metrics: parseList(v) }), { key: "metrics", "data-metrics-input": true }));
    fields.push(
      <label class="field" key="mode">
        <span class="muted small">Lines</span>
        <select value={block.mode} onChange={(e) => set({ mode: e.currentTarget.value })}>
          <option value="band">cross-rank line per run</option>
          <option value="ranks">every rank</option>
        </select>
      </label>,
      <label class="field" key="x">
        <span class="muted small">x</span>
        <select value={block.x} onChange={(e) => set({ x: e.currentTarget.value })}>
          <option value="step">step</option>
          <option value="time">time</option>
        </select>
      </label>,
      <label class="field check" key="log">
        <input type="checkbox" checked={!!block.log} onChange={(e) => set({ log: e.currentTarget.checked })} /> log y
      </label>,
    );
  } else if (block.type === "lineage") {
    fields.push(field("Artifact", block.artifact, (v) => set({ artifact: v.trim() }), { key: "artifact" }));
    fields.push(field("Version", block.version, (v) => set({ version: v.trim() || "latest" }), { key: "version" }));
  } else {
    fields.push(field("Run (project/run)", refText(block.run), (v) => set({ run: parseRef(v, project) }), { key: "run", "data-run-input": true }));
    if (["media", "table", "histogram"].includes(block.type)) {
      fields.push(field("Key", block.key, (v) => set({ key: v.trim() }), { key: "key", "data-key-input": true }));
      fields.push(field("Step (empty: latest)", block.step ?? "", (v) => set({ step: v.trim() === "" ? null : Number.parseInt(v, 10) }), { key: "step", inputMode: "numeric" }));
    }
  }
  if (block.type !== "text") {
    fields.push(field("Caption", block.caption, (v) => set({ caption: v || undefined }), { key: "caption", "data-caption-input": true, maxLength: 1000 }));
  }
  return <div class="block-fields">{fields}</div>;
}

function ReportEditor({ project, name, initial, onSaved }) {
  const [title, setTitle] = useState(initial.title);
  const [blocks, setBlocks] = useState(initial.blocks);
  const [kind, setKind] = useState("text");
  const [error, setError] = useState(null);
  const [saving, setSaving] = useState(false);
  const ctx = { project, record: null, live: false };
  const save = async () => {
    setSaving(true);
    setError(null);
    try {
      // base: the version edited (0: none yet), so a save over another's is refused (409)
      await api.saveReport(project, name, { title, blocks, base: initial.latest ?? 0 });
      onSaved();
    } catch (err) {
      setError(err);
      setSaving(false);
    }
  };
  return (
    <main class="main report-page editing" data-report-editor>
      <header class="page-head">
        <div>
          <p class="kicker">
            <a href={href.runs(project)}>{project}</a> · <a href={href.reports(project)}>Reports</a> · {name}
          </p>
          <input class="report-title-input" value={title} aria-label="Title" data-title-input maxLength={300} onInput={(e) => setTitle(e.currentTarget.value)} />
        </div>
        <div class="head-actions">
          {initial.latest ? <a class="btn" href={href.report(project, name)}>Cancel</a> : null}
          <button type="button" class="btn primary" onClick={save} disabled={saving} data-save>
            {saving ? "Saving…" : "Save"}
          </button>
        </div>
      </header>
      {error ? <p class="callout bad" data-save-error>{error.message}</p> : null}
      {blocks.map((b, i) => (
        <div class="block-edit" key={b.id ?? i} data-edit-block={i}>
          <div class="block-tools">
            <span class="kicker">{KIND_NAMES[b.type] ?? b.type}</span>
            <button type="button" class="icon" title="Move up" aria-label="Move up" disabled={i === 0} onClick={() => setBlocks(moveBlock(blocks, i, -1))}>↑</button>
            <button type="button" class="icon" title="Move down" aria-label="Move down" disabled={i === blocks.length - 1} onClick={() => setBlocks(moveBlock(blocks, i, 1))}>↓</button>
            <button type="button" class="icon" title="Remove" aria-label="Remove" data-remove onClick={() => setBlocks(removeBlock(blocks, i))}>✕</button>
          </div>
          <BlockEditor block={b} project={project} onChange={(nb) => setBlocks(replaceBlock(blocks, i, nb))} />
          <ReportBlock block={b} ctx={ctx} />
        </div>
      ))}
      <div class="add-block">
        <select value={kind} aria-label="Block kind" data-kind onChange={(e) => setKind(e.currentTarget.value)}>
          {KINDS.map((k) => <option key={k} value={k}>{KIND_NAMES[k]}</option>)}
        </select>
        <button type="button" class="btn" data-add-block onClick={() => setBlocks(insertBlock(blocks, blocks.length, newBlock(kind, { project })))}>
          Add block
        </button>
      </div>
    </main>
  );
}

// -- export from the dashboard: the same file `rankwise report export` writes -------------

const TEMPLATE = "export/report.html";
const SLOT = "__RANKWISE_EXPORT_DATA__";

/** JSON safe inside a <script> element: no "<", ">", "&" or line separators as such. */
export function scriptJson(value) {
  return JSON.stringify(value).replace(/[<>&\u2028\u2029]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
}

async function dataUri(url) {
  const res = await fetch(url, { credentials: "same-origin" });
  if (!res.ok) throw new Error(`a blob could not be read (HTTP ${res.status})`);
  const type = (res.headers.get("content-type") ?? "application/octet-stream").split(";")[0];
  const bytes = new Uint8Array(await res.arrayBuffer());
  let bin = "";
  for (let i = 0; i < bytes.length; i += 0x8000) bin += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return `data:${type};base64,${btoa(bin)}`;
}

async function exportInBrowser(report, record) {
  const replies = {};
  const blobs = {};
  for (const block of report.blocks) {
    for (const req of blockRequests(block, report.project)) {
      const data = await api.block(req, { record });
      replies[requestKey(req)] = data;
      const project = block.run?.project ?? report.project;
      const digests = block.type === "media" ? mediaDigests(data, block.step) : block.type === "table" ? tableDigests(data) : [];
      for (const d of digests) if (!blobs[d]) blobs[d] = await dataUri(blobUrl(project, d));
    }
  }
  const tpl = await (await fetch(TEMPLATE, { credentials: "same-origin" })).text();
  if (!tpl.includes(SLOT)) throw new Error("the export template is missing from this server's dashboard");
  const data = { report, replies, blobs, exported: Date.now() / 1000 };
  const html = tpl.replace(SLOT, () => scriptJson(data));
  const url = URL.createObjectURL(new Blob([html], { type: "text/html" }));
  const a = document.createElement("a");
  a.href = url;
  a.download = `${report.name}.html`;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}

/** The image cells' digests of a table reply. */
export function tableDigests(reply) {
  const out = [];
  (reply?.types ?? []).forEach((t, j) => {
    if (t !== "image") return;
    for (const row of reply.rows ?? []) if (typeof row[j] === "string" && /^[0-9a-f]{64}$/.test(row[j])) out.push(row[j]);
  });
  return out;
}
