// The servers view: the live servers sharing this store (GET /v1/servers: host, GPUs,
// slots, device classes, current tasks, last renewal), this server's GPU slots (GET
// /v1/devices: state, restarts, current task, last error) and sandbox (GET /healthz).
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

  // One row per live server; its tasks link to their pages.
  function renderServers(body) {
    const items = body.servers || [];
    const note = h('p', {class: 'muted small', id: 'servers-store',
      text: `Store: ${body.store}; a server not renewed for ${body.lease_seconds} s is gone and its tasks are taken over.`});
    const gpus = (s) => s.gpus.length ? s.gpus.map((g) => `${g.index}: ${g.name || '?'} (${g.state || '?'})`).join(', ') : 'none';
    const tasks = (s) => s.tasks.length
      ? s.tasks.map((id) => h('a', {href: `#/tasks/${id}`, text: id.slice(0, 8)}))
      : '–';
    put(serversBox, note, items.length
      ? table(['Host', 'Pid', 'Device classes', 'GPUs', 'Slots', 'Tasks', 'Renewed', 'Version'],
        items.map((s) => h('tr', {dataset: {instance: s.instance}, class: s.this ? 'this' : ''},
          h('td', {text: s.host + (s.this ? ' (this one)' : '')}),
          h('td', {class: 'num', text: s.pid}),
          h('td', {text: s.devices.length ? s.devices.join(', ') : 'any'}),
          h('td', {class: 'small', text: gpus(s)}),
          h('td', {class: 'num', text: s.slots}),
          h('td', null, tasks(s)),
          h('td', {class: 'small', text: s.renewed_at}),
          h('td', {class: 'small', text: s.version}))), {id: 'servers-table'})
      : h('p', {class: 'muted', text: 'No live server.'}));
  }

  await load();
  const timer = setInterval(() => { if (!document.hidden) load(); }, REFRESH_MS);
  return () => clearInterval(timer);
}
