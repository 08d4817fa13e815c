// The task list (status filter on the server, family and name filters on the page,
// paging on the API's cursors; #/tasks?status=&cursor=&limit=), the submission of a .py
// file and cancelling.
import {api, query} from './api.js';
import {badge, clearErrors, h, notice, put, readText, showError, speedup, table, when} from './dom.js';
import {enumOf} from './spec.js';

const PAGE = 25;
const REFRESH_MS = 3000;
// Cursors of the pages before the one shown, per status filter ("Newer" goes back).
const pageStack = new Map();

export async function tasksView(root, _params, q) {
  const status = q.get('status') || '';
  const cursor = q.get('cursor') || '';
  const limit = q.get('limit') || PAGE;
  const [statuses, policies, proposers] = await Promise.all([
    enumOf('TaskStatus', ['queued', 'running', 'succeeded', 'failed', 'cancelled']),
    enumOf('Policy', ['htam+tree']),
    enumOf('Proposer', ['builtin', 'llm', 'test']),
  ]);
  const listBox = h('div', {id: 'task-list'});
  const filters = {family: '', name: ''};
  let page = null;

  const familySelect = h('select', {id: 'filter-family', 'aria-label': 'Family', onchange: (e) => { filters.family = e.target.value; render(); }});
  const nameInput = h('input', {id: 'filter-name', type: 'search', placeholder: 'name contains', 'aria-label': 'Name filter',
    oninput: (e) => { filters.name = e.target.value.toLowerCase(); render(); }});
  const statusSelect = h('select', {id: 'filter-status', 'aria-label': 'Status', onchange: (e) => go(e.target.value, '')},
    h('option', {value: '', text: 'every status'}),
    statuses.map((st) => h('option', {value: st, text: st, selected: st === status})));

  put(root,
    submitForm(policies, proposers, () => load()),
    h('section', {class: 'card'},
      h('div', {class: 'row spread'}, h('h2', {text: 'Tasks'}),
        h('div', {class: 'row filters'}, statusSelect, familySelect, nameInput)),
      listBox));

  function go(st, cur) {
    location.hash = `#/tasks${query({status: st, cursor: cur, limit: limit === PAGE ? '' : limit})}`;
  }

  function render() {
    if (!page) return;
    const families = [...new Set(page.items.map((t) => t.baselines?.family).filter(Boolean))].sort();
    put(familySelect, h('option', {value: '', text: 'every family'}),
      families.map((f) => h('option', {value: f, text: f, selected: f === filters.family})));
    const shown = page.items.filter((t) =>
      (!filters.family || t.baselines?.family === filters.family) &&
      (!filters.name || t.name.toLowerCase().includes(filters.name)));
    const stack = pageStack.get(status) || [];
    put(listBox,
      shown.length ? table(['Name', 'Status', 'Family', 'Best', 'Steps', 'Policy', 'Submitted', ''],
        shown.map(taskRow), {class: 'tasks'})
        : h('p', {class: 'muted', text: page.items.length ? 'No task on this page matches the filters.' : 'No tasks yet.'}),
      h('div', {class: 'row pager'},
        cursor ? h('button', {type: 'button', class: 'quiet', id: 'page-first', text: '« First page', onclick: () => { pageStack.set(status, []); go(status, ''); }}) : null,
        stack.length ? h('button', {type: 'button', class: 'quiet', id: 'page-newer', text: '‹ Newer', onclick: () => go(status, stack.pop())}) : null,
        page.next_cursor ? h('button', {type: 'button', class: 'quiet', id: 'page-older', text: 'Older ›', onclick: () => {
          pageStack.set(status, [...stack, cursor]);
          go(status, page.next_cursor);
        }}) : null));
  }

  function taskRow(t) {
    const live = t.status === 'queued' || t.status === 'running';
    const cancel = live && !t.cancel_requested
      ? h('button', {type: 'button', class: 'small danger', text: 'Cancel', onclick: async (e) => {
        e.target.disabled = true;
        try {
          await api('POST', `/v1/tasks/${t.id}/cancel`);
          await load();
        } catch (err) {
          notice(`Cancel failed: ${err.message}`);
          e.target.disabled = false;
        }
      }}) : null;
    return h('tr', {dataset: {id: t.id}},
      h('td', null, h('a', {href: `#/tasks/${t.id}`, text: t.name})),
      h('td', null, badge(t.status), t.cancel_requested && live ? h('span', {class: 'muted small', text: ' cancelling'}) : null),
      h('td', {text: t.baselines?.family || '–'}),
      h('td', {class: 'num', text: speedup(t.progress.best_speedup)}),
      h('td', {class: 'num', text: `${t.progress.step}/${t.progress.budget_steps}`}),
      h('td', {text: t.options.policy}),
      h('td', {class: 'small', text: when(t.created_at)}),
      h('td', null, cancel));
  }

  async function load() {
    try {
      page = await api('GET', `/v1/tasks${query({status, cursor, limit})}`);
      render();
    } catch (err) {
      put(listBox, h('p', {class: 'error', text: `Could not list tasks: ${err.message}`}));
    }
  }

  await load();
  const timer = setInterval(() => { if (!document.hidden) load(); }, REFRESH_MS);
  return () => clearInterval(timer);
}

// A task name the API takes, from a file name ("softmax (2).py" -> "softmax__2_").
function nameFromFile(file) {
  const base = file.replace(/\.py$/i, '').replace(/[^A-Za-z0-9_.-]/g, '_').slice(0, 128);
  return base || 'task';
}

// A number when text is one, else the text itself (the API then says what is wrong).
function numberOr(text) {
  const t = text.trim();
  return t !== '' && isFinite(Number(t)) ? Number(t) : t;
}

// The submission form: a .py file dropped or picked, and the main options.
function submitForm(policies, proposers, submitted) {
  let reference = null;
  const fileName = h('span', {class: 'file-name muted', text: 'no file chosen'});
  const fileInput = h('input', {type: 'file', accept: '.py,text/x-python,text/plain', id: 'submit-file', 'data-field': 'reference',
    onchange: () => fileInput.files[0] && take(fileInput.files[0])});
  const name = h('input', {id: 'submit-name', 'data-field': 'name', placeholder: 'from the file name', autocomplete: 'off'});
  const steps = h('input', {id: 'submit-steps', 'data-field': 'budget.steps', inputmode: 'numeric', value: '20', size: 5});
  const seconds = h('input', {id: 'submit-seconds', 'data-field': 'budget.seconds', inputmode: 'numeric', value: '900', size: 6});
  const policy = h('select', {id: 'submit-policy', 'data-field': 'policy'},
    policies.map((p) => h('option', {value: p, text: p, selected: p === 'htam+tree'})));
  const proposer = h('select', {id: 'submit-proposer', 'data-field': 'proposer'},
    proposers.map((p) => h('option', {value: p, text: p, selected: p === 'builtin'})));
  const result = h('p', {class: 'muted small', role: 'status'});

  async function take(file) {
    reference = await readText(file);
    fileName.textContent = `${file.name} (${reference.length} characters)`;
    if (!name.value) name.value = nameFromFile(file.name);
  }

  const drop = h('div', {class: 'drop', id: 'drop-zone', tabindex: '0',
    ondragover: (e) => { e.preventDefault(); drop.classList.add('over'); },
    ondragleave: () => drop.classList.remove('over'),
    ondrop: (e) => {
      e.preventDefault();
      drop.classList.remove('over');
      const f = e.dataTransfer.files[0];
      if (f) take(f);
    }},
    h('span', {text: 'Drop a KernelBench .py file here, or '}),
    h('label', {class: 'link'}, 'choose one', fileInput), ' ', fileName);

  const form = h('form', {id: 'submit-form', novalidate: true, onsubmit: async (e) => {
    e.preventDefault();
    clearErrors(form);
    if (reference === null) {
      showError(form, {message: 'choose a KernelBench .py file first', field: 'reference'});
      return;
    }
    const body = {reference, policy: policy.value, proposer: proposer.value, budget: {}};
    if (name.value.trim()) body.name = name.value.trim();
    if (steps.value.trim()) body.budget.steps = numberOr(steps.value);
    if (seconds.value.trim()) body.budget.seconds = numberOr(seconds.value);
    const button = form.querySelector('button[type=submit]');
    button.disabled = true;
    try {
      const task = await api('POST', '/v1/tasks', body);
      put(result, 'Submitted ', h('a', {href: `#/tasks/${task.id}`, text: task.name}), ` (${task.id}).`);
      reference = null;
      fileInput.value = '';
      name.value = '';
      fileName.textContent = 'no file chosen';
      submitted();
    } catch (err) {
      showError(form, err);
    } finally {
      button.disabled = false;
    }
  }},
  drop,
  h('div', {class: 'fields'},
    h('label', null, 'Name', name),
    h('label', null, 'Steps', steps),
    h('label', null, 'Seconds', seconds),
    h('label', null, 'Policy', policy),
    h('label', null, 'Proposer', proposer)),
  h('div', {class: 'row'}, h('button', {type: 'submit', text: 'Submit'}), result),
  h('p', {class: 'form-error error', hidden: true}));
  return h('section', {class: 'card'}, h('h2', {text: 'Submit a task'}), form);
}
