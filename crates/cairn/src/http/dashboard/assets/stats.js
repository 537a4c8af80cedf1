// Planner and gate statistics: GET /v1/stats (the tenant's planner telemetry and the rollout
// split) and GET /v1/stats/gate (the gate's decisions and how they turned out).

import { api } from './api.js';
import { h, put, num, pct, notice } from './dom.js';

const REFRESH_MS = 10000;

function facts(pairs) {
  return h('dl', { class: 'facts' }, pairs.map(([k, v, hint]) => [
    h('dt', {}, k), h('dd', { title: hint || null }, v)]));
}

function table(head, rows, empty) {
  if (!rows.length) return h('p', { class: 'muted' }, empty);
  return h('table', { class: 'plain' },
    h('thead', {}, h('tr', {}, head.map((t) => h('th', {}, t)))),
    h('tbody', {}, rows.map((r) => h('tr', {}, r.map((c) => h('td', {}, c))))));
}

function taskLink(id) {
  return h('a', { href: `#/tasks/${encodeURIComponent(id)}`, class: 'mono', title: id }, `…${id.slice(-8)}`);
}

function plannerView(st) {
  const repairs = Object.entries(st.repairs || {});
  const rollout = st.rollout;
  return [
    facts([
      ['tasks', num(st.tasks)],
      ['planned tasks', num(st.planned_tasks)],
      ['plan validity rate', pct(st.plan_validity_rate), 'plans accepted on first proposal'],
      ['average plan length', st.average_plan_length == null ? '–' : st.average_plan_length.toFixed(2), 'milestones per plan'],
      ['step completion rate', pct(st.step_completion_rate)],
      ['replan frequency', st.replan_frequency == null ? '–' : st.replan_frequency.toFixed(2)],
      ['drift rate', pct(st.drift_rate), 'steps refused by the executor contract'],
      ['verified success', pct(st.verified_success)],
      ['planner failures', num(st.planner_failures)],
      ['executor failures', num(st.executor_failures)],
    ]),
    h('h4', {}, 'Repairs by level'),
    table(['level', 'count'], repairs.map(([k, v]) => [k, num(v)]), 'No repairs.'),
    h('h4', {}, 'Rollout'),
    rollout
      ? facts([['auto tasks on v2', `${rollout.percent}%`],
        ['routed to v2 / v1 (this process)', `${num(rollout.routed_v2)} / ${num(rollout.routed_v1)}`],
        ['checked against', rollout.eval_report || 'no evaluation report']])
      : h('p', { class: 'muted' }, 'Not shown to this key.'),
  ];
}

function gateView(g) {
  return [
    facts([['decisions', num(g.decisions)]]),
    h('h4', {}, 'By route'),
    table(['route', 'decisions'], Object.entries(g.by_route || {}).map(([k, v]) => [k, num(v)]), 'No decisions yet.'),
    h('h4', {}, 'Direct success by goal kind'),
    table(['goal kind', 'success'], Object.entries(g.direct_success_by_kind || {}).map(([k, v]) => [k, pct(v)]),
      'No direct-routed task has ended yet.'),
    h('h4', {}, 'Direct-routed tasks that failed'),
    table(['task', 'goal kind', 'status'], (g.direct_failed || []).map((r) => [taskLink(r.task_id), r.goal_kind || '–', r.status]), 'None.'),
    h('h4', {}, 'Planned tasks that finished in one step'),
    table(['task', 'goal kind', 'status'], (g.planned_one_step || []).map((r) => [taskLink(r.task_id), r.goal_kind || '–', r.status]), 'None.'),
  ];
}

export function mountStats(view) {
  const planner = h('div', {}, h('p', { class: 'muted' }, 'Loading…'));
  const gate = h('div', {}, h('p', { class: 'muted' }, 'Loading…'));
  put(view, h('h2', {}, 'Planner and gate statistics'),
    h('div', { class: 'grid' },
      h('section', { class: 'card', id: 'planner-stats' }, h('h3', {}, 'Planner'), planner),
      h('section', { class: 'card', id: 'gate-stats' }, h('h3', {}, 'Gate'), gate)));
  let stopped = false;
  let timer = null;
  async function load() {
    const [st, g] = await Promise.allSettled([api('/v1/stats'), api('/v1/stats/gate')]);
    if (stopped) return;
    const show = (el, outcome, render, what) => {
      if (outcome.status === 'fulfilled') put(el, render(outcome.value));
      else if (outcome.reason.status !== 401) put(el, notice(`Could not load ${what}. ${outcome.reason.message}`));
    };
    show(planner, st, plannerView, 'the planner statistics');
    show(gate, g, gateView, 'the gate statistics');
    timer = setTimeout(load, REFRESH_MS);
  }
  load();
  return () => { stopped = true; clearTimeout(timer); };
}
