package tests

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ctxflow/ctxflow/activities/openai"
	"github.com/ctxflow/ctxflow/tests/fakeollama"
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
	// The model classifies each turn's intent first; a random-weight
	// model's label is any of them, and a sure "task" or "clarify" leaves
	// the chat route. chatTurn asks again (the recent intents change the
	// prompt) until a turn is answered by the generate step.
	turns := 0
	chatTurn := func(q string) workflows.TurnResult {
		t.Helper()
		for range 6 {
			res, _, err := s.turn(ctx, "real", fmt.Sprintf("r%d", turns), q)
			turns++
			if err != nil {
				t.Fatalf("turn %d: %v\n%s", turns, err, s.workerLogs())
			}
			if res.Status != workflows.TurnCompleted || res.Answer == "" {
				t.Fatalf("turn %d = %+v", turns, res)
			}
			// The model classified the intent, its answer held to the schema
			// (a random model's label, but one of the labels).
			if it := res.Intent; it == nil || !slices.Contains([]string{"qa", "chitchat", "task", "continue", "clarify"}, it.Label) {
				t.Errorf("turn %d intent = %+v", turns, it)
			}
			if len(res.Steps) > 1 && res.Steps[1].Name == "generate" {
				if res.Engine != "ollama" || res.Model != o.Model {
					t.Fatalf("turn %d = %+v", turns, res)
				}
				return res
			}
			t.Logf("turn %d: the random model's intent %+v left the chat route; asking again", turns, res.Intent)
		}
		t.Fatalf("%q: six turns, none on the chat route", q)
		return workflows.TurnResult{}
	}
	for _, q := range []string{"hello there", "and a follow-up"} {
		if gen := chatTurn(q).Steps[1]; gen.Details["promptTokens"] == float64(0) {
			t.Errorf("%q: generate step = %+v, want the model's prompt tokens", q, gen)
		}
	}
	// A question longer than the server's default context arrives whole:
	// the worker asks for CTXFLOW_OLLAMA_NUM_CTX (capped by the model's).
	long := chatTurn(strings.Repeat("a question longer than the default context ", 30))
	if n := num(long.Steps[1].Details["promptTokens"]); n <= ollamatest.ServerDefaultContext {
		t.Errorf("long question: the model counted %v prompt tokens, cut to the server's default %d", n, ollamatest.ServerDefaultContext)
	}
	var st workflows.SessionState
	if _, err := s.do(ctx, http.MethodGet, "/v1/sessions/real", nil, &st); err != nil {
		t.Fatal(err)
	}
	if st.TokenRatio[o.Model] <= 0 || st.Turns != turns {
		t.Errorf("state: turns %d, token ratio %v", st.Turns, st.TokenRatio)
	}
}

// TestSessionWithRealOpenAICompatible runs sessions through the real
// server's OpenAI-compatible API (/v1), where no request can ask for a
// context: the model is served with one that holds the window
// (a Modelfile's num_ctx here; vLLM's --max-model-len, llama.cpp's -c),
// CTXFLOW_OPENAI_CONTEXT_LENGTH tells ctxflow, a session that cannot fit it
// is refused when it is created, and a long question arrives whole.
func TestSessionWithRealOpenAICompatible(t *testing.T) {
	if ok, why := ollamatest.Wanted(); !ok {
		t.Skip(why)
	}
	o := ollamatest.Start(t)
	model := ollamatest.ModelName + "-long"
	if err := o.CreateModel(model, fmt.Sprintf("PARAMETER num_ctx %d", ollamatest.ContextLength)); err != nil {
		t.Fatal(err)
	}
	// The API process and the worker, as `ctxflow api` and `ctxflow worker`
	// configured alike.
	env := []string{
		"CTXFLOW_MODEL_PROVIDER=openai", "CTXFLOW_OPENAI_BASE_URL=" + o.URL + "/v1", "CTXFLOW_LLM_MODEL=" + model,
		fmt.Sprintf("CTXFLOW_OPENAI_CONTEXT_LENGTH=%d", ollamatest.ContextLength), "LLM_MAX_TOKENS=64",
	}
	models, err := openai.New(openai.Config{BaseURL: o.URL + "/v1", ContextLength: ollamatest.ContextLength})
	if err != nil {
		t.Fatal(err)
	}
	s := startStack(t, stackOptions{extraEnv: env, models: models, limits: workflows.Limits{LLMMaxTokens: 64}})
	s.startWorker()
	ctx := t.Context()
	code, err := s.do(ctx, http.MethodPost, "/v1/sessions", map[string]any{
		"sessionId": "too-wide", "config": map[string]any{"llmModel": model, "maxTokens": ollamatest.ContextLength},
	}, nil)
	if code != http.StatusBadRequest || err == nil || !strings.Contains(err.Error(), "CTXFLOW_OPENAI_CONTEXT_LENGTH") {
		t.Errorf("a window as wide as the context: %d %v, want 400 naming CTXFLOW_OPENAI_CONTEXT_LENGTH", code, err)
	}
	if _, err := s.do(ctx, http.MethodPost, "/v1/sessions", map[string]any{
		"sessionId": "v1", "config": map[string]any{"llmModel": model, "maxTokens": ollamatest.ContextLength - 64},
	}, nil); err != nil {
		t.Fatal(err)
	}
	long, _, err := s.turn(ctx, "v1", "o0", strings.Repeat("a question longer than the default context ", 30))
	if err != nil || long.Status != workflows.TurnCompleted || long.Engine != "openai" || long.Model != model {
		t.Fatalf("long turn: %v %+v\n%s", err, long, s.workerLogs())
	}
	if n := num(long.Steps[1].Details["promptTokens"]); n <= ollamatest.ServerDefaultContext {
		t.Errorf("long question: the server counted %v prompt tokens, cut to its default %d", n, ollamatest.ServerDefaultContext)
	}
}

// TestSessionMovesFromOfflineToOllama is issue 4's provider check: a
// session answered by the offline engine (Ollama unreachable at start-up)
// is answered by Ollama once a worker starts with OLLAMA_HOST set to a
// server that has the model — the same session, over the same knowledge
// base, whose documents the model now grades with structured output.
func TestSessionMovesFromOfflineToOllama(t *testing.T) {
	if ok, why := ollamatest.Wanted(); !ok {
		t.Skip(why)
	}
	o := ollamatest.Start(t)
	s := startStack(t, stackOptions{extraEnv: []string{"OLLAMA_HOST=http://127.0.0.1:1", "CTXFLOW_LLM_MODEL=" + o.Model}})
	s.startWorker()
	ctx := t.Context()
	s.ingestREADME(t)
	if _, err := s.do(ctx, http.MethodPost, "/v1/sessions", map[string]any{
		"sessionId": "switch", "config": map[string]any{"llmModel": o.Model, "maxRewriteAttempts": 1},
	}, nil); err != nil {
		t.Fatal(err)
	}
	first, _, err := s.turn(ctx, "switch", "w0", "What is ctxflow?")
	if err != nil || first.Engine != "offline" || !strings.HasPrefix(first.Answer, "(offline engine)") {
		t.Fatalf("offline turn = %+v, %v\n%s", first, err, s.workerLogs())
	}

	s.killWorker()
	s.env = append(s.env, "OLLAMA_HOST="+o.URL) // the last value wins
	s.startWorker()
	second, _, err := s.turn(ctx, "switch", "w1", "How do I run it?")
	if err != nil {
		t.Fatalf("turn after the switch: %v\n%s", err, s.workerLogs())
	}
	if second.Status != workflows.TurnCompleted || second.Engine != "ollama" || second.Model != o.Model ||
		strings.HasPrefix(second.Answer, "(offline engine)") {
		t.Fatalf("turn after the switch = %+v", second)
	}
	// The qa turn's answer is the session's generate step (the corrective
	// loop chooses the documents).
	i := slices.IndexFunc(second.Steps, func(s workflows.Step) bool { return s.Name == "generate" })
	if i < 0 || second.Steps[i].Details["engine"] != "ollama" || !slices.ContainsFunc(second.Steps, func(s workflows.Step) bool { return s.Name == "corrective_rag" }) {
		t.Fatalf("steps = %+v", second.Steps)
	}
	t.Logf("generate step after the switch: %v", second.Steps[i].Details)
	if second.SessionInfo.Turns != 2 {
		t.Errorf("session info = %+v", second.SessionInfo)
	}
}

// TestWorkerNoticesALateModel: a worker that started while Ollama lacked
// its model answers with the offline engine, asks again every
// CTXFLOW_OLLAMA_PROBE_INTERVAL, and once the model is pulled the same
// session's next answer comes from Ollama, without a restart.
func TestWorkerNoticesALateModel(t *testing.T) {
	fake := fakeollama.New(fakeollama.Options{Models: []string{"llama3:latest"}})
	srv := httptest.NewServer(fake)
	defer srv.Close()
	s := startStack(t, stackOptions{extraEnv: []string{"OLLAMA_HOST=" + srv.URL, "CTXFLOW_OLLAMA_PROBE_INTERVAL=100ms"}})
	s.startWorker()
	ctx := t.Context()
	first, _, err := s.turn(ctx, "late", "l0", "hello there, what is new?")
	if err != nil || first.Engine != "offline" {
		t.Fatalf("before the pull: %+v, %v\n%s", first, err, s.workerLogs())
	}
	resp, err := http.Post(srv.URL+"/api/pull", "application/json", strings.NewReader(`{"model": "`+fakeollama.DefaultModel+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	time.Sleep(200 * time.Millisecond) // past the probe interval
	second, _, err := s.turn(ctx, "late", "l1", "and what else is new?")
	if err != nil || second.Engine != "ollama" || !strings.HasPrefix(second.Answer, "answer ") {
		t.Fatalf("after the pull: %+v, %v\n%s", second, err, s.workerLogs())
	}
}
