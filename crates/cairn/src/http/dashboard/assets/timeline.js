// The event timeline: one line per event, oldest first, with a summary in words of the kind's
// data (the catalog in docs/api.md) and the whole event as expandable JSON.

import { h, cssName, clock, short, num } from './dom.js';

const TERMINAL = new Set(['task.succeeded', 'task.failed', 'task.budget_exhausted', 'task.cancelled']);

export function isTerminal(kind) { return TERMINAL.has(kind); }

function movements(d) {
  const list = Array.isArray(d.movements) ? d.movements : [];
  const text = list.slice(0, 4).map((m) => `${m.milestone ?? 'reserve'} ${m.unit} ${num(m.amount)}`).join(', ');
  return list.length > 4 ? `${text}, and ${list.length - 4} more` : text;
}

function resultSummary(r) {
  if (!r || typeof r !== 'object') return '';
  const verified = r.verified === true ? 'verified' : r.verified === false ? 'not verified' : '';
  return [verified, r.reason || r.cause].filter(Boolean).join(': ');
}

/** A one-line summary of an event's data; unknown kinds fall back to their JSON. */
export function summarize(kind, d = {}) {
  switch (kind) {
    case 'task.created': return `${d.strategy}: ${short(d.goal, 100)}`;
    case 'task.claimed': return `by ${d.worker_id} (attempt ${d.attempt})`;
    case 'task.released': return `by ${d.worker_id}: ${d.reason}`;
    case 'task.lease_expired': return `lease of ${d.worker_id} ran out`;
    case 'task.succeeded':
    case 'task.budget_exhausted': return resultSummary(d.result) || short(d.report ?? '', 100);
    case 'task.failed': return d.error ? `engine error: ${short(d.error, 100)}` : resultSummary(d.result);
    case 'task.cancelled': return `was ${d.previous_status}`;
    case 'gate.decided': return `route ${d.route}, strategy ${d.strategy}${d.source ? ` (${d.source})` : ''}`;
    case 'gate.outcome': return `route ${d.route}: ${d.status}, ${d.steps_completed} steps, verified ${d.verified}`;
    case 'plan.accepted': return `version ${d.version}, ${d.milestones} milestones: ${short(d.reason ?? '', 80)}`;
    case 'plan.refused': return `attempt ${d.attempt}: ${short(d.errors, 100)}`;
    case 'plan.declined': return short(d.reason ?? '', 100);
    case 'plan.versioned': return `version ${d.version}`;
    case 'plan.stale': return `${d.milestone} ${d.tool}: ${short(d.reason ?? '', 80)}`;
    case 'plan.constraint_raised': return `${d.milestone}: ${short(d.text ?? '', 100)}`;
    case 'milestone.started': return d.milestone;
    case 'milestone.steps_planned':
      return `${d.milestone}: ${Array.isArray(d.steps) ? d.steps.length : d.steps} steps (level ${d.level}, attempt ${d.attempt})`;
    case 'milestone.steps_refused': return `${d.milestone}: ${short(d.errors ?? d.escalate_to ?? '', 100)}`;
    case 'milestone.blocked': return `${d.milestone}: ${d.reason} (${d.dependency})`;
    case 'step.finished':
      return `${d.milestone ?? ''} ${d.step ?? ''} ${d.tool}: ${d.ok ? 'ok' : `error: ${short(d.error ?? '', 80)}`}`;
    case 'executor.drift': return `${d.milestone} ${d.step} ${d.tool}: ${short(d.reason ?? '', 80)}`;
    case 'monitor.decided': return `${d.milestone} ${d.decision}: ${short(d.reason ?? '', 100)}`;
    case 'repair.started': return `${d.milestone} ${d.level} (${d.class}): ${short(d.reason ?? '', 80)}`;
    case 'verifier.decided': return `verified ${d.verified}: ${short(d.reason ?? '', 100)}`;
    case 'direct.round': return `round ${d.round}: ${Array.isArray(d.steps) ? d.steps.length : d.steps} steps${d.done ? ', done' : ''}`;
    case 'strategy.round': return `${d.strategy} round ${d.round}${d.error ? `: ${short(d.error, 80)}` : ''}`;
    case 'v1.list': return d.error ? short(d.error, 100) : `${Array.isArray(d.list) ? d.list.length : ''} steps`;
    default:
      if (kind.startsWith('ledger.')) return `${d.source ?? ''}: ${movements(d)}`;
      return short(d, 120);
  }
}

/** One timeline line for an event. */
export function eventRow(event) {
  const family = event.kind.split('.')[0];
  return h('li', { class: `event fam-${cssName(family)}`, dataset: { seq: String(event.seq), kind: event.kind } },
    h('details', {},
      h('summary', {},
        h('span', { class: 'seq mono' }, `#${event.seq}`),
        h('span', { class: 'time mono muted' }, clock(event.created_at)),
        h('span', { class: 'kind mono' }, event.kind),
        h('span', { class: 'text' }, summarize(event.kind, event.data || {}))),
      h('pre', {}, JSON.stringify(event, null, 2))));
}
