// Reports (docs/reports.md): a title and an ordered list of blocks, Markdown text or live
// panels. This module is pure: the block kinds, the edits (add, move, remove), and the
// requests each panel makes. Those requests are declared once here, and the Python
// exporter (rankwise/report_export.py) makes the same ones, so an exported report holds
// exactly the replies its panels ask for (tests/data/report_requests.json pins both).

export const KINDS = ["text", "chart", "media", "table", "histogram", "health", "failure", "lineage"];
export const KIND_NAMES = {
  text: "Text",
  chart: "Chart",
  media: "Media",
  table: "Table",
  histogram: "Histogram",
  health: "Health strip",
  failure: "Hang or failure",
  lineage: "Artifact lineage",
};
export const CHART_POINTS = 1000; // a report chart's points per line, fixed: the export asks the same
export const TABLE_ROWS = 100;

let counter = 0;
/** A block id unique within a report (kept in the saved JSON, the key of its panel). */
export function newId() {
  counter += 1;
  return `b${Date.now().toString(36)}${counter.toString(36)}`;
}

/** A new block of `kind`, with the run (or runs) given filled in. */
export function newBlock(kind, { project = "", run = "", key = "" } = {}) {
  const id = newId();
  const ref = { project, run };
  switch (kind) {
    case "text":
      return { id, type: "text", text: "" };
    case "chart":
      return { id, type: "chart", runs: run ? [ref] : [], metrics: key ? [key] : [], mode: "band", x: "step", log: false, smoothing: 0 };
    case "media":
    case "table":
    case "histogram":
      return { id, type: kind, run: ref, key, step: null };
    case "lineage":
      return { id, type: "lineage", artifact: key, version: "latest" };
    default:
      return { id, type: kind, run: ref };
  }
}

/** `blocks` with block `i` moved by `by` places (clamped); the same list when it cannot move. */
export function moveBlock(blocks, i, by) {
  const j = Math.max(0, Math.min(blocks.length - 1, i + by));
  if (i === j || i < 0 || i >= blocks.length) return blocks;
  const out = blocks.slice();
  const [b] = out.splice(i, 1);
  out.splice(j, 0, b);
  return out;
}

export function removeBlock(blocks, i) {
  return blocks.filter((_, k) => k !== i);
}

export function insertBlock(blocks, i, block) {
  const out = blocks.slice();
  out.splice(Math.max(0, Math.min(blocks.length, i)), 0, block);
  return out;
}

export function replaceBlock(blocks, i, block) {
  return blocks.map((b, k) => (k === i ? block : b));
}

/** What is missing before a block can be drawn (null: nothing), in words. */
export function blockProblem(block) {
  if (block.type === "text") return null;
  if (block.type === "chart") {
    if (!block.runs?.length) return "pick at least one run";
    if (!block.metrics?.length) return "pick at least one metric";
    return null;
  }
  if (block.type === "lineage") return block.artifact ? null : "name an artifact";
  if (!block.run?.project || !block.run?.run) return "pick a run";
  if (["media", "table", "histogram"].includes(block.type) && !block.key) return "pick a key";
  return null;
}

const runPath = (ref, ...tail) => ["projects", ref.project, "runs", ref.run, ...tail];

function drop(params) {
  const out = {};
  for (const [k, v] of Object.entries(params)) if (v !== null && v !== undefined && v !== "") out[k] = v;
  return out;
}

/**
 * The API requests a block's panel makes, each {method, path: [segments], params, body}:
 * `path` unencoded segments under api/v1. A block that cannot be drawn yet makes none.
 * @returns {{method: string, path: string[], params: object, body: object|null}[]}
 */
export function blockRequests(block, reportProject) {
  if (blockProblem(block)) return [];
  const get = (path, params = {}) => ({ method: "GET", path, params: drop(params), body: null });
  switch (block.type) {
    case "chart":
      return block.metrics.map((key) => ({
        method: "POST",
        path: ["compare"],
        params: {},
        body: {
          runs: block.runs.map((r) => `${r.project}/${r.run}`),
          key,
          x: block.x ?? "step",
          max_points: CHART_POINTS,
          streams: block.mode === "ranks" ? "all" : "none",
          band: true,
        },
      }));
    case "media":
      return [get(runPath(block.run, "media"), { key: block.key, label: block.label, step: block.step })];
    case "table":
      return [get(runPath(block.run, "tables"), { key: block.key, label: block.label, step: block.step, limit: TABLE_ROWS })];
    case "histogram":
      return [get(runPath(block.run, "histograms"), { key: block.key, label: block.label })];
    case "health":
      return [get(runPath(block.run)), get(runPath(block.run, "health"))];
    case "failure":
      return [get(runPath(block.run))];
    case "lineage":
      return [get(["artifacts", reportProject, block.artifact, block.version || "latest"])];
    default:
      return [];
  }
}

/** JSON with object keys sorted at every level, no spaces (Python: sort_keys, separators). */
export function canonical(value) {
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
  if (value && typeof value === "object") {
    const keys = Object.keys(value).filter((k) => value[k] !== undefined).sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonical(value[k])}`).join(",")}}`;
  }
  return JSON.stringify(value);
}

/** The key an export stores a request's reply under: the request, canonical JSON. */
export function requestKey(req) {
  return canonical({ method: req.method, path: req.path, params: req.params ?? {}, body: req.body ?? null });
}

/** The items of the step a media panel shows: the block's step, else the latest. */
export function itemsAt(reply, step) {
  const items = reply?.items ?? [];
  if (!items.length) return [];
  const want = step ?? Math.max(...items.map((it) => it.step));
  return items.filter((it) => it.step === want);
}

/** The digests a media panel shows (images, clips, text at its step), for an export to inline. */
export function mediaDigests(reply, step) {
  return itemsAt(reply, step).filter((it) => it.kind !== "html").map((it) => it.digest);
}
