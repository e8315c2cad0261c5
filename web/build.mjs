// Build the page into dist/: index.html, app.js, app.css and the KaTeX fonts the CSS names;
// and the API reference into dist/docs/: Swagger UI's files from npm, served at /docs.
// Runs offline once `npm ci` has installed esbuild and the libraries.

import { copyFile, mkdir, rm } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import * as esbuild from "esbuild";

const here = dirname(fileURLToPath(import.meta.url));
const dist = join(here, "dist");

await rm(dist, { recursive: true, force: true });
await mkdir(dist, { recursive: true });
const result = await esbuild.build({
  entryPoints: { app: join(here, "src", "main.js") },
  outdir: dist,
  bundle: true,
  minify: true,
  format: "esm",
  target: ["es2020"],
  legalComments: "linked",
  loader: { ".woff2": "file", ".woff": "file", ".ttf": "file" },
  assetNames: "fonts/[name]-[hash]",
  metafile: true,
  logLevel: "warning",
});
await copyFile(join(here, "index.html"), join(dist, "index.html"));
const swagger = join(here, "node_modules", "swagger-ui-dist");
await mkdir(join(dist, "docs"));
for (const [from, name] of [
  [join(here, "docs", "index.html"), "index.html"],
  [join(here, "docs", "init.js"), "init.js"],
  [join(swagger, "swagger-ui-bundle.js"), "swagger-ui-bundle.js"],
  [join(swagger, "swagger-ui.css"), "swagger-ui.css"],
  [join(swagger, "LICENSE"), "swagger-ui.LICENSE.txt"],
]) {
  await copyFile(from, join(dist, "docs", name));
}
const sizes = Object.entries(result.metafile.outputs)
  .filter(([name]) => /\.(js|css)$/.test(name))
  .map(([name, info]) => `${name.replace(`${here}/`, "")} ${(info.bytes / 1024).toFixed(0)} KiB`);
console.log(`built ${sizes.join(", ")}`);
