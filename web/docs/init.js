// The API's reference at /docs: Swagger UI (from npm, served by the grader itself) on the
// service's own /openapi.json; no validator badge, so the page fetches nothing elsewhere.
window.ui = SwaggerUIBundle({
  url: "/openapi.json",
  dom_id: "#swagger-ui",
  validatorUrl: null,
  deepLinking: true,
});
