// Agent task: start one (POST .../tasks), follow the session's task (GET
// .../tasks/{taskId}): its status, steps and, when paused, the progress
// summary with a Continue button (POST .../continue).

import { h, fill, errorBox, busy } from '../dom.js';
import { api, sessionPath, newId } from '../api.js';

export default {
  id: 'task',
  title: 'Agent task',
  mount(root, app) {
    const goal = h('textarea', { id: 'task-goal', rows: 2, placeholder: 'Goal, e.g. How many rows does each table of the shop have?' });
    const maxSteps = h('input', { id: 'task-max-steps', type: 'number', min: 1, max: 200, placeholder: 'max steps' });
    const start = h('button', { id: 'task-start', type: 'submit' }, 'Start task');
    const body = h('div', { id: 'task-view' });
    const form = h('form', { onsubmit: (e) => { e.preventDefault(); busy(start, startTask); } },
      goal, h('div.row', {}, maxSteps, start));
    root.append(body, form);

    let task = null; // GET .../tasks/{taskId}
    let error = null;
    let running = '';
    let loadedKey = '';

    // act runs a task turn (start or continue) and waits for its next
    // pause or its end.
    async function act(what, path, req) {
      running = what;
      error = null;
      render();
      try {
        const res = await api('POST', path, req).catch((e) => {
          if (e.body && e.body.turn) return e.body.turn;
          throw e;
        });
        if (res.error) error = { code: res.errorCode, message: res.error };
      } catch (e) { error = e; }
      running = '';
      await app.refresh();
    }

    function startTask() {
      if (!goal.value.trim()) { error = { message: 'Write the goal first.' }; render(); return; }
      if (!app.session) { error = { message: 'Select or create a session first.' }; render(); return; }
      const req = { goal: goal.value.trim(), taskId: newId('task') };
      if (maxSteps.value) req.config = { maxSteps: Number(maxSteps.value) };
      return act('starting…', `${sessionPath(app.session)}/tasks?wait=true`, req);
    }

    async function load(id) {
      try {
        task = await api('GET', `${sessionPath(app.session)}/tasks/${encodeURIComponent(id)}`);
      } catch (e) { error = e; }
      render();
    }

    // approval shows a call waiting for approval with Approve, Edit (the
    // arguments as edited in the box) and Reject (with the message).
    function approval(t, p) {
      const args = h('textarea.args', { rows: 2, value: p.arguments, dataset: { call: p.callId } });
      const note = h('input.note', { type: 'text', placeholder: 'message (for a rejection)' });
      const decide = (decision) => {
        const req = { decision };
        if (decision === 'edit') {
          try { req.arguments = JSON.parse(args.value); } catch { error = { message: 'The arguments are not valid JSON.' }; render(); return; }
        }
        if (decision === 'reject' && note.value.trim()) req.message = note.value.trim();
        return act(`${decision}…`, `${sessionPath(app.session)}/tasks/${encodeURIComponent(t.taskId)}/approvals/${encodeURIComponent(p.callId)}`, req);
      };
      return h('li.pending-call', { dataset: { call: p.callId } },
        h('code', {}, p.tool), p.reason ? h('div.muted', {}, p.reason) : null, args, note,
        h('div.row', {},
          h('button.primary.approve', { disabled: !!running || !!p.decision, onclick: () => decide('approve') }, 'Approve'),
          h('button.edit', { disabled: !!running || !!p.decision, onclick: () => decide('edit') }, 'Edit'),
          h('button.reject', { disabled: !!running || !!p.decision, onclick: () => decide('reject') }, 'Reject')));
    }

    function render() {
      start.disabled = !!running || !app.session;
      const t = task && task.task;
      const items = [error ? errorBox(error) : null, running ? h('p.info', {}, `Task ${running}`) : null];
      if (!app.session) items.push(h('p.empty', {}, 'Select a session to run an agent task in it.'));
      else if (!t) items.push(h('p.empty', {}, (app.state && app.state.task) ? 'Loading the task…' : 'No agent task in this session yet.'));
      else {
        const paused = t.status === 'paused';
        items.push(
          h('p', {}, h('span.badge', { id: 'task-status', class: `badge ${t.status}` }, t.status), ' ',
            h('span', { id: 'task-step' }, `step ${t.step} of ${t.budget}`), ` · ${t.pauses} pause(s) · `,
            h('a', { href: app.temporalURL(t.workflowId), target: '_blank', rel: 'noopener' }, 'workflow ↗')),
          h('p.goal', {}, t.goal),
          paused ? [h('h4', {}, 'Progress summary'), h('pre.summary', { id: 'task-summary' }, t.summary || '(none)'),
            h('button.primary', {
              id: 'task-continue', disabled: !!running,
              onclick: () => act('continuing…', `${sessionPath(app.session)}/continue?wait=true`, { turnId: newId('cont') }),
            }, 'Continue')] : null,
          (t.pending || []).length ? [h('h4', {}, 'Waiting for approval'), h('ul.pending', { id: 'task-pending' }, t.pending.map((p) => approval(t, p)))] : null,
          t.answer ? [h('h4', {}, 'Answer'), h('pre.summary', { id: 'task-answer' }, t.answer)] : null,
          t.error ? errorBox({ message: t.error }) : null,
          h('details', {}, h('summary', {}, `Steps (${(t.steps || []).length})`),
            h('ol.task-steps', {}, (t.steps || []).map((s) => h(`li.${s.ok ? 'ok' : 'failed'}`, {},
              h('code', {}, s.tool || 'answer'), s.args ? ` ${s.args}` : '',
              s.observation ? h('div.muted', {}, s.observation) : null)))));
      }
      fill(body, items);
    }

    app.on(() => {
      const ref = app.state && app.state.task;
      const key = ref ? `${app.session}/${ref.taskId}/${ref.status}/${ref.step}` : app.session;
      if (key !== loadedKey) {
        loadedKey = key;
        task = null;
        if (ref) load(ref.taskId);
      }
      render();
    });
  },
};
