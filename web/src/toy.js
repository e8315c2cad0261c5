// The toy experiment as run through the student's code, rendered from the report alone: the
// tables the exercise declares (a heat map where the table asks for one, so a wrong mask or
// a per-token clip shows at a glance; greyed cells such as padding), and the plots, drawn by
// the service after the verdict, with the exercise's titles and alt text.

import { formatNumber, h } from "./dom.js";

/** The largest |value| over the finite, not greyed cells: the ends of the colour scale. */
function scaleOf(rows) {
  let scale = 0;
  for (const row of rows) {
    row.cells.forEach((value, j) => {
      const muted = (row.muted || [])[j];
      if (!muted && typeof value === "number" && Number.isFinite(value)) {
        scale = Math.max(scale, Math.abs(value));
      }
    });
  }
  return scale || 1;
}

/** Diverging scale: blue for negative, white at 0, red for positive. */
export function cellColour(value, scale) {
  const t = Math.max(-1, Math.min(1, value / scale));
  const [r, g, b] = t < 0 ? [37, 99, 235] : [220, 38, 38];
  const mix = (channel) => Math.round(255 + (channel - 255) * Math.abs(t));
  return `rgb(${mix(r)}, ${mix(g)}, ${mix(b)})`;
}

function cell(value, muted, scale) {
  const text = typeof value === "string" ? value : formatNumber(value, 4);
  if (muted) return h("td", { class: "muted-cell", title: "greyed: not part of the result" }, text);
  if (value === null) return h("td", { class: "nan", title: "not a finite number" }, text);
  if (scale === null || typeof value !== "number") return h("td", {}, text);
  const strong = Math.abs(value / scale) > 0.55;
  const style = { background: cellColour(value, scale), color: strong ? "#fff" : "inherit" };
  return h("td", { style }, text);
}

function legend(scale) {
  return h(
    "div",
    { class: "legend", "aria-hidden": "true" },
    h("span", {}, formatNumber(-scale, 3)),
    h("span", { class: "legend-bar" }),
    h("span", {}, `+${formatNumber(scale, 3)}`),
    h("span", { class: "legend-pad" }, "greyed"),
  );
}

/** One table of the report's artifacts (grader/report/model.py Table). */
export function toyTable(table) {
  const scale = table.heatmap ? scaleOf(table.rows) : null;
  const head = h(
    "tr",
    {},
    h("th", { scope: "col" }, ""),
    table.columns.map((name) => h("th", { scope: "col" }, name)),
  );
  const rows = table.rows.map((row) =>
    h(
      "tr",
      {},
      h("th", { scope: "row" }, row.label),
      row.cells.map((value, j) => cell(value, (row.muted || [])[j], scale)),
    ),
  );
  const element = h(
    "table",
    { class: `toy-table${table.heatmap ? " heatmap" : ""}`, "data-name": table.name },
    h("caption", {}, h("strong", {}, table.title), table.caption ? ` ${table.caption}` : null),
    h("thead", {}, head),
    h("tbody", {}, rows),
  );
  return h("div", { class: "table-wrap" }, element, scale === null ? null : legend(scale));
}

// A plot not drawn yet keeps its request open while the service draws it (up to its
// plot_wait_seconds), and a browser opens at most six connections to one server: plots asked
// for all at once, or a replaced report's plots still loading, hold them all and the page's
// own requests (history, Submit, polling) wait behind them. So a report's plots load one
// after the other, and a plot that left the page (its report was replaced) stops loading.

/** A plot's figure, and load(): ask for the image (retrying a few times while it is being
 *  drawn); resolves once it is shown, given up, or no longer on the page. */
function plotFigure(plot, url) {
  const status = h("p", { class: "plot-status" }, "Drawing the plot…");
  const img = h("img", { alt: plot.alt, decoding: "async" });
  const full = h(
    "a",
    { href: url, target: "_blank", rel: "noopener", title: "Open full size" },
    img,
  );
  const figure = h("figure", { class: "plot" }, status, full, h("figcaption", {}, plot.title));
  const load = () =>
    new Promise((resolve) => {
      if (!img.isConnected) return resolve();
      let tries = 0;
      img.addEventListener("load", () => {
        status.remove();
        resolve();
      });
      img.addEventListener("error", () => {
        tries += 1;
        if (!img.isConnected) return resolve();
        if (tries > 4) {
          status.textContent = `The plot "${plot.title}" could not be loaded.`;
          status.classList.add("failed");
          img.remove();
          return resolve();
        }
        const separator = url.includes("?") ? "&" : "?";
        setTimeout(() => {
          if (img.isConnected) img.src = `${url}${separator}retry=${tries}`;
          else resolve();
        }, 800 * tries);
      });
      img.src = url;
    });
  return { figure, load };
}

/** Stop loading the plots inside `element` (about to be replaced): frees their connections. */
export function stopPlots(element) {
  for (const img of element.querySelectorAll(".plot img")) img.removeAttribute("src");
}

/** The whole toy section, or null when the report has no artifacts. Its plots start loading
 *  once it is on the page (put it there in the same task, as showReport does).
 *  plotUrls: plot name -> URL, as the service answered beside the report. */
export function toySection(artifacts, plotUrls = {}) {
  if (!artifacts) return null;
  const plots = (artifacts.plots || [])
    .filter((plot) => plotUrls[plot.name])
    .map((plot) => plotFigure(plot, plotUrls[plot.name]));
  plots.reduce((before, plot) => before.then(plot.load), Promise.resolve());
  return h(
    "section",
    { class: "toy", "aria-label": "Toy experiment" },
    h("h3", {}, "Toy experiment"),
    (artifacts.tables || []).map(toyTable),
    plots.length
      ? h(
          "div",
          { class: "plots" },
          plots.map((plot) => plot.figure),
        )
      : null,
  );
}
