// A turn as the chat shows it under its answer: the step timeline with
// durations, the rewritten query, topic and intent, the retrieved
// documents, and the corrective loop's decision path, grader verdict and
// relevance-filter verdicts (kept/dropped, with reasons). Not a panel: a
// renderer the chat (and any panel) uses.

import { h, ms } from '../dom.js';

export function decisionPath(path) {
  if (!path || !path.length) return null;
  return h('ol.decision-path', {}, path.map((d) => h('li', { class: /→ rewrite|dropped|failed/.test(d) ? 'warn' : '' }, d)));
}

// filterVerdicts renders "id kept: reason" lines.
function filterVerdicts(lines) {
  return h('ul.verdicts', {}, lines.map((l) => {
    const m = /^(\S+) (kept|dropped): (.*)$/s.exec(l);
    return m ? h(`li.${m[2]}`, {}, h('code', {}, m[1]), ` ${m[2]}: ${m[3]}`) : h('li', {}, l);
  }));
}

const shown = (v) => (typeof v === 'number' && !Number.isInteger(v) ? v.toFixed(2) : String(v));

function details(step, app) {
  const d = step.details || {};
  const rows = [];
  for (const [k, v] of Object.entries(d)) {
    if (k === 'decisionPath' || k === 'relevanceFilter' || v === '' || v === null) continue;
    if (k === 'workflowId' && app) {
      rows.push(h('div.kv', {}, h('span.k', {}, k), h('a', { href: app.temporalURL(v), target: '_blank', rel: 'noopener' }, v)));
    } else {
      rows.push(h('div.kv', {}, h('span.k', {}, k), h('span.v', {}, typeof v === 'object' ? JSON.stringify(v) : shown(v))));
    }
  }
  if (step.name === 'corrective_rag' || d.passRate !== undefined) {
    rows.push(h('div.grader', {},
      `Grader: ${d.passCount ?? '?'} of ${d.totalCount ?? '?'} documents passed (${Math.round((d.passRate || 0) * 100)}%)`,
      d.graderDegraded ? ` — degraded: ${d.graderDegraded}` : ''));
  }
  if (d.decisionPath && d.decisionPath.length) rows.push(h('h4', {}, 'Decision path'), decisionPath(d.decisionPath));
  if (d.relevanceFilter && d.relevanceFilter.length) rows.push(h('h4', {}, 'Relevance filter'), filterVerdicts(d.relevanceFilter));
  return rows;
}

// steps renders a timeline: a row a step, its bar proportional to its
// duration (running steps have none yet).
export function steps(list, app) {
  const total = Math.max(1, ...list.map((s) => s.durationMs || 0));
  return h('ol.timeline', {}, list.map((s) => h(`li.step.${s.status || 'running'}`, { dataset: { step: s.name } },
    h('details', { open: s.name === 'corrective_rag' },
      h('summary', {},
        h('span.name', {}, s.name),
        h('span.badge', {}, s.status || 'running'),
        h('span.bar', {}, h('i', { style: `width:${Math.round(((s.durationMs || 0) / total) * 100)}%` })),
        h('span.dur', {}, s.status === 'running' ? '…' : ms(s.durationMs || 0))),
      details(s, app)))));
}

function docs(list) {
  if (!list || !list.length) return null;
  return h('div.docs', {}, h('h4', {}, `Retrieved documents (${list.length})`),
    h('ul', {}, list.map((d) => h('li', {},
      h('details', {}, h('summary', {}, h('code', {}, d.id), ` ${shown(d.score)}`, d.source ? ` · ${d.source}` : ''),
        h('p.doc', {}, d.text || '(no text)'))))));
}

// intent shows a turn's intent: "qa 0.82 → qa", "(fell back)" when the
// last confident intent stood in for a doubtful guess.
function intent(it) {
  if (!it) return null;
  return `${it.label} ${it.confidence.toFixed(2)}${it.fellBack ? ' (fell back)' : ''}${it.route ? ` → ${it.route}` : ''}`;
}

// turn renders a whole turn result.
export function turn(r, app) {
  const total = r.receivedAt && r.completedAt ? Date.parse(r.completedAt) - Date.parse(r.receivedAt) : null;
  const facts = [
    ['Turn', r.turnId], ['Status', r.type ? `${r.status} (task ${r.type})` : r.status], ['Total', total > 0 ? ms(total) : null],
    ['Engine', [r.engine, r.model].filter(Boolean).join(' · ')], ['Intent', intent(r.intent)],
    ['Rewritten query', r.rewrittenQuery], ['Topic', r.topic], ['Error', r.error],
  ].filter(([, v]) => v);
  return h('div.turn-detail', {},
    h('dl.facts', {}, facts.map(([k, v]) => [h('dt', {}, k), h('dd', {}, v)])),
    steps(r.steps || [], app),
    docs(r.retrievedDocs));
}
