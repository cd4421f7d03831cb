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
    const drafts = new Map(); // taskId/callId → {args, note} as typed

    // act runs a task turn (start, continue or a decision on a pending
    // call) and waits for the task's next stop (a pause, an approval, its
    // end). The task's own state is read then: the session learns it from
    // the task's event a moment later, and until it does its state still
    // shows the task as before (the decided call, say, still pending).
    async function act(what, path, req, taskId) {
      running = what;
      error = null;
      render();
      let id = taskId;
      try {
        const res = await api('POST', path, req).catch((e) => {
          if (e.body && e.body.turn) return e.body.turn;
          throw e;
        });
        if (res && res.error) error = { code: res.errorCode, message: res.error };
        if (res && res.task && res.task.taskId) id = res.task.taskId;
      } catch (e) { error = e; }
      running = '';
      if (id) await load(id);
      await app.refresh();
    }

    function startTask() {
      if (!goal.value.trim()) { error = { message: 'Write the goal first.' }; render(); return; }
      if (!app.session) { error = { message: 'Select or create a session first.' }; render(); return; }
      const req = { goal: goal.value.trim(), taskId: newId('task') };
      if (maxSteps.value) req.config = { maxSteps: Number(maxSteps.value) };
      return act('starting…', `${sessionPath(app.session)}/tasks?wait=true`, req, req.taskId);
    }

    // load reads a task's state; only the latest load is shown.
    let loads = 0;
    async function load(id) {
      const n = ++loads;
      const session = app.session;
      try {
        const got = await api('GET', `${sessionPath(session)}/tasks/${encodeURIComponent(id)}`);
        if (n === loads && session === app.session) task = got;
      } catch (e) { if (n === loads) error = e; }
      render();
    }

    // approval shows a call waiting for approval with Approve, Edit (the
    // arguments as edited in the box) and Reject (with the message). What
    // is typed in the boxes is kept across renders (an error shown, the
    // session refreshed) until the call is decided.
    function approval(t, p) {
      const key = `${t.taskId}/${p.callId}`; // call ids repeat across tasks
      const draft = drafts.get(key) || { args: p.arguments, note: '' };
      const keep = () => drafts.set(key, draft);
      const args = h('textarea.args', { rows: 2, value: draft.args, dataset: { call: p.callId },
        oninput: () => { draft.args = args.value; keep(); } });
      const note = h('input.note', { type: 'text', value: draft.note, placeholder: 'message (for a rejection)',
        oninput: () => { draft.note = note.value; keep(); } });
      const decide = async (decision) => {
        const req = { decision };
        if (decision === 'edit') {
          try { req.arguments = JSON.parse(args.value); } catch { error = { message: 'The arguments are not valid JSON.' }; render(); return; }
        }
        if (decision === 'reject' && note.value.trim()) req.message = note.value.trim();
        await act(`${decision}…`, `${sessionPath(app.session)}/tasks/${encodeURIComponent(t.taskId)}/approvals/${encodeURIComponent(p.callId)}`, req, t.taskId);
        if (!error) drafts.delete(key); // refused: what was typed stays to be fixed
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
        // The same task stays in view while it is read again (no
        // "Loading" flash after a decision); another one, or none, not.
        const t = task && task.sessionId === app.session && task.task;
        if (!ref || !t || t.taskId !== ref.taskId) task = null;
        if (ref && !(t && t.taskId === ref.taskId && t.status === ref.status && t.step === ref.step)) load(ref.taskId);
      }
      render();
    });
  },
};
