// The /api/docs page: Swagger UI (swagger-ui-dist, pinned in package.json and copied into
// the package by vite.config.js) over the server's own OpenAPI document. A file, not an
// inline script, so the page runs under a CSP with script-src 'self' and nothing else.
/* global SwaggerUIBundle */
window.addEventListener("load", () => {
  window.ui = SwaggerUIBundle({
    url: "/api/openapi.json",
    dom_id: "#swagger-ui",
    presets: [SwaggerUIBundle.presets.apis],
    layout: "BaseLayout",
    deepLinking: true,
    // Nothing leaves the origin: no validator badge fetched from swagger.io.
    validatorUrl: null,
  });
});
