// The instructor's page (/instructor): the class's statistics on one exercise (and course),
// from GET /api/instructor/stats, and the course's term (deadlines, extensions, quota,
// regrade) through /api/instructor/course and /api/instructor/regrades. Signed in by the
// instructor token typed into the page, or by an LTI instructor launch (#lti=<token>).

import "./instructor.css";
import { h, replaceChildren } from "./dom.js";
import { drawDistribution, drawTimeline } from "./instructor-plots.js";
import { termSection } from "./instructor-term.js";

const $ = (id) => document.getElementById(id);
const auth = { token: "", lti: null };

async function call(path, { method = "GET", body } = {}) {
  const headers = { Accept: "application/json" };
  if (auth.lti) headers["X-LTI-Session"] = auth.lti;
  else headers.Authorization = `Bearer ${auth.token}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!response.ok) {
    let detail = response.statusText;
    try {
      detail = (await response.json()).detail || detail;
    } catch {
      // not JSON: the status text says it
    }
    throw new Error(`The server answered ${response.status}: ${detail}`);
  }
  return response;
}

const json = async (path, options) => (await call(path, options)).json();

function say(text) {
  $("status").textContent = text;
}

function query(extra = "") {
  const course = $("course").value.trim();
  const exercise = encodeURIComponent($("exercise").value);
  return `exercise=${exercise}${course ? `&course=${encodeURIComponent(course)}` : ""}${extra}`;
}

const percent = (share) => `${Math.round(share * 100)}%`;

function table(caption, headers, rows) {
  return h(
    "table",
    { class: "grid" },
    h("caption", {}, caption),
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        headers.map((text) => h("th", { scope: "col" }, text)),
      ),
    ),
    h(
      "tbody",
      {},
      rows.map((cells) =>
        h(
          "tr",
          {},
          cells.map((cell) => h("td", {}, cell)),
        ),
      ),
    ),
  );
}

function csvButton(name) {
  const download = async () => {
    const blob = await (
      await call(`/api/instructor/stats?${query(`&format=csv&table=${name}`)}`)
    ).blob();
    const link = h("a", { href: URL.createObjectURL(blob), download: `${name}.csv` });
    link.click();
    URL.revokeObjectURL(link.href);
  };
  return h("button", { type: "button", class: "quiet", onclick: download }, `Download ${name}.csv`);
}

function show(id, ...children) {
  const section = $(id);
  const title = section.querySelector("h2");
  replaceChildren(section, title, ...children);
  section.hidden = false;
}

function render(stats) {
  const empty = stats.submissions === 0;
  replaceChildren(
    $("summary"),
    h(
      "p",
      { id: "numbers" },
      `${stats.students} students, ${stats.submissions} submissions` +
        (stats.practice_submissions ? ` (${stats.practice_submissions} practice)` : "") +
        "; " +
        `${stats.passed} of ${stats.graded_students} graded students passed.`,
    ),
    csvButton("students"),
  );
  $("class").hidden = false;
  drawDistribution($("distribution"), stats.distribution);
  drawTimeline($("timeline"), stats.timeline);
  if (empty) {
    for (const id of ["items", "mistakes", "stuck"])
      show(id, h("p", { class: "muted" }, "No submissions yet."));
    return;
  }
  const itemRows = stats.tests.map((t) => [
    t.title,
    t.test,
    percent(t.first_fail_share),
    percent(t.fail_share),
  ]);
  show(
    "items",
    table(
      "Share of students whose submission fails each test",
      ["Test", "Id", "First try", "Now"],
      itemRows,
    ),
    csvButton("tests"),
  );
  const waiting = stats.labels_ready
    ? null
    : h(
        "p",
        { class: "muted" },
        "The known mistakes are being graded; reload in a minute for their names.",
      );
  show(
    "mistakes",
    waiting,
    stats.mistakes.map((m) => mistake(m, stats.reference)),
    csvButton("mistakes"),
  );
  const stuckRows = stats.stuck.map((s) => [
    s.student,
    String(s.submissions),
    `${s.best_score} / ${s.max_score}`,
    String(s.since_best),
  ]);
  show(
    "stuck",
    stuckRows.length
      ? table(
          "Many submissions, no better score for a while",
          ["Student", "Submissions", "Best score", "Submissions since the best"],
          stuckRows,
        )
      : h("p", { class: "muted" }, "No student is stuck."),
    csvButton("stuck"),
  );
}

function beside(code, reference) {
  return h(
    "div",
    { class: "side" },
    h("figure", {}, h("figcaption", {}, "One submission"), h("pre", { tabindex: "0" }, code)),
    h("figure", {}, h("figcaption", {}, "The reference"), h("pre", { tabindex: "0" }, reference)),
  );
}

/** The largest groups come with one submission's code; the others fetch it when asked. */
function example(m, reference) {
  if (m.code !== null) return beside(m.code, reference);
  const box = h("div", {});
  const show = async () => {
    try {
      const view = await json(`/api/instructor/submissions/${encodeURIComponent(m.submission_id)}`);
      replaceChildren(box, beside(view.code, reference));
    } catch (error) {
      say(error.message);
    }
  };
  replaceChildren(box, h("button", { type: "button", onclick: show }, "Show one submission"));
  return box;
}

function mistake(m, reference) {
  const name = m.titles.length ? m.titles.join(" / ") : "unlabelled";
  const students = m.size === 1 ? "1 student" : `${m.size} students`;
  return h(
    "article",
    { class: "mistake" },
    h("h3", {}, `${students}: ${name}`),
    m.explanations.length ? h("p", {}, m.explanations[0]) : null,
    h("p", { class: "muted" }, `Failing tests: ${m.failing_tests.join(", ")}`),
    h("p", {}, `Students: ${m.students.join(", ")}`),
    example(m, reference),
  );
}

async function load(event) {
  event?.preventDefault();
  auth.token = $("token").value.trim();
  if (!auth.token && !auth.lti) return say("Type the instructor token first.");
  say("Loading…");
  let stats;
  try {
    stats = await json(`/api/instructor/stats?${query()}`);
    render(stats);
    say(`Statistics of ${$("exercise").value}.`);
  } catch (error) {
    return say(error.message);
  }
  // an LTI launch reaches its own course only: the server names it
  if (auth.lti) $("course").value = stats.course;
  const course = $("course").value.trim() || "default";
  termSection($("term"), { call, json, say, exercise: $("exercise").value, course, table });
}

async function start() {
  const match = /(?:^#|&)lti=([^&]+)/.exec(window.location.hash);
  if (match) {
    auth.lti = match[1];
    window.history.replaceState(null, "", window.location.pathname);
    $("token-field").hidden = true;
    $("course").readOnly = true;
    $("course").placeholder = "the course you launched from";
  }
  try {
    const exercises = await (await fetch("/api/exercises")).json();
    replaceChildren(
      $("exercise"),
      exercises.map((e) => h("option", { value: e.id }, `${e.title} (${e.id})`)),
    );
  } catch {
    say("The exercises could not be read: is the grader running?");
  }
  $("choose").addEventListener("submit", load);
  if (auth.lti) load();
}

start();
