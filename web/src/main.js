// The page: wires the exercise picker, the statement, the editor, Run/Submit, the results
// panel and the history.

import "./styles.css";
import { api } from "./api.js";
import { createEditor } from "./editor.js";
import { h, replaceChildren } from "./dom.js";
import { createPicker, exerciseInAddress, showInAddress } from "./exercises.js";
import { renderHistory, submittedCode } from "./history.js";
import { addPreview, points, showBusy, showError, showIdle, showReport } from "./results.js";
import { renderStatement } from "./statement.js";
import { storage } from "./storage.js";
import { startLtiSession } from "./lti.js";

const $ = (id) => document.getElementById(id);
const els = {
  title: $("title"),
  exercise: $("exercise"),
  statement: $("statement"),
  history: $("history"),
  student: $("student"),
  run: $("run"),
  submit: $("submit"),
  reset: $("reset"),
  results: $("results"),
  status: $("status"),
  term: $("term"),
  tabs: [$("tab-statement"), $("tab-history")],
};
let exercise = null; // the exercise shown (GET /api/exercises/{id})
let rootId = null; // the root exercise's id: the one shown when the address names none
let picker = null; // absent for an LMS session (its link fixes the exercise) or one exercise
let opening = 0; // the latest openExercise: an older one that answers late is dropped
let busy = false;
let lti = null; // the LMS session, when the page was opened by a launch
let preview = null; // the exercise's reference preview, once the service has it
let submitted = null; // the code last submitted or loaded: the editor holds no unsaved change
let shown = null; // the graded answer in the results panel, and its caption: null when idle

// Each exercise's code is kept on its own: loading another exercise never saves over it.
const editor = createEditor($("editor"), {
  code: "",
  onChange: (code) => exercise && storage.saveCode(exercise.id, code),
  onRun: () => grade("run"),
});

function setBusy(kind) {
  busy = Boolean(kind);
  for (const button of [els.run, els.submit]) {
    button.disabled = busy;
    if (busy && button.id === kind) button.setAttribute("aria-busy", "true");
    else button.removeAttribute("aria-busy");
  }
  picker?.setDisabled(busy); // a verdict belongs to the exercise it was asked for
}

function studentName() {
  return lti ? lti.name : els.student.value.trim();
}

async function request(kind, id) {
  const code = editor.getCode();
  if (kind === "run") return settled(kind, await api.run(code, id));
  const name = studentName();
  const response = await api.submit(code, name, storage.keyFor(name), id);
  submitted = code;
  if (response.student_key && !lti) storage.saveKey(response.student, response.student_key);
  return settled(kind, response);
}

const POLL_MS = 1000;
const pause = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Poll a grading the server answered with 202 until it has a verdict, saying where it is. */
async function settled(kind, response) {
  let current = response;
  while (current.status === "queued" || current.status === "grading") {
    els.status.textContent =
      current.status === "queued" ? `Queued, position ${current.position ?? "?"}` : "Grading…";
    await pause(POLL_MS);
    current =
      kind === "run"
        ? await api.runStatus(current.report_id)
        : await api.submission(current.submission_id, storage.keyFor(studentName()));
  }
  return current;
}

// The service's rule for names (grader/service/schemas.py), checked here to say it plainly.
const NAME_RULE = /^[\p{L}\p{N}][\p{L}\p{M}\p{N}_ .@-]{0,63}$/u;

function nameProblem() {
  if (lti) return null;
  const name = studentName();
  if (!name) return "Enter your name above before you submit.";
  if (!NAME_RULE.test(name)) {
    return "A name starts with a letter or digit and holds only letters, digits, spaces and . _ @ - (64 at most).";
  }
  return null;
}

async function grade(kind) {
  if (busy || !exercise) return;
  const problem = kind === "submit" ? nameProblem() : null;
  if (problem) {
    replaceChildren(els.results, problemLine(problem));
    els.student.focus();
    return;
  }
  setBusy(kind);
  els.status.textContent = kind === "run" ? "Running…" : "Submitting…";
  shown = null;
  const done = showBusy(
    els.results,
    kind === "run" ? "Running the visible tests…" : "Grading your submission on every tier…",
  );
  const asked = exercise;
  try {
    const response = await request(kind, asked.id);
    done();
    if (exercise !== asked) return; // the student went to another exercise (Back) meanwhile
    show(response, "");
    els.status.textContent =
      response.status === "ungradable"
        ? "Ungradable: the grader failed, not your code"
        : `Graded: ${points(response.report.score)} / ${points(response.report.max_score)}`;
    if (kind === "submit") {
      refreshHistory();
      showTerm();
    }
  } catch (error) {
    done();
    if (exercise !== asked) return;
    showError(els.results, error);
    els.status.textContent = "Grading failed";
  } finally {
    setBusy(null);
  }
}

async function openSubmission(item, label) {
  shown = null;
  const done = showBusy(els.results, "Opening the submission…");
  try {
    const response = await api.submission(item.submission_id, storage.keyFor(studentName()));
    const final = await settled("submit", response);
    done();
    show(final, `Submission of ${label}`);
  } catch (error) {
    done();
    showError(els.results, error);
  }
}

/** A graded answer in the results panel, beside the reference preview; a past submission's
 *  (caption given) with its code above. */
function show(answer, caption) {
  shown = [answer, caption];
  showReport(els.results, answer.report, caption, answer.plots, preview, answer.hint);
  if (caption) els.results.prepend(submittedCode(answer.code, loadCode));
}

/** Put a past submission's code in the editor, after asking when that loses unsaved work. */
function loadCode(code) {
  const current = editor.getCode();
  const unsaved = ![code, submitted, exercise.starter].includes(current);
  const question =
    "Load this submission's code into the editor? Your unsaved changes will be lost.";
  if (unsaved && !window.confirm(question)) return;
  editor.setCode(code);
  submitted = code;
  els.status.textContent = "The submission's code is in the editor.";
  editor.focus();
}

/** Ask for the exercise's reference preview until it is drawn (a grading node draws it once
 *  per exercise version), then show it: alone before a first Run, or beside a report. */
async function loadPreview(asked) {
  for (let tries = 0; tries < 60; tries += 1) {
    let answer;
    try {
      answer = await api.preview(asked.id);
    } catch {
      return; // an exercise without a toy, or the service is down: the panel says nothing more
    }
    if (exercise !== asked) return;
    if (answer.status === "ready") {
      preview = answer;
      if (shown)
        show(...shown); // graded before the preview came: now beside it
      else if (els.results.querySelector(".placeholder")) addPreview(els.results, preview);
      return;
    }
    await pause(POLL_MS);
  }
}

/** Under Submit: the due date, the credit a Submit now would earn, the Submits left. */
async function showTerm() {
  els.term.textContent = "";
  if (!exercise || lti) return; // an LMS course's term is shown by the LMS
  const name = studentName();
  let term;
  try {
    term = await api.term(exercise.id, name, storage.keyFor(name));
  } catch {
    return; // the term is a hint: Submit still answers what applies
  }
  const parts = [];
  if (term.due_at) parts.push(`Due ${new Date(term.due_at).toLocaleString()}`);
  if (term.refused) parts.push(term.refused);
  else if (!term.counted) parts.push("a Submit now is practice (not counted)");
  else if (term.credit < 100) parts.push(`a Submit now earns up to ${term.credit} %`);
  if (term.remaining !== null) parts.push(`${term.remaining} Submits left`);
  els.term.textContent = parts.join(" · ");
}

function refreshHistory() {
  const name = studentName();
  return renderHistory(els.history, {
    name,
    key: storage.keyFor(name),
    exercise,
    onOpen: openSubmission,
  });
}

function selectTab(tab) {
  for (const other of els.tabs) {
    const selected = other === tab;
    other.setAttribute("aria-selected", String(selected));
    $(other.getAttribute("aria-controls")).hidden = !selected;
  }
  if (tab.id === "tab-history") refreshHistory();
}

function resetToStarter() {
  if (!exercise) return;
  if (!window.confirm("Replace your code with the starter? Your current code will be lost."))
    return;
  editor.setCode(exercise.starter);
  editor.focus();
}

function problemLine(text) {
  return h("p", { class: "alert server-error", role: "alert" }, text);
}

/**
 * Show exercise `id` (null: the root one): its statement, its starter or the code kept for
 * it, an empty results panel, its history. address: "push" or "replace" to name it in the
 * address too; left out, the address stays as it is.
 */
async function openExercise(id, address) {
  const ticket = ++opening;
  const previous = exercise;
  let next;
  try {
    next = await api.exercise(id);
  } catch (error) {
    if (ticket !== opening) return;
    if (error.status === 404 && id && id !== rootId) {
      await openExercise(rootId, "replace");
      els.results.prepend(
        problemLine(`There is no exercise “${id}”; here is the first exercise instead.`),
      );
      return;
    }
    const problem = `The exercise could not be loaded. ${error.message}`;
    if (previous) {
      picker?.show(previous.id);
      replaceChildren(els.results, problemLine(problem));
    } else {
      replaceChildren(els.statement, problemLine(problem));
    }
    return;
  }
  if (ticket !== opening) return;
  rootId ??= next.id; // the list was not readable: then only the root exercise is opened
  storage.adoptOldCode(rootId);
  exercise = next;
  picker?.show(next.id);
  if (address) showInAddress(next.id, address);
  els.title.textContent = next.title;
  document.title = `${next.title} · gspo-grader`;
  renderStatement(els.statement, next);
  editor.load(storage.code(next.id) ?? next.starter);
  if (previous?.id !== next.id) {
    preview = null;
    submitted = null;
    shown = null;
    showIdle(els.results);
    els.status.textContent = "";
    loadPreview(next);
  }
  if (!els.history.hidden) refreshHistory();
  showTerm();
}

/** The exercises this service grades, or null when the list cannot be read. */
async function catalog() {
  try {
    return await api.exercises();
  } catch {
    return null; // the exercise itself then says what is wrong
  }
}

async function start() {
  await signIn();
  const exercises = await catalog();
  rootId = exercises?.[0]?.id ?? null;
  if (lti) {
    await openExercise(lti.exercise); // the course's link fixes the exercise: no picker
    return;
  }
  if (exercises && exercises.length > 1) {
    picker = createPicker(els.exercise, exercises, (id) => openExercise(id, "push"));
  }
  window.addEventListener("popstate", () => openExercise(exerciseInAddress() ?? rootId));
  await openExercise(exerciseInAddress() ?? rootId);
}

function wire() {
  els.student.value = storage.student();
  els.student.addEventListener("input", () => storage.saveStudent(studentName()));
  els.run.addEventListener("click", () => grade("run"));
  els.submit.addEventListener("click", () => grade("submit"));
  els.reset.addEventListener("click", resetToStarter);
  for (const tab of els.tabs) tab.addEventListener("click", () => selectTab(tab));
  window.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey) && !event.defaultPrevented) {
      event.preventDefault();
      grade("run");
    }
  });
}

async function signIn() {
  try {
    lti = await startLtiSession();
  } catch (error) {
    replaceChildren(els.results, problemLine(error.message));
    return;
  }
  if (!lti) return;
  const course = lti.course ? ` · ${lti.course}` : "";
  replaceChildren(
    els.student.parentElement,
    h("span", { class: "signed-in" }, `Signed in as ${lti.name}${course}`),
  );
}

wire();
showIdle(els.results);
start();
