// The Runs page's state lives in the URL (so a view is a link) and in saved views
// (stored by the server). This module converts between the three forms: URL query
// parameters, the filters object of a saved view, and the runs API's parameters.

import { summaryValue } from "./metrics.js";
import { runDuration } from "./format.js";

export const STATES = ["running", "finished", "failed", "killed", "crashed"];
const SERVER_SORTS = new Set(["created", "updated", "name", "state", "steps"]);

/** Filters from the hash's query parameters. */
export function filtersFromParams(params) {
  const list = (k) => (params.get(k) ? params.get(k).split(",").filter(Boolean) : []);
  return {
    state: list("state").filter((s) => STATES.includes(s)),
    group: params.get("group") ?? "",
    job_type: params.get("job_type") ?? "",
    tag: list("tag"),
    q: params.get("q") ?? "",
    sort: params.get("sort") ?? "-created",
    by: params.get("by") ?? "",
    agg: params.get("agg") ?? "",
    pc: list("pc"),
    cols: list("cols"),
    view: params.get("view") ?? "",
    filter: params.get("filter") ?? "",
  };
}

/** The hash parameters for filters (href.runs takes this object). */
export function paramsFromFilters(f) {
  return {
    state: f.state, group: f.group, job_type: f.job_type, tag: f.tag, q: f.q,
    sort: f.sort === "-created" ? "" : f.sort, by: f.by, cols: f.cols, view: f.view,
    filter: f.filter, agg: f.agg, pc: f.pc,
  };
}

/** What a saved view stores: filters and columns (not the view's own name). */
export function viewFromFilters(name, f) {
  return {
    name,
    filters: {
      state: f.state, group: f.group, job_type: f.job_type, tag: f.tag, q: f.q, sort: f.sort, by: f.by,
      ...(f.filter ? { filter: f.filter } : {}),
      ...(f.agg ? { agg: f.agg } : {}),
      ...(f.pc?.length ? { pc: f.pc } : {}),
    },
    columns: f.cols,
  };
}

/** And back: the filters a saved view opens with. */
export function filtersFromView(view) {
  const v = view.filters ?? {};
  const arr = (x) => (Array.isArray(x) ? x.map(String) : x ? [String(x)] : []);
  return {
    state: arr(v.state).filter((s) => STATES.includes(s)),
    group: v.group ? String(v.group) : "",
    job_type: v.job_type ? String(v.job_type) : "",
    tag: arr(v.tag),
    q: v.q ? String(v.q) : "",
    sort: v.sort ? String(v.sort) : "-created",
    by: v.by ? String(v.by) : "",
    cols: arr(view.columns),
    view: view.name,
    filter: typeof v.filter === "string" ? v.filter : "",
    agg: v.agg ? String(v.agg) : "",
    pc: arr(v.pc),
  };
}

/** Do the filters hide any run? (Sorting, grouping and columns do not.) */
export function isFiltered(f) {
  return Boolean(f.state.length || f.group || f.job_type || f.tag.length || f.q || f.filter);
}

/** Is the sort one the server does (over all runs) or one done here (over the page)? */
export function parseSort(sort) {
  const desc = sort.startsWith("-");
  const key = desc ? sort.slice(1) : sort;
  return { key, desc, server: SERVER_SORTS.has(key) };
}

/** The runs API's parameters for filters. */
export function apiParams(f, limit = 500) {
  const s = parseSort(f.sort);
  return {
    state: f.state, group: f.group || undefined, job_type: f.job_type || undefined,
    tag: f.tag, q: f.q || undefined, sort: s.server ? f.sort : "-created", limit,
  };
}

function sortValue(run, key, now) {
  switch (key) {
    case "group": return run.group ?? "";
    case "job_type": return run.job_type ?? "";
    case "ranks": return run.world_size ?? 0;
    case "duration": return runDuration(run, now) ?? -1;
    default:
      if (key.startsWith("s:")) {
        const v = summaryValue(run, key.slice(2));
        return typeof v === "number" ? v : null;
      }
      return null;
  }
}

/** Runs sorted by a key the server does not sort by; missing values always last. */
export function clientSort(runs, sort, now = Date.now() / 1000) {
  const { key, desc, server } = parseSort(sort);
  if (server) return runs;
  const rows = runs.map((r, i) => [sortValue(r, key, now), i, r]);
  rows.sort((a, b) => {
    const [va, ia] = a;
    const [vb, ib] = b;
    if (va === null && vb === null) return ia - ib;
    if (va === null) return 1;
    if (vb === null) return -1;
    const c = va < vb ? -1 : va > vb ? 1 : 0;
    return (desc ? -c : c) || ia - ib;
  });
  return rows.map((r) => r[2]);
}

/** A run's value of a config key ("lr", "opt.name"), or undefined. */
export function configValue(run, key) {
  const c = run.config ?? {};
  if (key in c) return c[key];
  let cur = c;
  for (const part of key.split(".")) {
    if (cur === null || typeof cur !== "object" || !(part in cur)) return undefined;
    cur = cur[part];
  }
  return cur;
}

/** What rows are grouped by: "group", "job_type" or "config.KEY". */
export function groupKeyOf(run, by) {
  if (by === "job_type") return run.job_type ?? "";
  if (by.startsWith("config.")) {
    const v = configValue(run, by.slice("config.".length));
    return v === undefined || v === null ? "" : typeof v === "string" ? v : JSON.stringify(v);
  }
  return run.group ?? "";
}

/** Config keys with a scalar value in some run (grouping and parallel-coordinates axes). */
export function configKeys(runs, numericOnly = false) {
  const keys = new Set();
  for (const r of runs) {
    for (const [k, v] of Object.entries(r.config ?? {})) {
      if (k.startsWith("_")) continue;
      if (typeof v === "number" || (!numericOnly && (typeof v === "string" || typeof v === "boolean"))) keys.add(k);
    }
  }
  return [...keys].sort();
}

/** Mean, min and max of a summary key over runs (its finite numbers only). */
export function aggregate(runs, key) {
  const xs = runs.map((r) => r.summary?.[key]).filter((v) => typeof v === "number" && Number.isFinite(v));
  if (!xs.length) return null;
  const sum = xs.reduce((a, b) => a + b, 0);
  return { n: xs.length, mean: sum / xs.length, min: Math.min(...xs), max: Math.max(...xs) };
}

/** Rows grouped by ``by`` (run group by default), groups in first-seen order, runs
 * without a value last. */
export function groupRuns(runs, by = "group") {
  const map = new Map();
  for (const r of runs) {
    const g = groupKeyOf(r, by);
    if (!map.has(g)) map.set(g, []);
    map.get(g).push(r);
  }
  const named = [...map.entries()].filter(([g]) => g !== "");
  const loose = map.get("") ?? [];
  const out = named.map(([group, rs]) => ({ group, runs: rs }));
  if (loose.length) out.push({ group: "", runs: loose });
  return out;
}

/** Distinct groups, job types and tags of a set of runs (filter choices). */
export function facets(runs) {
  const groups = new Set();
  const jobTypes = new Set();
  const tags = new Set();
  for (const r of runs) {
    if (r.group) groups.add(r.group);
    if (r.job_type) jobTypes.add(r.job_type);
    for (const t of r.tags ?? []) tags.add(t);
  }
  const sorted = (s) => [...s].sort();
  return { groups: sorted(groups), jobTypes: sorted(jobTypes), tags: sorted(tags) };
}

/** The filter builder's filter (W&B's MongoDB-style JSON in the URL), or null. */
export function parseFilter(text) {
  if (!text) return null;
  try {
    const v = JSON.parse(text);
    return v && typeof v === "object" && !Array.isArray(v) && Object.keys(v).length ? v : null;
  } catch {
    return null;
  }
}

const escapeRegex = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/** The server search's body for filters: the builder's filter and the chips, all must hold. */
export function searchBody(f, limit = 500) {
  const parts = [];
  const built = parseFilter(f.filter);
  if (built) parts.push(built);
  if (f.state.length) parts.push({ state: { $in: f.state } });
  if (f.group) parts.push({ group: f.group });
  if (f.job_type) parts.push({ job_type: f.job_type });
  for (const t of f.tag) parts.push({ tags: t });
  if (f.q) parts.push({ display_name: { $regex: `(?i)${escapeRegex(f.q)}` } });
  const s = parseSort(f.sort);
  const order = { created: "created_at", updated: "updated_at", name: "display_name", state: "state" }[s.key];
  return {
    filters: parts.length === 1 ? parts[0] : parts.length ? { $and: parts } : {},
    order: order ? `${s.desc ? "-" : "+"}${order}` : "-created_at",
    limit,
  };
}

export const FILTER_OPS = ["$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$regex", "$exists"];

/** One builder row {field, op, value} as a condition; the value is read as JSON when it
 * parses (numbers, true, null, lists), else as a string. */
export function conditionOf(row) {
  let value = row.value;
  if (row.op === "$exists") value = row.value !== "false";
  else if (row.op !== "$regex") {
    try {
      value = JSON.parse(row.value);
    } catch {
      value = row.value;
    }
    if ((row.op === "$in" || row.op === "$nin") && !Array.isArray(value)) {
      value = String(row.value).split(",").map((x) => x.trim()).filter(Boolean)
        .map((x) => { try { return JSON.parse(x); } catch { return x; } });
    }
  }
  return { [row.field.trim()]: { [row.op]: value } };
}

/** Builder rows as one filter ($and of the rows). */
export function filterOfRows(rows) {
  const conds = rows.filter((r) => r.field.trim()).map(conditionOf);
  if (!conds.length) return "";
  return JSON.stringify(conds.length === 1 ? conds[0] : { $and: conds });
}

/** And back, for the rows a filter in the URL opens with (one level of $and). */
export function rowsOfFilter(text) {
  const v = parseFilter(text);
  if (!v) return [];
  const conds = Array.isArray(v.$and) && Object.keys(v).length === 1 ? v.$and : [v];
  const rows = [];
  for (const c of conds) {
    for (const [field, spec] of Object.entries(c ?? {})) {
      if (field.startsWith("$")) return [];
      const ops = spec && typeof spec === "object" && !Array.isArray(spec) ? Object.entries(spec) : [["$eq", spec]];
      for (const [op, val] of ops) {
        rows.push({ field, op, value: typeof val === "string" && op === "$regex" ? val : JSON.stringify(val) });
      }
    }
  }
  return rows;
}

/** The builder's filter with ``field`` kept within [lo, hi] (a brushed axis); null
 * bounds remove the field's range. */
export function withRange(filterText, field, lo, hi) {
  const rows = rowsOfFilter(filterText).filter(
    (r) => !(r.field === field && (r.op === "$gte" || r.op === "$lte")),
  );
  if (lo !== null && hi !== null) {
    rows.push({ field, op: "$gte", value: JSON.stringify(lo) }, { field, op: "$lte", value: JSON.stringify(hi) });
  }
  return filterOfRows(rows);
}
