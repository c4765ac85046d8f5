// Report text is Markdown. marked parses it into tokens, and this module turns the tokens
// into Preact elements: no HTML string is ever built (the dashboard's rule, test/
// no-raw-html.test.js), so nothing in the text can become markup. Raw HTML in the text
// is shown as the text it is; links keep only http(s), mailto and in-page targets (any
// other becomes plain text); images are not loaded (a report page and its export make no
// request for them): their alt text is shown instead. Only the elements below are made.

import { h } from "preact";
import { Lexer } from "marked";

const SAFE_URL = /^(https?:|mailto:|#)/i;
const NAMED = { amp: "&", lt: "<", gt: ">", quot: '"', apos: "'", nbsp: "\u00a0" };

/** Character references (&amp;, &#39;, &#x2F;) decoded: Markdown text means them so. */
export function decodeEntities(text) {
  return String(text ?? "").replace(/&(#x[0-9a-f]{1,6}|#[0-9]{1,7}|[a-z]+);/gi, (m, ref) => {
    if (ref[0] === "#") {
      const code = ref[1] === "x" || ref[1] === "X" ? Number.parseInt(ref.slice(2), 16) : Number.parseInt(ref.slice(1), 10);
      return code > 0 && code <= 0x10ffff && !(code >= 0xd800 && code <= 0xdfff) ? String.fromCodePoint(code) : "\ufffd";
    }
    return NAMED[ref.toLowerCase()] ?? m;
  });
}

/** A link's target when it is one a report may hold, else null. */
export function safeHref(href) {
  const url = String(href ?? "").trim();
  return SAFE_URL.test(url) ? url : null;
}

function inline(tokens, key = "i") {
  return (tokens ?? []).map((t, i) => inlineToken(t, `${key}.${i}`));
}

function inlineToken(t, key) {
  switch (t.type) {
    case "text":
      return t.tokens ? h("span", { key }, inline(t.tokens, key)) : decodeEntities(t.text);
    case "escape":
      return t.text;
    case "html":
      return t.text; // raw HTML: shown as text, never parsed
    case "strong":
      return h("strong", { key }, inline(t.tokens, key));
    case "em":
      return h("em", { key }, inline(t.tokens, key));
    case "del":
      return h("del", { key }, inline(t.tokens, key));
    case "codespan":
      return h("code", { key }, t.text);
    case "br":
      return h("br", { key });
    case "link": {
      const href = safeHref(t.href);
      const body = inline(t.tokens, key);
      if (!href) return h("span", { key }, body);
      return h("a", { key, href, rel: "noopener noreferrer nofollow", target: "_blank", title: t.title || undefined }, body);
    }
    case "image":
      return h("span", { key, class: "md-image", title: "images are not loaded in reports" }, `[${t.text || "image"}]`);
    case "checkbox":
      return h("input", { key, type: "checkbox", checked: !!t.checked, disabled: true });
    default:
      return t.raw ?? "";
  }
}

function block(t, key) {
  switch (t.type) {
    case "space":
      return null;
    case "heading":
      return h(`h${Math.min(6, Math.max(1, t.depth))}`, { key }, inline(t.tokens, key));
    case "paragraph":
      return h("p", { key }, inline(t.tokens, key));
    case "text":
      return t.tokens ? h("span", { key }, inline(t.tokens, key)) : decodeEntities(t.text);
    case "code":
      return h("pre", { key }, h("code", null, t.text));
    case "blockquote":
      return h("blockquote", { key }, blocks(t.tokens, key));
    case "hr":
      return h("hr", { key });
    case "html":
      return h("p", { key }, t.text); // raw HTML: shown as text, never parsed
    case "list":
      return h(
        t.ordered ? "ol" : "ul",
        { key, start: t.ordered && t.start !== 1 && t.start !== "" ? t.start : undefined },
        t.items.map((item, i) => h("li", { key: i }, blocks(item.tokens, `${key}.${i}`))),
      );
    case "table":
      return h("table", { key }, [
        h("thead", { key: "h" }, h("tr", null, t.header.map((c, i) => h("th", { key: i, align: t.align[i] || undefined }, inline(c.tokens, `${key}.h${i}`))))),
        h(
          "tbody",
          { key: "b" },
          t.rows.map((row, r) => h("tr", { key: r }, row.map((c, i) => h("td", { key: i, align: t.align[i] || undefined }, inline(c.tokens, `${key}.${r}.${i}`))))),
        ),
      ]);
    default:
      return inlineToken(t, key);
  }
}

function blocks(tokens, key = "b") {
  return (tokens ?? []).map((t, i) => block(t, `${key}.${i}`));
}

/** Markdown text as Preact elements (GitHub-flavoured: tables, task lists, strikethrough). */
export function markdown(text) {
  return blocks(new Lexer({ gfm: true }).lex(String(text ?? "")));
}
