// Metric keys as the Charts tab lays them out: sections by prefix ("train/", "val/"),
// filtered by a search box.

/** The section of a key: its text before the first "/", or "" for plain keys. */
export function sectionOf(key) {
  const i = key.indexOf("/");
  return i > 0 ? key.slice(0, i) : "";
}

/**
 * Keys grouped into `[{name, keys}]`: sections in the order train, val(idation), test,
 * then the others alphabetically, and unprefixed keys last under "" (shown as "other").
 */
export function sections(keys) {
  const map = new Map();
  for (const k of keys) {
    const s = sectionOf(k);
    if (!map.has(s)) map.set(s, []);
    map.get(s).push(k);
  }
  const rank = (s) => {
    const order = ["train", "training", "val", "valid", "validation", "eval", "test"];
    const i = order.indexOf(s.toLowerCase());
    if (s === "") return [2, ""];
    return i >= 0 ? [0, String(i).padStart(2, "0")] : [1, s.toLowerCase()];
  };
  return [...map.entries()]
    .sort((a, b) => {
      const [ra, sa] = rank(a[0]);
      const [rb, sb] = rank(b[0]);
      return ra - rb || (sa < sb ? -1 : sa > sb ? 1 : 0);
    })
    .map(([name, ks]) => ({ name, keys: ks.slice().sort() }));
}

/**
 * Keys matching a search: every whitespace-separated word must occur (case-insensitive);
 * a query given as /regex/ is used as a regular expression when it is a valid one.
 */
export function filterKeys(keys, query) {
  const q = (query ?? "").trim();
  if (!q) return keys;
  if (q.length > 2 && q.startsWith("/") && q.endsWith("/")) {
    try {
      const re = new RegExp(q.slice(1, -1), "i");
      return keys.filter((k) => re.test(k));
    } catch {
      // not a valid pattern: fall through to plain words
    }
  }
  const words = q.toLowerCase().split(/\s+/);
  return keys.filter((k) => {
    const lk = k.toLowerCase();
    return words.every((w) => lk.includes(w));
  });
}

/** Flattens nested config/summary objects to `[["optimizer.lr", 0.1], ...]`, sorted. */
export function flatten(obj, prefix = "", out = []) {
  if (obj === null || typeof obj !== "object" || Array.isArray(obj)) {
    out.push([prefix, obj]);
    return out;
  }
  const keys = Object.keys(obj);
  if (!keys.length && prefix) out.push([prefix, obj]);
  for (const k of keys) flatten(obj[k], prefix ? `${prefix}.${k}` : k, out);
  if (!prefix) out.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  return out;
}

/** Summary keys whose values are numbers in at least one run: candidate table columns. */
export function numericSummaryKeys(runs) {
  const keys = new Set();
  for (const r of runs) {
    for (const [k, v] of flatten(r.summary ?? {})) {
      if (typeof v === "number" || v === null || v === "NaN" || v === "Infinity" || v === "-Infinity") keys.add(k);
    }
  }
  return [...keys].sort();
}

/** A value of a flattened summary by dotted key. */
export function summaryValue(run, key) {
  const s = run.summary ?? {};
  if (key in s) return s[key];
  let cur = s;
  for (const part of key.split(".")) {
    if (cur === null || typeof cur !== "object" || !(part in cur)) return undefined;
    cur = cur[part];
  }
  return cur;
}
