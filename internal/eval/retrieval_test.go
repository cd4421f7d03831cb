package eval

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxflow/ctxflow/activities"
)

// evalDir is where the tests find the sets: the samples in testdata (a
// clone needs nothing beside it), or CTXFLOW_EVALDATA (e.g.
// ../shared/evaldata, the whole dev sets).
func evalDir() string {
	if d := os.Getenv("CTXFLOW_EVALDATA"); d != "" {
		return d
	}
	return "testdata"
}

// loadMTRAG loads and indexes mtrag for one test.
func loadMTRAG(t *testing.T) *Set {
	t.Helper()
	set, err := Load(t.Context(), filepath.Join(evalDir(), "mtrag", "cases.jsonl"), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = set.Close() })
	return set
}

func TestRetrievalRecallOnMTRAG(t *testing.T) {
	set := loadMTRAG(t)
	rep, err := set.Retrieval(t.Context(), 5)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	rep.Write(&b)
	t.Logf("\n%s", b.String())
	if rep.Cases < 10 || rep.Passages < 50 {
		t.Fatalf("cases %d, passages %d", rep.Cases, rep.Passages)
	}
	for _, row := range rep.Rows {
		if row.Recall <= 0 || row.Recall > 1 {
			t.Errorf("%s/%s recall %v out of (0, 1]", row.Mode, row.Query, row.Recall)
		}
	}
	// The gold rewrite stands alone, so it retrieves at least as well as
	// the question as asked; hybrid is at least as good as its worse half.
	hy := activities.SearchHybrid
	if rep.Recall(hy, "gold") < rep.Recall(hy, "asked") {
		t.Errorf("hybrid: gold rewrite %.3f below the question as asked %.3f", rep.Recall(hy, "gold"), rep.Recall(hy, "asked"))
	}
	if worse := min(rep.Recall(activities.SearchDense, "asked"), rep.Recall(activities.SearchKeyword, "asked")); rep.Recall(hy, "asked") < worse {
		t.Errorf("hybrid %.3f below both dense and keyword (%.3f)", rep.Recall(hy, "asked"), worse)
	}
}

func TestGradingOnMTRAG(t *testing.T) {
	rep, err := loadMTRAG(t).Grading(t.Context(), 5)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	rep.Write(&b)
	t.Logf("\n%s", b.String())
	if rep.Cases < 10 || rep.Pairs < 5*rep.Cases/2 || rep.Grader.TP+rep.Grader.FN == 0 {
		t.Fatalf("report %+v", rep)
	}
	// A judge worth having keeps gold passages more often than chance.
	base := ratio(rep.Grader.TP+rep.Grader.FN, rep.Pairs)
	for name, v := range map[string]Verdicts{"grader": rep.Grader, "filter": rep.Filter} {
		if v.Precision() <= base || v.Recall() == 0 {
			t.Errorf("%s: precision %.3f (base rate %.3f), recall %.3f", name, v.Precision(), base, v.Recall())
		}
	}
}
