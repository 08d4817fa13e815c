// One task: live progress over its event stream, the speed-up chart, the steps, the
// candidate tree, the best kernel's source, the KernelBench download and why it stopped.
import {api} from './api.js';
import {badge, download, h, ms, notice, num, onWidth, put, speedup, table, when} from './dom.js';
import {followEvents} from './events.js';
import {speedChart} from './chart.js';
import {candidateTree} from './tree.js';
import {highlight} from './highlight.js';

const STOP_REASONS = {
  budget: 'the step or time budget was used up',
  budget_exhausted: 'the LLM budget (dollars or tokens) was used up',
  at_floor: 'every generated region runs within stop_at_floor of its floor',
  space_exhausted: 'nothing new was left to try',
  proposer_unavailable: 'the proposer could not be reached',
  store_error: 'the store refused the task\'s commits',
};

export async function taskView(root, [id]) {
  let task = await api('GET', `/v1/tasks/${id}`);
  const st = {steps: new Map(), baselines: task.baselines, finished: null, status: task.status,
    candidates: [], selected: null, stream: 'connecting', best: null, received: 0, resumes: 0};

  const header = h('section', {class: 'card'});
  const stats = h('section', {class: 'stats', id: 'task-stats'});
  const chartBox = h('div', {id: 'chart'});
  const stepsBox = h('div', {id: 'steps'});
  const treeBox = h('div', {class: 'tree-box', id: 'tree'});
  const selectedBox = h('div', {id: 'selected'});
  const bestBox = h('div', {id: 'best'});
  put(root, header, stats,
    h('section', {class: 'card'}, h('h2', {text: 'Best time per step'}), chartBox),
    h('section', {class: 'card'}, h('h2', {text: 'Steps'}), stepsBox),
    h('section', {class: 'card'}, h('h2', {text: 'Candidate tree'}),
      h('p', {class: 'muted small', text: 'Solid edges are patches (small steps), dashed ones regenerations (large steps). Select a node to read its source.'}),
      treeBox, selectedBox),
    h('section', {class: 'card'}, h('h2', {text: 'Best kernel'}), bestBox),
    h('section', {class: 'card'}, h('details', null, h('summary', {text: 'Reference program'}),
      h('pre', {class: 'source', text: task.reference || ''}))));

  const steps = () => [...st.steps.values()].sort((a, b) => a.step - b.step);
  const live = () => st.status === 'queued' || st.status === 'running';

  function renderHeader() {
    const stop = st.finished?.stop_reason;
    const error = task.error;
    put(header,
      h('div', {class: 'row spread'},
        h('h2', null, task.name, ' ', h('span', {id: 'task-status'}, badge(st.status))),
        h('span', {class: `stream st-${st.stream}`, id: 'stream-state',
          dataset: {events: st.received, resumes: st.resumes},
          text: `stream: ${st.stream}${st.resumes ? ` (resumed ${st.resumes}×)` : ''}`})),
      h('p', {class: 'muted small'}, `${task.id} · submitted ${when(task.created_at)} · `,
        `${task.options.proposer} proposer, ${task.options.policy}, memory ${task.options.memory || 'default'}`),
      stop || st.finished ? h('p', {id: 'task-stop'}, h('strong', {text: 'Stopped: '}),
        stop ? `${stop} (${STOP_REASONS[stop] || 'see the server log'})` : st.finished.status) : null,
      error ? h('p', {class: 'error', id: 'task-error', text: `${error.code}: ${error.message}`}) : null,
      h('div', {class: 'row'},
        live() && !task.cancel_requested ? h('button', {type: 'button', class: 'danger', id: 'task-cancel', text: 'Cancel', onclick: cancel}) : null,
        task.cancel_requested && live() ? h('span', {class: 'muted', text: 'cancel requested'}) : null,
        bestId() ? h('button', {type: 'button', id: 'download-kernelbench', text: 'Download ModelNew (.py)', onclick: downloadExport}) : null,
        !live() ? h('button', {type: 'button', class: 'quiet', text: 'Delete task', onclick: remove}) : null,
        h('a', {href: '#/tasks', class: 'quiet', text: '← all tasks'})));
  }

  // The best candidate: the end's word, else the fastest correct step so far (the
  // earliest among equals, as the engine counts), else what the task said on load.
  function bestId() {
    return st.finished?.best_candidate || st.best?.candidate || task.progress.best_candidate || null;
  }

  function renderStats() {
    const b = st.baselines || {};
    const p = task.progress;
    const ss = steps();
    const lastBest = [...ss].reverse().find((x) => x.best_speedup)?.best_speedup;
    const best = st.finished?.best_speedup ?? lastBest ?? p.best_speedup;
    const bestMs = Math.min(...ss.map((x) => x.time_ms).filter((t) => t > 0));
    const cell = (label, value, idAttr) => h('div', {class: 'stat'}, h('span', {class: 'muted small', text: label}),
      h('strong', {id: idAttr, text: value}));
    put(stats,
      cell('Best speed-up', speedup(best), 'best-speedup'),
      cell('Best time', ms(isFinite(bestMs) ? bestMs : p.best_ms), 'best-ms'),
      cell('Eager', ms(b.eager_ms)),
      cell('torch.compile', ms(b.compile_ms)),
      cell('Floor', ms(b.floor_ms)),
      cell('Steps', `${ss.length ? ss[ss.length - 1].step : p.step} / ${p.budget_steps}`, 'step-count'),
      cell('Family', b.family || '–'),
      cell('Bound', b.bound || '–'));
  }

  let chartWidth = 0;
  function renderChart() {
    const b = st.baselines || {};
    put(chartBox, speedChart(steps(), task.progress.budget_steps,
      {eager: b.eager_ms, compile: b.compile_ms, floor: b.floor_ms}, chartWidth || chartBox.clientWidth));
  }

  function renderSteps() {
    const ss = steps();
    if (!ss.length) {
      put(stepsBox, h('p', {class: 'muted', text: live() ? 'Waiting for the first step…' : 'No steps.'}));
      return;
    }
    put(stepsBox, table(['Step', 'Kind', 'Direction', 'Strategy', 'Outcome', 'Time', 'Speed-up', 'Reward'],
      ss.map((x) => h('tr', {class: `outcome-${x.outcome}`, dataset: {step: x.step}},
        h('td', {class: 'num', text: x.step}),
        h('td', {text: x.kind || '–'}),
        h('td', {text: (x.direction || '–') + (x.direction_kept ? ' (kept)' : '')}),
        h('td', {text: x.strategy || '–'}),
        h('td', null, h('span', {class: `outcome ${x.outcome}`, text: x.outcome}),
          x.class ? h('span', {class: 'muted small', text: ` ${x.class}`}) : null),
        h('td', {class: 'num', text: ms(x.time_ms)}),
        h('td', {class: 'num', text: speedup(x.speedup)}),
        h('td', {class: 'num', text: x.reward === undefined ? '–' : num(x.reward)}))),
      {id: 'steps-table'}));
  }

  function renderTree() {
    if (!st.candidates.length) {
      put(treeBox, h('p', {class: 'muted', text: 'No candidates yet.'}));
      return;
    }
    st.treeBest = bestId();
    put(treeBox, candidateTree(st.candidates, st.treeBest, (c) => { st.selected = c.id; renderSelected(); }));
    renderSelected();
  }

  function renderSelected() {
    const c = st.candidates.find((x) => x.id === st.selected);
    for (const n of treeBox.querySelectorAll('.node')) n.classList.toggle('selected', n.dataset.id === st.selected);
    if (!c) {
      put(selectedBox);
      return;
    }
    const r = c.result || {};
    put(selectedBox,
      h('h3', {text: `Step ${c.step}: ${c.direction || c.step_kind} / ${c.strategy || '–'}`}),
      h('p', {class: 'muted small'}, r.correct ? `correct, ${ms(r.time?.median_ms)}` : `failed: ${r.failure?.class || '?'} ${r.failure?.message || ''}`,
        c.options?.length ? ` · options ${c.options.join(' ')}` : ''),
      c.source ? highlight(c.source) : h('pre', {class: 'source', text: JSON.stringify(c.program, null, 2)}));
  }

  // Candidates are written once, in seq order: each load asks only for those after the
  // last one held (the API's cursor is that seq).
  async function loadCandidates() {
    let cursor = st.candidates.length ? String(st.candidates[st.candidates.length - 1].seq) : null;
    const before = st.candidates.length;
    do {
      const page = await api('GET', `/v1/tasks/${id}/candidates?limit=200${cursor ? `&cursor=${cursor}` : ''}`);
      st.candidates.push(...page.items);
      cursor = page.next_cursor;
    } while (cursor);
    if (st.candidates.length !== before || st.treeBest !== bestId() || !treeBox.firstChild) renderTree();
  }

  // One load at a time, so two never append the same page.
  let loading = Promise.resolve();
  const queueCandidates = () => {
    loading = loading.then(loadCandidates).catch((e) => notice(`Candidates: ${e.message}`));
    return loading;
  };

  async function loadBest() {
    if (!bestId()) {
      put(bestBox, h('p', {class: 'muted', text: live() ? 'No correct candidate yet.' : 'No correct candidate.'}));
      return;
    }
    try {
      const best = await api('GET', `/v1/tasks/${id}/best`);
      put(bestBox, h('p', {class: 'muted small'}, `${speedup(best.speedup)} over eager, ${ms(best.time_ms)}`,
        best.options.length ? ` · options ${best.options.join(' ')}` : ''), highlight(best.source));
    } catch (err) {
      put(bestBox, h('p', {class: 'muted', text: `No single CUDA source to show (${err.code}: ${err.message}). The KernelBench download has the whole program.`}));
    }
  }

  async function downloadExport() {
    try {
      const text = await api('GET', `/v1/tasks/${id}/best?format=kernelbench`);
      download(`${task.name}_model_new.py`, text, 'text/x-python');
    } catch (err) {
      notice(`No export: ${err.message}`);
    }
  }

  async function cancel() {
    try {
      task = await api('POST', `/v1/tasks/${id}/cancel`);
      st.status = task.status;
      renderHeader();
    } catch (err) {
      notice(`Cancel failed: ${err.message}`);
    }
  }

  async function remove() {
    if (!confirm(`Delete task ${task.name} with its events and candidates?`)) return;
    try {
      await api('DELETE', `/v1/tasks/${id}`);
      location.hash = '#/tasks';
    } catch (err) {
      notice(`Delete failed: ${err.message}`);
    }
  }

  // Redraws at most every 50 ms, and reloads the candidates at most twice a second.
  let frame = 0;
  let candTimer = 0;
  const redraw = () => {
    if (frame) return;
    frame = setTimeout(() => {
      frame = 0;
      renderHeader();
      renderStats();
      renderChart();
      renderSteps();
    }, 50);
  };
  const refreshCandidates = () => {
    clearTimeout(candTimer);
    candTimer = setTimeout(queueCandidates, 500);
  };

  const onEvent = async (ev) => {
    const d = ev.data || {};
    st.received++;
    if (ev.type === 'profiled' && d.baselines) st.baselines = d.baselines;
    if (ev.type === 'step') {
      st.steps.set(d.step, d);
      if (d.outcome === 'correct' && d.speedup > 0 && !(st.best?.speedup >= d.speedup)) {
        st.best = {candidate: d.candidate, speedup: d.speedup};
      }
      refreshCandidates();
    }
    if (['running', 'succeeded', 'failed', 'cancelled'].includes(ev.type)) st.status = ev.type;
    if (ev.type === 'cancel_requested') task.cancel_requested = true;
    if (ev.type === 'finished') {
      st.finished = d;
      st.status = d.status || st.status;
      task = await api('GET', `/v1/tasks/${id}`).catch(() => task);
      loadBest();
      refreshCandidates();
    }
    redraw();
  };

  redraw();
  const stopWatching = onWidth(chartBox, (w) => { chartWidth = w; renderChart(); });
  loadBest();
  queueCandidates();
  const stop = followEvents(id, onEvent, (state) => {
    if (state === 'live' && st.stream === 'reconnecting') st.resumes++;
    st.stream = state;
    redraw();
  });
  return () => {
    stop();
    stopWatching();
    clearTimeout(candTimer);
    clearTimeout(frame);
  };
}
