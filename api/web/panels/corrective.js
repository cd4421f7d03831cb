// Corrective query: the self-corrective loop without a session (POST
// /v1/rag/corrective, seed 003's answer): the answer, the decision path,
// the grader's verdicts per document, the rewrite history and the nodes
// the workflow ran.

import { h, fill, errorBox, busy, ms } from '../dom.js';
import { api } from '../api.js';
import { decisionPath } from './timeline.js';

const pct = (x) => `${Math.round((x || 0) * 100)}%`;

function result(r) {
  const q = r.query || {};
  const g = r.graderResult || {};
  const docs = (r.retrieval && r.retrieval.documents) || [];
  return [
    h('pre.summary', { id: 'rag-answer' }, r.answer || '(no answer)'),
    h('dl.facts', {},
      h('dt', {}, 'Query'), h('dd', {}, q.wasRewritten ? `${q.original} → ${q.final} (${q.rewriteCount} rewrite(s))` : q.original),
      h('dt', {}, 'Grader'), h('dd', {}, `${g.passCount} of ${g.totalCount} passed (${pct(g.passRate)})${g.degraded ? ` — degraded: ${g.degraded}` : ''}`),
      g.reasoning ? [h('dt', {}, 'Reasoning'), h('dd', {}, g.reasoning)] : null,
      h('dt', {}, 'Took'), h('dd', {}, ms((r.workflow && r.workflow.totalDuration) || 0))),
    h('h4', {}, 'Decision path'),
    decisionPath(r.workflow && r.workflow.decisionPath) || h('p.empty', {}, 'No decisions recorded.'),
    (r.rewriteHistory || []).length ? [h('h4', {}, 'Rewrites'), h('ol.rewrites', {}, r.rewriteHistory.map((w) =>
      h('li', {}, `${w.from} → `, h('strong', {}, w.rewrittenQuery), h('div.muted', {}, w.rewriteReason))))] : null,
    h('h4', {}, `Documents (${docs.length})`),
    docs.length ? h('ul.verdicts.graded', {}, docs.map((d) => h(`li.${d.passed ? 'kept' : 'dropped'}`, {},
      h('code', {}, d.id), ` round ${d.attempt} · score ${(d.score || 0).toFixed(2)} · `,
      h('strong', {}, d.passed ? 'passed' : 'failed'), d.used ? ' · used' : '',
      h('div.muted', {}, `filter: ${d.filterKept ? 'kept' : 'dropped'} — ${d.filterReason}`),
      d.grade ? h('div.muted', {}, `grader (${d.gradedBy}): ${d.grade.is_relevant ? 'relevant' : 'not relevant'}, confidence ${pct(d.grade.confidence)} — ${d.grade.reasoning}`) : null)))
      : h('p.empty', {}, r.retrieval && r.retrieval.error ? `Retrieval failed: ${r.retrieval.error}` : 'Nothing retrieved: is the knowledge base empty?'),
    h('details', {}, h('summary', {}, 'Workflow nodes'), h('ol.timeline', {}, ((r.workflow && r.workflow.nodeExecutions) || []).map((n) =>
      h(`li.step.${n.status}`, {}, h('span.name', {}, `${n.node} #${n.attempt}`), h('span.badge', {}, n.status), ' ', h('span.dur', {}, ms(n.durationMs || 0)),
        n.detail ? h('div.muted', {}, n.detail) : null)))),
  ];
}

export default {
  id: 'corrective',
  title: 'Corrective RAG query',
  mount(root) {
    const query = h('input', { id: 'rag-query', placeholder: 'A question for the knowledge base' });
    const topK = h('input', { id: 'rag-topk', type: 'number', min: 1, max: 50, placeholder: 'top K' });
    const mode = h('select', { id: 'rag-mode' }, ['hybrid', 'dense', 'keyword'].map((m) => h('option', { value: m }, m)));
    const go = h('button', { id: 'rag-run', type: 'submit' }, 'Run');
    const out = h('div', { id: 'rag-result' }, h('p.empty', {}, 'Runs retrieve → grade → rewrite → generate on the knowledge base, without a session.'));
    root.append(h('form', {
      onsubmit: (e) => {
        e.preventDefault();
        if (!query.value.trim()) return;
        const req = { query: query.value.trim(), searchMode: mode.value };
        if (topK.value) req.topK = Number(topK.value);
        fill(out, h('p.info', {}, 'Running…'));
        busy(go, async () => {
          try { fill(out, result(await api('POST', '/v1/rag/corrective', req))); } catch (err) { fill(out, errorBox(err)); }
        });
      },
    }, query, h('div.row', {}, topK, mode, go)), out);
  },
};
