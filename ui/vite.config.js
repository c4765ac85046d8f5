// Builds the dashboard into the Python package's static folder, which the server mounts
// at "/". Everything the page needs is bundled: no CDN, no web fonts, nothing fetched
// from outside at run time.
import { fileURLToPath } from "node:url";
import { defineConfig } from "vite";

const outDir = fileURLToPath(new URL("../rankwise/server/static", import.meta.url));

export default defineConfig({
  base: "./",
  oxc: { jsx: { runtime: "automatic", importSource: "preact" } },
  build: {
    outDir,
    emptyOutDir: true,
    target: "es2020",
    assetsInlineLimit: 0,
    chunkSizeWarningLimit: 400,
  },
  server: {
    // `npm run dev` against a running `rankwise ui` on the default port.
    proxy: { "/api": "http://127.0.0.1:8585" },
  },
  test: {
    include: ["test/**/*.test.js"],
    environment: "node",
  },
});
