// The toy experiment as run through the student's code, rendered from the report alone: the
// tables the exercise declares (a heat map where the table asks for one, so a wrong mask or
// a per-token clip shows at a glance; greyed cells such as padding), and the plots, drawn by
// the service after the verdict, with the exercise's titles and alt text. Beside the
// reference preview (the same toy run through the reference solution), each table and plot
// toggles between "yours" and the reference solution's, and a cell of yours that differs
// from the reference's gets the red frame the gradient plot gives a value off the analytic one.

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

/** Whether a cell of yours differs from the reference's (the toy's own tolerance). */
function differs(got, want) {
  if (typeof got === "number" && typeof want === "number") {
    return Math.abs(got - want) > 1e-6 + 1e-5 * Math.abs(want);
  }
  return want !== undefined && got !== want;
}

function cell(value, muted, scale, want) {
  const text = typeof value === "string" ? value : formatNumber(value, 4);
  let attrs = {};
  if (muted) attrs = { class: "muted-cell", title: "greyed: not part of the result" };
  else if (value === null) attrs = { class: "nan", title: "not a finite number" };
  else if (scale !== null && typeof value === "number") {
    const strong = Math.abs(value / scale) > 0.55;
    attrs.style = { background: cellColour(value, scale), color: strong ? "#fff" : "inherit" };
  }
  if (differs(value, want)) {
    attrs.class = `${attrs.class || ""} differs`.trim();
    attrs.title = `differs from the reference solution's ${formatNumber(want, 4)}`;
  }
  return h("td", attrs, text);
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

/** One table of the report's artifacts (grader/report/model.py Table); its cells that differ
 *  from `reference` (the same table from the reference preview) are marked. */
export function toyTable(table, reference = null) {
  const scale = table.heatmap ? scaleOf(table.rows) : null;
  const head = h(
    "tr",
    {},
    h("th", { scope: "col" }, ""),
    table.columns.map((name) => h("th", { scope: "col" }, name)),
  );
  const rows = table.rows.map((row, i) =>
    h(
      "tr",
      {},
      h("th", { scope: "row" }, row.label),
      row.cells.map((value, j) =>
        cell(value, (row.muted || [])[j], scale, reference?.rows[i]?.cells[j]),
      ),
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

/** Yours and the reference solution's versions of one table or plot, one shown at a time;
 *  announce(text) says which is shown (an aria-live line). */
function compared(title, yours, theirs, announce) {
  theirs.hidden = true;
  const views = { yours, reference: theirs };
  const label = { yours: "Yours", reference: "Reference solution" };
  const buttons = Object.keys(views).map((which) =>
    h(
      "button",
      { type: "button", "data-show": which, "aria-pressed": String(which === "yours") },
      label[which],
    ),
  );
  for (const button of buttons) {
    button.addEventListener("click", () => {
      const which = button.dataset.show;
      for (const other of buttons) other.setAttribute("aria-pressed", String(other === button));
      for (const [name, view] of Object.entries(views)) view.hidden = name !== which;
      announce(`${title}: showing ${which === "yours" ? "yours" : "the reference solution's"}.`);
    });
  }
  return h(
    "div",
    { class: "compare" },
    h(
      "div",
      {
        class: "toggle",
        role: "group",
        "aria-label": `${title}: yours or the reference solution's`,
      },
      buttons,
    ),
    yours,
    theirs,
  );
}

/** The whole toy section, or null when there are no artifacts. Its plots start loading once
 *  it is on the page (put it there in the same task, as showReport does).
 *  plotUrls: plot name -> URL, as the service answered beside the report.
 *  reference: the reference preview ({artifacts, plots}) to compare with, or null.
 *  heading: the section's title; note: a line under it. */
export function toySection(
  artifacts,
  plotUrls = {},
  reference = null,
  heading = "Toy experiment",
  note = null,
) {
  if (!artifacts) return null;
  const live = h("p", { class: "lab-state sr-only", "aria-live": "polite" });
  const announce = (text) => {
    live.textContent = text;
  };
  const theirs = reference?.artifacts;
  const figures = [];
  const plotOf = (plot, urls) => {
    const figure = plotFigure(plot, urls[plot.name]);
    figures.push(figure);
    return figure.figure;
  };
  const tables = (artifacts.tables || []).map((table) => {
    const other = theirs?.tables.find((t) => t.name === table.name);
    if (!other) return toyTable(table);
    return compared(table.title, toyTable(table, other), toyTable(other), announce);
  });
  const plots = (artifacts.plots || [])
    .filter((plot) => plotUrls[plot.name])
    .map((plot) => {
      const mine = plotOf(plot, plotUrls);
      const other = theirs && reference.plots[plot.name] ? plotOf(plot, reference.plots) : null;
      return other ? compared(plot.title, mine, other, announce) : mine;
    });
  figures.reduce((before, figure) => before.then(figure.load), Promise.resolve());
  announce(
    theirs
      ? "Showing your toy experiment; each table and plot switches to the reference solution's."
      : `Showing the ${heading}.`,
  );
  return h(
    "section",
    { class: "toy", "aria-label": heading },
    h("h3", {}, heading),
    note ? h("p", { class: "toy-note" }, note) : null,
    live,
    tables,
    plots.length ? h("div", { class: "plots" }, plots) : null,
  );
}
