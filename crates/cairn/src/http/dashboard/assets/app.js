// The dashboard's entry point: hash routing (#/tasks, #/tasks/<id>, #/stats, #/new), the
// sign-in form, and mounting one view at a time. Each view returns a function that stops its
// timers and streams, called before the next view mounts.

import { api, setKey, forgetKey, hasKey, onUnauthorized } from './api.js';
import { h, put, notice } from './dom.js';
import { mountTaskList } from './tasks.js';
import { mountTask } from './task.js';
import { mountStats } from './stats.js';
import { mountSubmit } from './submit.js';

const main = document.getElementById('main');
const signOut = document.getElementById('sign-out');
let stopView = () => {};
let signingIn = false;

const routes = [
  [/^#\/tasks\/([0-9a-fA-F-]{36})$/, (el, m) => mountTask(el, m[1])],
  [/^#\/stats$/, (el) => mountStats(el)],
  [/^#\/new$/, (el) => mountSubmit(el)],
  [/^(#\/tasks)?$/, (el) => mountTaskList(el)],
];

function route() {
  if (signingIn) return;
  stopView();
  stopView = () => {};
  const hash = window.location.hash === '#/' ? '' : window.location.hash;
  for (const link of document.querySelectorAll('nav a[data-route]')) {
    link.classList.toggle('active', hash.startsWith(link.dataset.route) ||
      (link.dataset.route === '#/tasks' && hash === ''));
  }
  for (const [pattern, mount] of routes) {
    const m = hash.match(pattern);
    if (m) {
      const view = h('div', { class: 'view' });
      put(main, view);
      stopView = mount(view, m) || (() => {});
      return;
    }
  }
  put(main, notice(`There is no page at ${hash}.`), h('p', {}, h('a', { href: '#/tasks' }, 'Back to the tasks')));
}

/** Shows the sign-in form; `message` says why (a rejected key, or none yet). */
function showSignIn(message, kind = 'error') {
  signingIn = true;
  stopView();
  stopView = () => {};
  forgetKey();
  signOut.hidden = true;
  const input = h('input', {
    type: 'password', name: 'api-key', id: 'api-key', autocomplete: 'off',
    spellcheck: 'false', placeholder: 'cairn_<key id>_<secret>', required: true,
  });
  const status = h('div', { class: 'form-status' }, message ? notice(message, kind) : null);
  const button = h('button', { type: 'submit' }, 'Sign in');
  const form = h('form', { class: 'sign-in', id: 'sign-in' },
    h('h2', {}, 'Sign in'),
    h('p', {}, 'This server requires an API key. The key is kept in this tab\'s memory only ' +
      'and is forgotten when the tab is closed or reloaded.'),
    h('label', { for: 'api-key' }, 'API key'), input, button, status);
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    button.disabled = true;
    setKey(input.value.trim());
    put(status, notice('Checking the key…', 'info'));
    try {
      await api('/v1/tasks?limit=1');
      signingIn = false;
      signOut.hidden = false;
      route();
    } catch (err) {
      // A 401 has already re-drawn this form through onUnauthorized; anything else is shown here.
      if (err.status !== 401) put(status, notice(err.message));
      button.disabled = false;
    }
  });
  put(main, form);
  input.focus();
}

onUnauthorized((err) => {
  const why = hasKey()
    ? `The server did not accept this key (${err.message}).`
    : null;
  showSignIn(why);
});

signOut.addEventListener('click', () => showSignIn('Signed out: the key is forgotten.', 'info'));
window.addEventListener('hashchange', route);
route();
