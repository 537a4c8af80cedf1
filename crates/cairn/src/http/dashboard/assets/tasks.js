// The task list: newest first, filtered by status on the server and by strategy on the page,
// paged with the API's keyset cursor, and polled so that statuses and progress stay live.

import { api, query } from './api.js';
import { h, put, badge, when, notice, short } from './dom.js';

const POLL_MS = 3000;
const PAGE_SIZE = 25;
const STATUSES = ['queued', 'running', 'awaiting_approval', 'succeeded', 'failed', 'budget_exhausted', 'cancelled'];
const STRATEGIES = ['auto', 'direct', 'v2', 'one_shot', 'reactive', 'v1'];

// Kept across visits so that coming back from a task shows the same filters and page.
const state = { status: '', strategy: '', cursors: [null] };

function select(name, label, values, current, onChange) {
  const el = h('select', { name, id: `filter-${name}` },
    h('option', { value: '' }, 'any'),
    values.map((v) => h('option', { value: v, selected: v === current }, v.replace('_', ' '))));
  el.addEventListener('change', () => onChange(el.value));
  return h('label', { class: 'filter' }, `${label} `, el);
}

// The list's tasks carry no `progress` (only GET /v1/tasks/{id} reads it): running tasks get
// theirs from that read, and an ended task's column is read from its result.
function progressText(task) {
  const p = task.progress;
  if (p) {
    const parts = [p.phase];
    if (p.milestones_total > 0) parts.push(`${p.milestones_done}/${p.milestones_total} milestones`);
    parts.push(`${p.steps_completed} steps`);
    return parts.join(' · ');
  }
  const r = task.result;
  if (r && Array.isArray(r.milestones) && r.milestones.length) {
    const passed = Array.isArray(r.passed) ? r.passed.length : 0;
    return `${passed}/${r.milestones.length} milestones passed`;
  }
  if (r && r.verified !== undefined) return r.verified ? 'verified' : 'not verified';
  return task.plan_version ? `plan v${task.plan_version}` : '';
}

function row(task) {
  const link = `#/tasks/${encodeURIComponent(task.id)}`;
  const planned = task.plan_version !== null && task.plan_version !== undefined;
  return h('tr', { class: 'task-row', dataset: { id: task.id, status: task.status, planned: String(planned) } },
    h('td', {}, badge(task.status)),
    h('td', { class: 'goal' }, h('a', { href: link }, short(task.goal, 140))),
    h('td', {}, task.strategy),
    h('td', { class: 'muted' }, progressText(task)),
    h('td', { class: 'muted nowrap' }, when(task.created_at)),
    // Task ids are UUIDv7: the first digits are a timestamp shared by neighbours, the last are random.
    h('td', { class: 'mono muted', title: task.id }, h('a', { href: link }, `…${task.id.slice(-8)}`)));
}

export function mountTaskList(view) {
  const message = h('div', { class: 'messages' });
  const body = h('tbody', {});
  const table = h('table', { class: 'tasks' },
    h('thead', {}, h('tr', {},
      ['Status', 'Goal', 'Strategy', 'Progress', 'Created', 'Id'].map((t) => h('th', {}, t)))),
    body);
  const pageInfo = h('span', { class: 'muted' });
  const newer = h('button', { type: 'button', class: 'secondary' }, '← Newer');
  const older = h('button', { type: 'button', class: 'secondary' }, 'Older →');
  const updated = h('span', { class: 'muted small', id: 'tasks-updated' });
  let nextCursor = null;
  let timer = null;
  let stopped = false;
  let generation = 0;

  async function load() {
    clearTimeout(timer);
    const mine = ++generation;
    const cursor = state.cursors[state.cursors.length - 1];
    try {
      const page = await api(`/v1/tasks${query({ status: state.status, limit: PAGE_SIZE, cursor })}`);
      // The list carries no `progress`; a running task's is read from its own page. Only the
      // running ones on this page, so at most a page's worth of small reads per poll.
      await Promise.all(page.items.filter((t) => t.status === 'running' && !t.progress).map((t) =>
        api(`/v1/tasks/${encodeURIComponent(t.id)}`).then((full) => { t.progress = full.progress; }, () => {})));
      if (stopped || mine !== generation) return;
      nextCursor = page.next_cursor || null;
      const items = state.strategy
        ? page.items.filter((t) => t.strategy === state.strategy)
        : page.items;
      put(body, items.length
        ? items.map(row)
        : h('tr', {}, h('td', { colspan: 6, class: 'empty' },
          page.items.length ? 'No task on this page has that strategy.' : 'No tasks.')));
      put(pageInfo, `page ${state.cursors.length}`);
      newer.disabled = state.cursors.length === 1;
      older.disabled = !nextCursor;
      put(updated, `updated ${new Date().toLocaleTimeString()}`);
      put(message);
    } catch (err) {
      if (stopped || mine !== generation) return;
      if (err.status === 401) return; // the sign-in form has taken over
      put(message, notice(`Could not load the tasks. ${err.message}`));
    }
    if (!stopped) timer = setTimeout(load, POLL_MS);
  }

  newer.addEventListener('click', () => { state.cursors.pop(); load(); });
  older.addEventListener('click', () => { if (nextCursor) { state.cursors.push(nextCursor); load(); } });
  const restart = () => { state.cursors = [null]; load(); };

  put(view,
    h('div', { class: 'toolbar' },
      h('h2', {}, 'Tasks'),
      select('status', 'Status', STATUSES, state.status, (v) => { state.status = v; restart(); }),
      select('strategy', 'Strategy', STRATEGIES, state.strategy, (v) => { state.strategy = v; load(); }),
      updated),
    h('p', { class: 'muted small' },
      'Newest first, refreshed every few seconds. The status filter is applied by the server; ' +
      'the strategy filter to the tasks of the page shown, since the API filters by status only.'),
    message, table,
    h('div', { class: 'pager' }, newer, pageInfo, older));
  load();
  return () => { stopped = true; clearTimeout(timer); };
}
