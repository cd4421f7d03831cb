package workflows

import (
	"fmt"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/ctxflow/ctxflow/activities"
)

// The pass rate is the share of documents that passed, and a round asks
// for a rewrite exactly when it is below the threshold (so a threshold of 0
// never does).
func TestGradeRoundProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		total := rapid.IntRange(0, 20).Draw(t, "total")
		passed := rapid.IntRange(0, total).Draw(t, "passed")
		threshold := rapid.Float64Range(0, 1).Draw(t, "threshold")
		g := gradeRound("q", passed, total, threshold)
		if g.PassRate < 0 || g.PassRate > 1 || (total > 0 && g.PassRate != float64(passed)/float64(total)) {
			t.Fatalf("pass rate %v for %d of %d", g.PassRate, passed, total)
		}
		if g.ShouldRewrite != (g.PassRate < threshold) {
			t.Fatalf("should rewrite %v at rate %v, threshold %v", g.ShouldRewrite, g.PassRate, threshold)
		}
		if threshold == 0 && g.ShouldRewrite {
			t.Fatal("a zero threshold asked for a rewrite")
		}
	})
}

// Simulated over any grading outcomes, the loop rewrites at most
// maxRewriteAttempts times, never searches a formulation twice, and stops
// as soon as a round passes.
func TestLoopDecisionsProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		maxRewrites := rapid.IntRange(0, 5).Draw(t, "maxRewrites")
		threshold := rapid.Float64Range(0, 1).Draw(t, "threshold")
		// The rewriter proposes formulations from a small vocabulary, so
		// that it often repeats one.
		proposals := rapid.SliceOfN(rapid.SampledFrom([]string{"a", "A", "b", "a  b", "c", "q"}), 10, 10).Draw(t, "proposals")
		tried := triedQueries{}
		tried.add("q")
		searched := []string{"q"}
		rewrites := 0
		for attempt := 0; ; attempt++ {
			total := rapid.IntRange(0, 6).Draw(t, "total")
			g := gradeRound("q", rapid.IntRange(0, total).Draw(t, "passed"), total, threshold)
			rewrite, why := afterGrade(g, attempt, maxRewrites, threshold)
			if why == "" {
				t.Fatal("a decision without a reason")
			}
			if !g.ShouldRewrite && rewrite {
				t.Fatalf("rewrote after a round that passed: %s", why)
			}
			if !rewrite {
				break
			}
			next := proposals[attempt%len(proposals)]
			if tried.has(next) {
				break // the loop generates instead of searching again
			}
			tried.add(next)
			searched = append(searched, normQuery(next))
			rewrites++
		}
		if rewrites > maxRewrites {
			t.Fatalf("%d rewrites, limit %d", rewrites, maxRewrites)
		}
		seen := map[string]bool{}
		for _, q := range searched {
			if seen[q] {
				t.Fatalf("searched %q twice: %v", q, searched)
			}
			seen[q] = true
		}
	})
}

// A document that passed once stays passed whatever later rounds say, and
// every document is recorded once; with keepPassing (runs since
// "filter-binds"), with the verdicts of the last round it passed in.
func TestMergeDocKeepsPassed(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		keepPassing := rapid.Bool().Draw(t, "keepPassing")
		var docs []RAGDoc
		byID := map[string]int{}
		everPassed := map[string]bool{}
		lastPassedIn := map[string]int{}
		for round, id := range rapid.SliceOfN(rapid.SampledFrom([]string{"d1", "d2", "d3", "d4"}), 0, 20).Draw(t, "grades") {
			passed := rapid.Bool().Draw(t, "passed")
			everPassed[id] = everPassed[id] || passed
			if passed {
				lastPassedIn[id] = round
			}
			docs = mergeDoc(docs, byID, RAGDoc{Doc: activities.Doc{ID: id}, Passed: passed, Attempt: round, FilterKept: passed}, keepPassing)
		}
		if len(docs) != len(everPassed) {
			t.Fatalf("%d documents recorded for %d ids", len(docs), len(everPassed))
		}
		for _, d := range docs {
			if d.Passed != everPassed[d.ID] {
				t.Fatalf("%s passed %v, ever passed %v", d.ID, d.Passed, everPassed[d.ID])
			}
			if keepPassing && d.Passed && (d.Attempt != lastPassedIn[d.ID] || !d.FilterKept) {
				t.Fatalf("%s recorded with round %d's verdicts (kept %v), passed last in round %d", d.ID, d.Attempt, d.FilterKept, lastPassedIn[d.ID])
			}
		}
	})
}

// The answer is built from at most k documents, all passed, the most
// confident first; no passed document left out is more confident than one
// kept.
func TestForAnswerProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(0, 12).Draw(t, "n")
		docs := make([]RAGDoc, n)
		for i := range docs {
			docs[i] = RAGDoc{Doc: activities.Doc{ID: fmt.Sprint("d", i)}, Passed: rapid.Bool().Draw(t, "passed")}
			if rapid.Bool().Draw(t, "graded") {
				docs[i].Grade = &activities.Grade{Confidence: rapid.Float64Range(0, 1).Draw(t, "confidence")}
			}
		}
		k := rapid.IntRange(1, 6).Draw(t, "k")
		got := forAnswer(docs, k)
		if len(got) > k {
			t.Fatalf("%d documents for k=%d", len(got), k)
		}
		for i, d := range got {
			if !d.Passed {
				t.Fatalf("%s did not pass", d.ID)
			}
			if i > 0 && confidence(got[i-1]) < confidence(d) {
				t.Fatalf("not by confidence: %v", got)
			}
		}
		for _, d := range docs {
			if d.Passed && !slices.ContainsFunc(got, func(g RAGDoc) bool { return g.ID == d.ID }) && len(got) > 0 && confidence(d) > confidence(got[len(got)-1]) {
				t.Fatalf("%s (%.2f) left out for a less confident document", d.ID, confidence(d))
			}
		}
	})
}
