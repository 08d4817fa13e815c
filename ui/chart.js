// The speed-up chart of a task, drawn as SVG: the best time so far after each step
// (a staircase), every correct candidate's time (dots), failed steps (crosses on the
// top edge), and the eager, torch.compile and floor times as horizontal lines.
import {h, ms, s} from './dom.js';

const M = {left: 48, right: 18, top: 16, bottom: 34};

// A "nice" tick spacing near span/count (1, 2 or 5 times a power of ten).
function tickStep(span, count) {
  const raw = span / Math.max(count, 1);
  const p = 10 ** Math.floor(Math.log10(raw || 1));
  return [1, 2, 5, 10].map((m) => m * p).find((t) => t >= raw) || p;
}

// steps: [{step, time_ms (null unless correct), outcome}] in step order; budget: the
// step budget; lines: {eager, compile, floor} in ms (each may be null); width: the
// drawing's width in CSS pixels. Returns a figure element holding the SVG and its
// legend.
export function speedChart(steps, budget, lines, width) {
  const W = Math.max(280, width);
  const H = W < 600 ? 240 : 300;
  const xMax = Math.max(budget || 1, ...steps.map((p) => p.step), 1);
  const times = steps.map((p) => p.time_ms).filter((t) => t > 0);
  const refs = [lines.eager, lines.compile, lines.floor].filter((t) => t > 0);
  const yMax = Math.max(...times, ...refs, 0.001) * 1.12;
  const x = (v) => M.left + (v / xMax) * (W - M.left - M.right);
  const y = (v) => H - M.bottom - (v / yMax) * (H - M.top - M.bottom);

  const grid = [];
  const ys = tickStep(yMax, 5);
  for (let v = 0; v <= yMax; v += ys) {
    grid.push(s('line', {class: 'grid', x1: M.left, x2: W - M.right, y1: y(v), y2: y(v)}),
      s('text', {class: 'tick', x: M.left - 6, y: y(v) + 4, 'text-anchor': 'end', text: +v.toPrecision(3)}));
  }
  const xs = Math.max(1, tickStep(xMax, W < 600 ? 5 : 10));
  for (let v = 0; v <= xMax; v += xs) {
    grid.push(s('text', {class: 'tick', x: x(v), y: H - M.bottom + 16, 'text-anchor': 'middle', text: v}));
  }

  const refLines = [['eager', lines.eager], ['compile', lines.compile], ['floor', lines.floor]]
    .filter(([, v]) => v > 0)
    .map(([name, v]) => s('g', {class: `ref ref-${name}`},
      s('line', {x1: M.left, x2: W - M.right, y1: y(v), y2: y(v)}),
      s('text', {x: W - M.right - 2, y: y(v) - 4, 'text-anchor': 'end', text: `${name} ${ms(v)}`})));

  // The staircase of the best time so far, from the first correct step on.
  let best = null;
  let bestStep = 0;
  let path = '';
  for (const p of steps) {
    if (p.time_ms > 0 && (best === null || p.time_ms < best)) {
      path += best === null ? `M${x(p.step)},${y(p.time_ms)}` : `H${x(p.step)}V${y(p.time_ms)}`;
      best = p.time_ms;
      bestStep = p.step;
    }
  }
  if (best !== null) path += `H${x(steps[steps.length - 1].step)}`;
  // The best point says its time and, against eager, its speed-up.
  const note = best === null ? null : s('text', {class: 'best-note', x: x(bestStep) + (bestStep > xMax / 2 ? -8 : 8),
    y: y(best) + 18, 'text-anchor': bestStep > xMax / 2 ? 'end' : 'start',
    text: `best ${ms(best)}${lines.eager > 0 ? ` · ${(lines.eager / best).toFixed(2)}× eager` : ''}`});

  const marks = steps.map((p) => {
    const tip = s('title', {text: `step ${p.step}: ${p.outcome}${p.time_ms > 0 ? `, ${ms(p.time_ms)}` : ''}`});
    if (p.time_ms > 0) {
      return s('circle', {class: 'dot', cx: x(p.step), cy: y(p.time_ms), r: 4}, tip);
    }
    const cx = x(p.step);
    const cy = M.top + 4;
    return s('path', {class: 'fail', d: `M${cx - 4},${cy - 4}L${cx + 4},${cy + 4}M${cx - 4},${cy + 4}L${cx + 4},${cy - 4}`}, tip);
  });

  const svg = s('svg', {class: 'chart', width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: 'img',
    'aria-label': `Best time per step; ${steps.length} steps plotted`,
    'data-points': steps.length, 'data-best': best === null ? '' : best},
  grid,
  s('line', {class: 'axis', x1: M.left, x2: W - M.right, y1: y(0), y2: y(0)}),
  s('text', {class: 'label', x: (M.left + W - M.right) / 2, y: H - 4, 'text-anchor': 'middle', text: 'step'}),
  s('text', {class: 'label', x: 12, y: M.top + 4, text: 'ms'}),
  refLines,
  path ? s('path', {class: 'best', d: path}) : null,
  marks, note);

  return h('figure', {class: 'chart-box'}, svg,
    h('figcaption', {class: 'legend'},
      h('span', {class: 'key best', text: 'best so far'}),
      h('span', {class: 'key dot', text: 'correct candidate'}),
      h('span', {class: 'key fail', text: 'failed step'}),
      h('span', {class: 'key ref-eager', text: 'eager'}),
      h('span', {class: 'key ref-compile', text: 'torch.compile'}),
      h('span', {class: 'key ref-floor', text: 'floor'})));
}
