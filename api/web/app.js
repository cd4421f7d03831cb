// The page: a shared state (app) and panels. A panel is one module whose
// default export is {id, title, mount(body, app)}; mount subscribes to
// app.on(render) and reads app's fields. Adding a panel is one module and
// one line in `panels` below.

import { api, sessionPath, stats, httpURL } from './api.js';
import { h, fill, errorBox } from './dom.js';
import sessions from './panels/sessions.js';
import chat from './panels/chat.js';
import task from './panels/task.js';
import tree from './panels/tree.js';
import corrective from './panels/corrective.js';
import settings from './panels/settings.js';

const panels = [
  ['#side', sessions],
  ['#center', chat],
  ['#inspect', task],
  ['#inspect', tree],
  ['#inspect', corrective],
  ['#settings', settings],
];

// ?temporalUI= and ?namespace= hold for this page only: remembered, a link
// someone sent could point the page's Temporal links anywhere for good. The
// address is used only as an http(s) URL.
const params = new URLSearchParams(location.search);
const linked = { temporalUI: httpURL(params.get('temporalUI') || ''), namespace: params.get('namespace') || '' };

const listeners = [];

export const app = {
  session: '', // the selected session id
  state: null, // GET /v1/sessions/{id}
  messages: [], // the branch shown: the active one, or viewLeaf's
  tree: null, // GET /v1/sessions/{id}/tree
  viewLeaf: '', // a branch viewed without moving the active leaf
  results: new Map(), // turnId → turn result (steps, documents, ...)
  errors: {}, // state, messages, tree: why each failed to load

  on(fn) { listeners.push(fn); },
  changed() {
    for (const fn of listeners) {
      try { fn(app); } catch (e) { app.notify(e); }
    }
  },

  // select shows a session (an id not yet used starts with its first turn).
  async select(id) {
    if (id !== app.session) {
      Object.assign(app, { session: id, state: null, messages: [], tree: null, viewLeaf: '', results: new Map() });
      history.replaceState(null, '', id ? `#session=${encodeURIComponent(id)}` : '#');
    }
    await app.refresh();
  },

  // refresh reloads the selected session's state, branch and tree.
  async refresh() {
    const id = app.session;
    app.errors = {};
    if (!id) return app.changed();
    const base = sessionPath(id);
    const leaf = app.viewLeaf ? `?leaf=${encodeURIComponent(app.viewLeaf)}` : '';
    const [state, msgs, tr] = await Promise.allSettled([
      api('GET', base), api('GET', `${base}/messages${leaf}`), api('GET', `${base}/tree`),
    ]);
    if (id !== app.session) return; // another session was selected meanwhile
    const take = (name, r, fallback) => {
      if (r.status === 'fulfilled') return r.value;
      app.errors[name] = r.reason;
      return fallback;
    };
    app.state = take('state', state, null);
    app.messages = (take('messages', msgs, null) || { messages: [] }).messages || [];
    app.tree = take('tree', tr, null);
    for (const r of (app.state && app.state.recent) || []) app.results.set(r.turnId, r);
    app.changed();
  },

  notify(err) {
    const el = document.querySelector('#notice');
    fill(el, errorBox(err), h('button.link', { onclick: () => { el.hidden = true; } }, 'dismiss'));
    el.hidden = false;
  },

  // temporalURL links a workflow in the Temporal UI: the UI's address
  // comes from ?temporalUI=, else the settings, else this host on port 8233.
  temporalURL(workflowId) {
    const base = linked.temporalUI || httpURL(localStorage.getItem('ctxflow.temporalUI') || '') || `${location.protocol}//${location.hostname}:8233`;
    const ns = linked.namespace || 'default';
    return `${base.replace(/\/+$/, '')}/namespaces/${encodeURIComponent(ns)}/workflows/${encodeURIComponent(workflowId)}`;
  },
};

// The header: the session's name and its workflow in the Temporal UI.
app.on(() => {
  fill(document.querySelector('#current'), app.session || 'no session');
  const link = document.querySelector('#temporal-link');
  link.hidden = !app.session;
  if (app.session) {
    const tenant = (app.state && app.state.tenant) || 'default';
    link.href = app.temporalURL(`session/${tenant}/${app.session}`);
  }
});

window.addEventListener('unhandledrejection', (e) => app.notify(e.reason));
window.ctxflow = { app, stats }; // for the browser's console (and the tests)

for (const [where, p] of panels) {
  const body = h('div.panel-body');
  const section = p.inline ? body : h('section.panel', { id: `panel-${p.id}` }, h('h2', {}, p.title), body);
  document.querySelector(where).append(section);
  p.mount(body, app);
}

const fromHash = new URLSearchParams(location.hash.slice(1)).get('session') || '';
app.select(fromHash);
