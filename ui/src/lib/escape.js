// User text (run names, metric keys, tags, config values, log lines) reaches the page only
// as text: Preact renders strings as text nodes and uPlot's own legend, the one place it
// would touch the DOM with labels, is turned off. Nothing here builds HTML from user data;
// these helpers cover the few places where text crosses another syntax (URLs, HTML in
// the rare non-Preact spot, terminal colour codes).

const HTML_ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

/** Text made safe to place inside HTML (element content or a quoted attribute). */
export function escapeHtml(value) {
  return String(value ?? "").replace(/[&<>"']/g, (c) => HTML_ESCAPES[c]);
}

/** One path segment of a dashboard link: `/`, `?`, `#`, `%` and spaces encoded. */
export function seg(value) {
  return encodeURIComponent(String(value ?? ""));
}

// C0 controls except tab, plus DEL and the C1 block: they render as nothing or garble
// layout, so they are shown as U+FFFD instead of being passed through silently.
// eslint-disable-next-line no-control-regex -- matching control characters is the point
const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g;

/** A single-line display form of any user value: controls replaced, never HTML. */
export function displayText(value) {
  if (value === null || value === undefined) return "";
  const s = typeof value === "string" ? value : JSON.stringify(value) ?? String(value);
  return s.replace(CONTROL, "\ufffd");
}

// eslint-disable-next-line no-control-regex -- ESC (\u001b) starts every ANSI sequence
const ANSI_SGR = /\u001b\[([0-9;]*)m/g;
// Any other escape sequence (cursor movement, OSC titles, ...): dropped from display.
// eslint-disable-next-line no-control-regex -- ESC and BEL delimit these sequences
const ANSI_OTHER = /\u001b(?:\[[0-9;?]*[A-Za-z]|\][^\u0007\u001b]*(?:\u0007|\u001b\\)|[@-Z\\-_])/g;

const BASIC = ["black", "red", "green", "yellow", "blue", "magenta", "cyan", "white"];

/**
 * A log line with ANSI colour codes as segments `{text, fg, bg, bold, dim, italic,
 * underline}`: the renderer turns each into a text node in a styled span, so colours are
 * kept and the text itself is never interpreted.
 */
export function ansiSegments(line) {
  const out = [];
  let style = {};
  let last = 0;
  const src = String(line ?? "");
  const push = (text) => {
    const clean = text.replace(ANSI_OTHER, "").replace(CONTROL, "");
    if (clean) out.push({ text: clean, ...style });
  };
  for (const m of src.matchAll(ANSI_SGR)) {
    push(src.slice(last, m.index));
    last = m.index + m[0].length;
    style = applySgr(style, m[1]);
  }
  push(src.slice(last));
  return out;
}

function applySgr(prev, params) {
  const codes = params === "" ? [0] : params.split(";").map((p) => Number(p) || 0);
  let s = { ...prev };
  for (let i = 0; i < codes.length; i++) {
    const c = codes[i];
    if (c === 0) s = {};
    else if (c === 1) s.bold = true;
    else if (c === 2) s.dim = true;
    else if (c === 3) s.italic = true;
    else if (c === 4) s.underline = true;
    else if (c === 22) {
      delete s.bold;
      delete s.dim;
    }
    else if (c === 23) delete s.italic;
    else if (c === 24) delete s.underline;
    else if (c >= 30 && c <= 37) s.fg = BASIC[c - 30];
    else if (c >= 90 && c <= 97) s.fg = "bright-" + BASIC[c - 90];
    else if (c === 39) delete s.fg;
    else if (c >= 40 && c <= 47) s.bg = BASIC[c - 40];
    else if (c >= 100 && c <= 107) s.bg = "bright-" + BASIC[c - 100];
    else if (c === 49) delete s.bg;
    else if ((c === 38 || c === 48) && codes[i + 1] === 5) {
      // 256-colour: keep the basic 16 as names, approximate the rest by nothing.
      const n = codes[i + 2];
      const name = n < 8 ? BASIC[n] : n < 16 ? "bright-" + BASIC[n - 8] : undefined;
      if (name) s[c === 38 ? "fg" : "bg"] = name;
      i += 2;
    } else if ((c === 38 || c === 48) && codes[i + 1] === 2) {
      i += 4; // 24-bit colour: not rendered
    }
  }
  return s;
}
