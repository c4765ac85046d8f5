// A small Markdown subset for run notes, built as Preact elements (never HTML strings,
// so nothing in a note can run as code): paragraphs, # headings, - and 1. lists,
// ``` code blocks, and inline **bold**, *italic*, `code` and [links](https://...) (http,
// https and mailto only). Anything else stays text.

import { h } from "preact";

const INLINE = /(\*\*([^*]+)\*\*|\*([^*]+)\*|`([^`]+)`|\[([^\]]+)\]\(([^)\s]+)\))/g;

function safeHref(url) {
  return /^(https?:|mailto:)/i.test(url) ? url : null;
}

/** Inline Markdown of one line as a list of strings and elements. */
export function inline(text) {
  const out = [];
  let last = 0;
  for (const m of text.matchAll(INLINE)) {
    if (m.index > last) out.push(text.slice(last, m.index));
    if (m[2] !== undefined) out.push(h("strong", null, m[2]));
    else if (m[3] !== undefined) out.push(h("em", null, m[3]));
    else if (m[4] !== undefined) out.push(h("code", null, m[4]));
    else {
      const href = safeHref(m[6]);
      out.push(href ? h("a", { href, rel: "noopener noreferrer", target: "_blank" }, m[5]) : m[0]);
    }
    last = m.index + m[0].length;
  }
  if (last < text.length) out.push(text.slice(last));
  return out;
}

/** A note's Markdown as block elements. */
export function markdown(text) {
  const blocks = [];
  const lines = String(text ?? "").replace(/\r\n?/g, "\n").split("\n");
  let para = [];
  let list = null;
  const flush = () => {
    if (para.length) blocks.push(h("p", null, ...inline(para.join(" "))));
    para = [];
    if (list) blocks.push(h(list.tag, null, ...list.items.map((t) => h("li", null, ...inline(t)))));
    list = null;
  };
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    if (line.startsWith("```")) {
      flush();
      const code = [];
      for (i++; i < lines.length && !lines[i].startsWith("```"); i++) code.push(lines[i]);
      blocks.push(h("pre", null, h("code", null, code.join("\n"))));
      continue;
    }
    const head = /^(#{1,6})\s+(.*)$/.exec(line);
    const item = /^\s*(?:([-*])|(\d+)\.)\s+(.*)$/.exec(line);
    if (head) {
      flush();
      blocks.push(h(`h${Math.min(6, head[1].length + 2)}`, null, ...inline(head[2])));
    } else if (item) {
      const tag = item[1] ? "ul" : "ol";
      if (para.length || (list && list.tag !== tag)) flush();
      if (!list) list = { tag, items: [] };
      list.items.push(item[3]);
    } else if (!line.trim()) {
      flush();
    } else {
      if (list) flush();
      para.push(line);
    }
  }
  flush();
  return blocks;
}
