package eval

import (
	"path/filepath"
	"strings"
	"testing"
)

// The answers sample (inline passages, gold answers) measures every figure:
// rewrites, retrieval with each query form, and the offline answers.
func TestEvaluateAnswers(t *testing.T) {
	set, err := Load(t.Context(), filepath.Join("testdata", "answers", "cases.jsonl"), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	var calls int
	m, err := set.Evaluate(t.Context(), func(done, total int) {
		if calls++; done != calls || total != len(set.Cases) {
			t.Errorf("progress %d/%d at call %d", done, total, calls)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	WriteTable(&b, []Metrics{m})
	t.Logf("\n%s", b.String())
	if m.Set != "answers" || m.Counts.Cases != 7 || m.Counts.Retrieval != 7 || m.Counts.Answers != 7 || set.Passages != 8 {
		t.Fatalf("set %q, counts %+v, %d passages", m.Set, m.Counts, set.Passages)
	}
	if m.RecallAt5 == nil || m.MRR == nil || m.AnswerTokenF1 == nil {
		t.Fatalf("missing figures: %+v", m)
	}
	// The rewriter resolves these follow-ups, and the rewrites retrieve as
	// well as the gold ones: the offline answer quotes the gold passage.
	if m.RewriteTokenF1 <= m.CopyTokenF1 || m.RecallAt5.Rewritten < m.RecallAt5.Raw || *m.AnswerTokenF1 < 0.3 {
		t.Errorf("figures %+v, recall %+v, answer F1 %v", m, *m.RecallAt5, *m.AnswerTokenF1)
	}
}

// With a limit only the first cases are measured, over the whole corpus.
func TestLoadLimit(t *testing.T) {
	set, err := Load(t.Context(), filepath.Join("testdata", "answers", "cases.jsonl"), 2)
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	if len(set.Cases) != 2 || set.Passages != 8 || len(set.Gold) != 2 {
		t.Errorf("%d cases, %d passages, %d with gold", len(set.Cases), set.Passages, len(set.Gold))
	}
}

func TestAnswerContent(t *testing.T) {
	got := answerContent("(offline engine) From the knowledge base:\n- The Pixel 8 costs $699. [pixel-price]")
	if strings.Contains(got, "offline") || strings.Contains(got, "pixel-price") || !strings.Contains(got, "costs $699.") {
		t.Errorf("answerContent = %q", got)
	}
}
