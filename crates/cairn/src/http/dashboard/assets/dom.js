// DOM helpers. Every string from the API reaches the page through createTextNode or an
// attribute set with setAttribute, never through innerHTML, so a goal or a tool's output
// that holds markup is shown as text, not run.

const SVG_NS = 'http://www.w3.org/2000/svg';

function fill(el, attrs, children) {
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith('on') && typeof value === 'function') {
      el.addEventListener(name.slice(2), value);
    } else if (name === 'dataset') {
      Object.assign(el.dataset, value);
    } else {
      el.setAttribute(name, value === true ? '' : String(value));
    }
  }
  append(el, children);
  return el;
}

/** Appends children: nodes as they are, strings and numbers as text, arrays flattened. */
export function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

/** An HTML element: h('a', {href: '#/'}, 'text', otherNode). */
export function h(tag, attrs, ...children) {
  return fill(document.createElement(tag), attrs, children);
}

/** An SVG element, same calling convention as h. */
export function s(tag, attrs, ...children) {
  return fill(document.createElementNS(SVG_NS, tag), attrs, children);
}

/** Replaces an element's children. */
export function put(el, ...children) {
  el.replaceChildren();
  return append(el, children);
}

/** A status badge; the class picks the colour in app.css. */
export function badge(status) {
  return h('span', { class: `badge st-${cssName(status)}` }, String(status).replace('_', ' '));
}

/** Keeps a class name to letters, digits, '-' and '_' whatever the API sends. */
export function cssName(value) {
  return String(value ?? 'unknown').replace(/[^a-zA-Z0-9_-]/g, '_');
}

/** "2026-12-06T07:10:11.120Z" as the reader's local date and time. */
export function when(iso) {
  if (!iso) return '';
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? String(iso) : d.toLocaleString();
}

/** Time of day with milliseconds, for the event timeline. */
export function clock(iso) {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return String(iso ?? '');
  const pad = (n, w = 2) => String(n).padStart(w, '0');
  return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
}

/** Whole numbers with thousands separators; null as a dash. */
export function num(value) {
  return value === null || value === undefined ? '–' : Number(value).toLocaleString();
}

/** A rate in [0, 1] as a percentage; null (no data yet) as a dash. */
export function pct(value) {
  return value === null || value === undefined ? '–' : `${(value * 100).toFixed(1)}%`;
}

/** Cuts long text for one-line summaries; the full value stays in the expandable JSON. */
export function short(text, max = 120) {
  const str = typeof text === 'string' ? text : JSON.stringify(text);
  if (str === undefined) return '';
  return str.length > max ? `${str.slice(0, max - 1)}…` : str;
}

/** Collapsible pretty-printed JSON; the <pre> gets it as text. */
export function jsonDetails(label, value) {
  return h('details', { class: 'json' },
    h('summary', {}, label),
    h('pre', {}, JSON.stringify(value, null, 2)));
}

/** The message box used for every API error and notice. */
export function notice(text, kind = 'error') {
  return h('div', { class: `notice ${kind}`, role: kind === 'error' ? 'alert' : 'status' }, text);
}
