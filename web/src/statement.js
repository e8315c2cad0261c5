// The exercise statement: Markdown with math. Raw HTML in the statement is not rendered
// (html: false), so only Markdown and KaTeX output ever reach the page as markup.

import MarkdownIt from "markdown-it";
import { h } from "./dom.js";
import { mathPlugin } from "./math.js";

const markdown = new MarkdownIt({ html: false, linkify: true, typographer: true }).use(mathPlugin);

/** Render the statement into `container`, then list the tiers the submission is graded on. */
export function renderStatement(container, exercise) {
  const body = h("div", { class: "markdown" });
  body.innerHTML = markdown.render(exercise.statement || "");
  container.replaceChildren(body, tiersList(exercise.tiers || []));
}

function tiersList(tiers) {
  if (!tiers.length) return null;
  const rows = tiers.map((tier) =>
    h(
      "li",
      {},
      h("span", { class: "tier-id" }, tier.id),
      h("span", { class: "tier-title" }, tier.title),
      h("span", { class: "tier-points" }, `${tier.points} pts`),
      h("span", { class: "tier-visibility" }, tier.visibility === "hidden" ? "Submit only" : ""),
      tier.description ? h("p", { class: "tier-description" }, tier.description) : null,
    ),
  );
  return h(
    "section",
    { class: "tiers-list" },
    h("h2", {}, "How you are graded"),
    h("ul", {}, rows),
  );
}
