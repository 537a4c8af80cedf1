// Plan versions, newest first, each with the reason it was written and its structural
// difference from the version before (GET .../plans/{version}/diff). Versions are immutable,
// so each diff is fetched once and kept for as long as the task page is open.

import { api } from './api.js';
import { h, put, when, short, jsonDetails, notice } from './dom.js';

function compact(value) {
  return short(JSON.stringify(value) ?? 'none', 90);
}

function diffView(d) {
  const diff = d.diff || {};
  const lines = [];
  for (const m of diff.added || []) {
    lines.push(h('li', { class: 'added' }, `+ ${m.id}: ${m.title}`,
      m.depends_on && m.depends_on.length ? ` (after ${m.depends_on.join(', ')})` : ''));
  }
  for (const id of diff.removed || []) lines.push(h('li', { class: 'removed' }, `− ${id}`));
  for (const c of diff.changed || []) {
    lines.push(h('li', { class: 'changed' }, `~ ${c.id}`,
      h('ul', {}, (c.changes || []).map((f) =>
        h('li', {}, h('span', { class: 'mono' }, f.field), ': ', compact(f.before), ' → ', compact(f.after))))));
  }
  if (diff.reordered) lines.push(h('li', { class: 'changed' }, 'the milestones were reordered'));
  const unchanged = diff.unchanged || [];
  if (unchanged.length) lines.push(h('li', { class: 'muted' }, `unchanged: ${unchanged.join(', ')}`));
  if (!lines.length) lines.push(h('li', { class: 'muted' }, 'no structural change'));
  return h('ul', { class: 'diff' }, lines);
}

/**
 * Draws the versions into `el`. `cache` maps version to its diff (or error) across redraws;
 * `redraw` is called when a diff arrives.
 */
export function drawPlans(el, taskId, versions, cache, redraw) {
  if (!versions.length) {
    put(el, h('p', { class: 'muted' }, 'No plan version yet: the task is not planned (or not yet).'));
    return;
  }
  const sorted = [...versions].sort((a, b) => b.version - a.version);
  put(el, h('ol', { class: 'plans' }, sorted.map((v) => {
    const milestones = (v.plan && Array.isArray(v.plan.milestones)) ? v.plan.milestones : [];
    let change;
    if (v.version === sorted[sorted.length - 1].version && !cache.has(v.version)) {
      change = h('p', { class: 'muted' }, `first version: ${milestones.length} milestones`);
    } else if (!cache.has(v.version)) {
      cache.set(v.version, { pending: true });
      api(`/v1/tasks/${encodeURIComponent(taskId)}/plans/${v.version}/diff`)
        .then((d) => cache.set(v.version, { diff: d }))
        .catch((err) => cache.set(v.version, { error: err }))
        .finally(redraw);
      change = h('p', { class: 'muted' }, 'loading the difference…');
    } else {
      const got = cache.get(v.version);
      if (got.pending) change = h('p', { class: 'muted' }, 'loading the difference…');
      else if (got.error && got.error.status === 404) {
        change = h('p', { class: 'muted' }, `first version: ${milestones.length} milestones`);
      } else if (got.error) change = notice(`Could not load the difference. ${got.error.message}`);
      else change = diffView(got.diff);
    }
    return h('li', { class: 'plan-version', dataset: { version: String(v.version) } },
      h('div', { class: 'plan-head' },
        h('strong', {}, `v${v.version}`),
        h('span', { class: 'muted' }, when(v.created_at)),
        v.caused_by_seq ? h('span', { class: 'muted' }, `caused by event #${v.caused_by_seq}`) : null),
      h('p', { class: 'reason' }, v.reason),
      change,
      jsonDetails(`plan v${v.version} as JSON`, v.plan));
  })));
}
