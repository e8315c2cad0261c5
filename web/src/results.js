// The results panel: what is happening now, and then the report. Errors the student must fix
// (syntax error, timeout) come first and plainly; then the verdict, one row per tier with the
// failing tests open, the toy experiment, and the captured output folded away.

import { formatNumber, h, replaceChildren } from "./dom.js";
import { stopPlots, toySection } from "./toy.js";

const ERROR_TITLES = {
  syntax_error: "Syntax error",
  missing_function: "A required function is missing",
  import_error: "Your module raised an error while loading",
  timeout: "Time limit exceeded",
  memory_limit: "Memory limit exceeded",
  crash: "Your code crashed the worker",
};
const OUTCOME_MARK = { passed: "✓", failed: "✗", error: "!", skipped: "–" };
/** A score as people read it: at most two decimals (the report keeps the exact value). */
export const points = (value) => String(Math.round(value * 100) / 100);

/** The panel while a grading is in flight. */
export function showBusy(panel, text) {
  panel.setAttribute("aria-busy", "true");
  const started = Date.now();
  const clock = h("span", { class: "elapsed" }, "0 s");
  const timer = setInterval(() => {
    clock.textContent = `${Math.round((Date.now() - started) / 1000)} s`;
  }, 1000);
  stopPlots(panel); // the report shown until now loads no more plots
  replaceChildren(
    panel,
    h(
      "div",
      { class: "busy" },
      h("span", { class: "spinner", "aria-hidden": "true" }),
      h("p", {}, text),
      clock,
    ),
  );
  return () => {
    clearInterval(timer);
    panel.removeAttribute("aria-busy");
  };
}

/** A request that failed (server down, 413, 503, 500): its message, never a blank panel. */
export function showError(panel, error) {
  const hint = error.retryAfter ? ` Try again in ${error.retryAfter} s.` : "";
  stopPlots(panel);
  replaceChildren(
    panel,
    h(
      "div",
      { class: "alert server-error", role: "alert" },
      h("h3", {}, "Could not grade"),
      h("p", {}, `${error.message}${hint}`),
    ),
  );
}

const PREVIEW_TITLE = "Reference preview: what a correct solution produces";

/** The reference preview ({artifacts, plots}, or null while there is none) as a toy section. */
function previewSection(preview, note = null) {
  return preview && toySection(preview.artifacts, preview.plots, null, PREVIEW_TITLE, note);
}

/** The panel before anything was graded. */
export function showIdle(panel) {
  stopPlots(panel);
  replaceChildren(
    panel,
    h(
      "p",
      { class: "placeholder" },
      "Press Run (Ctrl+Enter) to check the visible tests, or Submit to be graded on every tier.",
    ),
  );
}

/** Add the reference preview under the idle panel's lines (a line put above stays). */
export function addPreview(panel, preview) {
  panel.append(previewSection(preview));
}

/** Why a report has no toy of the student's to show beside the preview. */
function noArtifacts(report) {
  const why = report.submission_error
    ? `your code stopped before the toy experiment could run (${ERROR_TITLES[report.submission_error.kind] || "see above"})`
    : report.grader_error
      ? "the grader failed before the toy experiment ran (not your code's fault)"
      : "the toy experiment did not run through your code (see the failing tests above)";
  return `No artifacts of yours could be drawn: ${why}. The reference solution's are shown.`;
}

function submissionError(error) {
  if (!error) return null;
  let title = ERROR_TITLES[error.kind] || "Your submission could not be graded";
  if (error.line) title += ` on line ${error.line}`;
  return h(
    "div",
    { class: "alert submission-error", role: "alert" },
    h("h3", {}, title),
    h("p", {}, error.message),
    error.detail ? h("pre", { class: "detail" }, error.detail) : null,
  );
}

function graderError(error) {
  if (!error) return null;
  return h(
    "div",
    { class: "alert grader-error", role: "alert" },
    h("h3", {}, "The grader failed: this is not your fault"),
    h("p", {}, error.message),
    error.detail
      ? h("details", {}, h("summary", {}, "Details for the instructor"), h("pre", {}, error.detail))
      : null,
  );
}

function verdict(report, caption) {
  const label = report.passed ? "All tiers passed" : "Not passed yet";
  const scope = report.mode === "run" ? "Run: visible tests only" : "Submit: every tier";
  const time =
    report.timings && report.timings.total_s
      ? ` · ${formatNumber(report.timings.total_s, 3)} s`
      : "";
  return h(
    "div",
    { class: `verdict ${report.passed ? "pass" : "fail"}` },
    h("div", { class: "score" }, `${points(report.score)} / ${points(report.max_score)}`),
    h(
      "div",
      {},
      h("strong", {}, label),
      h("div", { class: "muted" }, caption || `${scope}${time}`),
    ),
  );
}

function testItem(test, names, repeats) {
  const failed = test.outcome === "failed" || test.outcome === "error";
  const first = test.same_error_as;
  const more = repeats.get(test.id) || 0;
  return h(
    "li",
    { class: `test ${test.outcome}` },
    h(
      "div",
      { class: "test-name" },
      h("span", { class: "mark", "aria-hidden": "true" }, OUTCOME_MARK[test.outcome] || "?"),
      test.name,
      h("span", { class: "outcome" }, test.outcome),
      test.hidden ? h("span", { class: "tag" }, "hidden") : null,
    ),
    failed && first
      ? h(
          "p",
          { class: "muted same-error" },
          `Failed with the same error as “${names.get(first) || first}”.`,
        )
      : null,
    failed && test.message && !first ? h("pre", { class: "message" }, test.message) : null,
    failed && more
      ? h(
          "p",
          { class: "muted same-error" },
          `… and ${more} more test${more === 1 ? "" : "s"} failed with this same error.`,
        )
      : null,
    failed && test.inputs && !test.hidden && !first
      ? h(
          "div",
          { class: "inputs" },
          h("div", { class: "label" }, "Inputs"),
          h("pre", {}, test.inputs),
        )
      : null,
  );
}

function tierRow(tier, names, repeats) {
  const item = (test) => testItem(test, names, repeats);
  const notRun = tier.tests.length === 0;
  const status = notRun ? "not run" : tier.passed ? "passed" : "failed";
  const failing = tier.tests.filter((t) => t.outcome === "failed" || t.outcome === "error");
  const others = tier.tests.filter((t) => !failing.includes(t));
  const summary = h(
    "summary",
    {},
    h("span", { class: "tier-id" }, tier.id),
    h("span", { class: "tier-title" }, tier.title),
    h("span", { class: "tier-points" }, `${points(tier.score)} / ${points(tier.max_score)}`),
    h("span", { class: `badge ${status.replace(" ", "-")}` }, status),
  );
  const body = [
    tier.description ? h("p", { class: "muted" }, tier.description) : null,
    notRun ? h("p", { class: "muted" }, "This tier runs on Submit.") : null,
    failing.length ? h("ul", { class: "tests" }, failing.map(item)) : null,
    others.length
      ? h(
          "details",
          { class: "passed-tests" },
          h("summary", {}, `${others.length} other test${others.length === 1 ? "" : "s"}`),
          h("ul", { class: "tests" }, others.map(item)),
        )
      : null,
  ];
  return h(
    "li",
    { class: `tier ${status.replace(" ", "-")}` },
    h("details", { open: failing.length > 0 }, summary, body),
  );
}

function outputBlock(report) {
  const text = report.output || "";
  const lines = text ? text.replace(/\n$/, "").split("\n").length : 0;
  const note = report.output_truncated ? ", truncated" : "";
  return h(
    "details",
    { class: "output" },
    h("summary", {}, `Output (${lines} line${lines === 1 ? "" : "s"}${note})`),
    text ? h("pre", {}, text) : h("p", { class: "muted" }, "Your code printed nothing."),
  );
}

/** Test names by id, and how many later tests repeat each test's error (same_error_as). */
function errorGroups(tiers) {
  const names = new Map();
  const repeats = new Map();
  for (const test of tiers.flatMap((tier) => tier.tests)) {
    names.set(test.id, test.name);
    if (test.same_error_as) {
      repeats.set(test.same_error_as, (repeats.get(test.same_error_as) || 0) + 1);
    }
  }
  return { names, repeats };
}

/** Render a Report (grader/report/model.py) into the panel; plotUrls come beside it, the
 *  reference preview ({artifacts, plots} or null) to compare the toy with, and the known
 *  mistake its failing tests match, where the exercise allows naming it. */
export function showReport(panel, report, caption = "", plotUrls = {}, preview = null, hint = "") {
  const tiers = report.tiers || [];
  const { names, repeats } = errorGroups(tiers);
  stopPlots(panel);
  replaceChildren(
    panel,
    submissionError(report.submission_error),
    graderError(report.grader_error),
    verdict(report, caption),
    hint ? h("p", { class: "mistake-hint", role: "note" }, `A known mistake: ${hint}`) : null,
    h(
      "ol",
      { class: "tiers", "aria-label": "Tiers" },
      tiers.map((tier) => tierRow(tier, names, repeats)),
    ),
    report.artifacts
      ? toySection(report.artifacts, plotUrls, preview)
      : previewSection(preview, noArtifacts(report)),
    outputBlock(report),
  );
  panel.scrollTop = 0;
}
