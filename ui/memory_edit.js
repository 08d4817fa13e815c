// The memory's editors: a direction (its descriptive fields and prior) with its
// strategies, one strategy with its evidence, and the forms that create them. Errors
// come from the API and are shown beside the field they name.
import {api} from './api.js';
import {clearErrors, h, notice, num, showError, table, when} from './dom.js';
import {changed, checksField, linesField, readForm, selectField, textField} from './forms.js';

// Sends the fields of form that differ from original with PATCH to path, then calls
// done(updated), which redraws and returns the form now shown, where "saved" is then
// written. A form without changes says so. Errors are shown in place.
async function saveChanges(form, path, original, done) {
  clearErrors(form);
  const status = form.querySelector('.saved');
  status.textContent = '';
  let updated;
  try {
    const diff = changed(original, readForm(form));
    if (!Object.keys(diff).length) {
      status.textContent = 'nothing changed';
      return;
    }
    updated = await api('PATCH', path, diff);
  } catch (err) {
    showError(form, err);
    return;
  }
  const shown = (await done(updated)) || form;
  shown.querySelector('.saved').textContent = `saved ${when(updated.updated_at)}`;
}

// The buttons row and the error line every editor ends with.
function footer(...buttons) {
  return [h('div', {class: 'row'}, buttons, h('span', {class: 'saved muted small', role: 'status'})),
    h('p', {class: 'form-error error', hidden: true})];
}

// The selected direction: its fields, statistics, strategies and learned transitions.
export function directionEditor(ctx, g, locals, outEdges) {
  const form = h('form', {id: 'direction-form', novalidate: true, onsubmit: (e) => {
    e.preventDefault();
    saveChanges(form, ctx.mem(`/v1/memory/global/${g.id}`), g, async () => {
      await ctx.reload();
      const shown = document.getElementById('direction-form');
      if (shown) shown.closest('details').open = true;
      return shown;
    });
  }},
  textField('Name', 'name', g.name),
  textField('Intent', 'intent', g.intent, 3),
  textField('Prior (reward units)', 'prior', String(g.prior)),
  linesField('Objectives (one a line)', 'objectives', g.objectives),
  checksField('Triggers', 'triggers', ctx.triggers.length ? ctx.triggers : g.triggers, g.triggers),
  linesField('Risks (one a line)', 'risks', g.risks),
  footer(h('button', {type: 'submit', text: 'Save direction'}),
    h('button', {type: 'button', class: 'danger quiet', id: 'direction-delete', text: 'Delete…', onclick: remove})));
  form.querySelector('[data-field=prior]').dataset.number = '1';

  async function remove() {
    const cascade = g.local_count > 0;
    if (!confirm(cascade ? `Delete ${g.id}, its ${g.local_count} strategies and their evidence?` : `Delete ${g.id}?`)) return;
    try {
      await api('DELETE', ctx.mem(`/v1/memory/global/${g.id}`, cascade ? {cascade: 'true'} : {}));
      await ctx.select(null);
      await ctx.reload();
    } catch (err) {
      showError(form, err);
    }
  }

  const s = g.stats;
  return h('div', null,
    h('h2', null, g.name, ' ', h('code', {class: 'small', text: g.id})),
    h('p', {class: 'muted small', text: `${s.n} tries, ${s.successes} correct, ${s.improvements} improvements, mean reward ${num(s.mean)}, trend ${num(s.ema)}`}),
    h('details', {class: 'editor'}, h('summary', {text: 'Edit direction'}), form),
    h('h3', {text: `Strategies (${locals.length})`}),
    table(['Strategy', 'Families', 'Tries', 'Mean'], locals.map((l) => h('tr', {dataset: {id: l.id}},
      h('td', null, h('a', {href: '#', class: 'strategy-link', dataset: {id: l.id}, text: l.name,
        onclick: (e) => { e.preventDefault(); ctx.openStrategy(l.id); }}), h('br'), h('code', {class: 'small muted', text: l.id})),
      h('td', {class: 'small', text: l.families.join(', ')}),
      h('td', {class: 'num', text: l.stats.n}),
      h('td', {class: 'num', text: num(l.stats.mean)}))), {id: 'strategies'}),
    newStrategyForm(ctx, g.id),
    outEdges.length ? h('div', null, h('h3', {text: 'Learned transitions from here'}),
      table(['To', 'Weighted count', 'Mean reward'], outEdges.map((e) => [e.to, num(e.stats.n, 2), num(e.stats.mean)]))) : null);
}

// One strategy: its fields (name, edit pattern, knob move, checks, families, direction)
// and its newest evidence.
export function strategyEditor(ctx, local) {
  const knob = textField('Knob move (JSON, empty for none)', 'knob_move', local.knob_move ? JSON.stringify(local.knob_move) : '');
  knob.querySelector('input').dataset.json = '1';
  const form = h('form', {id: 'strategy-form', novalidate: true, onsubmit: (e) => {
    e.preventDefault();
    saveChanges(form, ctx.mem(`/v1/memory/local/${local.id}`), local, async () => {
      await ctx.reload();  // reopens this strategy too
      return document.getElementById('strategy-form');
    });
  }},
  textField('Name', 'name', local.name),
  textField('Edit pattern', 'edit_pattern', local.edit_pattern, 4),
  knob,
  linesField('Checks (one a line)', 'checks', local.checks),
  checksField('Families', 'families', ctx.families, local.families),
  selectField('Direction', 'global', ctx.globals().map((g) => g.id), local.global),
  footer(h('button', {type: 'submit', text: 'Save strategy'}),
    h('button', {type: 'button', class: 'danger quiet', text: 'Delete…', onclick: async () => {
      if (!confirm(`Delete strategy ${local.id} and its evidence?`)) return;
      try {
        await api('DELETE', ctx.mem(`/v1/memory/local/${local.id}`));
        ctx.closeStrategy();
        await ctx.reload();
      } catch (err) {
        showError(form, err);
      }
    }})));
  const s = local.stats;
  return h('div', null,
    h('h2', null, local.name, ' ', h('code', {class: 'small', text: local.id})),
    h('p', {class: 'muted small', id: 'strategy-stats', text: `${s.n} tries, ${s.successes} correct, mean reward ${num(s.mean)}`}),
    h('p', {id: 'strategy-pattern', text: local.edit_pattern}),
    form,
    h('h3', {text: 'Evidence (newest first)'}),
    local.evidence?.length
      ? table(['When', 'Task', 'Outcome', 'Reward', 'Note'], local.evidence.map((e) => [
        when(e.created_at),
        e.task_id ? h('a', {href: `#/tasks/${e.task_id}`, text: e.task_id.slice(0, 8)}) : '–',
        e.outcome, num(e.reward), e.note || '']))
      : h('p', {class: 'muted', text: 'No evidence yet.'}));
}

// Creates a strategy under direction gid.
function newStrategyForm(ctx, gid) {
  const form = h('form', {class: 'inline-create', novalidate: true, onsubmit: async (e) => {
    e.preventDefault();
    clearErrors(form);
    const v = readForm(form);
    if (!v.id) delete v.id;
    try {
      const local = await api('POST', ctx.mem(`/v1/memory/global/${gid}/local`), v);
      await ctx.reload();
      await ctx.openStrategy(local.id);
    } catch (err) {
      showError(form, err);
    }
  }},
  h('h3', {text: 'New strategy'}),
  h('div', {class: 'fields'}, textField('Id (optional)', 'id', ''), textField('Name', 'name', '')),
  footer(h('button', {type: 'submit', text: 'Create strategy'})));
  return h('details', {class: 'editor'}, h('summary', {text: 'New strategy…'}), form);
}

// Creates a direction (id, name, prior).
export function newDirectionForm(ctx) {
  const form = h('form', {id: 'new-direction', novalidate: true, onsubmit: async (e) => {
    e.preventDefault();
    clearErrors(form);
    const v = readForm(form);
    if (!v.id) delete v.id;
    if (v.prior === '') delete v.prior;
    try {
      const g = await api('POST', ctx.mem('/v1/memory/global'), v);
      notice(`Created direction ${g.id}.`);
      await ctx.reload();
      await ctx.select(g.id);
    } catch (err) {
      showError(form, err);
    }
  }},
  h('h2', {text: 'New direction'}),
  h('div', {class: 'fields'}, textField('Id (optional)', 'id', ''), textField('Name', 'name', ''),
    textField('Prior', 'prior', '')),
  textField('Intent', 'intent', '', 3),
  footer(h('button', {type: 'submit', text: 'Create direction'})));
  form.querySelector('[data-field=prior]').dataset.number = '1';
  return form;
}
