// A small markdown-it plugin: `$...$` is inline math and `$$...$$` display math, both typeset
// by KaTeX. Written here (not a plugin from npm) because the rules we need are few: Pandoc's
// convention that an inline opening `$` is not followed by a space and a closing `$` is not
// preceded by one, so prices like "$5 and $6" stay text.

import katex from "katex";

function typeset(tex, displayMode) {
  return katex.renderToString(tex, { displayMode, throwOnError: false, output: "htmlAndMathml" });
}

function findInlineClose(src, from) {
  for (let pos = from; pos < src.length; pos += 1) {
    if (src[pos] === "\\") pos += 1;
    else if (src[pos] === "$") return pos;
  }
  return -1;
}

function mathInline(state, silent) {
  const { src, pos } = state;
  if (src[pos] !== "$") return false;
  const display = src[pos + 1] === "$";
  const open = display ? 2 : 1;
  const close = display ? src.indexOf("$$", pos + 2) : findInlineClose(src, pos + 1);
  if (close < 0) return false;
  const tex = src.slice(pos + open, close);
  if (!tex.trim()) return false;
  if (!display && (/^\s/.test(tex) || /\s$/.test(tex))) return false;
  if (!silent) {
    const token = state.push(display ? "math_display" : "math_inline", "math", 0);
    token.content = tex;
  }
  state.pos = close + open;
  return true;
}

function mathBlock(state, startLine, endLine, silent) {
  const start = state.bMarks[startLine] + state.tShift[startLine];
  const firstLine = state.src.slice(start, state.eMarks[startLine]);
  if (!firstLine.startsWith("$$")) return false;
  if (silent) return true;
  let body = firstLine.slice(2);
  let line = startLine;
  let closed = body.trimEnd().endsWith("$$");
  while (!closed && line + 1 < endLine) {
    line += 1;
    const text = state.src.slice(state.bMarks[line] + state.tShift[line], state.eMarks[line]);
    body += `\n${text}`;
    closed = text.trimEnd().endsWith("$$");
  }
  if (closed) body = body.trimEnd().slice(0, -2);
  const token = state.push("math_block", "math", 0);
  token.block = true;
  token.content = body.trim();
  token.map = [startLine, line + 1];
  state.line = line + 1;
  return true;
}

/** markdown-it plugin: `md.use(mathPlugin)`. */
export function mathPlugin(md) {
  md.inline.ruler.before("escape", "math_inline", mathInline);
  md.block.ruler.before("fence", "math_block", mathBlock, {
    alt: ["paragraph", "reference", "blockquote", "list"],
  });
  md.renderer.rules.math_inline = (tokens, idx) => typeset(tokens[idx].content, false);
  md.renderer.rules.math_display = (tokens, idx) => typeset(tokens[idx].content, true);
  md.renderer.rules.math_block = (tokens, idx) =>
    `<div class="math-block">${typeset(tokens[idx].content, true)}</div>\n`;
}
