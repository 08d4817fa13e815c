// Form fields shared by the editors. Every input carries data-field, the API's name
// for it, so an API error naming that field is shown beside it (dom.js, showError).
import {h} from './dom.js';

// A labelled text input (or textarea when rows > 1) for the API field name.
export function textField(label, field, value, rows = 1) {
  const input = rows > 1
    ? h('textarea', {'data-field': field, rows, spellcheck: 'false'})
    : h('input', {'data-field': field, autocomplete: 'off', spellcheck: 'false'});
  input.value = value ?? '';
  return h('label', {class: 'field'}, h('span', {text: label}), input);
}

// A textarea holding a list of strings, one a line.
export function linesField(label, field, values) {
  const f = textField(label, field, (values || []).join('\n'), Math.max(2, Math.min(6, (values || []).length + 1)));
  f.querySelector('textarea').dataset.lines = '1';
  return f;
}

// A group of checkboxes for a list of enum values.
export function checksField(label, field, options, chosen) {
  return h('fieldset', {class: 'field checks', 'data-field': field, 'data-checks': '1', tabindex: '-1'},
    h('legend', {text: label}),
    options.map((o) => h('label', {class: 'check'},
      h('input', {type: 'checkbox', value: o, checked: (chosen || []).includes(o)}), o)));
}

// A labelled select of options (value and text alike); with noneText, a first choice
// "" that stands for null.
export function selectField(label, field, options, chosen, noneText = null) {
  return h('label', {class: 'field'}, h('span', {text: label}),
    h('select', {'data-field': field, 'data-nullable': noneText !== null ? '1' : null},
      noneText !== null ? h('option', {value: '', text: noneText, selected: chosen === null}) : null,
      options.map((o) => h('option', {value: o, text: o, selected: o === chosen}))));
}

// The value of one field element as the API wants it: lines as arrays, checkbox groups
// as arrays, inputs marked data-json parsed as JSON (empty: null), data-number ones as
// numbers when they read as one (else the text, for the API to refuse), and an empty
// choice of a data-nullable select as null.
function valueOf(el) {
  if (el.dataset.checks) return [...el.querySelectorAll('input:checked')].map((c) => c.value);
  const v = el.value;
  if (el.dataset.lines) return v.split('\n').map((l) => l.trim()).filter(Boolean);
  if (el.dataset.json) return v.trim() === '' ? null : JSON.parse(v);
  if (el.dataset.nullable && v === '') return null;
  if (el.dataset.number) return v.trim() !== '' && isFinite(Number(v)) ? Number(v) : v;
  return v;
}

// Every data-field of form as {field: value}. A data-json field that does not parse
// throws {message, field}, shaped like an API error.
export function readForm(form) {
  const out = {};
  for (const el of form.querySelectorAll('[data-field]')) {
    try {
      out[el.dataset.field] = valueOf(el);
    } catch {
      throw {message: 'not valid JSON', field: el.dataset.field};
    }
  }
  return out;
}

// The keys of next whose values differ from original's.
export function changed(original, next) {
  const out = {};
  for (const [k, v] of Object.entries(next)) {
    if (JSON.stringify(v) !== JSON.stringify(original[k] ?? (Array.isArray(v) ? [] : null))) out[k] = v;
  }
  return out;
}
