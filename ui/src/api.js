// The HTTP API (docs/http-api.md) as plain functions. Every failure becomes an ApiError
// carrying the server's own message, which says what to change.

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

import { requestKey } from "./lib/reports.js";

const BASE = "api/v1";
const SAFE = new Set(["GET", "HEAD"]);

// An exported report (`rankwise report export`, docs/reports.md) is one HTML file opened
// from disk: its panels' replies and blobs are inline, in a JSON script element, and
// read from there instead of the network. The dashboard itself has no such element.
let exported = null;
/** The inline data of an exported report (null in the dashboard). */
export function exportData() {
  if (exported === null && typeof document?.getElementById === "function") {
    const el = document.getElementById("rankwise-export");
    exported = el ? JSON.parse(el.textContent) : false;
  }
  return exported || null;
}

function dataUriText(uri) {
  const b64 = String(uri).split(",", 2)[1] ?? "";
  const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
  return new TextDecoder().decode(bytes);
}

// Double-submit CSRF: the server set rk_csrf (readable, unlike the session cookie) at
// login; every mutation echoes it in a header a cross-site form cannot send.
function csrfToken() {
  for (const part of document.cookie.split(";")) {
    const [k, ...v] = part.trim().split("=");
    if (k === "rk_csrf" || k === "__Host-rk_csrf") return v.join("=");
  }
  return "";
}

// A 401 from any call means the session is gone: the app shows the login page.
export const UNAUTHORIZED = "rankwise:unauthorized";

function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params ?? {})) {
    if (v === undefined || v === null || v === "") continue;
    if (Array.isArray(v)) v.forEach((item) => q.append(k, String(item)));
    else q.append(k, String(v));
  }
  const s = q.toString();
  return s ? `?${s}` : "";
}

async function request(method, path, { params, body, signal } = {}) {
  let res;
  const headers = { Accept: "application/json" };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (!SAFE.has(method)) headers["X-Rankwise-CSRF"] = csrfToken() || "login";
  try {
    res = await fetch(`${BASE}${path}${query(params)}`, {
      method,
      signal,
      headers,
      credentials: "same-origin",
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (err) {
    if (err.name === "AbortError") throw err;
    throw new ApiError(0, "the rankwise server cannot be reached; is it still running?");
  }
  if (res.status === 204) return null;
  let data;
  try {
    data = await res.json();
  } catch {
    data = null;
  }
  if (res.status === 401 && path !== "/session") {
    window.dispatchEvent(new Event(UNAUTHORIZED));
  }
  if (!res.ok) {
    const msg = data?.error?.message ?? `${method} ${path} failed with HTTP ${res.status}`;
    throw new ApiError(res.status, msg);
  }
  return data;
}

const p = (s) => encodeURIComponent(s);
/** A run's path (relative to api/v1) plus `tail`, each name URI-encoded. */
export const runPath = (project, run, tail = "") => `/projects/${p(project)}/runs/${p(run)}${tail}`;

// The replies, as docs/http-api.md documents them (the fields the dashboard reads; the
// server may send more). Editors and `// @ts-check` files see them through the JSDoc below.

/**
 * @typedef {{name: string, runs: number, updated: number}} Project
 * @typedef {{label: string, incarnation: number, rank: number, local_rank: number,
 *   node: number, host: string, pid: number, is_primary: boolean, state: string,
 *   last_step: number, points: number, dropped: number, started: number,
 *   last_seen: number, exit_code: number|null, signal: number|null,
 *   error_type: string|null, error_message: string|null, traceback: string|null}} Stream
 * @typedef {{project: string, id: string, name: string, group: string|null,
 *   job_type: string|null, tags: string[], notes: string|null, run_mode: string|null,
 *   environment: Object<string, unknown>, state: string, crashed: string[],
 *   world_size: number, num_nodes: number, run_ranks: number, run_nodes: number,
 *   created: number, updated: number, duration: number|null, steps: number,
 *   n_streams: number, config: Object<string, unknown>, summary: Object<string, unknown>,
 *   first_failure: Object<string, unknown>|null, unsynced: Object<string, unknown>|null,
 *   streams?: Stream[], summary_ranks?: Object<string, Object<string, unknown>>,
 *   summary_cross_rank?: Object<string, unknown>,
 *   defined_metrics?: Object<string, {reduce?: string, step_metric?: string,
 *     summary?: string, goal?: string, hidden?: boolean}>,
 *   code?: CodeInfo, nodes?: NodeInfo[]}} Run
 * @typedef {{commit?: string, branch?: string, remote?: string, root?: string,
 *   dirty?: boolean, diff_digest?: string, diff_size?: number,
 *   diff_truncated?: boolean}} GitInfo
 * @typedef {{program?: string, argv?: string[], cwd?: string, git?: GitInfo,
 *   packages?: Object<string, string>, note?: string}} CodeInfo
 * @typedef {{node?: number, host?: string, os?: string, python?: string, torch?: string,
 *   cuda?: string, nccl?: string, driver?: string, gpus?: string[],
 *   env?: Object<string, string>}} NodeInfo
 * @typedef {{label: string, x: number[], y: (number|null)[], downsampled: boolean,
 *   nonfinite?: {x: number[], value: string[]}}} Series
 * @typedef {{x: number[], step: number[], n: number[], nw: number[], mean: (number|null)[],
 *   wmean: (number|null)[], min: (number|null)[], max: (number|null)[],
 *   std: (number|null)[], downsampled: boolean, partial: boolean[],
 *   complete_step: number|null, sum?: (number|null)[],
 *   reduce?: "mean"|"wmean"|"sum"|"min"|"max"}} Band
 * @typedef {{key: string, x: "step"|"time", series: Series[], band: Band|null}} SeriesReply
 * @typedef {{key: string, x: "step"|"time",
 *   runs: {project: string, run: string, series: Series[], band: Band|null}[]}} CompareReply
 * @typedef {{label: string, rank: number, node: number, host: string, state: string,
 *   last_step: number, last_seen: number, step_rate: number|null,
 *   lag_steps: number|null, lag_seconds: number|null, slow: boolean, stalled: boolean,
 *   stall: {where: string, since: number, seconds: number,
 *     stacks?: Object<string, string>}|null, message: string}} RankHealth
 * @typedef {{state: string, crashed: string[], now: number, window: number,
 *   factor: number, median_rate: number|null, ranks: RankHealth[]}} HealthReply
 * @typedef {{label: string, incarnation: number, rank: number, time: number,
 *   idle_seconds: number, where: string, cleared: boolean,
 *   stacks: Object<string, string>|null, step: number|null}} Stall
 * @typedef {{id: number, label: string, rank: number, node: number,
 *   stream: "stdout"|"stderr", time: number, text: string}} ConsoleLine
 * @typedef {{lines: ConsoleLine[], total: number|null, offset: number|null}} ConsolePage
 * @typedef {{key: string, name: string, label: string, rank: number, node: number,
 *   host: string, gpu?: number, x: number[], y: (number|null)[],
 *   downsampled: boolean}} SystemLine
 * @typedef {{key: string, kind: "image"|"audio"|"video"|"html"|"text"|"table"|"histogram",
 *   steps: number[], labels: string[]}} MediaKey
 * @typedef {{step: number, label: string, kind: string, index: number, digest: string,
 *   format: string, caption: string|null, width?: number|null, height?: number|null,
 *   frames?: number|null, fps?: number|null, sample_rate?: number|null,
 *   duration?: number|null, size?: number}} MediaItem
 * @typedef {{items: MediaItem[], steps: number[]}} MediaReply
 * @typedef {{columns: string[], types: string[], rows: unknown[][], total: number,
 *   step: number, label: string, steps: number[]}} TableReply
 * @typedef {{label: string, steps: number[], edges: number[][],
 *   counts: number[][], nan?: number[], posinf?: number[], neginf?: number[]}} HistogramSeries
 * @typedef {{series: HistogramSeries[]}} HistogramsReply
 * @typedef {{path: string, digest?: string, size?: number,
 *   chunks?: [string, number][], ref?: string}} ManifestEntry
 * @typedef {{run_id: string, label?: string|null, time?: number}} ArtifactUse
 * @typedef {{project: string, name: string, version: string, type: string,
 *   digest: string, size?: number, file_count?: number, aliases?: string[], tags?: string[],
 *   description?: string|null, metadata?: Object<string, unknown>, created_at?: number,
 *   run_id?: string|null, label?: string|null, manifest?: {entries: ManifestEntry[]}|null,
 *   used_by?: ArtifactUse[]}} VersionInfo
 *   (fields holding their default are left out of a reply: lib/artifacts.js versionView)
 * @typedef {{name: string, type: string, versions: number, latest: string,
 *   size?: number, updated_at?: number}} ArtifactSummary
 * @typedef {{logged: VersionInfo[], used: VersionInfo[]}} RunArtifacts
 * @typedef {{signal?: AbortSignal}} Opts
 */

/**
 * The URL of a stored blob (an image, a clip, a table's image cell), for `src`
 * attributes: the server picks its content type from the media row naming it.
 * `inline` asks for an html panel to be shown (in a sandboxed frame) rather than saved.
 */
export function blobUrl(project, digest, { inline = false } = {}) {
  const ex = exportData();
  if (ex) return ex.blobs?.[digest] ?? "";
  return `${BASE}/blobs/${p(project)}/${p(digest)}${inline ? "?inline=1" : ""}`;
}

/** An artifact's path (relative to api/v1): `/artifacts/{project}/{name}/...`, encoded. */
const artifactPath = (project, name, ...rest) =>
  [`/artifacts/${p(project)}`, ...(name === undefined ? [] : [p(name)]), ...rest.map(p)].join("/");

/**
 * The download URL of one file of an artifact version, for `href` attributes: each
 * segment of the file's path percent-encoded, its slashes kept. The server answers it as
 * an attachment (Content-Disposition), never rendered in the page.
 */
export function artifactFileUrl(project, name, version, path) {
  const file = String(path).split("/").map(p).join("/");
  return `${BASE}${artifactPath(project, name, version)}/files/${file}`;
}

/**
 * Ask for a reply before the page that shows it is on screen, and hand it over once:
 * the run page asks for the run and its metric keys at once (the keys would otherwise
 * wait for the run to arrive), and the Charts tab takes the answer already on its way.
 * The owner (the run page) holds the object and passes it down; a second `take()`
 * returns null, so a tab opened again asks afresh.
 * @template T
 * @param {() => Promise<T>} request
 * @returns {{take: () => Promise<T|null>|null}}
 */
export function askAhead(request) {
  let reply = request().catch(() => null);
  return {
    take() {
      const r = reply;
      reply = null;
      return r;
    },
  };
}

export const api = {
  /** @type {(opts?: Opts) => Promise<{projects: Project[]}>} */
  projects: (opts) => request("GET", "/projects", opts),
  /** @type {(project: string, params?: object, opts?: Opts) => Promise<{runs: Run[], total: number}>} */
  runs: (project, params, opts) =>
    request("GET", `/projects/${p(project)}/runs`, { ...opts, params }),
  /** @type {(project: string, run: string, opts?: Opts) => Promise<Run>} */
  run: (project, run, opts) => request("GET", runPath(project, run), opts),
  /** @type {(project: string, run: string, opts?: Opts) => Promise<{keys: string[]}>} */
  metrics: (project, run, opts) => request("GET", runPath(project, run, "/metrics"), opts),
  /** @type {(project: string, run: string, params: object, opts?: Opts) => Promise<SeriesReply>} */
  series: (project, run, params, opts) =>
    request("GET", runPath(project, run, "/series"), { ...opts, params }),
  /** The rank × step heatmap of one metric (values: base64 float32, rows × buckets).
   * @type {(project: string, run: string, params: {key: string, buckets?: number, offset?: number, limit?: number}, opts?: Opts) => Promise<object>} */
  heatmap: (project, run, params, opts) =>
    request("GET", runPath(project, run, "/heatmap"), { ...opts, params }),
  /** @type {(body: object, opts?: Opts) => Promise<CompareReply>} */
  compare: (body, opts) => request("POST", "/compare", { ...opts, body }),
  /** @type {(project: string, run: string, params?: {stacks?: boolean}, opts?: Opts) => Promise<HealthReply>} */
  health: (project, run, params, opts) =>
    request("GET", runPath(project, run, "/health"), { ...opts, params }),
  /** @type {(project: string, run: string, params?: {limit?: number}, opts?: Opts) => Promise<{stalls: Stall[]}>} */
  stalls: (project, run, params, opts) =>
    request("GET", runPath(project, run, "/stalls"), { ...opts, params }),
  /** One page of console lines (params as in lib/logs.js consoleParams, plus position). */
  /** @type {(project: string, run: string, params: object, opts?: Opts) => Promise<ConsolePage>} */
  console: (project, run, params, opts) =>
    request("GET", runPath(project, run, "/console"), { ...opts, params }),
  /** @type {(project: string, run: string, opts?: Opts) => Promise<{keys: string[]}>} */
  system: (project, run, opts) => request("GET", runPath(project, run, "/system"), opts),
  /** @type {(project: string, run: string, params: {key: string, max_points?: number}, opts?: Opts) => Promise<{key: string, series: SystemLine[]}>} */
  systemSeries: (project, run, params, opts) =>
    request("GET", runPath(project, run, "/system/series"), { ...opts, params }),
  /** @type {(project: string, opts?: Opts) => Promise<{views: object[]}>} */
  views: (project, opts) => request("GET", `/projects/${p(project)}/views`, opts),
  saveView: (project, view, opts) =>
    request("POST", `/projects/${p(project)}/views`, { ...opts, body: view }),
  deleteView: (project, name, opts) =>
    request("DELETE", `/projects/${p(project)}/views`, { ...opts, params: { name } }),
  /** @type {(project: string, run: string, opts?: Opts) => Promise<{keys: MediaKey[]}>} */
  mediaKeys: (project, run, opts) => request("GET", runPath(project, run, "/media/keys"), opts),
  /** @type {(project: string, run: string, params: {key: string, label?: string, step?: number}, opts?: Opts) => Promise<MediaReply>} */
  media: (project, run, params, opts) =>
    request("GET", runPath(project, run, "/media"), { ...opts, params }),
  /** @type {(project: string, run: string, params: object, opts?: Opts) => Promise<TableReply>} */
  table: (project, run, params, opts) =>
    request("GET", runPath(project, run, "/tables"), { ...opts, params }),
  /** @type {(project: string, run: string, params: {key: string, label?: string}, opts?: Opts) => Promise<HistogramsReply>} */
  histograms: (project, run, params, opts) =>
    request("GET", runPath(project, run, "/histograms"), { ...opts, params }),
  /** A text panel's words (a blob of format txt), as text: shown with Preact, never as HTML. */
  blobText: async (project, digest, opts) => {
    const ex = exportData();
    if (ex) {
      if (!ex.blobs?.[digest]) throw new ApiError(404, "this text panel is not in the export");
      return dataUriText(ex.blobs[digest]);
    }
    const res = await fetch(blobUrl(project, digest), { signal: opts?.signal, credentials: "same-origin" });
    if (!res.ok) throw new ApiError(res.status, `this text panel could not be read (HTTP ${res.status})`);
    return res.text();
  },
  /** @type {(project: string, params?: {type?: string}, opts?: Opts) => Promise<{artifacts: ArtifactSummary[]}>} */
  artifacts: (project, params, opts) => request("GET", artifactPath(project), { ...opts, params }),
  /** Every version of an artifact, newest first (no manifests). */
  /** @type {(project: string, name: string, opts?: Opts) => Promise<{versions: VersionInfo[]}>} */
  artifactVersions: (project, name, opts) => request("GET", artifactPath(project, name), opts),
  /** One version (`latest`, `v3` or an alias) with its manifest and `used_by`. */
  /** @type {(project: string, name: string, ref: string, opts?: Opts) => Promise<VersionInfo>} */
  artifactVersion: (project, name, ref, opts) => request("GET", artifactPath(project, name, ref), opts),
  /** What a run logged and used (no manifests; empty lists for a run with none). */
  /** @type {(project: string, run: string, opts?: Opts) => Promise<RunArtifacts>} */
  runArtifacts: (project, run, opts) => request("GET", `/runs/${p(project)}/${p(run)}/artifacts`, opts),
  /** The alert events a run raised, newest first, each with its deliveries' state. */
  runAlerts: (project, run, opts) => request("GET", runPath(project, run, "/alerts"), opts),
  /** Alert destinations (admin tokens only): never their secrets. */
  destinations: (opts) => request("GET", "/alerts/destinations", opts),
  addDestination: (body) => request("POST", "/alerts/destinations", { body }),
  removeDestination: (id) => request("DELETE", `/alerts/destinations/${p(id)}`),
  testDestination: (id) => request("POST", `/alerts/destinations/${p(id)}/test`),
  /** @type {(project: string, opts?: Opts) => Promise<{reports: object[]}>} */
  reports: (project, opts) => request("GET", `/projects/${p(project)}/reports`, opts),
  /** One report: the latest version, or `version`. */
  report: (project, name, version, opts) =>
    request("GET", `/projects/${p(project)}/reports/${p(name)}`, { ...opts, params: { version } }),
  reportVersions: (project, name, opts) =>
    request("GET", `/projects/${p(project)}/reports/${p(name)}/versions`, opts),
  /** Save a new version; `base` is the version the edit started from (409 if not the latest). */
  saveReport: (project, name, body) =>
    request("POST", `/projects/${p(project)}/reports/${p(name)}`, { body }),
  deleteReport: (project, name) => request("DELETE", `/projects/${p(project)}/reports/${p(name)}`),
  /**
   * One request of a report panel (lib/reports.js blockRequests): from the network, or
   * in an exported report from its inline replies. `record` (a Map) keeps each reply
   * under its request key, for the dashboard's export button.
   */
  block: async (req, { signal, record } = {}) => {
    const key = requestKey(req);
    const ex = exportData();
    if (ex) {
      if (!(key in (ex.replies ?? {}))) throw new ApiError(404, "this panel's data is not in the export");
      return ex.replies[key];
    }
    const path = `/${req.path.map(p).join("/")}`;
    const data = await request(req.method, path, { signal, params: req.params, body: req.body ?? undefined });
    record?.set(key, data);
    return data;
  },

  /** Change a run's name, tags, notes, group or job type (a writer: a write or admin token, or `rankwise ui`). */
  editRun: (project, run, body) => request("POST", runPath(project, run, "/edits"), { body }),
  /** The run's edits, oldest first. */
  runEdits: (project, run, opts) => request("GET", runPath(project, run, "/edits"), opts),
  /** Add and remove tags on several runs: {runs, add, remove}. */
  bulkTags: (project, body) => request("POST", `/projects/${p(project)}/runs/tags`, { body }),
  /** Delete runs: {runs} or {filters}, with purge (for good) and dry_run (count only). */
  deleteRuns: (project, body) => request("POST", `/projects/${p(project)}/runs/delete`, { body }),
  /** Take runs out of the trash: {runs}. */
  restoreRuns: (project, body) => request("POST", `/projects/${p(project)}/runs/restore`, { body }),
  /** The project's deleted runs, and the server's retention. */
  trash: (project, opts) => request("GET", `/projects/${p(project)}/trash`, opts),
  /** W&B's MongoDB-style filters, evaluated by the server: {filters, order, limit, offset}. */
  searchRuns: (project, body, opts) =>
    request("POST", `/projects/${p(project)}/runs/search`, { ...opts, body }),
  whoami: (opts) => request("GET", "/session", opts),
  login: (token) => request("POST", "/session", { body: { token } }),
  logout: () => request("DELETE", "/session"),
};
