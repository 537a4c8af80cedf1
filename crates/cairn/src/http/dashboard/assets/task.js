// One task's page. History comes from the JSON event pages; after that the page follows the
// task's event stream (SSE, with a stream token when signed in) until the terminal event. Each
// event is added to the timeline, folded into the milestone statuses, and triggers a
// (debounced) re-read of the task, its plan versions, ledger and artifacts.

import { api, streamUrl } from './api.js';
import { h, put, badge, when, num, notice, jsonDetails, short } from './dom.js';
import { drawDag, foldMilestoneEvent } from './dag.js';
import { drawLedger } from './ledger.js';
import { drawPlans } from './plans.js';
import { eventRow, isTerminal } from './timeline.js';
import { approvalView } from './approvals.js';

// Every kind in the catalog: an EventSource delivers a named event only to a listener for that
// name. An event of a kind not listed here is still shown: the next one reveals the gap in seq
// numbers and the page reads the missing events as JSON.
const KINDS = ['task.created', 'task.claimed', 'task.released', 'task.lease_expired',
  'task.succeeded', 'task.failed', 'task.budget_exhausted', 'task.cancelled', 'task.message',
  'approval.requested', 'approval.decided', 'approval.expired', 'engine.step',
  'plan.versioned', 'gate.decided', 'gate.outcome', 'plan.refused', 'plan.accepted',
  'plan.declined', 'plan.stale', 'milestone.started', 'milestone.steps_planned',
  'milestone.steps_refused', 'step.finished', 'executor.drift', 'monitor.decided',
  'repair.started', 'milestone.blocked', 'plan.constraint_raised', 'verifier.decided',
  'direct.round', 'ledger.allocate', 'ledger.charge', 'ledger.grant', 'ledger.return',
  'strategy.round', 'v1.list'];
const UNITS = ['tokens', 'tool_calls', 'wall_ms'];
const ENDED = ['succeeded', 'failed', 'budget_exhausted', 'cancelled'];
const REFRESH_DEBOUNCE_MS = 400;
const FALLBACK_POLL_MS = 15000;

function section(title, id, ...body) {
  return h('section', { class: 'card', id }, h('h3', {}, title), ...body);
}

function meter(spent, budget) {
  const bar = h('span', { class: 'meter-fill' });
  const share = budget > 0 ? Math.min(1, spent / budget) : 0;
  bar.style.width = `${(share * 100).toFixed(1)}%`; // set from JS: allowed by the CSP
  return h('span', { class: 'meter' }, bar);
}

/** What `progress` would say, read from an ended task's result (the API drops `progress` then). */
function progressFromResult(r) {
  if (!r || !r.spend) return null;
  return {
    phase: 'ended', current: [], spent: r.spend,
    milestones_done: Array.isArray(r.passed) ? r.passed.length : 0,
    milestones_total: Array.isArray(r.milestones) ? r.milestones.length : 0,
    steps_completed: r.metrics && r.metrics.steps_completed !== undefined ? r.metrics.steps_completed : '–',
  };
}

function progressView(task) {
  const p = task.progress || progressFromResult(task.result);
  const spent = (p && p.spent) || {};
  const rows = UNITS.map((u) => h('tr', {},
    h('th', {}, u), h('td', {}, meter(spent[u] || 0, task.budget[u])),
    h('td', { class: 'mono' }, `${num(spent[u] || 0)} / ${num(task.budget[u])}`)));
  const facts = p
    ? [h('dt', {}, 'phase'), h('dd', {}, p.phase),
      h('dt', {}, 'milestones'), h('dd', {}, `${p.milestones_done} done of ${p.milestones_total}`),
      h('dt', {}, 'under way'), h('dd', {}, p.current.length
        ? p.current.map((c) => `${c.id} (${c.title})`).join(', ') : 'none'),
      h('dt', {}, 'steps completed'), h('dd', {}, String(p.steps_completed))]
    : [h('dt', {}, 'phase'), h('dd', {}, 'not started')];
  return [h('dl', { class: 'facts' }, facts),
    h('table', { class: 'spend' }, h('caption', {}, 'spent of the budget'), rows)];
}

function resultView(task) {
  const r = task.result;
  if (!r) {
    return h('p', { class: 'muted' }, ENDED.includes(task.status)
      ? `The task ended (${task.status.replace('_', ' ')}) without a result.`
      : 'No result yet: the task has not ended.');
  }
  const facts = [];
  const add = (k, v) => { if (v !== undefined && v !== null && v !== '') facts.push(h('dt', {}, k), h('dd', {}, v)); };
  add('verified', r.verified === undefined ? undefined : (r.verified ? 'yes' : 'no'));
  add('cause', r.cause);
  add('reason', r.reason);
  add('route', r.gate && (r.gate.route || r.gate.decision));
  add('answer', typeof r.answer === 'string' ? r.answer : r.answer && JSON.stringify(r.answer));
  return [facts.length ? h('dl', { class: 'facts' }, facts) : null, jsonDetails('the result as JSON', r)];
}

function artifactsView(items) {
  if (!items.length) return h('p', { class: 'muted' }, 'No artifacts (yet).');
  return h('ul', { class: 'artifacts' }, items.map((a) => {
    const text = typeof a.value === 'string' ? a.value : JSON.stringify(a.value, null, 2);
    return h('li', { class: 'artifact' },
      h('div', {}, h('span', { class: 'mono' }, a.milestone_id), ' / ', h('strong', {}, a.name),
        ' ', h('span', { class: 'muted small' }, when(a.created_at))),
      text.length > 300
        ? h('details', {}, h('summary', {}, short(text, 200)), h('pre', {}, text))
        : h('pre', {}, text));
  }));
}

export function mountTask(view, id) {
  const path = `/v1/tasks/${encodeURIComponent(id)}`;
  const el = {
    messages: h('div', { class: 'messages' }),
    head: h('div', { class: 'task-head' }, h('p', { class: 'muted' }, 'Loading…')),
    approval: h('div', {}), progress: h('div', {}), result: h('div', {}), dag: h('div', {}),
    ledger: h('div', {}), plans: h('div', {}), artifacts: h('div', {}),
    timeline: h('ol', { class: 'timeline' }),
    stream: h('span', { class: 'stream-state muted small', id: 'stream-state' }),
  };
  put(view, h('p', {}, h('a', { href: '#/tasks' }, '← Tasks')), el.messages, el.head, el.approval,
    h('div', { class: 'grid' },
      section('Progress', 'progress', el.progress),
      section('Result', 'result', el.result)),
    section('Milestones', 'milestones', el.dag),
    h('div', { class: 'grid' },
      section('Ledger', 'ledger', el.ledger),
      section('Plan versions', 'plans', el.plans)),
    section('Artifacts', 'artifacts', el.artifacts),
    section('Events', 'events', h('div', { class: 'toolbar' }, el.stream), el.timeline));

  const snap = { task: null, plans: [], ledger: null, artifacts: [], approvals: [] };
  const overlay = new Map(); // milestone id -> {status, seq} as the events tell it
  const diffs = new Map();
  const problems = {};
  let lastSeq = 0;
  let terminal = false;
  let stopped = false;
  let source = null;
  let refreshTimer = null;
  let pollTimer = null;
  let retryTimer = null;
  let retryMs = 1000;
  let queue = Promise.resolve();

  const serial = (fn) => { queue = queue.then(fn).catch(() => {}); return queue; };
  const stateText = (text) => put(el.stream, `stream: ${text}`);

  function showProblems() {
    // An unknown task makes every read fail the same way: say it once.
    if (problems.task && problems.task.status === 404) {
      put(el.messages, notice('There is no such task (it may belong to another tenant).'));
      return;
    }
    const list = Object.entries(problems).filter(([, e]) => e && e.status !== 401);
    put(el.messages, list.map(([what, e]) => notice(`Could not load ${what}. ${e.message}`)));
  }

  function drawHead(task) {
    const cancel = h('button', { type: 'button', class: 'danger', id: 'cancel' }, 'Cancel task');
    cancel.addEventListener('click', async () => {
      cancel.disabled = true;
      try { await api(`${path}/cancel`, { method: 'POST' }); problems.cancel = null; }
      catch (err) { problems.cancel = err; cancel.disabled = false; }
      showProblems();
      scheduleRefresh();
    });
    put(el.head,
      h('h2', { class: 'goal' }, task.goal),
      h('div', { class: 'meta' }, badge(task.status),
        h('span', {}, `strategy ${task.strategy}`),
        h('span', { class: 'mono muted' }, task.id),
        h('span', { class: 'muted' }, `created ${when(task.created_at)}`),
        task.finished_at ? h('span', { class: 'muted' }, `ended ${when(task.finished_at)}`) : null,
        task.plan_version ? h('span', {}, `plan v${task.plan_version}`) : null,
        task.tools ? h('span', { class: 'muted' }, `tools: ${task.tools.join(', ')}`) : null,
        ['queued', 'running', 'awaiting_approval'].includes(task.status) ? cancel : null));
  }

  // Sections are re-drawn only when their data changed, so an expanded <details> stays open
  // while events stream in.
  const drawn = new Map();
  function update(name, data, render) {
    const key = JSON.stringify(data);
    if (drawn.get(name) === key) return;
    drawn.set(name, key);
    render();
  }

  function draw() {
    const task = snap.task;
    if (!task) return;
    update('head', task, () => drawHead(task));
    update('approval', [task.status, snap.approvals], () => put(el.approval,
      task.status === 'awaiting_approval' ? approvalView(path, snap.approvals, scheduleRefresh) : null));
    update('progress', [task.progress, task.budget], () => put(el.progress, progressView(task)));
    update('result', task.result, () => put(el.result, resultView(task)));
    const latest = snap.plans.reduce((a, b) => (!a || b.version > a.version ? b : a), null);
    const milestones = latest && latest.plan && Array.isArray(latest.plan.milestones) ? latest.plan.milestones : [];
    const since = latest ? latest.caused_by_seq || 0 : 0;
    // An ended task's result has each milestone's final status; before that, the snapshot's
    // status unless an event after the snapshot says more (snapshots are written when a plan
    // changes, not when a milestone passes).
    const final = new Map((task.result && Array.isArray(task.result.milestones) ? task.result.milestones : [])
      .map((m) => [m.id, m.status]));
    const ended = ENDED.includes(task.status);
    const statusOf = (m) => {
      const o = overlay.get(m.id);
      const f = final.get(m.id);
      // 'blocked' exists only in the events: a result says a blocked milestone never ran.
      if (f && !(o && o.status === 'blocked' && f !== 'done')) return f;
      const s = o && o.seq > since ? o.status : (m.status || 'pending');
      // A milestone under way when the task ended (cancelled, say) will not go on.
      return ended && (s === 'active' || s === 'failing') ? 'stopped' : s;
    };
    const graph = milestones.map((m) => [m.id, m.title, m.depends_on, statusOf(m)]);
    update('dag', [latest && latest.version, graph, task.status], () => put(el.dag, latest
      ? [h('p', { class: 'muted small' }, `plan v${latest.version}; arrows run from a milestone to those that depend on it`),
        drawDag(milestones, statusOf)]
      : h('p', { class: 'muted' }, task.status === 'queued' ? 'Not planned yet: the task is queued.'
        : 'No plan: this task runs without milestones (the direct route or a baseline), or is still planning.')));
    const order = milestones.map((m) => m.id);
    update('ledger', [snap.ledger && snap.ledger.units, order], () => put(el.ledger, drawLedger(snap.ledger, order)));
    const diffState = [...diffs.entries()].map(([v, d]) => [v, d.pending ? 0 : d.error ? 1 : 2]);
    update('plans', [snap.plans.map((v) => [v.version, v.created_at]), diffState],
      () => drawPlans(el.plans, id, snap.plans, diffs, () => { if (!stopped) draw(); }));
    update('artifacts', snap.artifacts, () => put(el.artifacts, artifactsView(snap.artifacts)));
  }

  async function refresh() {
    const [task, plans, ledger, artifacts, approvals] = await Promise.allSettled([
      api(path), api(`${path}/plans`), api(`${path}/ledger`), api(`${path}/artifacts`),
      api(`${path}/approvals`)]);
    if (stopped) return;
    const take = (what, outcome, apply) => {
      if (outcome.status === 'fulfilled') { apply(outcome.value); problems[what] = null; }
      else problems[what] = outcome.reason;
    };
    take('task', task, (v) => { snap.task = v; });
    if (!snap.task) put(el.head);
    take('the plan versions', plans, (v) => { snap.plans = v.items || []; });
    take('the ledger', ledger, (v) => { snap.ledger = v; });
    take('the artifacts', artifacts, (v) => { snap.artifacts = v.items || []; });
    take('the approvals', approvals, (v) => { snap.approvals = v.items || []; });
    showProblems();
    draw();
  }

  function scheduleRefresh() {
    if (refreshTimer || stopped) return;
    refreshTimer = setTimeout(() => { refreshTimer = null; refresh(); }, REFRESH_DEBOUNCE_MS);
  }

  function addEvent(event) {
    if (event.seq <= lastSeq) return;
    lastSeq = event.seq;
    const list = el.timeline;
    // Follow the newest event only when the reader is already at the bottom of the list.
    const atBottom = list.scrollTop + list.clientHeight >= list.scrollHeight - 8;
    list.append(eventRow(event));
    if (atBottom) list.scrollTop = list.scrollHeight;
    // Re-colour the graph at once; the other sections follow with the debounced re-read.
    if (foldMilestoneEvent(overlay, event)) draw();
    if (isTerminal(event.kind)) {
      terminal = true;
      closeStream();
      stateText('ended (the task has ended)');
    }
    scheduleRefresh();
  }

  /** Reads every stored event after lastSeq as JSON pages; notes whether the task has ended. */
  async function catchUp() {
    for (let guard = 0; guard < 1000 && !stopped; guard++) {
      const page = await api(`${path}/events?after=${lastSeq}`);
      page.items.forEach(addEvent);
      if (page.terminal && !terminal) { terminal = true; stateText('ended (the task has ended)'); }
      // An unfiltered page is empty only at the end; addEvent has moved lastSeq past this one.
      if (!page.items.length) break;
    }
  }

  function closeStream() {
    if (source) { source.close(); source = null; }
  }

  function onFrame(message) {
    let event;
    try { event = JSON.parse(message.data); } catch { return; }
    serial(async () => {
      if (stopped || event.seq <= lastSeq) return;
      if (event.seq > lastSeq + 1) await catchUp(); // fills a gap left by an unlisted kind
      addEvent(event);
    });
  }

  async function openStream() {
    if (stopped || terminal) return;
    stateText('connecting…');
    let url;
    try { url = await streamUrl(id, lastSeq); } catch (err) {
      if (err.status === 401 || stopped) return;
      problems.stream = err; showProblems();
      retryLater();
      return;
    }
    if (stopped) return;
    const es = new EventSource(url);
    source = es;
    for (const kind of KINDS) es.addEventListener(kind, onFrame);
    es.addEventListener('message', onFrame);
    es.addEventListener('open', () => {
      retryMs = 1000; stateText('live'); problems.stream = null; showProblems();
    });
    es.addEventListener('error', () => {
      // The browser would reconnect with the same URL, whose token may have expired; instead
      // close, read what was missed as JSON, and open a fresh stream after a pause.
      if (source !== es) return;
      closeStream();
      if (!stopped && !terminal) retryLater();
    });
  }

  function retryLater() {
    stateText(`reconnecting in ${Math.round(retryMs / 1000)} s…`);
    clearTimeout(retryTimer);
    retryTimer = setTimeout(() => serial(async () => {
      try { await catchUp(); } catch (err) {
        if (err.status === 401) return;
        problems.events = err; showProblems();
      }
      if (!terminal) openStream();
    }), retryMs);
    retryMs = Math.min(retryMs * 2, 5000);
  }

  function poll() {
    // A slow safety net besides the stream: re-read the task now and then while it runs.
    pollTimer = setTimeout(() => { if (!terminal) scheduleRefresh(); if (!stopped) poll(); }, FALLBACK_POLL_MS);
  }

  refresh();
  serial(async () => {
    try { await catchUp(); } catch (err) {
      if (err.status !== 401) { problems.events = err; showProblems(); }
      return;
    }
    if (terminal) stateText('ended (the task has ended)');
    else openStream();
  });
  poll();

  return () => {
    stopped = true;
    closeStream();
    clearTimeout(refreshTimer); clearTimeout(pollTimer); clearTimeout(retryTimer);
  };
}
