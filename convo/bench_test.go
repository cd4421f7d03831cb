package convo

import (
	"encoding/json"
	"fmt"
	"testing"
)

// benchTree builds a branch of n messages with cached token counts: a system
// prompt, then rounds of user → assistant, every third round with a tool
// call and its result.
func benchTree(tb testing.TB, n int) (*Tree, string) {
	tb.Helper()
	tr := NewTree()
	add := func(m Message) {
		if tr.Len() > 0 {
			m.ParentID = tr.nodes[tr.Len()-1].msg.ID
		}
		m.ID = fmt.Sprintf("m%d", tr.Len())
		m.Tokens = 40 + tr.Len()%50
		if err := tr.Append(m); err != nil {
			tb.Fatal(err)
		}
	}
	add(Message{Role: RoleSystem, Content: "You are a helpful assistant."})
	for round := 0; tr.Len() < n; round++ {
		add(Message{Role: RoleUser, Content: "What is the status of order 4521?"})
		if round%3 == 0 && tr.Len()+3 <= n {
			call := fmt.Sprintf("k%d", round)
			add(Message{Role: RoleToolCall, ToolCall: &ToolCall{ID: call, Name: "orders", Args: json.RawMessage(`{"id":4521}`)}})
			add(Message{Role: RoleToolResult, ToolCallID: call, Content: `{"status":"shipped"}`})
		}
		if tr.Len() < n {
			add(Message{Role: RoleAssistant, Content: "It shipped yesterday."})
		}
	}
	return tr, tr.nodes[tr.Len()-1].msg.ID
}

var benchSizes = []struct {
	name string
	n    int
}{{"100", 100}, {"10k", 10_000}, {"100k", 100_000}}

// BenchmarkWindow is context assembly with cached token counts on branches
// of 100, 10k and 100k messages (default config: hybrid, 10 rounds, 4000
// tokens). It should not grow with the branch.
func BenchmarkWindow(b *testing.B) {
	for _, size := range benchSizes {
		tr, leaf := benchTree(b, size.n)
		cfg := DefaultWindowConfig()
		b.Run(size.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := tr.Window(leaf, cfg); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAssemble is the full model view: window, running summary, and
// conversion to model messages.
func BenchmarkAssemble(b *testing.B) {
	for _, size := range benchSizes {
		tr, leaf := benchTree(b, size.n)
		w, c := DefaultWindowConfig(), DefaultSummaryConfig()
		p, err := tr.PlanSummary(leaf, w, c, SummaryState{})
		if err != nil {
			b.Fatal(err)
		}
		s := NewSummaryState(wordTok{}, p, "The user tracks order 4521, which shipped.", c)
		b.Run(size.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				ctx, err := tr.Assemble(leaf, w, s)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := ctx.ModelMessages(View{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkPlanSummary plans the first fold of a whole branch (the worst
// case): O(window + one fold step of MaxFoldTokens), not O(branch).
func BenchmarkPlanSummary(b *testing.B) {
	for _, size := range benchSizes {
		tr, leaf := benchTree(b, size.n)
		w, c := DefaultWindowConfig(), DefaultSummaryConfig()
		b.Run(size.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := tr.PlanSummary(leaf, w, c, SummaryState{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkTrimSlice is Trim over a materialised branch, which validates the
// whole branch: O(n), for comparison with BenchmarkWindow.
func BenchmarkTrimSlice(b *testing.B) {
	for _, size := range benchSizes {
		tr, leaf := benchTree(b, size.n)
		branch, _ := tr.Branch(leaf)
		cfg := DefaultWindowConfig()
		b.Run(size.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := Trim(branch, cfg); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAppend is the per-message cost of growing a tree.
func BenchmarkAppend(b *testing.B) {
	for b.Loop() {
		benchTree(b, 1000)
	}
}
