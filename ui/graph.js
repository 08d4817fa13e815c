// The HTAM memory drawn as SVG: the global directions on a circle, sized by their
// tries and coloured by their mean reward, and the transitions between them as arrows
// whose width is the edge's weighted count and whose colour is its mean reward.
import {num, s} from './dom.js';

// Colour of a mean reward: grey when unknown, green above 0, red below (0.5 is full).
export function rewardColour(mean) {
  if (mean === null || mean === undefined || !isFinite(mean)) return '#9aa3ad';
  const t = Math.min(Math.abs(mean) / 0.5, 1);
  const mix = (a, b) => Math.round(a + (b - a) * t);
  return mean >= 0 ? `rgb(${mix(154, 30)},${mix(163, 150)},${mix(173, 70)})`
                   : `rgb(${mix(154, 200)},${mix(163, 50)},${mix(173, 50)})`;
}

// A direction's name on one line, or on two split at the blank nearest its middle.
function labelLines(name) {
  if (name.length <= 16 || !name.includes(' ')) return [name];
  let cut = -1;
  for (let i = 0; i < name.length; i++) {
    if (name[i] === ' ' && (cut < 0 || Math.abs(i - name.length / 2) < Math.abs(cut - name.length / 2))) cut = i;
  }
  return [name.slice(0, cut), name.slice(cut + 1)];
}

function norm(x, y) {
  const l = Math.hypot(x, y) || 1;
  return {x: x / l, y: y / l};
}

// One arrow from node p to node q (a loop when they are the same), as path strings.
function arrowPaths(p, q, width) {
  let d;
  let tip;
  let dir;
  if (p === q) {  // a loop outside the circle
    const ox = Math.cos(p.a);
    const oy = Math.sin(p.a);
    const c1 = {x: p.x + ox * 50 - oy * 26, y: p.y + oy * 50 + ox * 26};
    const c2 = {x: p.x + ox * 50 + oy * 26, y: p.y + oy * 50 - ox * 26};
    dir = norm(p.x - c2.x, p.y - c2.y);
    tip = {x: p.x - dir.x * p.r, y: p.y - dir.y * p.r};
    d = `M${p.x},${p.y}C${c1.x},${c1.y} ${c2.x},${c2.y} ${tip.x},${tip.y}`;
  } else {  // a curve bent to its left, so a->b and b->a stay apart
    const c = {x: (p.x + q.x) / 2 + (q.y - p.y) * 0.18, y: (p.y + q.y) / 2 - (q.x - p.x) * 0.18};
    dir = norm(q.x - c.x, q.y - c.y);
    tip = {x: q.x - dir.x * (q.r + 2), y: q.y - dir.y * (q.r + 2)};
    d = `M${p.x},${p.y}Q${c.x},${c.y} ${tip.x - dir.x * width},${tip.y - dir.y * width}`;
  }
  const k = 6 + width;
  const head = `M${tip.x},${tip.y}L${tip.x - dir.x * k - dir.y * k * 0.6},${tip.y - dir.y * k + dir.x * k * 0.6}` +
    `L${tip.x - dir.x * k + dir.y * k * 0.6},${tip.y - dir.y * k - dir.x * k * 0.6}Z`;
  return {d, head};
}

// globals, edges: the API's lists; selected: a direction id or null; onSelect(id) and
// onEdge(edge) are called on clicks; width: the drawing's width in CSS pixels.
// Returns the SVG element.
export function memoryGraph(globals, edges, selected, onSelect, onEdge, width) {
  const W = Math.max(300, width);
  const H = Math.round(Math.min(W, 560));
  const small = W < 520;
  const ring = Math.min(W, H) / 2 - (small ? 52 : 64);
  const n = globals.length;
  const pos = new Map();
  const nMax = Math.max(1, ...globals.map((g) => g.stats.n));
  const eMax = Math.max(1e-9, ...edges.map((e) => e.stats.n));
  globals.forEach((g, i) => {
    const a = -Math.PI / 2 + (2 * Math.PI * i) / Math.max(n, 1);
    pos.set(g.id, {x: W / 2 + ring * Math.cos(a), y: H / 2 - 8 + ring * Math.sin(a), a,
      r: (small ? 11 : 14) + (small ? 8 : 12) * Math.sqrt(g.stats.n / nMax)});
  });

  const arrows = edges.filter((e) => pos.has(e.from) && pos.has(e.to)).map((e) => {
    const learned = e.stats.n > 0;
    const w = learned ? 1.5 + 7 * Math.sqrt(e.stats.n / eMax) : 1;
    const colour = learned ? rewardColour(e.stats.mean) : '#c5ccd3';
    const {d, head} = arrowPaths(pos.get(e.from), pos.get(e.to), w);
    const near = selected && (e.from === selected || e.to === selected);
    return s('g', {class: `arrow${learned ? ' learned' : ''}${near ? ' near' : ''}`,
      dataset: {from: e.from, to: e.to, n: e.stats.n}, onclick: () => onEdge(e)},
    s('title', {text: `${e.from} → ${e.to}: weighted count ${num(e.stats.n, 2)}, mean reward ${num(e.stats.mean)}` +
      (e.when ? `\nwhen: ${e.when}` : '')}),
    s('path', {d, fill: 'none', stroke: colour, 'stroke-width': w}),
    s('path', {d: head, fill: colour}));
  });

  const nodes = globals.map((g) => {
    const p = pos.get(g.id);
    const below = Math.sin(p.a) > -0.3;  // labels go below a node, or above the top ones
    const lines = labelLines(g.name);
    const y0 = below ? p.y + p.r + 14 : p.y - p.r - 6 - (lines.length - 1) * 14;
    return s('g', {class: `dir${g.id === selected ? ' selected' : ''}`, tabindex: '0', role: 'button',
      dataset: {id: g.id}, onclick: () => onSelect(g.id),
      onkeydown: (e) => { if (e.key === 'Enter') onSelect(g.id); }},
    s('title', {text: `${g.name} (${g.id}): ${g.stats.n} tries, mean reward ${num(g.stats.mean)}, prior ${g.prior}, ${g.local_count} strategies`}),
    s('circle', {cx: p.x, cy: p.y, r: p.r, fill: rewardColour(g.stats.mean)}),
    s('text', {class: 'count', x: p.x, y: p.y + 4, 'text-anchor': 'middle', text: g.stats.n}),
    s('text', {class: 'name', x: p.x, y: y0, 'text-anchor': 'middle'},
      lines.map((l, i) => s('tspan', {x: p.x, dy: i ? 14 : 0, text: l}))));
  });

  return s('svg', {class: 'graph', width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: 'img',
    'aria-label': `Memory graph: ${globals.length} directions, ${edges.length} transitions`,
    'data-nodes': globals.length, 'data-edges': edges.length}, arrows, nodes);
}
