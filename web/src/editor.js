// The code editor: CodeMirror 6 with Python highlighting, smart indentation, line numbers and
// bracket matching. Mod-Enter (Ctrl or Cmd + Enter) runs the visible tests from inside it.

import { autocompletion, closeBrackets, closeBracketsKeymap } from "@codemirror/autocomplete";
import { defaultKeymap, history, historyKeymap, indentWithTab } from "@codemirror/commands";
import { python } from "@codemirror/lang-python";
import {
  bracketMatching,
  defaultHighlightStyle,
  foldGutter,
  indentOnInput,
  indentUnit,
  syntaxHighlighting,
} from "@codemirror/language";
import { EditorState, Prec } from "@codemirror/state";
import {
  drawSelection,
  EditorView,
  highlightActiveLine,
  highlightActiveLineGutter,
  keymap,
  lineNumbers,
} from "@codemirror/view";

const theme = EditorView.theme({
  "&": { height: "100%", fontSize: "13.5px" },
  ".cm-scroller": { fontFamily: "var(--mono)", lineHeight: "1.55" },
  ".cm-gutters": { background: "var(--panel)", borderRight: "1px solid var(--line)" },
});

/**
 * Mount the editor in `parent`.
 * onChange(code) runs after every edit (autosave); onRun() on Mod-Enter.
 * Returns {getCode, setCode, load, focus}: setCode is an edit (undoable, autosaved); load
 * opens another document with a fresh undo history (another exercise's code) and is not.
 */
export function createEditor(parent, { code, onChange, onRun }) {
  const runKey = Prec.highest(keymap.of([{ key: "Mod-Enter", run: () => (onRun(), true) }]));
  const stateOf = (doc) =>
    EditorState.create({
      doc,
      extensions: [
        runKey,
        lineNumbers(),
        highlightActiveLineGutter(),
        foldGutter(),
        history(),
        drawSelection(),
        indentUnit.of("    "),
        indentOnInput(),
        bracketMatching(),
        closeBrackets(),
        autocompletion({ activateOnTyping: false }),
        highlightActiveLine(),
        syntaxHighlighting(defaultHighlightStyle, { fallback: true }),
        python(),
        keymap.of([...closeBracketsKeymap, ...defaultKeymap, ...historyKeymap, indentWithTab]),
        EditorView.lineWrapping,
        EditorView.contentAttributes.of({ "aria-label": "Code editor" }),
        // the editor's <style> carries the nonce the server's CSP names for this page
        EditorView.cspNonce.of(document.querySelector('meta[name="csp-nonce"]')?.content ?? ""),
        EditorView.updateListener.of((update) => {
          if (update.docChanged) onChange(update.state.doc.toString());
        }),
        theme,
      ],
    });
  const view = new EditorView({ parent, state: stateOf(code) });
  return {
    getCode: () => view.state.doc.toString(),
    setCode(text) {
      view.dispatch({ changes: { from: 0, to: view.state.doc.length, insert: text } });
    },
    load: (text) => view.setState(stateOf(text)),
    focus: () => view.focus(),
  };
}
