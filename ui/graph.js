// The HTAM memory drawn as SVG: the global directions on a circle, sized by their
// tries and coloured by their mean reward, and the learned transitions between them as
// arrows whose width is the edge's weighted count and whose colour is its mean reward.
import {num, s} from './dom.js';

const W = 720;
const H = 560;
const RING = 190;

// Colour of a mean reward: grey when unknown, green above 0, red below (0.5 is full).
export function rewardColour(mean) {
  if (mean === null || mean === undefined || !isFinite(mean)) return '#9aa3ad';
  const t = Math.min(Math.abs(mean) / 0.5, 1);
  const mix = (a, b) => Math.round(a + (b - a) * t);
  return mean >= 0 ? `rgb(${mix(154, 30)},${mix(163, 150)},${mix(173, 70)})`
                   : `rgb(${mix(154, 200)},${mix(163, 50)},${mix(173, 50)})`;
}

// globals, edges: the API's lists; selected: a direction id or null; onSelect(id) and
// onEdge(edge) are called on clicks. Returns the SVG element.
export function memoryGraph(globals, edges, selected, onSelect, onEdge) {
  const n = globals.length;
  const pos = new Map();
  const nMax = Math.max(1, ...globals.map((g) => g.stats.n));
  const eMax = Math.max(1e-9, ...edges.map((e) => e.stats.n));
  globals.forEach((g, i) => {
    const a = -Math.PI / 2 + (2 * Math.PI * i) / Math.max(n, 1);
    pos.set(g.id, {x: W / 2 + RING * Math.cos(a), y: H / 2 + RING * Math.sin(a), a,
      r: 14 + 12 * Math.sqrt(g.stats.n / nMax)});
  });

  const arrows = edges.filter((e) => pos.has(e.from) && pos.has(e.to)).map((e) => {
    const p = pos.get(e.from);
    const q = pos.get(e.to);
    const width = e.stats.n > 0 ? 1.5 + 7 * Math.sqrt(e.stats.n / eMax) : 1;
    const colour = e.stats.n > 0 ? rewardColour(e.stats.mean) : '#c5ccd3';
    let d;
    let tip;
    let dir;
    if (e.from === e.to) {  // a loop outside the circle
      const ox = Math.cos(p.a);
      const oy = Math.sin(p.a);
      const c1 = {x: p.x + ox * 60 - oy * 30, y: p.y + oy * 60 + ox * 30};
      const c2 = {x: p.x + ox * 60 + oy * 30, y: p.y + oy * 60 - ox * 30};
      d = `M${p.x},${p.y}C${c1.x},${c1.y} ${c2.x},${c2.y} `;
      dir = norm(p.x - c2.x, p.y - c2.y);
      tip = {x: p.x - dir.x * p.r, y: p.y - dir.y * p.r};
      d += `${tip.x},${tip.y}`;
    } else {  // a curve bent to its left, so a->b and b->a stay apart
      const mx = (p.x + q.x) / 2;
      const my = (p.y + q.y) / 2;
      const c = {x: mx + (q.y - p.y) * 0.18, y: my - (q.x - p.x) * 0.18};
      dir = norm(q.x - c.x, q.y - c.y);
      tip = {x: q.x - dir.x * (q.r + 2), y: q.y - dir.y * (q.r + 2)};
      d = `M${p.x},${p.y}Q${c.x},${c.y} ${tip.x - dir.x * width},${tip.y - dir.y * width}`;
    }
    const size = 6 + width;
    const head = `M${tip.x},${tip.y}L${tip.x - dir.x * size - dir.y * size * 0.6},${tip.y - dir.y * size + dir.x * size * 0.6}` +
      `L${tip.x - dir.x * size + dir.y * size * 0.6},${tip.y - dir.y * size - dir.x * size * 0.6}Z`;
    return s('g', {class: `arrow${e.stats.n > 0 ? ' learned' : ''}${selected && (e.from === selected || e.to === selected) ? ' near' : ''}`,
      dataset: {from: e.from, to: e.to}, onclick: () => onEdge(e)},
    s('title', {text: `${e.from} → ${e.to}: weighted count ${num(e.stats.n, 2)}, mean reward ${num(e.stats.mean)}` +
      (e.when ? `\nwhen: ${e.when}` : '')}),
    s('path', {d, fill: 'none', stroke: colour, 'stroke-width': width}),
    s('path', {d: head, fill: colour}));
  });

  const nodes = globals.map((g) => {
    const p = pos.get(g.id);
    const right = Math.cos(p.a) >= 0.2;
    const left = Math.cos(p.a) <= -0.2;
    const lx = p.x + Math.cos(p.a) * (p.r + 8);
    const ly = p.y + Math.sin(p.a) * (p.r + 8) + (Math.abs(Math.cos(p.a)) < 0.2 ? Math.sign(Math.sin(p.a)) * 10 : 4);
    return s('g', {class: `dir${g.id === selected ? ' selected' : ''}`, tabindex: '0', role: 'button',
      dataset: {id: g.id}, onclick: () => onSelect(g.id),
      onkeydown: (e) => { if (e.key === 'Enter') onSelect(g.id); }},
    s('title', {text: `${g.name} (${g.id}): ${g.stats.n} tries, mean reward ${num(g.stats.mean)}, prior ${g.prior}, ${g.local_count} strategies`}),
    s('circle', {cx: p.x, cy: p.y, r: p.r, fill: rewardColour(g.stats.mean)}),
    s('text', {class: 'count', x: p.x, y: p.y + 4, 'text-anchor': 'middle', text: g.stats.n}),
    s('text', {class: 'name', x: lx, y: ly, 'text-anchor': right ? 'start' : left ? 'end' : 'middle', text: g.name}));
  });

  return s('svg', {class: 'graph', viewBox: `0 0 ${W} ${H}`, role: 'img',
    'aria-label': `Memory graph: ${globals.length} directions, ${edges.length} transitions`,
    'data-nodes': globals.length, 'data-edges': edges.length}, arrows, nodes);
}

function norm(x, y) {
  const l = Math.hypot(x, y) || 1;
  return {x: x / l, y: y / l};
}
