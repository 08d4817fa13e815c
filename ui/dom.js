// Small DOM helpers: element builders (text is always set as text, never parsed as
// HTML) and the number formats every view uses.

const SVG_NS = 'http://www.w3.org/2000/svg';

// Fills el from attrs: "class", "text", "on<event>" handlers, "dataset", booleans
// (set when true), anything else as an attribute; then appends children (strings become
// text nodes; null and false are skipped; arrays are flattened).
function fill(el, attrs, children) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === 'text') el.textContent = v;
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'value' && 'value' in el) el.value = v;
    else if (v === true) el.setAttribute(k, '');
    else el.setAttribute(k, String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

// An HTML element: h('a', {href: '#/x', class: 'y'}, 'text', child, ...).
export function h(tag, attrs, ...children) {
  return fill(document.createElement(tag), attrs, children);
}

// An SVG element, same calling convention as h.
export function s(tag, attrs, ...children) {
  return fill(document.createElementNS(SVG_NS, tag), attrs, children);
}

// Replaces everything inside el with children.
export function put(el, ...children) {
  el.replaceChildren();
  return fill(el, null, children);
}

// Milliseconds with 3 significant digits ("1.25 ms"), or "–".
export function ms(x) {
  return typeof x === 'number' && isFinite(x) ? `${x.toPrecision(3)} ms` : '–';
}

// A speed-up as "2.50×", or "–".
export function speedup(x) {
  return typeof x === 'number' && isFinite(x) ? `${x.toFixed(2)}×` : '–';
}

// A number with a few decimals, or "–".
export function num(x, digits = 3) {
  return typeof x === 'number' && isFinite(x) ? x.toFixed(digits) : '–';
}

// A timestamp as local "YYYY-MM-DD HH:MM:SS".
export function when(iso) {
  if (!iso) return '–';
  const d = new Date(iso);
  const p = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ` +
    `${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

// A status badge (queued, running, succeeded, failed, cancelled, ready, ...).
export function badge(status) {
  return h('span', {class: `badge st-${status}`, text: status});
}

// A table with a header row; rows are arrays of cells (nodes or text). Wrapped in a
// div that scrolls sideways on narrow screens.
export function table(headers, rows, attrs = {}) {
  return h('div', {class: 'scroll'},
    h('table', attrs,
      h('thead', null, h('tr', null, headers.map((t) => h('th', {text: t})))),
      h('tbody', null, rows.map((r) => r instanceof Node ? r :
        h('tr', null, r.map((c) => h('td', null, c)))))));
}

// Starts a download of text as a file called name.
export function download(name, text, type = 'application/json') {
  const url = URL.createObjectURL(new Blob([text], {type}));
  const a = h('a', {href: url, download: name});
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

// Reads a File (from a picker or a drop) as text.
export function readText(file) {
  return file.text();
}

// Shows text in the page's notice line for a while (errors that belong to no form).
export function notice(text) {
  const el = document.getElementById('notice');
  el.textContent = text;
  el.hidden = false;
  clearTimeout(notice.timer);
  notice.timer = setTimeout(() => { el.hidden = true; }, 8000);
}

// Shows an API error in place: next to the input of form whose data-field names
// err.field (the API's JSON path, e.g. "budget.steps"), else in the form's .form-error
// line. Earlier messages are cleared first.
export function showError(form, err) {
  clearErrors(form);
  const text = err.code ? `${err.message} (${err.code})` : err.message;
  const input = fieldInput(form, err.field);
  if (input) {
    input.classList.add('invalid');
    input.setAttribute('aria-invalid', 'true');
    input.after(h('span', {class: 'field-error', role: 'alert', text}));
    input.focus();
    return;
  }
  const line = form.querySelector('.form-error');
  if (line) {
    line.textContent = err.field ? `${err.field}: ${text}` : text;
    line.hidden = false;
  } else {
    notice(text);
  }
}

// The input of form for an API field path: "checks[1]" and "knob_move.knob" fall back
// to "checks" and "knob_move" when no input names the element itself.
function fieldInput(form, field) {
  for (let f = field; f; f = f.replace(/(\[[0-9]+\]|\.[^.[]*)$/, '')) {
    const el = form.querySelector(`[data-field="${CSS.escape(f)}"]`);
    if (el) return el;
    if (!/[.[]/.test(f)) break;
  }
  return null;
}

// Removes the error marks showError left in form.
export function clearErrors(form) {
  for (const e of form.querySelectorAll('.field-error')) e.remove();
  for (const e of form.querySelectorAll('.invalid')) {
    e.classList.remove('invalid');
    e.removeAttribute('aria-invalid');
  }
  const line = form.querySelector('.form-error');
  if (line) line.hidden = true;
}

// Calls draw(width) now and whenever el's width changes by 16 px or more, so SVG
// drawn in CSS pixels keeps its text at its real size on any screen. Returns a
// function that stops watching.
export function onWidth(el, draw) {
  let last = 0;
  const check = () => {
    const w = Math.floor(el.clientWidth);
    if (w > 0 && Math.abs(w - last) >= 16) {
      last = w;
      draw(w);
    }
  };
  const ro = new ResizeObserver(check);
  ro.observe(el);
  check();
  return () => ro.disconnect();
}
