// The instructor page's plots, drawn as SVG from the statistics' JSON, each with a text
// alternative (the SVG's label) and a caption that says what the bars are.

import { h, replaceChildren } from "./dom.js";

const SVG = "http://www.w3.org/2000/svg";
const WIDTH = 420;
const HEIGHT = 160;
const BASE = 140; // the bars' baseline

function svg(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attrs)) el.setAttribute(name, String(value));
  for (const child of children) el.append(child);
  return el;
}

function bars(figure, caption, labels, counts, describe) {
  const top = Math.max(1, ...counts);
  const step = WIDTH / Math.max(counts.length, 1);
  const alt = describe();
  const plot = svg("svg", {
    viewBox: `0 0 ${WIDTH} ${HEIGHT}`,
    role: "img",
    "aria-label": alt,
    class: "bars",
  });
  counts.forEach((count, i) => {
    const height = ((BASE - 10) * count) / top;
    const bar = svg("rect", {
      x: i * step + 2,
      y: BASE - height,
      width: step - 4,
      height,
      class: "bar",
    });
    bar.append(svg("title", {}, `${labels[i]}: ${count}`));
    plot.append(bar);
    if (count)
      plot.append(
        svg(
          "text",
          { x: i * step + step / 2, y: BASE - height - 2, class: "count" },
          String(count),
        ),
      );
    if (counts.length <= 12 || i % Math.ceil(counts.length / 12) === 0) {
      plot.append(
        svg("text", { x: i * step + step / 2, y: HEIGHT - 4, class: "label" }, labels[i]),
      );
    }
  });
  replaceChildren(figure, h("figcaption", {}, caption), plot, h("p", { class: "sr-only" }, alt));
}

/** The counted scores in tenths of the maximum. */
export function drawDistribution(figure, distribution) {
  const labels = distribution.map((d) => `${d.from}–${d.to}%`);
  const counts = distribution.map((d) => d.students);
  bars(figure, "Score distribution (students by counted score)", labels, counts, () =>
    distribution.map((d, i) => `${labels[i]}: ${d.students}`).join("; "),
  );
}

/** Submissions accepted per day. */
export function drawTimeline(figure, timeline) {
  const labels = timeline.map((d) => d.day.slice(5));
  const counts = timeline.map((d) => d.submissions);
  bars(figure, "Submissions per day (UTC)", labels, counts, () =>
    timeline.length
      ? timeline.map((d) => `${d.day}: ${d.submissions}`).join("; ")
      : "No submissions yet.",
  );
}
