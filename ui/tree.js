// The candidate tree of a task as SVG: the reference at the top, each candidate under
// the one it patched (solid edge, a small step) or regenerated from (dashed, a large
// step). Colour says the outcome; the best candidate has a ring.
import {ms, s} from './dom.js';

const COL = 34;
const ROW = 46;
const R = 11;

// candidates: the task's candidates (API objects); bestId: the best one's id or null;
// onSelect(candidate) is called when a node is clicked. Returns the SVG element.
export function candidateTree(candidates, bestId, onSelect) {
  const byId = new Map(candidates.map((c) => [c.id, {c, kids: []}]));
  const root = candidates.find((c) => c.step_kind === 'reference');
  const roots = [];
  for (const n of byId.values()) {
    // A large step from the reference has no parent_id: it hangs under the root.
    const pid = n.c.parent_id || (n.c !== root && root ? root.id : null);
    const parent = pid && byId.get(pid);
    if (parent) parent.kids.push(n);
    else roots.push(n);
  }
  let leaves = 0;
  let depthMax = 0;
  const place = (n, depth) => {
    n.depth = depth;
    depthMax = Math.max(depthMax, depth);
    n.kids.sort((a, b) => a.c.step - b.c.step);
    if (!n.kids.length) n.slot = leaves++;
    else {
      n.kids.forEach((k) => place(k, depth + 1));
      n.slot = (n.kids[0].slot + n.kids[n.kids.length - 1].slot) / 2;
    }
  };
  roots.sort((a, b) => a.c.step - b.c.step).forEach((n) => place(n, 0));

  const px = (n) => COL / 2 + 8 + n.slot * COL;
  const py = (n) => R + 8 + n.depth * ROW;
  const width = Math.max(leaves * COL + 16, 120);
  const height = (depthMax + 1) * ROW;
  const edges = [];
  const nodes = [];
  for (const n of byId.values()) {
    for (const k of n.kids) {
      edges.push(s('line', {class: `edge ${k.c.step_kind === 'large' ? 'large' : 'small'}`,
        x1: px(n), y1: py(n), x2: px(k), y2: py(k)}));
    }
    const r = n.c.result || {};
    const outcome = n.c.step_kind === 'reference' ? 'reference' : r.correct ? 'correct' : 'failed';
    const time = r.time?.median_ms;
    const label = [`step ${n.c.step} (${n.c.step_kind || '?'})`,
      n.c.direction ? `${n.c.direction} / ${n.c.strategy || '–'}` : null,
      r.correct ? ms(time) : r.failure?.class || 'failed'].filter(Boolean).join('\n');
    nodes.push(s('g', {class: `node ${outcome}${n.c.id === bestId ? ' best' : ''}`, tabindex: '0',
      role: 'button', dataset: {id: n.c.id, step: n.c.step},
      onclick: () => onSelect(n.c),
      onkeydown: (e) => { if (e.key === 'Enter') onSelect(n.c); }},
    s('title', {text: label}),
    s('circle', {cx: px(n), cy: py(n), r: R}),
    s('text', {x: px(n), y: py(n) + 4, 'text-anchor': 'middle', text: n.c.step})));
  }
  return s('svg', {class: 'tree', width, height, viewBox: `0 0 ${width} ${height}`,
    role: 'img', 'aria-label': `Candidate tree of ${candidates.length} candidates`,
    'data-nodes': candidates.length}, edges, nodes);
}
