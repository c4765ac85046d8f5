import { describe, expect, it } from "vitest";
import { ansiSegments, displayText, escapeHtml, seg } from "../src/lib/escape.js";

describe("escapeHtml", () => {
  it("escapes the five HTML-significant characters", () => {
    expect(escapeHtml(`<img src=x onerror="alert('x')">&`)).toBe(
      "&lt;img src=x onerror=&quot;alert(&#39;x&#39;)&quot;&gt;&amp;",
    );
  });
  it("handles null and numbers", () => {
    expect(escapeHtml(null)).toBe("");
    expect(escapeHtml(3)).toBe("3");
  });
});

describe("seg", () => {
  it("keeps a run name from changing the route", () => {
    expect(seg("a/b?c#d e%")).toBe("a%2Fb%3Fc%23d%20e%25");
    expect(decodeURIComponent(seg("ünï/cøde"))).toBe("ünï/cøde");
  });
});

describe("displayText", () => {
  it("replaces control characters, keeps tabs and markup as text", () => {
    expect(displayText("a\u0000b\u001bc\td")).toBe("a\ufffdb\ufffdc\td");
    expect(displayText("<b>x</b>")).toBe("<b>x</b>");
  });
  it("renders non-strings as JSON", () => {
    expect(displayText({ a: [1, "<x>"] })).toBe('{"a":[1,"<x>"]}');
    expect(displayText(null)).toBe("");
    expect(displayText(false)).toBe("false");
  });
});

describe("ansiSegments", () => {
  it("turns colour codes into styled segments and drops the codes", () => {
    const segs = ansiSegments("\u001b[1;31mERROR\u001b[0m plain \u001b[32mok\u001b[39m");
    expect(segs).toEqual([
      { text: "ERROR", bold: true, fg: "red" },
      { text: " plain " },
      { text: "ok", fg: "green" },
    ]);
  });
  it("keeps HTML in a log line as text and strips other escape sequences", () => {
    const segs = ansiSegments("<script>x</script>\u001b[2K\u001b]0;title\u0007done");
    expect(segs.map((s) => s.text).join("")).toBe("<script>x</script>done");
  });
  it("knows bright and 256-colour basics", () => {
    expect(ansiSegments("\u001b[93mA\u001b[38;5;4mB")).toEqual([
      { text: "A", fg: "bright-yellow" },
      { text: "B", fg: "blue" },
    ]);
  });
});
