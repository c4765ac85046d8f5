// Artifacts as the dashboard shows them: the server's replies (docs/http-api.md) with
// their omitted defaults filled in, names grouped by type, sizes and digests made short,
// and the download URL of a file. Nothing here builds HTML: every name, path, metadata
// value and reference URI reaches the page as a text node.

import { fmtBytes } from "./system.js";

export { fmtBytes };

/**
 * A VersionInfo with the fields the server leaves out when they hold their default
 * (msgspec `omit_defaults`): an empty alias list, no description, empty metadata, ...
 * @param {Partial<import("../api.js").VersionInfo>} v
 * @returns {import("../api.js").VersionInfo}
 */
export function versionView(v) {
  return {
    size: 0,
    file_count: 0,
    description: null,
    created_at: 0,
    run_id: null,
    label: null,
    manifest: null,
    ...v,
    aliases: v.aliases ?? [],
    tags: v.tags ?? [],
    metadata: v.metadata ?? {},
    used_by: (v.used_by ?? []).map((u) => ({ label: null, time: 0, ...u })),
  };
}

/**
 * A manifest's entries as rows: files (digest, size, chunk count) and references (the
 * URI, a string rankwise never fetches), in the manifest's (path) order.
 * @param {{entries?: object[]}|null|undefined} manifest
 */
export function manifestRows(manifest) {
  return (manifest?.entries ?? []).map((e) =>
    e.ref !== undefined && e.ref !== null
      ? { path: e.path, ref: String(e.ref), digest: "", size: 0, chunks: 0 }
      : { path: e.path, ref: null, digest: e.digest ?? "", size: e.size ?? 0, chunks: (e.chunks ?? []).length },
  );
}

/** The first `n` hex digits of a digest and an ellipsis; the full value goes in a title. */
export function shortDigest(digest, n = 12) {
  const d = String(digest ?? "");
  return d.length > n ? `${d.slice(0, n)}…` : d;
}

/**
 * The project's artifact names by type: `[{type, names: [ArtifactSummary]}]`, types in
 * alphabetical order, names as the server sorted them (by name).
 * @param {import("../api.js").ArtifactSummary[]} list
 */
export function groupByType(list) {
  const groups = new Map();
  for (const a of list ?? []) {
    if (!groups.has(a.type)) groups.set(a.type, []);
    groups.get(a.type).push(a);
  }
  return [...groups.keys()].sort().map((type) => ({ type, names: groups.get(type) }));
}

/** Metadata as indented JSON text (shown in a <pre>, never interpreted). */
export function metadataText(metadata) {
  if (!metadata || (typeof metadata === "object" && !Object.keys(metadata).length)) return "";
  try {
    return JSON.stringify(metadata, null, 2);
  } catch {
    return String(metadata);
  }
}

/** "train-1 (rank-0)": who logged a version, or used one. */
export function byline(runId, label) {
  if (!runId) return "";
  return label ? `${runId} (${label})` : runId;
}

/** The aliases worth showing beside a version: all of them, `latest` first. */
export function orderedAliases(aliases) {
  const list = [...(aliases ?? [])];
  return list.sort((a, b) => (a === "latest" ? -1 : b === "latest" ? 1 : a.localeCompare(b)));
}
