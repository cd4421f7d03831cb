package eval

import (
	"math"
	"testing"

	"github.com/ctxflow/ctxflow/internal/eval/evaldata"
)

func TestRecallAtAndReciprocalRank(t *testing.T) {
	for _, tc := range []struct {
		name         string
		ranked, gold []string
		recall, rr   float64
	}{
		{"first", []string{"a", "b", "c"}, []string{"a"}, 1, 1},
		{"third", []string{"x", "y", "a"}, []string{"a"}, 1, 1.0 / 3},
		{"half found", []string{"x", "a", "y"}, []string{"a", "b"}, 0.5, 0.5},
		{"below k", []string{"1", "2", "3", "4", "5", "a"}, []string{"a"}, 0, 1.0 / 6},
		{"none", []string{"x", "y"}, []string{"a"}, 0, 0},
		{"no ranking", nil, []string{"a"}, 0, 0},
		{"no gold", []string{"a"}, nil, 0, 0},
	} {
		if got := RecallAt(tc.ranked, tc.gold, 5); got != tc.recall {
			t.Errorf("%s: RecallAt = %v, want %v", tc.name, got, tc.recall)
		}
		if got := ReciprocalRank(tc.ranked, tc.gold); math.Abs(got-tc.rr) > 1e-12 {
			t.Errorf("%s: ReciprocalRank = %v, want %v", tc.name, got, tc.rr)
		}
	}
}

// The two decision shares count only their own cases: unchanged among the
// cases with history that need no rewrite, changed among those that do.
func TestDecisionShares(t *testing.T) {
	history := []evaldata.Turn{{Role: "user", Content: "Tell me about the Pixel 8"}}
	for _, tc := range []struct {
		name       string
		c          evaldata.Case
		rewrite    string
		exact      bool
		selfCont   *bool // nil: not counted; else left unchanged
		needChange *bool // nil: not counted; else changed
	}{
		{"self-contained, kept", evaldata.Case{History: history, Question: "What is a phone?", GoldRewrite: "What is a phone"},
			"What is a phone?", true, ptr(true), nil},
		{"self-contained, changed", evaldata.Case{History: history, Question: "What is a phone?", GoldRewrite: "What is a phone?"},
			"What is a phone (Pixel 8)?", false, ptr(false), nil},
		{"no history: not a decision", evaldata.Case{Question: "What is a phone?", GoldRewrite: "What is a phone?"},
			"What is a phone?", true, nil, nil},
		{"needed, changed", evaldata.Case{History: history, Question: "How much is it?", GoldRewrite: "How much is the Pixel 8?"},
			"How much is the Pixel 8?", true, nil, ptr(true)},
		{"needed, kept", evaldata.Case{History: history, Question: "How much is it?", GoldRewrite: "How much is the Pixel 8?"},
			"How much is it ?", false, nil, ptr(false)},
		{"needed without history", evaldata.Case{Question: "他写过哪些小说？", GoldRewrite: "鲁迅写过哪些小说？"},
			"他写过哪些小说？", false, nil, ptr(false)},
	} {
		var tl tally
		tl.addRewrite(tc.c, tc.rewrite)
		m := tl.metrics("s", "f")
		if m.RewriteExactMatch != b01(tc.exact) {
			t.Errorf("%s: exact match %v, want %v", tc.name, m.RewriteExactMatch, tc.exact)
		}
		checkShare(t, tc.name+": unchanged when self-contained", m.UnchangedWhenSelfContained, tc.selfCont)
		checkShare(t, tc.name+": changed when needed", m.ChangedWhenNeeded, tc.needChange)
	}
}

func ptr(b bool) *bool { return &b }

func b01(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// checkShare checks a one-case share: absent, or 1 or 0.
func checkShare(t *testing.T, name string, got *float64, want *bool) {
	t.Helper()
	switch {
	case want == nil && got != nil:
		t.Errorf("%s = %v, want it absent", name, *got)
	case want != nil && (got == nil || *got != b01(*want)):
		t.Errorf("%s = %v, want %v", name, got, *want)
	}
}

// Over several cases the shares are means, and the F1s average per case.
func TestTallyMeans(t *testing.T) {
	h := []evaldata.Turn{{Role: "user", Content: "x"}}
	var tl tally
	tl.addRewrite(evaldata.Case{History: h, Question: "a b", GoldRewrite: "a b"}, "a b")
	tl.addRewrite(evaldata.Case{History: h, Question: "a b", GoldRewrite: "a b"}, "a b c d")
	tl.addRewrite(evaldata.Case{History: h, Question: "a", GoldRewrite: "a c"}, "a c")
	m := tl.metrics("s", "f")
	if *m.UnchangedWhenSelfContained != 0.5 || *m.ChangedWhenNeeded != 1 || m.Counts.SelfContained != 2 || m.Counts.NeedRewrite != 1 {
		t.Errorf("shares %v, %v, counts %+v", *m.UnchangedWhenSelfContained, *m.ChangedWhenNeeded, m.Counts)
	}
	// rewrite F1: 1, 2·(2/4)·1/(2/4+1) = 2/3, 1; copy F1: 1, 1, 2·1·(1/2)/(1+1/2) = 2/3
	if want := (1 + 2.0/3 + 1) / 3; math.Abs(m.RewriteTokenF1-want) > 1e-12 || math.Abs(m.CopyTokenF1-want) > 1e-12 {
		t.Errorf("rewrite F1 %v, copy F1 %v, want %v each", m.RewriteTokenF1, m.CopyTokenF1, want)
	}
	if m.RecallAt5 != nil || m.MRR != nil || m.AnswerTokenF1 != nil {
		t.Errorf("figures nothing measured: %+v", m)
	}
}
