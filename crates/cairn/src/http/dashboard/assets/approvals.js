// A waiting task's approval request: what it asks (the exact calls, or the plan's new and
// changed milestones) and buttons that send the decision bound to the request's digest. A
// decision the server refuses (a stale digest, a key without the `approve` scope) is shown as
// its problem.

import { api } from './api.js';
import { h, notice } from './dom.js';

function asked(request) {
  const r = request.request || {};
  if (request.kind === 'plan') {
    const since = r.approved_version ? ` (changed since approved version ${r.approved_version})` : '';
    return [h('p', {}, `Plan version ${r.plan_version} asks for sign-off${since}:`),
      h('ul', {}, (r.milestones || []).map((m) => h('li', {},
        h('strong', { class: 'mono' }, m.id), ` ${m.title} `,
        h('span', { class: 'muted small' }, `tools ${(m.tools || []).join(', ')}`))))];
  }
  return [h('p', {}, 'These calls ask for sign-off:'),
    h('ul', {}, (r.calls || []).map((c) => h('li', {},
      h('strong', { class: 'mono' }, c.tool), ' ', h('code', {}, JSON.stringify(c.args)))))];
}

/**
 * The panel for `items` (the task's requests, oldest first); `path` is the task's API path and
 * `done` is called after a decision was sent. Nothing when no request is pending.
 */
export function approvalView(path, items, done) {
  const pending = [...(items || [])].reverse().find((a) => a.state === 'pending');
  if (!pending) return null;
  const status = h('div', {});
  const comment = h('input', { type: 'text', id: 'approval-comment', placeholder: 'comment (needed to reject or revise)' });
  const decide = (decision) => async () => {
    const body = { decision, digest: pending.digest };
    if (comment.value.trim()) body.comment = comment.value.trim();
    try {
      await api(`${path}/approvals/${pending.id}`, { method: 'POST', body });
      status.replaceChildren(h('p', { class: 'muted' }, `Sent: ${decision}.`));
      done();
    } catch (err) {
      status.replaceChildren(notice(err.message));
    }
  };
  const button = (label, decision, cls) => {
    const b = h('button', { type: 'button', class: cls, id: `approval-${decision}` }, label);
    b.addEventListener('click', decide(decision));
    return b;
  };
  return h('section', { class: 'card', id: 'approval' },
    h('h3', {}, `Waiting for approval (request ${pending.id})`),
    ...asked(pending),
    h('p', { class: 'muted small mono' }, `digest ${pending.digest}`),
    h('div', { class: 'toolbar' }, comment,
      button('Approve', 'approve', ''),
      button('Reject', 'reject', 'danger'),
      pending.kind === 'plan' ? button('Revise', 'revise', '') : null),
    status);
}
