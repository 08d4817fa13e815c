// The page's entry: the hash router (#/tasks, #/tasks/<id>, #/memory, #/skills,
// #/servers), the token dialog and the notice line. Each view is a function
// (root, params, query) that fills root and may return a cleanup function, which runs
// when the view is left (closing its event stream, stopping its timers).
import {onTokenNeeded, setToken, token} from './api.js';
import {h} from './dom.js';
import {tasksView} from './tasks.js';
import {taskView} from './task.js';
import {memoryView} from './memory.js';
import {skillsView} from './skills.js';
import {serversView} from './servers.js';

const ROUTES = [
  {re: /^\/tasks\/([0-9a-fA-F-]{36})$/, view: taskView, nav: 'tasks'},
  {re: /^\/tasks$/, view: tasksView, nav: 'tasks'},
  {re: /^\/memory$/, view: memoryView, nav: 'memory'},
  {re: /^\/skills$/, view: skillsView, nav: 'skills'},
  {re: /^\/servers$/, view: serversView, nav: 'servers'},
];

let cleanup = null;

// Mounts the view the hash names (tasks when none matches).
async function route() {
  const [path, q] = (location.hash.slice(1) || '/tasks').split('?');
  const match = ROUTES.map((r) => ({r, m: path.match(r.re)})).find((x) => x.m);
  if (!match) {
    location.replace('#/tasks');
    return;
  }
  if (cleanup) cleanup();
  cleanup = null;
  for (const a of document.querySelectorAll('#nav a')) {
    a.classList.toggle('active', a.dataset.view === match.r.nav);
  }
  const root = document.getElementById('view');
  root.replaceChildren();
  const view = document.createElement('div');
  root.append(view);
  try {
    const done = await match.r.view(view, match.m.slice(1), new URLSearchParams(q || ''));
    if (view.isConnected) cleanup = done || null;
    else if (done) done();
  } catch (e) {
    view.append(h('p', {class: 'error'}, `Could not load: ${e.message} `,
      h('button', {type: 'button', text: 'Try again', onclick: route})));
  }
}

// The token dialog: asks once, resolves true when a token was given.
function askToken(why) {
  const dialog = document.getElementById('token-dialog');
  const input = document.getElementById('token-input');
  document.getElementById('token-why').textContent = why || 'A bearer token for writes (the server\'s --token-file).';
  input.value = token();
  return new Promise((resolve) => {
    const form = document.getElementById('token-form');
    const finish = (given) => {
      form.removeEventListener('submit', submit);
      dialog.removeEventListener('close', cancel);
      if (dialog.open) dialog.close();
      resolve(given);
    };
    const submit = (e) => {
      e.preventDefault();
      setToken(input.value.trim());
      finish(Boolean(input.value.trim()));
    };
    const cancel = () => finish(false);
    form.addEventListener('submit', submit);
    dialog.addEventListener('close', cancel);
    document.getElementById('token-cancel').onclick = () => finish(false);
    document.getElementById('token-clear').onclick = () => { setToken(''); finish(false); };
    dialog.showModal();
    input.focus();
  });
}

function showTokenState() {
  const b = document.getElementById('token-button');
  b.textContent = token() ? 'Token ✓' : 'Token';
}

onTokenNeeded(askToken);
document.getElementById('token-button').addEventListener('click', () => askToken());
document.addEventListener('opforge-token', showTokenState);
window.addEventListener('hashchange', route);
showTokenState();
route();
