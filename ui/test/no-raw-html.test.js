// The dashboard's lint rule against raw HTML: user text (run names, metric keys, config
// values, console lines) must reach the page only as text nodes. No source file may
// build HTML from strings, so Preact's escaping is never bypassed.
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const SRC = fileURLToPath(new URL("../src", import.meta.url));
const FORBIDDEN = [
  /dangerouslySetInnerHTML/,
  /\.(inner|outer)HTML\s*=/,
  /insertAdjacentHTML/,
  /document\.write/,
  /createContextualFragment/,
  /\bnew Function\b/,
  /\beval\s*\(/,
  // an html panel is shown only from the blob route in a sandboxed frame, never inline
  /\bsrcdoc\b/i,
];

function sources(dir) {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return sources(path);
    return /\.(jsx?|tsx?|mjs)$/.test(name) ? [path] : [];
  });
}

describe("no raw HTML in ui/src", () => {
  const files = sources(SRC);

  it("finds the sources", () => {
    expect(files.length).toBeGreaterThan(5);
  });

  for (const pattern of FORBIDDEN) {
    it(`nothing uses ${pattern}`, () => {
      const hits = files.filter((f) => pattern.test(readFileSync(f, "utf8")));
      expect(hits).toEqual([]);
    });
  }

  it("the rule itself catches a use", () => {
    expect(FORBIDDEN.some((p) => p.test("<div dangerouslySetInnerHTML={{ __html: x }} />"))).toBe(true);
  });
});
