// The Logs tab's model: which lines of a run's console are on screen, which pages of
// them to fetch, and where the scrollbar is, for logs of any length.
//
// Lines are addressed by their index among the lines matching the filters, in time
// order (the API's `offset`). The list is virtual: only the rows in view exist, and a
// scroll position maps to an index. Browsers cap an element's height (~17M px in
// Firefox, ~33M in Chrome), so past MAX_SCROLL_PX the scrollbar is scaled: the whole
// log still fits it, each pixel then stands for more than one row.

export const ROW_PX = 20;
export const PAGE = 200;
export const MAX_SCROLL_PX = 8_000_000;

/** Height of the scrolled content for `total` rows. */
export function contentHeight(total, rowPx = ROW_PX) {
  return Math.min(total * rowPx, MAX_SCROLL_PX);
}

/** How many whole rows fit in `viewPx`. */
export function rowsInView(viewPx, rowPx = ROW_PX) {
  return Math.max(1, Math.floor(viewPx / rowPx));
}

/** The (fractional) index of the first row in view at `scrollTop`. */
export function indexAt(scrollTop, total, viewPx, rowPx = ROW_PX) {
  const maxScroll = contentHeight(total, rowPx) - viewPx;
  const maxIndex = total - viewPx / rowPx;
  if (maxScroll <= 0 || maxIndex <= 0) return 0;
  const t = Math.min(1, Math.max(0, scrollTop / maxScroll));
  return t * maxIndex;
}

/** The scrollTop that puts row `index` first in view (inverse of indexAt). */
export function scrollTopFor(index, total, viewPx, rowPx = ROW_PX) {
  const maxScroll = contentHeight(total, rowPx) - viewPx;
  const maxIndex = total - viewPx / rowPx;
  if (maxScroll <= 0 || maxIndex <= 0) return 0;
  return (Math.min(Math.max(0, index), maxIndex) / maxIndex) * maxScroll;
}

/** Rows [first, end) to render for a first row at fractional `at`, plus `over` around. */
export function rowRange(at, total, viewPx, over = 10, rowPx = ROW_PX) {
  const first = Math.max(0, Math.floor(at) - over);
  const end = Math.min(total, Math.ceil(at + viewPx / rowPx) + over);
  return [first, Math.max(first, end)];
}

/** The page numbers covering rows [first, end) that `has(index)` lacks a row of. */
export function missingPages(first, end, has, page = PAGE) {
  const out = [];
  for (let p = Math.floor(first / page); p * page < end; p++) {
    const a = Math.max(first, p * page);
    const b = Math.min(end, (p + 1) * page);
    for (let i = a; i < b; i++) {
      if (!has(i)) {
        out.push(p);
        break;
      }
    }
  }
  return out;
}

/**
 * Lines by index, bounded: when more than `limit` are held, those farthest from the
 * rows in view go first. A generation number ties every entry to one set of filters, so
 * an answer to an older query is never mixed in.
 */
export class LineCache {
  constructor(limit = 20_000) {
    this.limit = limit;
    this.lines = new Map();
  }

  has(i) {
    return this.lines.has(i);
  }

  get(i) {
    return this.lines.get(i);
  }

  /** Store `lines` at indices offset, offset+1, ... */
  put(offset, lines, keepNear = offset) {
    lines.forEach((line, k) => this.lines.set(offset + k, line));
    if (this.lines.size > this.limit) {
      const byDistance = [...this.lines.keys()].sort((a, b) => Math.abs(b - keepNear) - Math.abs(a - keepNear));
      for (const i of byDistance.slice(0, this.lines.size - this.limit)) this.lines.delete(i);
    }
  }

  clear() {
    this.lines.clear();
  }

  get size() {
    return this.lines.size;
  }
}

/** Query parameters of /console for the tab's filters (only what is set). */
export function consoleParams({ label, node, stream, q }) {
  const params = {};
  if (label) params.label = label;
  if (node !== null && node !== undefined && node !== "") params.node = node;
  if (stream === "stdout" || stream === "stderr") params.stream = stream;
  if (q && q.trim()) params.q = q;
  return params;
}

/**
 * A time typed by a person as Unix seconds, in local time: "13:04:05" or "13:04" (on
 * the day of `refSeconds`, the run's start), "2024-05-01 13:04:05" or the
 * datetime-local form "2024-05-01T13:04:05". Null when it is not a time.
 */
export function parseJumpTime(text, refSeconds) {
  const s = String(text ?? "").trim();
  let m = s.match(/^(\d{4})-(\d{2})-(\d{2})[ T](\d{1,2}):(\d{2})(?::(\d{2})(?:\.(\d+))?)?$/);
  if (m) {
    const d = new Date(+m[1], +m[2] - 1, +m[3], +m[4], +m[5], +(m[6] ?? 0), 0);
    return valid(d, m[7]);
  }
  m = s.match(/^(\d{1,2}):(\d{2})(?::(\d{2})(?:\.(\d+))?)?$/);
  if (m && refSeconds !== null && refSeconds !== undefined) {
    const d = new Date(refSeconds * 1000);
    d.setHours(+m[1], +m[2], +(m[3] ?? 0), 0);
    return valid(d, m[4]);
  }
  return null;
}

function valid(d, frac) {
  const t = d.getTime();
  if (!Number.isFinite(t)) return null;
  return t / 1000 + (frac ? Number(`0.${frac}`) : 0);
}

/** "13:04:05.123" of Unix seconds, in local time (the log's time column). */
export function fmtClock(ts) {
  if (ts === null || ts === undefined) return "";
  const d = new Date(ts * 1000);
  const two = (n) => String(n).padStart(2, "0");
  const ms = String(d.getMilliseconds()).padStart(3, "0");
  return `${two(d.getHours())}:${two(d.getMinutes())}:${two(d.getSeconds())}.${ms}`;
}
