// The HTTP API (docs/http-api.md) as plain functions. Every failure becomes an ApiError
// carrying the server's own message, which says what to change.

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

const BASE = "api/v1";
const SAFE = new Set(["GET", "HEAD"]);

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
  let data = null;
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
const runPath = (project, run) => `/projects/${p(project)}/runs/${p(run)}`;

// The run page asks for a run and its metric keys at once (the keys would otherwise wait
// for the run to arrive); the charts tab takes the answer that is already on its way.
const early = new Map();

export function prefetchMetrics(project, run) {
  const key = `${project}/${run}`;
  if (!early.has(key)) early.set(key, api.metrics(project, run).catch(() => null));
}

export function takeMetrics(project, run) {
  const key = `${project}/${run}`;
  const p = early.get(key);
  early.delete(key);
  return p;
}

export const api = {
  projects: (opts) => request("GET", "/projects", opts),
  runs: (project, params, opts) =>
    request("GET", `/projects/${p(project)}/runs`, { ...opts, params }),
  run: (project, run, opts) => request("GET", runPath(project, run), opts),
  metrics: (project, run, opts) => request("GET", `${runPath(project, run)}/metrics`, opts),
  series: (project, run, params, opts) =>
    request("GET", `${runPath(project, run)}/series`, { ...opts, params }),
  compare: (body, opts) => request("POST", "/compare", { ...opts, body }),
  views: (project, opts) => request("GET", `/projects/${p(project)}/views`, opts),
  saveView: (project, view, opts) =>
    request("POST", `/projects/${p(project)}/views`, { ...opts, body: view }),
  deleteView: (project, name, opts) =>
    request("DELETE", `/projects/${p(project)}/views`, { ...opts, params: { name } }),
  whoami: (opts) => request("GET", "/session", opts),
  login: (token) => request("POST", "/session", { body: { token } }),
  logout: () => request("DELETE", "/session"),
  // Issue 5 (rank health, system metrics, console): used when the server offers them.
  get: (path, params, opts) => request("GET", path, { ...opts, params }),
};
