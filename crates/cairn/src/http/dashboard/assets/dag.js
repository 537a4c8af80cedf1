// The milestone DAG as inline SVG: milestones placed in layers by their longest chain of
// dependencies (left to right), edges from each dependency to its dependent, nodes coloured by
// status. A plan holds a handful of milestones, so no graph library is needed.

import { h, s, cssName, short } from './dom.js';

const W = 190;
const H = 50;
const GAP_X = 56;
const GAP_Y = 14;
const PAD = 10;

export const STATUS_WORDS = {
  pending: 'pending',
  active: 'running',
  failing: 'check failing, repairing',
  done: 'done',
  failed: 'failed',
  blocked: 'blocked',
  skipped: 'skipped',
  stopped: 'stopped with the task',
};

/** Layer index per milestone id: 0 for no dependency, else one more than its deepest dependency. */
function layers(milestones) {
  const byId = new Map(milestones.map((m) => [m.id, m]));
  const depth = new Map();
  const visiting = new Set();
  const visit = (id) => {
    if (depth.has(id)) return depth.get(id);
    // A validated plan has no cycle; the guard keeps a malformed one from looping forever.
    if (visiting.has(id)) return 0;
    visiting.add(id);
    const deps = (byId.get(id).depends_on || []).filter((d) => byId.has(d));
    const d = deps.length ? Math.max(...deps.map(visit)) + 1 : 0;
    visiting.delete(id);
    depth.set(id, d);
    return d;
  };
  milestones.forEach((m) => visit(m.id));
  return depth;
}

/**
 * Draws the DAG. `statusOf(milestone)` gives the status to colour it by (the plan's own status
 * overlaid with what later events said); `current` is the set of ids under way.
 */
export function drawDag(milestones, statusOf) {
  if (!milestones.length) {
    return h('p', { class: 'muted' }, 'This plan has no milestones.');
  }
  const depth = layers(milestones);
  const columns = [];
  for (const m of milestones) {
    const d = depth.get(m.id);
    (columns[d] = columns[d] || []).push(m);
  }
  const pos = new Map();
  columns.forEach((col, x) => col.forEach((m, y) => {
    pos.set(m.id, { x: PAD + x * (W + GAP_X), y: PAD + y * (H + GAP_Y) });
  }));
  const width = PAD * 2 + columns.length * W + (columns.length - 1) * GAP_X;
  const height = PAD * 2 + Math.max(...columns.map((c) => c.length)) * (H + GAP_Y) - GAP_Y;

  const edges = [];
  for (const m of milestones) {
    for (const dep of m.depends_on || []) {
      const a = pos.get(dep);
      const b = pos.get(m.id);
      if (!a || !b) continue;
      const x1 = a.x + W; const y1 = a.y + H / 2;
      const x2 = b.x - 4; const y2 = b.y + H / 2;
      const mid = (x1 + x2) / 2;
      edges.push(s('path', {
        class: 'edge', 'marker-end': 'url(#arrow)',
        d: `M${x1},${y1} C${mid},${y1} ${mid},${y2} ${x2},${y2}`,
      }));
    }
  }
  const nodes = milestones.map((m) => {
    const p = pos.get(m.id);
    const status = statusOf(m);
    return s('g', { class: `node st-${cssName(status)}`, transform: `translate(${p.x},${p.y})`,
      'data-milestone': m.id, 'data-status': status },
    s('title', {}, `${m.id}: ${m.title}\nstatus: ${STATUS_WORDS[status] || status}` +
      `${m.depends_on && m.depends_on.length ? `\ndepends on ${m.depends_on.join(', ')}` : ''}`),
    s('rect', { width: W, height: H, rx: 6 }),
    s('text', { x: 8, y: 18, class: 'node-id' }, `${short(m.id, 16)} · ${STATUS_WORDS[status] || status}`),
    s('text', { x: 8, y: 37, class: 'node-title' }, short(m.title, 27)));
  });

  const svg = s('svg', {
    class: 'dag', width, height, viewBox: `0 0 ${width} ${height}`, role: 'img',
    'aria-label': `Milestone graph of ${milestones.length} milestones`,
  },
  s('defs', {}, s('marker', { id: 'arrow', viewBox: '0 0 10 10', refX: 9, refY: 5,
    markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse' },
  s('path', { d: 'M0,0 L10,5 L0,10 z', class: 'arrow' }))),
  edges, nodes);
  const legend = h('div', { class: 'legend' }, Object.entries(STATUS_WORDS).map(([k, v]) =>
    h('span', { class: `legend-item st-${k}` }, h('span', { class: 'swatch' }), v)));
  return h('div', { class: 'dag-wrap' }, svg, legend);
}

/**
 * Folds one event into the per-milestone status overlay: what the events say happened to each
 * milestone since the plan snapshot was written. Answers true when the overlay changed.
 */
export function foldMilestoneEvent(overlay, event) {
  const d = event.data || {};
  const id = d.milestone;
  if (typeof id !== 'string') return false;
  let status = null;
  switch (event.kind) {
    case 'milestone.started':
    case 'milestone.steps_planned':
      status = 'active'; break;
    case 'repair.started':
      status = 'failing'; break;
    case 'milestone.blocked':
      status = 'blocked'; break;
    case 'monitor.decided':
      if (d.decision === 'passed') status = 'done';
      else if (d.decision === 'failing') status = 'failing';
      else status = 'failed'; // failed, over_budget: the milestone ended without passing
      break;
    default:
      return false;
  }
  overlay.set(id, { status, seq: event.seq });
  return true;
}
