// Builds the exported report's page (report.html + src/export.jsx) into ONE file,
// rankwise/server/static/export/report.html, with its script and stylesheet inline:
// `rankwise report export` and the dashboard's Export button fill in the data slot, and
// the file then opens from disk with no network request (its CSP allows nothing else).
import { fileURLToPath } from "node:url";
import { defineConfig } from "vite";

const outDir = fileURLToPath(new URL("../rankwise/server/static/export", import.meta.url));

/** Every emitted chunk and stylesheet moved into the HTML, and left out of the output. */
const inlineAll = {
  name: "rankwise-inline-all",
  enforce: "post",
  generateBundle(_opts, bundle) {
    const html = Object.values(bundle).find((f) => f.type === "asset" && f.fileName.endsWith(".html"));
    if (!html) return;
    let text = String(html.source);
    for (const [name, file] of Object.entries(bundle)) {
      if (file === html) continue;
      if (file.type === "chunk") {
        const code = file.code.replace(/<\/script/gi, "<\\/script").replace(/<!--/g, "<\\!--");
        const tag = new RegExp(`<script[^>]*src="[^"]*${escape(name)}"[^>]*></script>`);
        text = text.replace(tag, () => `<script type="module">${code}</script>`);
      } else if (name.endsWith(".css")) {
        const tag = new RegExp(`<link[^>]*href="[^"]*${escape(name)}"[^>]*>`);
        const css = String(file.source).replace(/<\/style/gi, "<\\/style");
        text = text.replace(tag, () => `<style>${css}</style>`);
      } else continue;
      delete bundle[name];
    }
    if (/<script[^>]*\ssrc=|<link[^>]*stylesheet/.test(text)) {
      this.error("the export page still names an external script or stylesheet");
    }
    html.source = text;
  },
};

function escape(s) {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

export default defineConfig({
  base: "./",
  plugins: [inlineAll],
  oxc: { jsx: { runtime: "automatic", importSource: "preact" } },
  build: {
    outDir,
    emptyOutDir: true,
    target: "es2020",
    assetsInlineLimit: 100_000_000,
    cssCodeSplit: false,
    modulePreload: false,
    chunkSizeWarningLimit: 2000,
    rollupOptions: {
      input: fileURLToPath(new URL("./report.html", import.meta.url)),
      output: { entryFileNames: "report.js", assetFileNames: "report[extname]" },
    },
  },
});
