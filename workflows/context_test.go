package workflows_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ctxflow/ctxflow/workflows"
)

// A history over summaryThreshold tokens is summarised even when it holds
// fewer messages than the window's rounds.
func TestSummaryIsTriggeredByTokens(t *testing.T) {
	h := newHarness(t)
	long := strings.Repeat("the quick brown fox jumps over the lazy dog ", 12) // ~110 tokens
	for i := range 4 {
		h.update(time.Duration(i+1)*time.Second, workflows.TurnRequest{TurnID: fmt.Sprintf("t-%d", i), Question: fmt.Sprintf("q%d %s", i, long)})
	}
	in := h.input(workflows.Limits{IdleTTL: time.Hour})
	in.Config = json.RawMessage(`{"summaryThreshold": 300}`)
	h.env.ExecuteWorkflow(workflows.SessionWorkflowName, in)

	if len(h.model.summaries) == 0 {
		t.Fatal("8 messages of ~500 tokens over a 300-token threshold were never summarised")
	}
	if st := h.state(t); st.Summary == nil || st.Summary.Folded == 0 {
		t.Errorf("state summary = %+v", st.Summary)
	}
}

// Compressing an unchanged branch twice reuses the stored summary: one
// model call, and the second step reports a cache hit.
func TestSecondCompressionOfUnchangedBranchHitsTheCache(t *testing.T) {
	h := newHarness(t)
	for i := range 3 {
		h.update(time.Duration(i+1)*time.Second, workflows.TurnRequest{TurnID: fmt.Sprintf("t-%d", i), Question: fmt.Sprintf("q%d", i)})
	}
	for _, at := range []time.Duration{10 * time.Second, 20 * time.Second} {
		h.env.RegisterDelayedCallback(func() { h.env.SignalWorkflow(workflows.SignalCompress, nil) }, at)
	}
	next := h.update(30*time.Second, workflows.TurnRequest{TurnID: "t-3", Question: "after"})
	h.env.ExecuteWorkflow(workflows.SessionWorkflowName, h.input(workflows.Limits{IdleTTL: time.Hour}))

	if len(h.model.summaries) != 1 {
		t.Fatalf("summariser called %d times, want 1", len(h.model.summaries))
	}
	if next.result.Status != workflows.TurnCompleted {
		t.Fatalf("turn after the compressions = %+v", next.result)
	}
	if st := h.state(t); st.Summary == nil || st.Summary.CacheHits != 1 {
		t.Errorf("summary = %+v, want the second compression counted as a cache hit", st.Summary)
	}
}

// Every window option validation accepts runs: the smallest token budget
// with the default and with the largest system prompt.
func TestSmallestTokenBudgetRuns(t *testing.T) {
	for _, prompt := range []string{"", strings.Repeat("be brief. ", 800)} {
		h := newHarness(t)
		in := h.input(workflows.Limits{IdleTTL: time.Hour})
		if prompt != "" {
			raw, _ := json.Marshal(map[string]any{"systemPrompt": prompt})
			in.Config = raw
		}
		first := h.update(time.Second, workflows.TurnRequest{TurnID: "t-1", Question: "What is ctxflow, how does its context engine trim a long conversation, and why?", Config: json.RawMessage(`{"maxTokens": 64}`)})
		second := h.update(2*time.Second, workflows.TurnRequest{TurnID: "t-2", Question: "And then?", Config: json.RawMessage(`{"maxTokens": 64}`)})
		h.env.ExecuteWorkflow(workflows.SessionWorkflowName, in)
		for _, o := range []*outcome{first, second} {
			if o.result.Status != workflows.TurnCompleted {
				t.Fatalf("maxTokens 64 (system prompt %d bytes): %+v", len(prompt), o.result)
			}
		}
		st := h.state(t)
		if st.Health != workflows.HealthOK {
			t.Errorf("health = %s (%s)", st.Health, st.DegradedReason)
		}
		load := second.result.Steps[0].Details
		if got := second.result.SessionInfo.TrimmedCount; fmt.Sprint(got) != fmt.Sprint(load["trimmedCount"]) || got == 0 {
			t.Errorf("sessionInfo.trimmedCount = %d, load step says %v", got, load["trimmedCount"])
		}
	}
}
