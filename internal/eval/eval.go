// Package eval measures ctxflow against evaluation sets in the common JSONL
// format of ../shared/evaldata (see [evaldata]): the worker's own question
// rewriter against the gold rewrites, the qa turn's own retrieval
// (activities.RAG.Retrieve over the set's passages as a closed corpus, in
// an in-memory embedded store with the offline embedder) with the question
// as asked, as rewritten and as the gold rewrite, and the offline answerer
// against gold answers where a set has them. `ctxflow eval --data FILE`
// and `make eval` run it; the tests run it on small samples in testdata.
package eval

import (
	"context"
	"fmt"
	"io"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/activities/offline"
	"github.com/ctxflow/ctxflow/internal/eval/evaldata"
	"github.com/ctxflow/ctxflow/lexical"
)

// RecallK is the depth of recall@k: the qa turn's default topK.
const RecallK = 5

// Metrics is what a set measures. Every figure is in 0..1; one that no
// case of the set measures (no passages, no gold answers, no case of its
// kind) is nil and left out of the JSON.
type Metrics struct {
	Set  string `json:"set"`
	File string `json:"file"`
	// RewriteTokenF1 is the token F1 of the system's rewrite against the
	// gold rewrite; CopyTokenF1 the same for the question left as asked
	// (the baseline a rewriter must beat).
	RewriteTokenF1 float64 `json:"rewrite_token_f1"`
	CopyTokenF1    float64 `json:"copy_token_f1"`
	// RewriteExactMatch is the share of rewrites equal to the gold rewrite
	// up to spaces, punctuation and case.
	RewriteExactMatch float64 `json:"rewrite_exact_match"`
	// UnchangedWhenSelfContained is, among the cases with history whose
	// gold rewrite is the question, the share the system left unchanged.
	UnchangedWhenSelfContained *float64 `json:"unchanged_when_self_contained,omitempty"`
	// ChangedWhenNeeded is, among the cases whose gold rewrite differs
	// from the question, the share the system changed.
	ChangedWhenNeeded *float64 `json:"changed_when_needed,omitempty"`
	// RecallAt5 and MRR are over the cases with a gold passage in the
	// corpus, for each query form.
	RecallAt5 *ByQuery `json:"recall_at_5,omitempty"`
	MRR       *ByQuery `json:"mrr,omitempty"`
	// AnswerTokenF1 is the token F1 of the offline answer (without its
	// label and citations) against the gold answer.
	AnswerTokenF1 *float64 `json:"answer_token_f1,omitempty"`
	// Counts are the cases behind each figure (the table shows them).
	Counts Counts `json:"-"`
}

// ByQuery is a retrieval figure for each form of the query.
type ByQuery struct {
	Raw       float64 `json:"raw"`       // the question as asked
	Rewritten float64 `json:"rewritten"` // the system's rewrite
	Gold      float64 `json:"gold"`      // the gold rewrite
}

// Counts are how many cases each figure of [Metrics] averages.
type Counts struct {
	Cases, SelfContained, NeedRewrite, Retrieval, Answers int
}

// tally accumulates a set's figures case by case.
type tally struct {
	rewriteF1, copyF1, exact mean
	unchanged, changed       mean
	recall, rr               [3]mean // raw, rewritten, gold
	answerF1                 mean
}

// Evaluate measures every case of the set; progress (nil: none) is told
// after each case.
func (s *Set) Evaluate(ctx context.Context, progress func(done, total int)) (Metrics, error) {
	var t tally
	for i, c := range s.Cases {
		if err := s.evalCase(ctx, c, &t); err != nil {
			return Metrics{}, fmt.Errorf("%s, case %s: %w", s.Name, c.ID, err)
		}
		if progress != nil {
			progress(i+1, len(s.Cases))
		}
	}
	return t.metrics(s.Name, s.Path), nil
}

// evalCase measures one case: its rewrite, its retrieval when it has a gold
// passage in the corpus, its answer when it has a gold answer and the set
// has passages.
func (s *Set) evalCase(ctx context.Context, c evaldata.Case, t *tally) error {
	rw, err := s.rewrite(ctx, c)
	if err != nil {
		return err
	}
	t.addRewrite(c, rw.Question)
	if s.rag == nil {
		return nil
	}
	if gold := s.goldIn(c); len(gold) > 0 {
		for i, q := range [3]string{c.Question, rw.Question, c.GoldRewrite} {
			ranked, err := s.Ranked(ctx, q, activities.SearchMode(s.qa.SearchMode), RecallK)
			if err != nil {
				return err
			}
			t.recall[i].add(RecallAt(ranked, gold, RecallK))
			t.rr[i].add(ReciprocalRank(ranked, gold))
		}
	}
	if c.GoldAnswer != "" {
		answer, err := s.answer(ctx, rw)
		if err != nil {
			return err
		}
		t.answerF1.add(evaldata.TokenF1(answerContent(answer), c.GoldAnswer))
	}
	return nil
}

// addRewrite scores a case's rewrite and the rewriter's decision.
func (t *tally) addRewrite(c evaldata.Case, rewrite string) {
	t.rewriteF1.add(evaldata.TokenF1(rewrite, c.GoldRewrite))
	t.copyF1.add(evaldata.TokenF1(c.Question, c.GoldRewrite))
	t.exact.addIf(evaldata.Same(rewrite, c.GoldRewrite))
	changed := !evaldata.Same(rewrite, c.Question)
	switch {
	case !evaldata.Same(c.GoldRewrite, c.Question):
		t.changed.addIf(changed)
	case len(c.History) > 0:
		t.unchanged.addIf(!changed)
	}
}

// metrics are the tally's figures.
func (t *tally) metrics(set, file string) Metrics {
	m := Metrics{
		Set: set, File: file,
		RewriteTokenF1: t.rewriteF1.value(), CopyTokenF1: t.copyF1.value(), RewriteExactMatch: t.exact.value(),
		UnchangedWhenSelfContained: t.unchanged.ptr(), ChangedWhenNeeded: t.changed.ptr(),
		AnswerTokenF1: t.answerF1.ptr(),
		Counts: Counts{Cases: t.rewriteF1.n, SelfContained: t.unchanged.n, NeedRewrite: t.changed.n,
			Retrieval: t.recall[0].n, Answers: t.answerF1.n},
	}
	if t.recall[0].n > 0 {
		m.RecallAt5 = &ByQuery{t.recall[0].value(), t.recall[1].value(), t.recall[2].value()}
		m.MRR = &ByQuery{t.rr[0].value(), t.rr[1].value(), t.rr[2].value()}
	}
	return m
}

// rewrite makes c's question stand alone as a qa turn's rewrite_query step
// does (activities.Session.RewriteQuestion): the worker's rewriter over the
// history before it; a question without history stays as asked.
func (s *Set) rewrite(ctx context.Context, c evaldata.Case) (activities.RewriteQuestionResult, error) {
	res := activities.RewriteQuestionResult{Question: c.Question}
	history := c.Messages()
	if len(history) == 0 {
		return res, nil
	}
	q, topic, err := s.rewriter.Rewrite(ctx, c.Question, history)
	if err != nil {
		return res, fmt.Errorf("rewrite: %w", err)
	}
	res.Question, res.Rewritten, res.Topic = q, q != c.Question, topic
	return res, nil
}

// goldIn are c's gold passages that are in the corpus.
func (s *Set) goldIn(c evaldata.Case) []string {
	var out []string
	for _, id := range c.GoldPassageIDs {
		if s.inCorpus[id] {
			out = append(out, id)
		}
	}
	return out
}

// answer answers a rewritten question as the first round of a qa turn's
// corrective loop does: the qa turn's retrieval (its default topK,
// similarity threshold and search mode, the rewrite's topic), the offline
// grader on each document the relevance filter kept, the offline answerer
// over those that passed. The loop's reformulation rounds are not run.
func (s *Set) answer(ctx context.Context, rw activities.RewriteQuestionResult) (string, error) {
	res, err := s.retrieve(ctx, activities.RetrieveInput{
		Query: rw.Question, TopK: s.qa.TopK, SimilarityThreshold: s.qa.SimilarityThreshold,
		Mode: activities.SearchMode(s.qa.SearchMode), Topic: rw.Topic,
	})
	if err != nil {
		return "", err
	}
	var docs []activities.Doc
	for _, d := range res.Docs {
		if !d.Kept { // the filter's verdicts bind, as in the loop
			continue
		}
		g, err := s.rag.GradeDoc(ctx, activities.GradeInput{Query: rw.Question, Doc: d, Model: offline.ModelName})
		if err != nil {
			return "", err
		}
		if g.IsRelevant {
			docs = append(docs, d.Doc)
		}
	}
	a, err := s.rag.Answer(ctx, activities.AnswerInput{Query: rw.Question, Docs: docs, Model: offline.ModelName})
	return a.Answer, err
}

// answerContent is an answer without the offline engine's label and its
// citations of document ids, which no gold answer has.
func answerContent(answer string) string {
	return lexical.StripCitations(lexical.StripLabel(answer))
}

// WriteTable prints the sets' figures as a Markdown table, with the cases
// behind each figure.
func WriteTable(w io.Writer, sets []Metrics) {
	fmt.Fprintln(w, "| set | cases | rewrite F1 | copy F1 | rewrite EM | unchanged when self-contained | changed when needed | recall@5 raw / rewritten / gold | MRR raw / rewritten / gold | answer F1 |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|")
	for _, m := range sets {
		c := m.Counts
		fmt.Fprintf(w, "| %s | %d | %.3f | %.3f | %.3f | %s | %s | %s | %s | %s |\n", m.Set, c.Cases,
			m.RewriteTokenF1, m.CopyTokenF1, m.RewriteExactMatch,
			share(m.UnchangedWhenSelfContained, c.SelfContained), share(m.ChangedWhenNeeded, c.NeedRewrite),
			byQuery(m.RecallAt5, c.Retrieval), byQuery(m.MRR, c.Retrieval), share(m.AnswerTokenF1, c.Answers))
	}
}

// share is a figure and the cases behind it, or "–" when none.
func share(v *float64, n int) string {
	if v == nil {
		return "–"
	}
	return fmt.Sprintf("%.3f of %d", *v, n)
}

// byQuery is a retrieval figure per query form, or "–" when none.
func byQuery(b *ByQuery, n int) string {
	if b == nil {
		return "–"
	}
	return fmt.Sprintf("%.3f / %.3f / %.3f of %d", b.Raw, b.Rewritten, b.Gold, n)
}
