// A student who came from an LMS (LTI 1.3 launch) is signed in by a session token, not by a
// name and key. The launch sends the page to /#lti=<token>: the fragment never reaches a
// server or a Referer. The page takes the token out of the address, keeps it in memory and
// in sessionStorage (a reload inside the LMS's iframe keeps the session; no cookie is
// needed, so browsers that block third-party cookies do not matter), and renews it while
// the page is open.

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

function tokenFromPage() {
  const match = /(?:^#|&)lti=([^&]+)/.exec(window.location.hash);
  if (match) {
    window.history.replaceState(null, "", window.location.pathname + window.location.search);
    remember(match[1]);
    return match[1];
  }
  try {
    return window.sessionStorage.getItem(KEY);
  } catch {
    return null;
  }
}

/** The LMS session (name, role, course, exercise), or null when the page was opened
 * directly (then the name-and-key mode applies). */
export async function startLtiSession() {
  const token = tokenFromPage();
  if (!token) return null;
  api.useSession(token);
  const info = await api.ltiSession();
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
