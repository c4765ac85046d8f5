// Hash routes, so the server only ever serves index.html at "/":
//
//   #/                                 projects
//   #/p/{project}?state=..&q=..        runs of a project (filters in the query)
//   #/p/{project}/r/{run}?tab=..       one run
//   #/p/{project}/g/{group}            the runs of a group, overlaid
//   #/p/{project}/artifacts?type=..&name=..&version=..   the project's artifacts
//   #/p/{project}/reports?add=chart&runs=..&metric=..   the project's reports (add a chart)
//   #/p/{project}/reports/{name}?version=N&edit=1        one report
//   #/compare?runs=p/r,p/r2            chosen runs, overlaid
//   #/alerts                           alert destinations (admin)
//
// Every user-given segment is URI-encoded (`seg`), so a run name cannot change the route.

import { useEffect, useState } from "preact/hooks";
import { seg } from "./lib/escape.js";

export function parseHash(hash) {
  const raw = (hash ?? "").replace(/^#/, "");
  const qi = raw.indexOf("?");
  const path = qi >= 0 ? raw.slice(0, qi) : raw;
  const params = new URLSearchParams(qi >= 0 ? raw.slice(qi + 1) : "");
  const parts = path.split("/").filter(Boolean).map(safeDecode);
  if (parts[0] === "p" && parts.length >= 2) {
    const project = parts[1];
    if (parts[2] === "r" && parts[3]) return { page: "run", project, run: parts[3], params };
    if (parts[2] === "g" && parts[3]) return { page: "group", project, group: parts[3], params };
    if (parts[2] === "artifacts") return { page: "artifacts", project, params };
    if (parts[2] === "reports" && parts[3]) return { page: "report", project, report: parts[3], params };
    if (parts[2] === "reports") return { page: "reports", project, params };
    return { page: "runs", project, params };
  }
  if (parts[0] === "compare") return { page: "compare", params };
  if (parts[0] === "alerts") return { page: "alerts", params };
  return { page: "projects", params };
}

function safeDecode(s) {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

function withQuery(path, params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params ?? {})) {
    if (v === undefined || v === null || v === "" || v === false) continue;
    if (Array.isArray(v)) {
      if (v.length) q.set(k, v.join(","));
    } else q.set(k, String(v));
  }
  const s = q.toString();
  return s ? `${path}?${s}` : path;
}

export const href = {
  projects: () => "#/",
  runs: (project, params) => withQuery(`#/p/${seg(project)}`, params),
  run: (project, run, params) => withQuery(`#/p/${seg(project)}/r/${seg(run)}`, params),
  group: (project, group) => `#/p/${seg(project)}/g/${seg(group)}`,
  artifacts: (project, params) => withQuery(`#/p/${seg(project)}/artifacts`, params),
  reports: (project, params) => withQuery(`#/p/${seg(project)}/reports`, params),
  report: (project, name, params) => withQuery(`#/p/${seg(project)}/reports/${seg(name)}`, params),
  compare: (refs) => withQuery("#/compare", { runs: refs }),
  alerts: () => "#/alerts",
};

/** The list form of a comma-separated query parameter. */
export function listParam(params, name) {
  const v = params.get(name);
  return v ? v.split(",").filter(Boolean) : [];
}

export function navigate(to, { replace = false } = {}) {
  if (replace) history.replaceState(null, "", to);
  else history.pushState(null, "", to);
  window.dispatchEvent(new HashChangeEvent("hashchange"));
}

export function useRoute() {
  const [route, setRoute] = useState(() => ({ ...parseHash(location.hash), hash: location.hash }));
  useEffect(() => {
    // pushState + our own event, and the browser's back/forward (popstate, hashchange):
    // whichever arrives, the route changes once per distinct hash.
    const on = () =>
      setRoute((prev) =>
        prev.hash === location.hash ? prev : { ...parseHash(location.hash), hash: location.hash },
      );
    window.addEventListener("hashchange", on);
    window.addEventListener("popstate", on);
    return () => {
      window.removeEventListener("hashchange", on);
      window.removeEventListener("popstate", on);
    };
  }, []);
  return route;
}
