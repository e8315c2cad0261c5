// The toy experiment as run through the student's code: sequence ratios, the loss, the
// per-token gradient matrix (a coloured table, so a wrong mask or a per-token clip is visible
// at a glance), the toy's checks, and the curve plots the service renders.

import { formatNumber, h } from "./dom.js";

const PLOT_ALT = {
  curves: "Line plot of the toy's training curves, one line per quantity, against the step",
  grad_matrix: "Heat map of the gradient of the loss with respect to each token's log-probability",
  token_vs_sequence: "Comparison of token-level and sequence-level importance ratios",
};
const PLOT_TITLE = {
  curves: "Curves",
  grad_matrix: "Gradient heat map",
  token_vs_sequence: "Token vs sequence ratios",
};

const words = (name) => name.replaceAll("_", " ");

/** The largest |value| over the valid, finite cells: the ends of the colour scale. */
function scaleOf(matrix, mask) {
  let scale = 0;
  matrix.forEach((row, i) =>
    row.forEach((value, j) => {
      const valid = !mask[i] || mask[i][j] !== 0;
      if (valid && Number.isFinite(value)) scale = Math.max(scale, Math.abs(value));
    }),
  );
  return scale || 1;
}

/** Diverging scale: blue for negative, white at 0, red for positive. */
export function cellColour(value, scale) {
  const t = Math.max(-1, Math.min(1, value / scale));
  const [r, g, b] = t < 0 ? [37, 99, 235] : [220, 38, 38];
  const mix = (channel) => Math.round(255 + (channel - 255) * Math.abs(t));
  return `rgb(${mix(r)}, ${mix(g)}, ${mix(b)})`;
}

function matrixCell(value, valid, scale) {
  if (!valid) return h("td", { class: "pad", title: "padding" }, formatNumber(value));
  if (value === null || !Number.isFinite(value)) {
    return h("td", { class: "nan", title: "not a finite number" }, formatNumber(value));
  }
  const strong = Math.abs(value / scale) > 0.55;
  const style = { background: cellColour(value, scale), color: strong ? "#fff" : "inherit" };
  return h("td", { style }, formatNumber(value, 3));
}

/** The gradient matrix [3, L] as an accessible table with row labels and a legend. */
export function gradientTable(artifacts) {
  const matrix = artifacts.grad_matrix || [];
  const mask = artifacts.mask || [];
  const width = Math.max(0, ...matrix.map((row) => row.length));
  const scale = scaleOf(matrix, mask);
  const head = h(
    "tr",
    {},
    h("th", { scope: "col" }, "response"),
    Array.from({ length: width }, (_, j) => h("th", { scope: "col" }, `token ${j}`)),
  );
  const rows = matrix.map((row, i) =>
    h(
      "tr",
      {},
      h("th", { scope: "row" }, (artifacts.row_labels || [])[i] || `response ${i + 1}`),
      row.map((value, j) => matrixCell(value, !mask[i] || mask[i][j] !== 0, scale)),
    ),
  );
  const caption = h("caption", {}, "∂ loss / ∂ logp for every token of the three responses");
  const table = h("table", { class: "grad-matrix", "aria-label": "Gradient matrix" }, caption);
  table.append(h("thead", {}, head), h("tbody", {}, rows));
  return h("div", { class: "matrix-wrap" }, table, legend(scale));
}

function legend(scale) {
  return h(
    "div",
    { class: "legend", "aria-hidden": "true" },
    h("span", {}, formatNumber(-scale, 3)),
    h("span", { class: "legend-bar" }),
    h("span", {}, `+${formatNumber(scale, 3)}`),
    h("span", { class: "legend-pad" }, "padding"),
  );
}

function ratiosTable(artifacts) {
  const labels = artifacts.row_labels || [];
  const rows = (artifacts.ratios || []).map((ratio, i) =>
    h(
      "tr",
      {},
      h("th", { scope: "row" }, labels[i] || `response ${i + 1}`),
      h("td", {}, formatNumber(ratio)),
    ),
  );
  rows.push(
    h(
      "tr",
      { class: "loss-row" },
      h("th", { scope: "row" }, "loss"),
      h("td", {}, formatNumber(artifacts.loss)),
    ),
  );
  return h(
    "table",
    { class: "ratios", "aria-label": "Sequence ratios and loss" },
    h(
      "thead",
      {},
      h("tr", {}, h("th", { scope: "col" }, ""), h("th", { scope: "col" }, "sequence ratio s")),
    ),
    h("tbody", {}, rows),
  );
}

function checksList(checks) {
  const entries = Object.entries(checks || {});
  if (!entries.length) return null;
  return h(
    "ul",
    { class: "checks" },
    entries.map(([name, ok]) =>
      h(
        "li",
        { class: ok ? "ok" : "bad" },
        h("span", { class: "mark", "aria-hidden": "true" }, ok ? "✓" : "✗"),
        words(name),
        h("span", { class: "sr-only" }, ok ? " (holds)" : " (fails)"),
      ),
    ),
  );
}

/** An <img> that retries a few times: plots are rendered after the verdict is returned. */
function plotImage(name, url) {
  const status = h("p", { class: "plot-status" }, "Rendering the plot…");
  const alt = PLOT_ALT[name] || `Plot: ${words(name)}`;
  const img = h("img", { src: url, alt, decoding: "async" });
  let tries = 0;
  img.addEventListener("load", () => status.remove());
  img.addEventListener("error", () => {
    tries += 1;
    if (tries > 4) {
      status.textContent = `The ${words(name)} plot could not be loaded.`;
      status.classList.add("failed");
      img.remove();
      return;
    }
    const separator = url.includes("?") ? "&" : "?";
    setTimeout(() => {
      img.src = `${url}${separator}retry=${tries}`;
    }, 800 * tries);
  });
  const caption = h("figcaption", {}, PLOT_TITLE[name] || words(name));
  const full = h(
    "a",
    { href: url, target: "_blank", rel: "noopener", title: "Open full size" },
    img,
  );
  return h("figure", { class: "plot" }, status, full, caption);
}

/** The whole toy section, or null when the report has no artifacts. `plotUrls` (name ->
 * URL) comes beside the report in the service's answer. */
export function toySection(artifacts, plotUrls = {}) {
  if (!artifacts) return null;
  const plots = Object.entries(plotUrls || {});
  return h(
    "section",
    { class: "toy", "aria-label": "Toy experiment" },
    h("h3", {}, "Toy experiment"),
    (artifacts.grad_matrix || []).length ? gradientTable(artifacts) : null,
    h("div", { class: "toy-summary" }, ratiosTable(artifacts), checksList(artifacts.checks)),
    plots.length
      ? h(
          "div",
          { class: "plots" },
          plots.map(([name, url]) => plotImage(name, url)),
        )
      : null,
  );
}
