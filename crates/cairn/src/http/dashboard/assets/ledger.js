// The ledger as one SVG bar chart per unit: for each milestone, what it was given (allocations
// plus grants from the reserve) against what it spent; and the reserve as held back at the
// start, against the planning and verification overhead charged to it. Figures are the books `GET /v1/tasks/{id}/ledger` derives.

import { h, s, num, short } from './dom.js';

const UNITS = ['tokens', 'tool_calls', 'wall_ms'];
const LABEL = 120;
const BAR = 280;
const VALUE = 190;
const ROW = 30;

function bars(label, title, given, spent, y, scale, text) {
  const gw = given > 0 ? Math.max(1, given * scale) : 0;
  const sw = spent > 0 ? Math.max(1, spent * scale) : 0;
  return s('g', { transform: `translate(0,${y})`, class: 'ledger-row' },
    s('title', {}, title),
    s('text', { x: 0, y: 15, class: 'ledger-label' }, short(label, 16)),
    s('rect', { x: LABEL, y: 2, width: gw, height: 10, class: 'bar given' }),
    s('rect', { x: LABEL, y: 14, width: sw, height: 10, class: 'bar spent' }),
    s('text', { x: LABEL + BAR + 8, y: 15, class: 'ledger-value' },
      text || `${num(spent)} of ${num(given)}`));
}

function unitChart(unit, books, order) {
  const ids = Object.keys(books.milestones || {});
  ids.sort((a, b) => (order.indexOf(a) + 1 || 1e9) - (order.indexOf(b) + 1 || 1e9) || a.localeCompare(b));
  const rows = ids.map((id) => {
    const m = books.milestones[id];
    // The books' `allocated` already counts grants and has returns taken out (what the
    // milestone holds now); what it was given in all is that plus what it gave back.
    const given = m.allocated + m.returned;
    return { id, given, spent: m.spent,
      title: `${id} (${unit}): given ${num(given)} (of which granted from the reserve ${num(m.granted)}), ` +
        `spent ${num(m.spent)}, returned ${num(m.returned)}, holds ${num(m.allocated)}` };
  });
  rows.push({ id: 'reserve', given: books.initial_reserve, spent: books.overhead,
    text: `${num(books.overhead)} overhead of ${num(books.initial_reserve)}`,
    title: `reserve (${unit}): held back ${num(books.initial_reserve)}, left ${num(books.reserve)}, ` +
      `planning and verification overhead ${num(books.overhead)}` });
  const max = Math.max(1, ...rows.map((r) => Math.max(r.given, r.spent)));
  const scale = BAR / max;
  const height = rows.length * ROW + 4;
  return h('figure', { class: 'ledger-unit', dataset: { unit } },
    h('figcaption', {}, `${unit}: ${num(books.spent)} spent, ${num(books.reserve)} left in the reserve`),
    s('svg', { class: 'ledger-chart', width: LABEL + BAR + VALUE, height,
      viewBox: `0 0 ${LABEL + BAR + VALUE} ${height}`, role: 'img',
      'aria-label': `${unit}: given against spent per milestone` },
    rows.map((r, i) => bars(r.id, r.title, r.given, r.spent, i * ROW, scale, r.text))));
}

/** The chart for every unit in the ledger view; `order` is the plan's milestone order. */
export function drawLedger(view, order) {
  const units = (view && view.units) || {};
  const present = UNITS.filter((u) => units[u]).concat(Object.keys(units).filter((u) => !UNITS.includes(u)));
  if (!present.length) {
    return h('p', { class: 'muted' }, 'No ledger entries yet (a task that is not planned has none until it runs).');
  }
  return h('div', { class: 'ledger' },
    h('div', { class: 'legend' },
      h('span', { class: 'legend-item given' }, h('span', { class: 'swatch' }), 'given (allocated + granted)'),
      h('span', { class: 'legend-item spent' }, h('span', { class: 'swatch' }), 'spent'),
      h('span', { class: 'muted small' }, 'reserve row: held back, and the overhead spent from it')),
    present.map((u) => unitChart(u, units[u], order)));
}
