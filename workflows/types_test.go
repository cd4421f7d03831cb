package workflows

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestValidateTurn(t *testing.T) {
	cfg := DefaultSessionConfig()
	tests := []struct {
		name string
		req  TurnRequest
		want string // "" = valid
	}{
		{"ok", TurnRequest{TurnID: "t-1", Question: "它多少钱？"}, ""},
		{"ok with options", TurnRequest{TurnID: "t-1", Question: "hi", Config: json.RawMessage(`{"maxRounds": 3, "llmModel": "llama3"}`)}, ""},
		{"null options", TurnRequest{TurnID: "t-1", Question: "hi", Config: json.RawMessage(`null`)}, ""},
		{"invalid utf-8", TurnRequest{TurnID: "t-1", Question: "caf\xc3"}, "not valid UTF-8"},
		{"empty", TurnRequest{TurnID: "t-1"}, "question is empty"},
		{"exactly 32 KiB", TurnRequest{TurnID: "t-1", Question: strings.Repeat("a", DefaultMaxQuestionBytes)}, ""},
		{"over 32 KiB", TurnRequest{TurnID: "t-1", Question: strings.Repeat("a", DefaultMaxQuestionBytes+1)}, "32768-byte limit"},
		{"empty turn id", TurnRequest{Question: "hi"}, "turnId"},
		{"turn id with slash", TurnRequest{TurnID: "a/b", Question: "hi"}, "turnId"},
		{"options not an object", TurnRequest{TurnID: "t-1", Question: "hi", Config: json.RawMessage(`[1]`)}, "cannot unmarshal"},
		{"session-only option", TurnRequest{TurnID: "t-1", Question: "hi", Config: json.RawMessage(`{"maxSteps": 3}`)}, `unknown field "maxSteps"`},
		{"max tokens too small", TurnRequest{TurnID: "t-1", Question: "hi", Config: json.RawMessage(`{"maxTokens": 1}`)}, "maxTokens"},
		{"model with space", TurnRequest{TurnID: "t-1", Question: "hi", Config: json.RawMessage(`{"llmModel": "a b"}`)}, "llmModel"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateTurn(tc.req, cfg, DefaultLimits())
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error = %v, want it to mention %q", err, tc.want)
			}
		})
	}
	// The bound is the service's (CTXFLOW_MAX_QUESTION_BYTES).
	small := Limits{MaxQuestionBytes: 2048}
	if err := ValidateTurn(TurnRequest{TurnID: "t", Question: strings.Repeat("问", 683)}, cfg, small); err == nil || !strings.Contains(err.Error(), "2048-byte limit") {
		t.Errorf("a 2049-byte question under a 2048-byte bound: %v", err)
	}
	if err := ValidateTurn(TurnRequest{TurnID: "t", Question: strings.Repeat("问", 682)}, cfg, small); err != nil {
		t.Errorf("a 2046-byte question under a 2048-byte bound: %v", err)
	}
}

func TestSessionWorkflowIDRoundTrip(t *testing.T) {
	id := SessionWorkflowID("acme", "s-1")
	if id != "session/acme/s-1" {
		t.Fatalf("id = %s", id)
	}
	tenant, sid, ok := ParseSessionWorkflowID(id)
	if !ok || tenant != "acme" || sid != "s-1" {
		t.Fatalf("parse = %q %q %v", tenant, sid, ok)
	}
	for _, bad := range []string{"session/", "session/acme", "other/acme/s", "session//s"} {
		if _, _, ok := ParseSessionWorkflowID(bad); ok {
			t.Errorf("%q parsed", bad)
		}
	}
}
