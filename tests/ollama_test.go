package tests

import (
	"net/http"
	"testing"

	"github.com/ctxflow/ctxflow/tests/ollamatest"
	"github.com/ctxflow/ctxflow/workflows"
)

// TestSessionTurnWithRealOllama runs a session turn through the workflow
// against a real Ollama server built from source, serving a tiny random-
// weight model: the answer is gibberish, but it is the model's, and its
// token counts calibrate the session's budget.
func TestSessionTurnWithRealOllama(t *testing.T) {
	if ok, why := ollamatest.Wanted(); !ok {
		t.Skip(why)
	}
	o := ollamatest.Start(t)
	s := startStack(t, stackOptions{extraEnv: []string{"OLLAMA_HOST=" + o.URL, "CTXFLOW_LLM_MODEL=" + o.Model}})
	s.startWorker()
	ctx := t.Context()
	if _, err := s.do(ctx, http.MethodPost, "/v1/sessions", map[string]any{
		"sessionId": "real", "config": map[string]any{"llmModel": o.Model},
	}, nil); err != nil {
		t.Fatal(err)
	}
	for i, q := range []string{"hello there", "and a follow-up"} {
		res, _, err := s.turn(ctx, "real", []string{"r0", "r1"}[i], q)
		if err != nil {
			t.Fatalf("turn %d: %v\n%s", i, err, s.workerLogs())
		}
		if res.Status != workflows.TurnCompleted || res.Engine != "ollama" || res.Model != o.Model || res.Answer == "" {
			t.Fatalf("turn %d = %+v", i, res)
		}
		gen := res.Steps[1]
		if gen.Name != "generate" || gen.Details["promptTokens"] == float64(0) {
			t.Errorf("turn %d generate step = %+v, want the model's prompt tokens", i, gen)
		}
	}
	var st workflows.SessionState
	if _, err := s.do(ctx, http.MethodGet, "/v1/sessions/real", nil, &st); err != nil {
		t.Fatal(err)
	}
	if st.TokenRatio[o.Model] <= 0 || st.Turns != 2 {
		t.Errorf("state: turns %d, token ratio %v", st.Turns, st.TokenRatio)
	}
}
