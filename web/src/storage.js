// What the page keeps in localStorage: the code being edited, the student's name, and the
// secret key the service issued for each name (a name without its key cannot submit again).

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

function readKeys() {
  try {
    return JSON.parse(read(KEYS) || "{}") || {};
  } catch {
    return {};
  }
}

export const storage = {
  code: () => read(CODE),
  saveCode: (code) => write(CODE, code),
  student: () => read(NAME) || "",
  saveStudent: (name) => write(NAME, name),
  keyFor: (name) => readKeys()[name] || null,
  saveKey(name, key) {
    const keys = readKeys();
    keys[name] = key;
    write(KEYS, JSON.stringify(keys));
  },
};
