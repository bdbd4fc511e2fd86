// Starts Swagger UI on /schema and /schema/swagger. A file, not an inline script, so the docs
// pages can send a Content-Security-Policy with script-src 'self' (api/openapi.py).
"use strict";
window.addEventListener("load", () => {
  const container = document.getElementById("swagger-container");
  window.ui = SwaggerUIBundle({
    url: container.dataset.specUrl,
    dom_id: "#swagger-container",
    deepLinking: true,
    showExtensions: true,
    showCommonExtensions: true,
    presets: [SwaggerUIBundle.presets.apis, SwaggerUIBundle.SwaggerUIStandalonePreset],
  });
});
