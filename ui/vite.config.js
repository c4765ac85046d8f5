// Builds the dashboard into the Python package's static folder, which the server mounts
// at "/". Everything the page needs is bundled: no CDN, no web fonts, nothing fetched
// from outside at run time.
import { copyFileSync, mkdirSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { defineConfig } from "vite";

const outDir = fileURLToPath(new URL("../rankwise/server/static", import.meta.url));

// /api/docs (Swagger UI) is served from the package too: swagger-ui-dist's bundle and
// stylesheet (pinned in package.json) and our initializer go to static/api-docs/.
const apiDocs = {
  name: "rankwise-api-docs",
  closeBundle() {
    const dest = `${outDir}/api-docs`;
    const dist = fileURLToPath(new URL("./node_modules/swagger-ui-dist/", import.meta.url));
    const here = fileURLToPath(new URL("./api-docs/", import.meta.url));
    mkdirSync(dest, { recursive: true });
    copyFileSync(`${dist}swagger-ui-bundle.js`, `${dest}/swagger-ui-bundle.js`);
    copyFileSync(`${dist}swagger-ui.css`, `${dest}/swagger-ui.css`);
    copyFileSync(`${here}init.js`, `${dest}/init.js`);
  },
};

export default defineConfig({
  base: "./",
  plugins: [apiDocs],
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
