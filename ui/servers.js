// The servers view: this server's GPU slots (GET /v1/devices: state, restarts, current
// task, last error) and sandbox (GET /healthz). Where the API also has GET /v1/servers
// (several servers sharing one store), found in /openapi.json, its list is shown above,
// each server's fields as they come.
import {api} from './api.js';
import {badge, h, put, table} from './dom.js';
import {hasPath} from './spec.js';

const REFRESH_MS = 3000;

export async function serversView(root) {
  const multi = await hasPath('/v1/servers');
  const serversBox = h('div', {id: 'servers-list'});
  const devicesBox = h('div', {id: 'devices'});
  const sandboxBox = h('p', {class: 'muted small', id: 'sandbox'});
  put(root,
    multi ? h('section', {class: 'card'}, h('h2', {text: 'Servers sharing this store'}), serversBox) : null,
    h('section', {class: 'card'}, h('h2', {text: 'This server\'s GPU slots'}), sandboxBox, devicesBox));

  async function load() {
    try {
      const [devices, health] = await Promise.all([api('GET', '/v1/devices'), api('GET', '/healthz')]);
      const sb = health.sandbox || {};
      sandboxBox.textContent = `Evaluators: sandbox ${sb.mode || '?'}${sb.user ? ` as ${sb.user}` : ''}${sb.reason ? ` (${sb.reason})` : ''}.`;
      put(devicesBox, devices.devices.length
        ? table(['Slot', 'Device', 'Capability', 'Memory', 'State', 'Restarts', 'Current task', 'Last error'],
          devices.devices.map((d, i) => h('tr', {dataset: {index: d.index}},
            h('td', {class: 'num', text: i}),
            h('td', {text: `${d.index}: ${d.name}`}),
            h('td', {text: d.capability || '–'}),
            h('td', {class: 'num', text: d.memory_bytes ? `${(d.memory_bytes / 2 ** 30).toFixed(0)} GiB` : '–'}),
            h('td', null, badge(d.state)),
            h('td', {class: 'num', text: d.restarts}),
            h('td', null, d.current_task ? h('a', {href: `#/tasks/${d.current_task}`, text: d.current_task.slice(0, 8)}) : '–'),
            h('td', {class: 'error small', text: d.last_error || ''}))), {id: 'devices-table'})
        : h('p', {class: 'muted', text: 'No evaluator slots: the server runs without GPUs (--gpus none), so tasks wait queued.'}));
      if (multi) renderServers(await api('GET', '/v1/servers'));
    } catch (err) {
      put(devicesBox, h('p', {class: 'error', text: `Could not read the devices: ${err.message}`}));
    }
  }

  // Any list shape: {items: [...]}, {servers: [...]} or an array, of flat objects.
  function renderServers(body) {
    const items = Array.isArray(body) ? body : body.items || body.servers || [];
    const keys = [...new Set(items.flatMap((x) => Object.keys(x)))];
    const cell = (v) => (v === null || v === undefined ? '–' : typeof v === 'object' ? JSON.stringify(v) : String(v));
    put(serversBox, items.length ? table(keys, items.map((x) => keys.map((k) => (k === 'state' || k === 'status') && x[k] ? badge(x[k]) : cell(x[k]))))
      : h('p', {class: 'muted', text: 'No servers listed.'}));
  }

  await load();
  const timer = setInterval(() => { if (!document.hidden) load(); }, REFRESH_MS);
  return () => clearInterval(timer);
}
