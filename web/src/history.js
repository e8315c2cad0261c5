// The student's past submissions to the exercise shown, newest first (the other exercises'
// appear when the student picks them). Each one reopens its stored report and its code, which
// can be loaded back into the editor, so a student can compare or return to an attempt.

import { api } from "./api.js";
import { h, replaceChildren } from "./dom.js";
import { points } from "./results.js";

function when(isoDate) {
  const date = new Date(isoDate);
  if (Number.isNaN(date.getTime())) return isoDate;
  return date.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" });
}

function entry(item, onOpen) {
  // queued and grading ones have no score yet; an ungradable one (the grader's fault) never has
  const graded = item.status === undefined || item.status === "done";
  let score = graded ? `${points(item.score)} / ${points(item.max_score)}` : "—";
  if (graded && item.counted === false) score += " (practice)";
  else if (graded && item.credit !== undefined && item.credit < 100)
    score += ` (credited ${points(item.credited_score)} at ${item.credit} %)`;
  const verdict = graded ? (item.passed ? "passed" : "failed") : item.status;
  return h(
    "li",
    {},
    h(
      "button",
      { type: "button", class: "history-item", onclick: () => onOpen(item, when(item.created_at)) },
      h("span", { class: "history-when" }, when(item.created_at)),
      h("span", { class: "history-score" }, score),
      h("span", { class: `badge ${graded ? verdict : "failed"}` }, verdict),
      item.note ? h("span", { class: "history-when" }, item.note) : null,
    ),
  );
}

/** A submission's code, shown above its report, with a button that loads it (onLoad(code)). */
export function submittedCode(code, onLoad) {
  return h(
    "details",
    { class: "submitted-code", open: true },
    h("summary", {}, "Code of this submission"),
    h("pre", {}, code),
    h(
      "button",
      { type: "button", class: "load-code", onclick: () => onLoad(code) },
      "Load into the editor",
    ),
  );
}

/**
 * Fill `container` with the submissions of `name` (which needs its key) to `exercise`.
 * onOpen(item, label) is called when the student picks one.
 */
export async function renderHistory(container, { name, key, exercise, onOpen }) {
  const heading = [
    h("h2", {}, "Your submissions"),
    exercise ? h("p", { class: "muted history-exercise" }, `Exercise: ${exercise.title}`) : null,
  ];
  if (!api.signedIn() && (!name || !key)) {
    replaceChildren(
      container,
      heading,
      h("p", { class: "muted" }, "Your submissions appear here after your first Submit."),
    );
    return;
  }
  replaceChildren(container, heading, h("p", { class: "muted" }, "Loading…"));
  try {
    const data = await api.submissions(name, key, exercise?.id);
    const items = data.submissions || [];
    replaceChildren(
      container,
      heading,
      items.length
        ? h(
            "ul",
            { class: "history-list" },
            items.map((item) => entry(item, onOpen)),
          )
        : h("p", { class: "muted" }, "No submissions yet."),
    );
  } catch (error) {
    replaceChildren(
      container,
      heading,
      h("p", { class: "alert server-error", role: "alert" }, error.message),
    );
  }
}
