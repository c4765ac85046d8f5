import { describe, expect, it } from "vitest";
import { markdown } from "../src/lib/markdown.js";

// The element tree as HTML-like text (escaping what a browser would): enough to compare.
function ser(node) {
  if (Array.isArray(node)) return node.map(ser).join("");
  if (typeof node === "string") return node.replace(/&/g, "&amp;").replace(/</g, "&lt;");
  const { children, ...attrs } = node.props;
  const a = Object.entries(attrs).map(([k, v]) => ` ${k}="${v}"`).join("");
  return `<${node.type}${a}>${ser(children ?? [])}</${node.type}>`;
}
const html = (text) => `<div>${ser(markdown(text))}</div>`;

describe("run notes' Markdown", () => {
  it("renders the subset", () => {
    expect(html("# Title\n\nsome **bold** and *it* and `x`\n\n- a\n- b")).toBe(
      "<div><h3>Title</h3><p>some <strong>bold</strong> and <em>it</em> and <code>x</code></p><ul><li>a</li><li>b</li></ul></div>",
    );
    expect(html("```\n<b>\n```")).toBe("<div><pre><code>&lt;b></code></pre></div>");
  });

  it("never makes HTML or script links", () => {
    const out = html('<img src=x onerror="alert(1)"> [x](javascript:alert(1)) [ok](https://e.org)');
    expect(out).not.toContain("<img");
    expect(out).toContain("&lt;img");
    expect(out).not.toContain('href="javascript');
    expect(out).toContain('<a href="https://e.org" rel="noopener noreferrer" target="_blank">ok</a>');
  });
});
