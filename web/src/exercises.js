// Which exercise the page shows: the picker in the header, and the address. The address
// names the exercise (/?exercise=dpo), so a link opens it; picking another one pushes a new
// address, so the browser's Back button returns to the exercise before.

import { h, replaceChildren } from "./dom.js";

const PARAM = "exercise";

/** The exercise id the address asks for, or null (then the root exercise). */
export function exerciseInAddress() {
  return new URLSearchParams(window.location.search).get(PARAM) || null;
}

/** Make the address name exercise `id`: a new history entry (push) or this one (replace). */
export function showInAddress(id, how) {
  if (exerciseInAddress() === id) return;
  const params = new URLSearchParams(window.location.search);
  params.set(PARAM, id);
  const address = `${window.location.pathname}?${params}${window.location.hash}`;
  if (how === "push") window.history.pushState(null, "", address);
  else window.history.replaceState(null, "", address);
}

/**
 * Fill `select` with the exercises (GET /api/exercises) by title and show its label.
 * onPick(id) runs when the student picks one. Returns {show(id), setDisabled(flag)}.
 */
export function createPicker(select, exercises, onPick) {
  replaceChildren(
    select,
    exercises.map((exercise) => h("option", { value: exercise.id }, exercise.title)),
  );
  select.addEventListener("change", () => onPick(select.value));
  select.closest("label").hidden = false;
  return {
    show: (id) => {
      select.value = id;
    },
    setDisabled: (flag) => {
      select.disabled = flag;
    },
  };
}
