// What the page keeps in localStorage: the code being edited, one per exercise, the
// student's name, and the secret key the service issued for each name (a name without its
// key cannot submit again).

// Before there were several exercises the page kept one code under CODE: the root
// exercise's. Now each exercise's is under CODE.<id>.
const CODE = "gspo-grader.code";
const NAME = "gspo-grader.student";
const KEYS = "gspo-grader.keys";

function read(key) {
  try {
    return window.localStorage.getItem(key);
  } catch {
    return null; // storage disabled (private mode): the page still works, it just forgets
  }
}

function write(key, value) {
  try {
    window.localStorage.setItem(key, value);
  } catch {
    // full or disabled: autosave is a convenience, never a reason to fail a Run
  }
}

function remove(key) {
  try {
    window.localStorage.removeItem(key);
  } catch {
    // disabled: nothing was kept
  }
}

const codeKey = (exercise) => `${CODE}.${exercise}`;

function readKeys() {
  try {
    return JSON.parse(read(KEYS) || "{}") || {};
  } catch {
    return {};
  }
}

export const storage = {
  /** The code kept for `exercise`, or null when the student has not edited it here. */
  code: (exercise) => read(codeKey(exercise)),
  saveCode: (exercise, code) => write(codeKey(exercise), code),
  /** Give the code kept before exercises had their own (the old single key) to the root
   * exercise, unless it has its own already; then forget the old key. */
  adoptOldCode(root) {
    const old = read(CODE);
    if (old === null) return;
    if (read(codeKey(root)) === null) write(codeKey(root), old);
    if (read(codeKey(root)) !== null) remove(CODE);
  },
  student: () => read(NAME) || "",
  saveStudent: (name) => write(NAME, name),
  keyFor: (name) => readKeys()[name] || null,
  saveKey(name, key) {
    const keys = readKeys();
    keys[name] = key;
    write(KEYS, JSON.stringify(keys));
  },
};
