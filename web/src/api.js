// The HTTP API the grading service exposes (see docs/architecture.md). Every failure becomes
// an ApiError whose message is one readable sentence, so the page never shows a blank panel.

export class ApiError extends Error {
  constructor(message, status = 0, retryAfter = null) {
    super(message);
    this.name = "ApiError";
    this.status = status; // 0 when the server could not be reached at all
    this.retryAfter = retryAfter; // seconds, from a 503's Retry-After header
  }
}

/** FastAPI's 422 detail is a list of {loc, msg}; every other detail is a sentence. */
function detailText(detail) {
  if (typeof detail === "string") return detail;
  if (Array.isArray(detail)) {
    return detail.map((item) => `${(item.loc || []).join(".")}: ${item.msg}`).join("; ");
  }
  return detail === undefined ? "" : JSON.stringify(detail);
}

async function errorFrom(response) {
  let detail = "";
  try {
    const body = await response.json();
    detail = detailText(body.detail);
  } catch {
    detail = "";
  }
  const retry = Number.parseInt(response.headers.get("Retry-After") || "", 10);
  const reason = detail || response.statusText || "no detail given";
  const message = `The server answered ${response.status}: ${reason}`;
  return new ApiError(message, response.status, Number.isNaN(retry) ? null : retry);
}

// The LMS session token (lti.js), sent on every call once a launch has set it.
let session = null;

async function request(path, { method = "GET", body, key } = {}) {
  const headers = { Accept: "application/json" };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (key) headers["X-Student-Key"] = key;
  if (session) headers["X-LTI-Session"] = session;
  let response;
  try {
    response = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch {
    throw new ApiError("The grading server cannot be reached. Is it running?");
  }
  if (!response.ok) throw await errorFrom(response);
  try {
    return await response.json();
  } catch {
    throw new ApiError(`The server answered ${response.status} with something that is not JSON.`);
  }
}

// Run and Submit answer 200 with the report, or 202 with a status ("queued" with its
// position, or "grading") while the verdict takes longer; then the page polls runStatus or
// submission until the status is "done" or "ungradable". Both name the exercise graded (an
// id from exercises(); left out: the root exercise).
//
// A student from an LMS submits and reads their history under the session (whose link fixes
// the exercise); everyone else under a name and key, one exercise's history at a time.
export const api = {
  useSession: (token) => {
    session = token;
  },
  signedIn: () => session !== null,
  exercises: () => request("/api/exercises"),
  exercise: (id) => request(id ? `/api/exercises/${encodeURIComponent(id)}` : "/api/exercise"),
  // 200 with the reference preview, or 202 {status: "drawing"} while a grading node draws it
  preview: (id) => request(`/api/exercises/${encodeURIComponent(id)}/preview`),
  ltiSession: () => request("/api/lti/session"),
  ltiHandOff: (code) => request("/lti/session", { method: "POST", body: { code } }),
  run: (code, exercise) => request("/api/run", { method: "POST", body: { code, exercise } }),
  runStatus: (reportId) => request(`/api/runs/${encodeURIComponent(reportId)}`),
  submit: (code, student, key, exercise) =>
    session
      ? request("/api/lti/submit", { method: "POST", body: { code, exercise } })
      : request("/api/submit", { method: "POST", body: { code, student, exercise }, key }),
  submissions: (student, key, exercise) =>
    session
      ? request("/api/lti/submissions")
      : request(
          `/api/submissions?student=${encodeURIComponent(student)}` +
            (exercise ? `&exercise=${encodeURIComponent(exercise)}` : ""),
          { key },
        ),
  // The due date and the credit a Submit now would earn; with the key, the Submits left.
  term: (exercise, student, key) =>
    request(
      `/api/term?exercise=${encodeURIComponent(exercise)}` +
        (student ? `&student=${encodeURIComponent(student)}` : ""),
      { key },
    ),
  submission: (id, key) =>
    request(`/api${session ? "/lti" : ""}/submissions/${encodeURIComponent(id)}`, { key }),
};
