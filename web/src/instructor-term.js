// The instructor page's term section: the course's schedule, extensions and quota
// (GET /api/instructor/course, PUT .../schedule, .../extension, .../quota) and a regrade
// preview with Apply and Roll back (/api/instructor/regrades).

import { h, replaceChildren } from "./dom.js";

const POLL_MS = 2000;

function field(label, attrs) {
  return h("label", { class: "field" }, h("span", {}, label), h("input", attrs));
}

function choice(label, name, options, value) {
  const select = h(
    "select",
    { name },
    options.map((o) => h("option", { value: o, selected: o === value }, o)),
  );
  return h("label", { class: "field" }, h("span", {}, label), select);
}

function form(title, onsubmit, ...fields) {
  const submit = async (event) => {
    event.preventDefault();
    await onsubmit(Object.fromEntries(new FormData(event.target)));
  };
  return h("form", { class: "term-form", onsubmit: submit }, h("h3", {}, title), ...fields);
}

const lateText = (late) => late.map((w) => `${w.until} ${w.credit}`).join("\n");

function lateWindows(text) {
  return text
    .split("\n")
    .map((line) => line.trim().split(/\s+/))
    .filter((parts) => parts[0])
    .map(([until, credit]) => ({ until, credit: Number(credit) }));
}

/** Fill `section` with the term's forms for this exercise and course. */
export async function termSection(section, { call, json, say, exercise, course, table }) {
  const title = section.querySelector("h2");
  let term;
  try {
    term = await json(
      `/api/instructor/course?exercise=${encodeURIComponent(exercise)}&course=${encodeURIComponent(course)}`,
    );
  } catch (error) {
    replaceChildren(
      section,
      title,
      h("p", { class: "muted" }, `The course's term cannot be read: ${error.message}`),
    );
    section.hidden = false;
    return;
  }
  const put = (what, body) => async (values) => {
    try {
      await call(`/api/instructor/course/${what}`, {
        method: "PUT",
        body: { exercise, course, ...body(values) },
      });
      // The forms are drawn again from the saved term before the message says so: what
      // the page shows when it reads "Saved" is what the service holds.
      await termSection(section, { call, json, say, exercise, course, table });
      say(`Saved the ${what}.`);
    } catch (error) {
      say(error.message);
    }
  };
  const offered = term.suggested_due_at; // the LMS's due date for the link, if it sent one
  const s = term.schedule || {
    opens_at: "",
    due_at: offered || "",
    late: [],
    after: "practice",
    policy: "best",
  };
  const lmsDate =
    offered && offered !== term.schedule?.due_at
      ? h(
          "p",
          { class: "muted", id: "lms-due" },
          term.schedule
            ? `The LMS gives this link the due date ${offered}; the schedule saved here counts.`
            : `The LMS gives this link the due date ${offered}: it counts once you save the schedule.`,
        )
      : null;
  const schedule = form(
    "Schedule",
    put("schedule", (v) => ({ ...v, opens_at: v.opens_at || null, late: lateWindows(v.late) })),
    lmsDate,
    field("Opens at", {
      name: "opens_at",
      value: s.opens_at || "",
      placeholder: "2026-12-01T09:00:00+00:00",
    }),
    field("Due at", {
      name: "due_at",
      value: s.due_at || "",
      placeholder: "2026-12-15T23:59:00+00:00",
    }),
    h(
      "label",
      { class: "field" },
      h("span", {}, "Late windows (one a line: until, credit %)"),
      h("textarea", { name: "late", rows: 2 }, lateText(s.late || [])),
    ),
    choice("After the last window", "after", ["practice", "closed"], s.after),
    choice("Counted submission", "policy", ["best", "latest"], s.policy),
    h("button", { type: "submit" }, "Save schedule"),
  );
  const extensions = form(
    "Extensions",
    put("extension", (v) => v),
    term.extensions.length
      ? table(
          "Extensions",
          ["Student", "Due at"],
          term.extensions.map((e) => [e.student, e.due_at]),
        )
      : h("p", { class: "muted" }, "No extensions."),
    field("Student", { name: "student", required: true }),
    field("New due at", { name: "due_at", required: true }),
    h("button", { type: "submit" }, "Grant extension"),
  );
  const q = term.quota || { submits: "", per_seconds: "" };
  const quota = form(
    "Quota",
    put("quota", (v) => ({ submits: Number(v.submits), per_seconds: Number(v.per_seconds) })),
    field("Submits", { name: "submits", type: "number", min: 1, value: q.submits }),
    field("Per seconds", { name: "per_seconds", type: "number", min: 1, value: q.per_seconds }),
    h("button", { type: "submit" }, "Save quota"),
  );
  const regrade = h("div", { class: "term-form", id: "regrade" });
  replaceChildren(
    section,
    title,
    h("div", { class: "term" }, schedule, extensions, quota),
    regrade,
  );
  section.hidden = false;
  regradeControls(regrade, { call, json, say, exercise, course, table });
}

function regradeControls(box, { call, json, say, exercise, course, table }) {
  const body = { exercise, course };
  const post = (path) => json(path, { method: "POST", body });
  const showPreview = (preview) => {
    const students = preview.students.map((s) => [
      s.student,
      String(s.old_score),
      String(s.new_score),
    ]);
    const tests = preview.tests.filter((t) => t.flipped).map((t) => [t.test, String(t.flipped)]);
    const apply = async () => {
      try {
        await call(`/api/instructor/regrades/${encodeURIComponent(preview.preview_id)}/apply`, {
          method: "POST",
        });
        say("The regrade is applied: students see their new scores.");
      } catch (error) {
        say(error.message);
      }
    };
    replaceChildren(
      box,
      h("h3", {}, "Regrade"),
      table("Old and new score per student", ["Student", "Old score", "New score"], students),
      table("Tests whose verdicts flipped", ["Test", "Flipped"], tests),
      h("button", { type: "button", onclick: apply }, "Apply"),
      rollback,
    );
  };
  const wait = async (preview) => {
    while (preview.status === "grading") {
      say(`Regrading: ${preview.students.length} students so far…`);
      await new Promise((resolve) => setTimeout(resolve, POLL_MS));
      preview = await json(`/api/instructor/regrades/${encodeURIComponent(preview.preview_id)}`);
    }
    say("The regrade preview is ready; nothing has changed for students yet.");
    showPreview(preview);
  };
  const start = async () => {
    try {
      await wait(await post("/api/instructor/regrades"));
    } catch (error) {
      say(error.message);
    }
  };
  const undo = async () => {
    try {
      await post("/api/instructor/regrades/rollback");
      say("The last regrade is rolled back.");
    } catch (error) {
      say(error.message);
    }
  };
  const rollback = h("button", { type: "button", onclick: undo }, "Roll back");
  replaceChildren(
    box,
    h("h3", {}, "Regrade"),
    h(
      "p",
      { class: "muted" },
      "Grade the counted submissions again against the exercise as it is now.",
    ),
    h("button", { type: "button", onclick: start }, "Preview regrade"),
    rollback,
  );
}
