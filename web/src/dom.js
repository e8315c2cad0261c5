// A tiny element builder. Every string goes in as text, never as HTML, because report
// messages and captured output come from student code.

/**
 * h("div", {class: "x", onclick: fn}, child, "text", [more]) -> HTMLElement
 * Attributes whose value is null, undefined or false are left out.
 */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith("on") && typeof value === "function") {
      el.addEventListener(name.slice(2), value);
    } else if (name === "style" && typeof value === "object") {
      Object.assign(el.style, value);
    } else {
      el.setAttribute(name, value === true ? "" : String(value));
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(el, child);
    else if (child instanceof Node) el.appendChild(child);
    else el.appendChild(document.createTextNode(String(child)));
  }
}

/** Replace every child of `el` with `children`. */
export function replaceChildren(el, ...children) {
  el.replaceChildren();
  append(el, children);
}

/** A number for people: short, fixed precision, and honest about NaN/inf (null on the wire). */
export function formatNumber(value, digits = 4) {
  if (value === null || value === undefined) return "NaN";
  if (!Number.isFinite(value)) return String(value);
  if (value === 0) return "0";
  const magnitude = Math.abs(value);
  if (magnitude >= 1e4 || magnitude < 1e-3) return value.toExponential(2);
  return Number(value.toPrecision(digits)).toString();
}
