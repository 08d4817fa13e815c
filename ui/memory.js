// The HTAM memory of one namespace: the graph of directions and learned transitions,
// the selected direction with its strategies and their evidence (editable), the score
// breakdown for a prefix and family, export and import.
import {api, query} from './api.js';
import {clearErrors, download, h, notice, num, onWidth, put, readText, showError, table} from './dom.js';
import {enumOf} from './spec.js';
import {memoryGraph, rewardColour} from './graph.js';
import {directionEditor, strategyEditor, newDirectionForm} from './memory_edit.js';

export async function memoryView(root, _params, q) {
  const ns = q.get('memory') || 'default';
  // A memory path with ?memory= for a namespace other than the default.
  const mem = (path, params = {}) => `${path}${query({...params, memory: ns === 'default' ? '' : ns})}`;
  const [families, triggers, namespaces] = await Promise.all([
    enumOf('MemoryFamily', ['pointwise', 'reduction', 'norm', 'softmax', 'scan', 'pooling', 'loss', 'gemm']),
    enumOf('MemoryTrigger', []),
    api('GET', '/v1/memory/namespaces').then((r) => r.items.map((n) => n.name)).catch(() => ['default']),
  ]);
  let scoreSelects = null;  // the score form's selects (scoreForm)
  const st = {globals: [], edges: [], selected: q.get('direction'), strategy: q.get('strategy')};
  const ctx = {mem, families, triggers, reload: () => load(), select: (id) => select(id),
    openStrategy: (id) => openStrategy(id), globals: () => st.globals,
    closeStrategy: () => { st.strategy = null; stratBox.hidden = true; }};

  const graphBox = h('div', {class: 'graph-box', id: 'memory-graph'});
  const edgeLine = h('p', {class: 'muted small', id: 'edge-detail', text: 'Select an arrow for its transition, a circle for its direction.'});
  const dirBox = h('section', {class: 'card', id: 'direction'});
  const stratBox = h('section', {class: 'card', id: 'strategy', hidden: true});
  const scoreBox = h('div', {id: 'score'});
  const ioForm = h('form', {class: 'row', novalidate: true, onsubmit: (e) => e.preventDefault()},
    h('label', null, 'Namespace ', h('select', {id: 'namespace', onchange: (e) => { location.hash = `#/memory${query({memory: e.target.value === 'default' ? '' : e.target.value})}`; }},
      namespaces.map((n) => h('option', {value: n, text: n, selected: n === ns})))),
    h('button', {type: 'button', id: 'memory-export', text: 'Export', onclick: exportMemory}),
    h('label', {class: 'button quiet'}, 'Import…', h('input', {type: 'file', accept: '.json,application/json', class: 'hidden-file', id: 'memory-import', onchange: importMemory})),
    h('button', {type: 'button', class: 'quiet', id: 'new-direction-button', text: 'New direction', onclick: () => put(dirBox, newDirectionForm(ctx))}),
    h('p', {class: 'form-error error', hidden: true}));

  put(root,
    h('section', {class: 'card'}, h('div', {class: 'row spread'}, h('h2', {text: 'Memory'}), ioForm)),
    h('div', {class: 'two'},
      h('section', {class: 'card'}, h('h2', {text: 'Directions and learned transitions'}), graphBox, edgeLine, legend()),
      h('div', null, dirBox, stratBox)),
    h('section', {class: 'card'}, h('h2', {text: 'Score breakdown'}),
      h('p', {class: 'muted small', text: 's(b) = Σ αᵢ·U(pᵢ→b) + β·trigger + c·explore; π = softmax(s/τ). Prefix: most recent direction first.'}),
      scoreForm(), scoreBox));

  async function load() {
    const [g, e] = await Promise.all([api('GET', mem('/v1/memory/global')), api('GET', mem('/v1/memory/edges'))]);
    st.globals = g.items;
    st.edges = e.items;
    if (st.selected && !st.globals.some((x) => x.id === st.selected)) st.selected = null;
    renderGraph();
    await renderDirection();
    refreshScoreOptions();
  }

  let graphWidth = 0;
  function renderGraph() {
    put(graphBox, memoryGraph(st.globals, st.edges, st.selected, select, (edge) => {
      put(edgeLine, h('strong', {text: `${edge.from} → ${edge.to}`}),
        `: weighted count ${num(edge.stats.n, 2)}, mean reward ${num(edge.stats.mean)}`,
        edge.when ? ` · when ${edge.when}` : '', edge.rationale ? ` · ${edge.rationale}` : '');
    }, graphWidth || graphBox.clientWidth));
  }

  async function select(id) {
    st.selected = id;
    st.strategy = null;
    stratBox.hidden = true;
    renderGraph();
    await renderDirection();
  }

  async function renderDirection() {
    const g = st.globals.find((x) => x.id === st.selected);
    if (!g) {
      put(dirBox, h('h2', {text: 'Direction'}), h('p', {class: 'muted', text: 'Select a direction in the graph.'}),
        table(['Direction', 'Tries', 'Mean', 'Strategies'], st.globals.map((x) => [
          h('a', {href: '#', class: 'dir-link', dataset: {id: x.id}, text: x.name, onclick: (e) => { e.preventDefault(); select(x.id); }}),
          String(x.stats.n), num(x.stats.mean), String(x.local_count)])));
      return;
    }
    const locals = (await api('GET', mem(`/v1/memory/global/${g.id}/local`))).items;
    const out = st.edges.filter((e) => e.from === g.id && e.stats.n > 0);
    put(dirBox, directionEditor(ctx, g, locals, out));
    if (st.strategy) await openStrategy(st.strategy);
  }

  async function openStrategy(id) {
    st.strategy = id;
    try {
      const local = await api('GET', mem(`/v1/memory/local/${id}`));
      put(stratBox, strategyEditor(ctx, local));
      stratBox.hidden = false;
      stratBox.scrollIntoView({block: 'nearest'});
      for (const r of dirBox.querySelectorAll('tr[data-id]')) r.classList.toggle('selected', r.dataset.id === id);
    } catch (err) {
      notice(`Strategy ${id}: ${err.message}`);
    }
  }

  async function exportMemory() {
    try {
      const doc = await api('GET', mem('/v1/memory/export'));
      download(`opforge-memory-${ns}.json`, JSON.stringify(doc, null, 2));
    } catch (err) {
      showError(ioForm, err);
    }
  }

  async function importMemory(e) {
    const file = e.target.files[0];
    e.target.value = '';
    if (!file) return;
    clearErrors(ioForm);
    let doc;
    try {
      doc = JSON.parse(await readText(file));
    } catch {
      showError(ioForm, {message: `${file.name} is not JSON`});
      return;
    }
    if (!confirm(`Replace the memory of namespace "${ns}" with ${file.name}?`)) return;
    try {
      const counts = await api('POST', mem('/v1/memory/import'), doc);
      notice(`Imported: ${counts.globals} directions, ${counts.locals} strategies, ${counts.edges} transitions, ${counts.evidence} evidence rows.`);
      await load();
    } catch (err) {
      showError(ioForm, err);
    }
  }

  // The score breakdown: up to 3 prefix directions, the family, bound and last failure.
  function scoreForm() {
    const sel = (id, label, options) => h('label', {class: 'field'}, h('span', {text: label}),
      h('select', {id, onchange: runScore}, h('option', {value: '', text: '–'}), options.map((o) => h('option', {value: o, text: o}))));
    scoreSelects = {
      p1: sel('score-p1', 'Prefix 1 (latest)', []), p2: sel('score-p2', 'Prefix 2', []), p3: sel('score-p3', 'Prefix 3', []),
      family: sel('score-family', 'Family', families), bound: sel('score-bound', 'Bound', ['memory', 'compute']),
      failure: sel('score-failure', 'Last failure', ['compile', 'load', 'launch', 'correctness', 'timeout', 'crash', 'check', 'parse']),
    };
    return h('form', {class: 'fields', id: 'score-form', novalidate: true, onsubmit: (e) => { e.preventDefault(); runScore(); }},
      Object.values(scoreSelects), h('p', {class: 'form-error error', hidden: true}));
  }

  function refreshScoreOptions() {
    for (const k of ['p1', 'p2', 'p3']) {
      const select = scoreSelects[k].querySelector('select');
      const keep = select.value;
      put(select, h('option', {value: '', text: '–'}), st.globals.map((g) => h('option', {value: g.id, text: g.id, selected: g.id === keep})));
    }
    runScore();
  }

  async function runScore() {
    const v = (k) => scoreSelects[k].querySelector('select').value;
    const prefix = ['p1', 'p2', 'p3'].map(v).filter(Boolean).join(',');
    const form = scoreBox.previousElementSibling;
    clearErrors(form);
    try {
      const r = await api('GET', mem('/v1/memory/score', {prefix, family: v('family'), bound: v('bound'), failure: v('failure')}));
      const rows = [...r.scores].sort((a, b) => b.pi - a.pi);
      put(scoreBox,
        h('p', {class: 'muted small', text: `N = ${r.N}; k0 ${r.config.k0}, k ${r.config.k}, K ${r.config.K}, λ ${r.config.lambda}, β ${r.config.beta}, c ${r.config.c}, τ ${r.config.tau}`}),
        table(['Direction', 'Prior', 'n', 'μ', 'Transition terms (α·U)', 'Transition', 'Trigger', 'Explore', 's(b)', 'π(b)'],
          rows.map((x) => h('tr', {dataset: {direction: x.direction}},
            h('td', {text: x.direction}), h('td', {class: 'num', text: num(x.prior, 2)}), h('td', {class: 'num', text: x.n}),
            h('td', {class: 'num', text: num(x.mu)}),
            h('td', {class: 'small', text: x.terms.map((t) => `${t.from}: ${num(t.alpha, 2)}·${num(t.u)} (n ${num(t.n_ab, 2)})`).join('; ') || '–'}),
            h('td', {class: 'num', text: num(x.transition)}), h('td', {class: 'num', text: num(x.trigger, 2)}),
            h('td', {class: 'num', text: num(x.explore)}), h('td', {class: 'num', text: num(x.score)}),
            h('td', {class: 'num'}, h('meter', {min: 0, max: 1, value: x.pi}), ` ${num(x.pi)}`))),
        {id: 'score-table'}));
    } catch (err) {
      showError(form, err);
    }
  }

  await load();
  return onWidth(graphBox, (w) => { graphWidth = w; if (st.globals.length) renderGraph(); });
}

// What the graph's sizes and colours mean.
function legend() {
  const swatch = (mean, label) => {
    const dot = h('span', {class: 'swatch'});
    dot.style.background = rewardColour(mean);
    return h('span', {class: 'key'}, dot, label);
  };
  return h('p', {class: 'legend small'},
    h('span', {text: 'Circle: a direction, sized and numbered by its tries.'}),
    h('span', {text: 'Arrow: a transition, as wide as its weighted count; thin grey ones were never taken.'}),
    h('span', {text: 'Colour: mean reward'}), swatch(-0.5, 'negative'), swatch(null, 'none yet'), swatch(0.5, 'positive'));
}
