// A student who came from an LMS (LTI 1.3 launch) is signed in by a session token, not by a
// name and key. The launch sends the page to /#lti=<code>: the fragment never reaches a
// server or a Referer. The code is not a session: the page exchanges it (POST /lti/session)
// for one, which works only in the browser that made the launch (it holds the launch's
// cookie), so a link carrying someone else's code signs nobody in. The page keeps the
// session in memory and sessionStorage (a reload inside the LMS's iframe keeps it) and
// renews it while open, up to the end the launch fixed.

import { api } from "./api.js";

const KEY = "gspo-grader.lti";
const RENEW_MS = 20 * 60 * 1000; // the token lives 60 minutes

function remember(token) {
  try {
    window.sessionStorage.setItem(KEY, token);
  } catch {
    // storage blocked: the token stays in memory for as long as the page is open
  }
}

function codeFromAddress() {
  const match = /(?:^#|&)lti=([^&]+)/.exec(window.location.hash);
  if (!match) return null;
  window.history.replaceState(null, "", window.location.pathname + window.location.search);
  return match[1];
}

function storedToken() {
  try {
    return window.sessionStorage.getItem(KEY);
  } catch {
    return null;
  }
}

/** The LMS session (name, role, course, exercise), or null when the page was opened
 * directly (then the name-and-key mode applies). */
export async function startLtiSession() {
  const code = codeFromAddress();
  const token = code ? null : storedToken();
  if (!code && !token) return null;
  if (token) api.useSession(token);
  const info = code ? await api.ltiHandOff(code) : await api.ltiSession();
  api.useSession(info.token);
  remember(info.token);
  window.setInterval(async () => {
    try {
      const renewed = await api.ltiSession();
      api.useSession(renewed.token);
      remember(renewed.token);
    } catch {
      // expired or offline: the next request says so in words
    }
  }, RENEW_MS);
  return info;
}
