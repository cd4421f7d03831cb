package workflows

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/ctxflow/ctxflow/convo"
)

// The corrective loop's decisions (seed 003), as pure functions: the
// workflow (rag.go) runs the activities and asks these what to do next.

// gradeRound is one grading round's result: how many documents passed of
// how many, against the pass threshold.
func gradeRound(query string, passed, total int, threshold float64) GraderResult {
	g := GraderResult{PassCount: passed, TotalCount: total}
	if total > 0 {
		g.PassRate = float64(passed) / float64(total)
	}
	g.ShouldRewrite = g.PassRate < threshold
	// Each document's own reasoning is in the retrieval's documents.
	g.Reasoning = fmt.Sprintf("%d of %d documents relevant to %q: pass rate %.2f %s the threshold %.2f",
		passed, total, convo.Clip(query, 60), g.PassRate, map[bool]string{true: "below", false: "at or above"}[g.ShouldRewrite], threshold)
	return g
}

// afterGrade decides what follows a grading round: generate when the pass
// rate reaches the threshold or the rewrite limit is reached, else rewrite.
// why is the decision path's line.
func afterGrade(g GraderResult, attempt, maxRewrites int, threshold float64) (rewrite bool, why string) {
	passed := fmt.Sprintf("grade: %d of %d passed (%.2f", g.PassCount, g.TotalCount, g.PassRate)
	switch {
	case !g.ShouldRewrite:
		return false, fmt.Sprintf("%s ≥ %.2f) → generate", passed, threshold)
	case attempt >= maxRewrites:
		return false, fmt.Sprintf("%s < %.2f), rewrite limit %d reached → generate", passed, threshold, maxRewrites)
	}
	return true, fmt.Sprintf("%s < %.2f) → rewrite", passed, threshold)
}

// triedQueries are the formulations a loop has searched, compared as
// [normQuery] forms: a rewrite that repeats one ends the loop instead of
// repeating a search.
type triedQueries map[string]bool

func (t triedQueries) add(q string)      { t[normQuery(q)] = true }
func (t triedQueries) has(q string) bool { return t[normQuery(q)] }

// normQuery is a query's comparison form: lower case, single spaces.
func normQuery(q string) string { return strings.Join(strings.Fields(strings.ToLower(q)), " ") }

// mergeDoc records a graded document among docs (byID indexes them): a
// document graded again takes its latest verdicts, but one that passed
// once stays usable — with the verdicts it passed on when keepPassing is
// set (before "filter-binds", with the latest round's filter verdict).
func mergeDoc(docs []RAGDoc, byID map[string]int, d RAGDoc, keepPassing bool) []RAGDoc {
	if i, ok := byID[d.ID]; ok {
		if keepPassing && docs[i].Passed && !d.Passed {
			return docs
		}
		d.Passed = d.Passed || docs[i].Passed
		docs[i] = d
		return docs
	}
	byID[d.ID] = len(docs)
	return append(docs, d)
}

// forAnswer chooses the documents the answer is built from: the k passed
// documents graded most confident (a document the relevance filter passed
// counts as 0.5), first seen first among equals, so that the prompt stays
// the size of one retrieval however many rounds ran.
func forAnswer(docs []RAGDoc, k int) []RAGDoc {
	var passed []RAGDoc
	for _, d := range docs {
		if d.Passed {
			passed = append(passed, d)
		}
	}
	slices.SortStableFunc(passed, func(a, b RAGDoc) int { return cmp.Compare(confidence(b), confidence(a)) })
	return passed[:min(len(passed), k)]
}

// confidence orders passed documents: the grader's confidence, or a
// neutral 0.5 for a document the relevance filter passed.
func confidence(d RAGDoc) float64 {
	if d.Grade == nil {
		return 0.5
	}
	return d.Grade.Confidence
}
