// The skill memory: every rule with its family, score, constraint and origin; enable,
// disable, edit, create and delete; export and import.
import {api} from './api.js';
import {clearErrors, download, h, notice, put, readText, showError, table, when} from './dom.js';
import {changed, readForm, selectField, textField} from './forms.js';
import {enumOf} from './spec.js';

export async function skillsView(root) {
  const families = await enumOf('MemoryFamily', ['pointwise', 'reduction', 'norm', 'softmax', 'scan', 'pooling', 'loss', 'gemm']);
  const listBox = h('div', {id: 'skills-list'});
  let editing = null;
  const ioForm = h('form', {class: 'row', novalidate: true, onsubmit: (e) => e.preventDefault()},
    h('button', {type: 'button', text: 'Export', onclick: async () => {
      try {
        download('opforge-skills.json', JSON.stringify(await api('GET', '/v1/skills/export'), null, 2));
      } catch (err) {
        showError(ioForm, err);
      }
    }}),
    h('label', {class: 'button quiet'}, 'Import…', h('input', {type: 'file', accept: '.json,application/json', class: 'hidden-file', onchange: importSkills})),
    h('p', {class: 'form-error error', hidden: true}));

  put(root,
    h('section', {class: 'card'}, h('div', {class: 'row spread'}, h('h2', {text: 'Skill rules'}), ioForm),
      h('p', {class: 'muted small', text: 'Rules learned from recurring failures (AdaExplore). Enabled rules scored 3 or more reach every proposal; a constraint makes the builtin proposer refuse a knob setting.'}),
      listBox),
    h('section', {class: 'card'}, h('h2', {text: 'New rule'}), ruleForm(null)));

  function ruleForm(rule) {
    const constraint = textField('Constraint (JSON, empty for none)', 'constraint', rule?.constraint ? JSON.stringify(rule.constraint) : '');
    constraint.querySelector('input').dataset.json = '1';
    const form = h('form', {class: 'rule-form', novalidate: true, onsubmit: async (e) => {
      e.preventDefault();
      clearErrors(form);
      try {
        const v = readForm(form);
        if (rule) {
          const diff = changed(rule, v);
          if (Object.keys(diff).length) await api('PATCH', `/v1/skills/${rule.id}`, diff);
          editing = null;
        } else {
          await api('POST', '/v1/skills', v);
          form.reset();
          notice('Rule created.');
        }
        await load();
      } catch (err) {
        showError(form, err);
      }
    }},
    textField('Rule ("You cannot … .")', 'rule', rule?.rule || '', 2),
    h('div', {class: 'fields'},
      textField('Score', 'score', String(rule?.score ?? 1)),
      selectField('Family', 'family', families, rule ? rule.family : null, 'every family')),
    constraint,
    h('div', {class: 'row'}, h('button', {type: 'submit', text: rule ? 'Save rule' : 'Create rule'}),
      rule ? h('button', {type: 'button', class: 'quiet', text: 'Cancel', onclick: () => { editing = null; load(); }}) : null),
    h('p', {class: 'form-error error', hidden: true}));
    form.querySelector('[data-field=score]').dataset.number = '1';
    return form;
  }

  async function setEnabled(rule, enabled, box) {
    box.disabled = true;
    try {
      await api('PATCH', `/v1/skills/${rule.id}`, {enabled});
      await load();
    } catch (err) {
      notice(`Rule ${rule.id}: ${err.message}`);
      box.checked = !enabled;
      box.disabled = false;
    }
  }

  async function remove(rule) {
    if (!confirm(`Delete rule ${rule.id}?`)) return;
    try {
      await api('DELETE', `/v1/skills/${rule.id}`);
      await load();
    } catch (err) {
      notice(`Rule ${rule.id}: ${err.message}`);
    }
  }

  async function importSkills(e) {
    const file = e.target.files[0];
    e.target.value = '';
    if (!file) return;
    clearErrors(ioForm);
    try {
      const counts = await api('POST', '/v1/skills/import', JSON.parse(await readText(file)));
      notice(`Imported: ${counts.skills} rules, ${counts.examples} examples.`);
      await load();
    } catch (err) {
      showError(ioForm, err instanceof SyntaxError ? {message: `${file.name} is not JSON`} : err);
    }
  }

  async function load() {
    const {items} = await api('GET', '/v1/skills');
    if (!items.length) {
      put(listBox, h('p', {class: 'muted', text: 'No rules yet.'}));
      return;
    }
    put(listBox, table(['Id', 'Rule', 'Family', 'Score', 'Enabled', 'Constraint', 'Origin', 'Refusals', 'Examples', ''],
      items.map((r) => {
        if (editing === r.id) {
          return h('tr', {class: 'editing', dataset: {id: r.id}}, h('td', {text: r.id}), h('td', {colspan: 9}, ruleForm(r)));
        }
        const box = h('input', {type: 'checkbox', checked: r.enabled, 'aria-label': `Enable rule ${r.id}`,
          onchange: (e) => setEnabled(r, e.target.checked, e.target)});
        return h('tr', {class: r.enabled ? '' : 'disabled', dataset: {id: r.id}},
          h('td', {class: 'num', text: r.id}),
          h('td', {class: 'rule', text: r.rule}),
          h('td', {text: r.family || 'every'}),
          h('td', {class: 'num', text: r.score}),
          h('td', null, box),
          h('td', null, r.constraint ? h('code', {class: 'small', text: JSON.stringify(r.constraint)}) : '–'),
          h('td', {text: r.origin}),
          h('td', {class: 'num', text: r.refusals}),
          h('td', {class: 'num', text: r.example_count}),
          h('td', {class: 'nowrap'},
            h('button', {type: 'button', class: 'small', text: 'Edit', onclick: () => { editing = r.id; load(); }}),
            h('button', {type: 'button', class: 'small quiet danger', text: 'Delete', onclick: () => remove(r)}),
            h('span', {class: 'muted small', title: `updated ${when(r.updated_at)}`})));
      }), {id: 'skills-table'}));
  }

  await load();
}
