// The form that submits a goal (POST /v1/tasks). An Idempotency-Key is drawn for each version
// of the form's contents, so pressing Submit again after a lost answer cannot start the task
// twice, while an edited form is a new task.

import { api } from './api.js';
import { h, put, notice } from './dom.js';

const STRATEGIES = ['auto', 'direct', 'v2', 'one_shot', 'reactive', 'v1'];
const APPROVALS = [['none', 'nothing beyond the operator\'s policy'], ['steps', 'every side-effecting call'],
  ['plan', 'the plan (v2 and auto)']];
const UNITS = [['tokens', 'tokens'], ['tool_calls', 'tool calls'], ['wall_ms', 'wall ms']];

function newKey() {
  // getRandomValues works on plain http too, unlike crypto.randomUUID.
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return `dashboard-${Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('')}`;
}

export function mountSubmit(view) {
  const goal = h('textarea', { name: 'goal', id: 'goal', rows: 4, required: true, maxlength: 8192,
    placeholder: 'Rename config key db.url to db.dsn in services A, B and C' });
  const strategy = h('select', { name: 'strategy', id: 'strategy' },
    STRATEGIES.map((s) => h('option', { value: s }, s)));
  const units = UNITS.map(([name, label]) => [name, label,
    h('input', { type: 'number', min: 1, step: 1, name, id: `budget-${name}`, placeholder: 'default' })]);
  const tools = h('input', { type: 'text', name: 'tools', id: 'tools', placeholder: 'every registered tool' });
  const approval = h('select', { name: 'approval', id: 'approval-mode' },
    APPROVALS.map(([value, label]) => h('option', { value }, `${value}: ${label}`)));
  const toolHint = h('p', { class: 'muted small' });
  const status = h('div', { class: 'form-status' });
  const button = h('button', { type: 'submit' }, 'Submit');
  let key = newKey();

  const form = h('form', { class: 'submit-form', id: 'submit-form' },
    h('label', { for: 'goal' }, 'Goal'), goal,
    h('label', { for: 'strategy' }, 'Strategy'), strategy,
    h('fieldset', {}, h('legend', {}, 'Budget (empty: the server\'s default)'),
      units.map(([name, label, input]) => h('label', { for: `budget-${name}`, class: 'inline' }, label, input))),
    h('label', { for: 'tools' }, 'Tools (comma-separated names; empty: every registered tool)'), tools, toolHint,
    h('label', { for: 'approval-mode' }, 'A person signs off'), approval,
    button, status);

  form.addEventListener('input', () => { key = newKey(); });
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const body = { goal: goal.value, strategy: strategy.value };
    const budget = {};
    for (const [name, , input] of units) {
      if (input.value !== '') budget[name] = Number(input.value);
    }
    if (Object.keys(budget).length) body.budget = budget;
    const names = tools.value.split(',').map((t) => t.trim()).filter(Boolean);
    if (names.length) body.tools = names;
    if (approval.value !== 'none') body.approval = approval.value;
    button.disabled = true;
    put(status, notice('Submitting…', 'info'));
    try {
      const task = await api('/v1/tasks', { method: 'POST', body, headers: { 'idempotency-key': key } });
      window.location.hash = `#/tasks/${encodeURIComponent(task.id)}`;
    } catch (err) {
      if (err.status !== 401) put(status, notice(`The task was not submitted. ${err.message}`));
      button.disabled = false;
    }
  });

  put(view, h('h2', {}, 'Submit a goal'), form);
  goal.focus();
  // The registered tools' names as a hint; listing them needs the admin scope, so a 403 is fine.
  api('/v1/tools').then((list) => {
    put(toolHint, `Registered: ${list.items.map((t) => t.name + (t.side_effects ? ' (side effects)' : '')).join(', ')}`);
  }).catch((err) => {
    if (err.status === 403) put(toolHint, 'This key may not list the registered tools (that needs the admin scope).');
  });
  return () => {};
}
