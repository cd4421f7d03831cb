// Chat: the shown branch's messages, each answer with its turn's step
// timeline; questions sent as streamed turns (answer deltas and steps as
// they come); edit a question (a new sibling branch) and switch between
// sibling questions (‹ 1/2 ›).

import { h, fill, errorBox, busy } from '../dom.js';
import { api, streamTurn, sessionPath, newId } from '../api.js';
import * as timeline from './timeline.js';

const turnOf = (m) => (m.meta && m.meta.turnId) || m.id.replace(/\.(u|a)$/, '');

// upsertStep records a step event: the end of a running step replaces it.
function upsertStep(list, s) {
  const i = list.findIndex((x) => x.name === s.name && (x.status === 'running' || x.start === s.start));
  if (i >= 0) list[i] = s;
  else list.push(s);
}

export default {
  id: 'chat',
  title: 'Conversation',
  mount(root, app) {
    const banner = h('div.banner');
    const list = h('div.messages', { id: 'messages' });
    const liveEl = h('div.live', { id: 'live' });
    const input = h('textarea', { id: 'question', rows: 2, placeholder: 'Ask a question… (Enter sends, Shift+Enter: new line)' });
    const send = h('button.primary', { id: 'send', type: 'submit' }, 'Send');
    // Stop cancels the turn in flight (POST .../turns/{turnId}/cancel): its
    // partial answer is kept as a cancelled message.
    const stop = h('button', { id: 'stop', type: 'button', hidden: true, onclick: () => stopTurn() }, 'Stop');
    const form = h('form.ask', { onsubmit: (e) => { e.preventDefault(); ask(); } }, input, send, stop);
    input.addEventListener('keydown', (e) => {
      if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) { e.preventDefault(); form.requestSubmit(); }
    });
    root.append(banner, list, liveEl, form);

    let live = null; // the turn in flight: {question, answer, steps, error, result}
    let failed = null; // the last turn, when it failed
    let editing = ''; // the message being edited

    const nodes = () => new Map(((app.tree && app.tree.nodes) || []).map((n) => [n.id, n]));

    // switchTo moves the active leaf to the newest leaf under id.
    async function switchTo(id) {
      const byId = nodes();
      let leaf = id;
      while (byId.get(leaf) && byId.get(leaf).children.length) leaf = byId.get(leaf).children.at(-1);
      try {
        await api('POST', `${sessionPath(app.session)}/branch`, { fromMessageId: leaf });
        app.viewLeaf = '';
        await app.refresh();
      } catch (e) { app.notify(e); }
    }

    function siblings(m) {
      const byId = nodes();
      const parent = byId.get(m.parentId);
      const ids = (parent ? parent.children : (app.tree && app.tree.roots) || [])
        .filter((id) => byId.get(id) && byId.get(id).role === 'user');
      const i = ids.indexOf(m.id);
      if (ids.length < 2 || i < 0) return null;
      return h('span.switcher', { dataset: { message: m.id } },
        h('button.link', { title: 'previous version', disabled: i === 0, onclick: () => switchTo(ids[i - 1]) }, '‹'),
        h('span.pos', {}, `${i + 1}/${ids.length}`),
        h('button.link', { title: 'next version', disabled: i === ids.length - 1, onclick: () => switchTo(ids[i + 1]) }, '›'));
    }

    function editor(m) {
      const text = h('textarea.edit', { rows: 2, value: m.content });
      const save = h('button.primary', { type: 'submit' }, 'Save & ask');
      return h('form.bubble.user.editing', {
        onsubmit: async (e) => {
          e.preventDefault();
          const content = text.value.trim();
          if (!content) return;
          editing = '';
          await run(content, () => api('POST', `${sessionPath(app.session)}/messages/${encodeURIComponent(m.id)}/edit?wait=true`,
            { content, turnId: newId('edit') }).catch((err) => {
            if (err.body && err.body.turn) return err.body.turn;
            throw err;
          }));
        },
      }, text, h('div.row', {}, save, h('button', { type: 'button', onclick: () => { editing = ''; render(); } }, 'Cancel')));
    }

    function message(m, last) {
      if (m.role === 'user') {
        if (editing === m.id) return editor(m);
        return h('div.bubble.user', { dataset: { id: m.id } }, h('div.text', {}, m.content),
          h('div.meta', {}, siblings(m),
            app.viewLeaf ? null : h('button.link.edit', { onclick: () => { editing = m.id; render(); } }, 'Edit')));
      }
      if (m.role !== 'assistant') {
        return h('div.bubble.other', { dataset: { id: m.id } }, h('span.role', {}, m.role), ' ', m.content);
      }
      const r = app.results.get(turnOf(m));
      // A stopped turn's partial answer: kept in the transcript, never shown
      // to the model again.
      const cancelled = m.meta && m.meta.status === 'cancelled';
      const el = h(cancelled ? 'div.bubble.assistant.cancelled' : 'div.bubble.assistant', { dataset: { id: m.id } }, h('div.text', {}, m.content),
        cancelled ? h('div.meta', {}, h('span.badge.cancelled', { title: 'Stopped: a partial answer, left out of what the model reads next' }, 'cancelled')) : null);
      if (!r) {
        const more = h('details.turn', {
          ontoggle: async () => {
            if (!more.open || more.dataset.loaded) return;
            more.dataset.loaded = '1';
            try {
              const res = await api('GET', `${sessionPath(app.session)}/turns/${encodeURIComponent(turnOf(m))}`);
              app.results.set(res.turnId, res);
              more.append(timeline.turn(res, app));
            } catch (e) { more.append(errorBox(e)); }
          },
        }, h('summary', {}, 'Steps'));
        return [el, more];
      }
      const sum = (r.steps || []).reduce((a, s) => a + (s.durationMs || 0), 0);
      return [el, h('details.turn', { open: last }, h('summary', {}, `Steps · ${(r.steps || []).length} · ${sum} ms`), timeline.turn(r, app))];
    }

    function render() {
      if (app.viewLeaf) {
        fill(banner, h('p.info', {}, `Viewing the branch that ends at ${app.viewLeaf} (not the active one). `,
          h('button', { onclick: () => switchTo(app.viewLeaf) }, 'Continue this branch'), ' ',
          h('button', { onclick: () => { app.viewLeaf = ''; app.refresh(); } }, 'Back to the active branch')));
      } else fill(banner);
      input.disabled = send.disabled = !!app.viewLeaf || !!live;
      stop.hidden = !live || !live.turnId;
      stop.disabled = !!(live && live.stopping);
      if (!app.session) {
        fill(list, h('p.empty', {}, 'Pick a session, or ask a question to start a new one.'));
        return;
      }
      const items = [];
      const err = app.errors.messages;
      if (err && !(err.status === 404 && !app.state)) items.push(errorBox(err));
      else if (app.errors.state && app.errors.state.status !== 404) items.push(errorBox(app.errors.state));
      const lastA = app.messages.findLast((m) => m.role === 'assistant');
      for (const m of app.messages) items.push(message(m, m === lastA));
      if (!items.length) items.push(h('p.empty', {}, app.state ? 'No messages yet: ask the first question.' : `New session ${app.session}: ask the first question.`));
      fill(list, items);
    }

    function renderLive() {
      const t = live || failed;
      if (!t || t.session !== app.session) { fill(liveEl); return; }
      const r = t.result;
      fill(liveEl,
        r ? null : h('div.bubble.user', {}, h('div.text', {}, t.question)), // a failed turn's question is saved
        t.error ? errorBox(t.error) : null,
        live ? h('div.bubble.assistant.streaming', {}, h('div.text', {}, t.answer || '…')) : null,
        r ? h('details.turn', { open: true }, h('summary', {}, 'Steps'), timeline.turn(r, app)) : timeline.steps(t.steps, app));
      if (live) liveEl.scrollIntoView({ block: 'end' });
    }

    // run sends a turn through fn and shows it live until it is saved; a
    // turn that fails stays in view with its error until the next one.
    async function run(question, fn) {
      const t = { session: app.session, question, answer: '', steps: [] };
      live = t;
      failed = null;
      render();
      renderLive();
      try {
        const res = await fn();
        app.results.set(res.turnId, res);
        if (res.status !== 'completed' && res.status !== 'cancelled') {
          Object.assign(t, { result: res, error: { code: res.errorCode, message: res.error || `the turn is ${res.status}` } });
          failed = t;
        }
      } catch (e) {
        Object.assign(t, { error: e });
        failed = t;
        input.value ||= question;
      }
      live = null;
      await app.refresh();
    }

    async function ask() {
      const question = input.value.trim();
      if (!question) return;
      if (!app.session) await app.select(newId('s'));
      input.value = '';
      const turnId = newId('web');
      await busy(send, () => run(question, () => streamTurn(app.session, { question, turnId }, (ev, data) => {
        if (live && !live.turnId) { live.turnId = turnId; render(); }
        if (!live) return;
        if (ev === 'step' && data) upsertStep(live.steps, data);
        else if (ev === 'token' && data) live.answer = (data.reset ? '' : live.answer) + (data.text || ''); // reset: a retried model call
        else if (ev === 'error' && data) live.error = data.error;
        renderLive();
      })));
    }

    async function stopTurn() {
      if (!live || !live.turnId) return;
      live.stopping = true;
      render();
      try {
        await api('POST', `${sessionPath(live.session)}/turns/${encodeURIComponent(live.turnId)}/cancel`);
      } catch (e) { if (live) { live.stopping = false; live.error = e; render(); renderLive(); } }
    }

    let shown = '';
    app.on(() => {
      if (app.session !== shown) { shown = app.session; failed = null; editing = ''; }
      render();
      renderLive();
    });
  },
};
