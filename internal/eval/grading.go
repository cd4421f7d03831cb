package eval

import (
	"context"
	"fmt"
	"io"
	"slices"

	"github.com/ctxflow/ctxflow/activities"
)

// Verdicts counts how a judge (the grader or the relevance filter) did on
// retrieved passages, against the gold passages.
type Verdicts struct {
	TP, FP, FN, TN int
}

// Precision is the share of passages judged relevant that are gold.
func (v Verdicts) Precision() float64 { return ratio(v.TP, v.TP+v.FP) }

// Recall is the share of retrieved gold passages judged relevant.
func (v Verdicts) Recall() float64 { return ratio(v.TP, v.TP+v.FN) }

func ratio(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

func (v *Verdicts) add(relevant, gold bool) {
	switch {
	case relevant && gold:
		v.TP++
	case relevant:
		v.FP++
	case gold:
		v.FN++
	default:
		v.TN++
	}
}

// GradingReport measures the corrective loop's judges on the top k
// passages retrieved (hybrid) for each case's offline-rewritten question.
type GradingReport struct {
	Set    string
	K      int
	Cases  int
	Pairs  int // (case, retrieved passage) pairs judged
	Grader Verdicts
	Filter Verdicts
}

// Write prints the report.
func (r GradingReport) Write(w io.Writer) {
	fmt.Fprintf(w, "%s: judges of the top %d hybrid passages, %d cases, %d pairs (%d gold)\n",
		r.Set, r.K, r.Cases, r.Pairs, r.Grader.TP+r.Grader.FN)
	fmt.Fprintf(w, "%-18s %10s %10s\n", "judge", "precision", "recall")
	fmt.Fprintf(w, "%-18s %10.3f %10.3f\n", "offline grader", r.Grader.Precision(), r.Grader.Recall())
	fmt.Fprintf(w, "%-18s %10.3f %10.3f\n", "relevance filter", r.Filter.Precision(), r.Filter.Recall())
	fmt.Fprintf(w, "%-18s %10.3f %10.3f\n", "keep all", ratio(r.Grader.TP+r.Grader.FN, r.Pairs), 1.0)
}

// Grading runs the corrective loop's retrieval (with its relevance filter)
// and the offline grader over the set's cases, as the activities do, and
// scores their verdicts against the gold passages.
func (s *Set) Grading(ctx context.Context, k int) (GradingReport, error) {
	rep := GradingReport{Set: s.Name, K: k, Cases: len(s.Gold)}
	for _, c := range s.Gold {
		rw, err := s.rewrite(ctx, c.Case)
		if err != nil {
			return rep, fmt.Errorf("case %s: %w", c.ID, err)
		}
		q := rw.Question
		res, err := s.retrieve(ctx, activities.RetrieveInput{Query: q, TopK: k, SimilarityThreshold: s.qa.SimilarityThreshold})
		if err != nil {
			return rep, fmt.Errorf("case %s: %w", c.ID, err)
		}
		for _, d := range res.Docs {
			g, err := s.rag.GradeDoc(ctx, activities.GradeInput{Query: q, Doc: d})
			if err != nil {
				return rep, fmt.Errorf("case %s: %w", c.ID, err)
			}
			gold := slices.Contains(c.Gold, d.ID)
			rep.Pairs++
			rep.Grader.add(g.IsRelevant, gold)
			rep.Filter.add(d.Kept, gold)
		}
	}
	return rep, nil
}
