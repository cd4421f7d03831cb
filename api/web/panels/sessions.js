// Sessions: the tenant's sessions (GET /v1/sessions) with a search box,
// and a form that creates one (POST /v1/sessions).

import { h, fill, errorBox, busy } from '../dom.js';
import { api } from '../api.js';

export default {
  id: 'sessions',
  title: 'Sessions',
  mount(root, app) {
    let sessions = [];
    let error = null;
    let loaded = false;
    const created = new Set();
    const search = h('input', { id: 'session-search', type: 'search', placeholder: 'Search sessions', oninput: () => render() });
    const reload = h('button.link', { title: 'reload the list', onclick: () => load() }, '↻');
    const list = h('ul.sessions', { id: 'session-list' });
    const name = h('input', { id: 'new-session', placeholder: 'new session id (optional)' });
    const create = h('button', { id: 'create-session', type: 'submit' }, 'Create');
    const form = h('form.row', {
      onsubmit: (e) => {
        e.preventDefault();
        busy(create, async () => {
          try {
            const body = name.value.trim() ? { sessionId: name.value.trim() } : {};
            const s = await api('POST', '/v1/sessions', body);
            name.value = '';
            created.add(s.sessionId);
            sessions = [{ sessionId: s.sessionId, status: 'idle', turns: 0 }, ...sessions.filter((x) => x.sessionId !== s.sessionId)];
            error = null;
            await app.select(s.sessionId);
          } catch (err) { error = err; render(); }
        });
      },
    }, name, create);
    root.append(h('div.row', {}, search, reload), list, form);

    async function load() {
      try {
        const res = await api('GET', '/v1/sessions?limit=200');
        // The listing is Temporal's visibility, which lags a little: keep
        // sessions this page created that it does not show yet.
        const listed = res.sessions || [];
        const ids = new Set(listed.map((s) => s.sessionId));
        sessions = [...listed, ...sessions.filter((s) => created.has(s.sessionId) && !ids.has(s.sessionId))];
        error = null;
      } catch (err) { error = err; }
      loaded = true;
      render();
    }

    function render() {
      const q = search.value.trim().toLowerCase();
      const rows = sessions.filter((s) => !q || `${s.sessionId} ${s.title || ''}`.toLowerCase().includes(q));
      fill(list,
        error ? h('li', {}, errorBox(error)) : null,
        !loaded ? h('li.empty', {}, 'Loading…') : null,
        loaded && !error && !rows.length ? h('li.empty', {}, q ? 'No session matches.' : 'No sessions yet: create one, or just ask a question.') : null,
        rows.map((s) => h('li', { class: s.sessionId === app.session ? 'active' : '' },
          h('button.session', { dataset: { id: s.sessionId }, onclick: () => app.select(s.sessionId) },
            h('span.id', {}, s.title || s.sessionId),
            h('span.badge', {}, s.status || ''),
            h('span.muted', {}, `${s.turns || 0} turn${s.turns === 1 ? '' : 's'}`)))));
    }

    let last = null;
    app.on(() => {
      // After a turn the listing changes (status, turn count): reload it
      // when the selected session's turn count moved.
      const key = `${app.session}/${app.state ? app.state.turns : ''}`;
      if (key !== last) { last = key; load(); } else render();
    });
  },
};
