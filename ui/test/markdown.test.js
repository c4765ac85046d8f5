// @vitest-environment happy-dom
import { render } from "preact";
import { describe, expect, it } from "vitest";
import { decodeEntities, markdown, safeHref } from "../src/lib/markdown.js";

function html(text) {
  const box = document.createElement("div");
  render(markdown(text), box);
  return box;
}

describe("markdown", () => {
  it("renders Markdown as elements", () => {
    const box = html("# Title\n\nSome **bold**, *em*, ~~del~~ and `a<b`.\n\n- [x] done\n- b\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n> q\n\n```\nx<1\n```");
    expect(box.querySelector("h1").textContent).toBe("Title");
    expect(box.querySelector("strong").textContent).toBe("bold");
    expect(box.querySelector("code").textContent).toBe("a<b");
    expect(box.querySelectorAll("li")).toHaveLength(2);
    expect(box.querySelector("input[type=checkbox]").checked).toBe(true);
    expect(box.querySelector("td").textContent).toBe("1");
    expect(box.querySelector("blockquote").textContent).toBe("q");
    expect(box.querySelector("pre").textContent).toBe("x<1");
  });
  it("never makes markup of raw HTML", () => {
    const text = [
      "<script>alert(1)</script>",
      "<img src=x onerror=alert(1)>",
      "hi <b onmouseover=alert(1)>x</b>",
      "<iframe src=javascript:alert(1)></iframe>",
      "<svg><script>alert(1)</script></svg>",
      "&lt;script&gt;alert(1)&lt;/script&gt;",
    ].join("\n\n");
    const box = html(text);
    expect(box.querySelector("script, img, iframe, svg, b")).toBe(null);
    for (const el of box.querySelectorAll("*")) {
      expect([...el.attributes].map((a) => a.name).filter((n) => n.startsWith("on"))).toEqual([]);
    }
    expect(box.textContent).toContain("<img src=x onerror=alert(1)>");
    expect(box.textContent).toContain("<script>alert(1)</script>");
  });
  it("keeps only safe links, and loads no image", () => {
    expect(html("[x](javascript:alert(1))").querySelector("a")).toBe(null);
    expect(html("[x](data:text/html,hi)").querySelector("a")).toBe(null);
    expect(html("[x](JaVaScRiPt:alert(1))").querySelector("a")).toBe(null);
    const a = html("[docs](https://example.com/a?b=1)").querySelector("a");
    expect(a.getAttribute("href")).toBe("https://example.com/a?b=1");
    expect(a.getAttribute("rel")).toBe("noopener noreferrer nofollow");
    const img = html("![a chart](https://example.com/x.png)");
    expect(img.querySelector("img")).toBe(null);
    expect(img.textContent).toContain("a chart");
    expect(safeHref(" mailto:a@b.c")).toBe("mailto:a@b.c");
    expect(safeHref("//evil.example")).toBe(null);
  });
  it("decodes character references as text", () => {
    expect(decodeEntities("a &amp; b &lt;i&gt; &#39;x&#x27; &bogus; &#0;")).toBe("a & b <i> 'x' &bogus; \ufffd");
  });
});
