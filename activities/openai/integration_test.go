package openai_test

// Integration tests against a real OpenAI-compatible server: Ollama's /v1
// API, served by the v0.17.4 binary that scripts/ollama-test-server.sh
// builds, with the tiny random-weight llama model the test suite writes
// (tests/ollamatest). Its /v1 routes are Ollama's own translation of the
// OpenAI API to its native one, so the native adapter (activities/ollama)
// answering the same requests is the reference for token counts and
// vectors.
//
// They are gated as activities/ollama's integration tests are: they run
// when the script's cached binary exists, or when CTXFLOW_OLLAMA_TESTS=1
// (as in `make test`; then a binary that cannot be built fails them);
// otherwise they skip and say how to enable them.

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/activities/ollama"
	"github.com/ctxflow/ctxflow/activities/openai"
	"github.com/ctxflow/ctxflow/convo"
	"github.com/ctxflow/ctxflow/tests/ollamatest"
)

// realServer starts a server for t, or skips t when the integration tests
// are not wanted. It returns the server, this adapter on its /v1 API and
// the native adapter on its own API.
func realServer(t *testing.T) (*ollamatest.Server, *openai.Client, *ollama.Client) {
	t.Helper()
	if ok, why := ollamatest.Wanted(); !ok {
		t.Skip("real Ollama server: " + why)
	}
	srv := ollamatest.Start(t)
	c, err := openai.New(openai.Config{BaseURL: srv.URL + "/v1", APIKey: "ignored-by-ollama"})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	native, err := ollama.New(ollama.Config{Host: srv.URL, Timeout: 2 * time.Minute})
	if err != nil {
		t.Fatalf("ollama.New: %v", err)
	}
	return srv, c, native
}

func userTurn(text string) []convo.ModelMessage {
	return []convo.ModelMessage{
		{Role: "system", Content: "You are a test model."},
		{Role: "user", Content: text},
	}
}

// wantModelError returns err as a *activities.ModelError or fails t.
func wantModelError(t *testing.T, err error) *activities.ModelError {
	t.Helper()
	if err == nil {
		t.Fatal("no error")
	}
	me, ok := errors.AsType[*activities.ModelError](err)
	if !ok {
		t.Fatalf("error %T %v is not a *activities.ModelError", err, err)
	}
	return me
}

func TestRealOpenAICompatible(t *testing.T) {
	srv, c, native := realServer(t)
	ctx := t.Context()
	model := srv.Model

	t.Run("Chat", func(t *testing.T) {
		req := activities.ChatRequest{
			Model:    model,
			Messages: userTurn("Say hello."),
			Options:  activities.ModelOptions{NumPredict: 8, Seed: ptr(1), Temperature: ptr(0.8)},
		}
		start := time.Now()
		resp, err := c.Chat(ctx, req, nil)
		if err != nil {
			t.Fatalf("Chat: %v", err)
		}
		t.Logf("%s: %q, %d+%d tokens, done %q", time.Since(start).Round(time.Millisecond), resp.Content,
			resp.PromptTokens, resp.CompletionTokens, resp.DoneReason)
		if resp.PromptTokens <= 0 {
			t.Errorf("PromptTokens = %d, want > 0", resp.PromptTokens)
		}
		if resp.CompletionTokens < 1 || resp.CompletionTokens > 8 {
			t.Errorf("CompletionTokens = %d, want 1..8 (max_tokens 8)", resp.CompletionTokens)
		}
		if resp.CompletionTokens == 8 && resp.DoneReason != "length" {
			t.Errorf("DoneReason = %q after max_tokens tokens, want length", resp.DoneReason)
		}
		// The same request through the native API: the same prompt, counted
		// by the same server, so the same count the workflow calibrates
		// with. (Not the same answer: /v1 samples with top_p 1, the native
		// API with the model's default.)
		ref, err := native.Chat(ctx, req, nil)
		if err != nil {
			t.Fatalf("native Chat: %v", err)
		}
		if resp.PromptTokens != ref.PromptTokens || resp.CompletionTokens != ref.CompletionTokens {
			t.Errorf("/v1: %d+%d tokens; native API: %d+%d tokens", resp.PromptTokens, resp.CompletionTokens, ref.PromptTokens, ref.CompletionTokens)
		}
	})

	t.Run("StreamWithUsage", func(t *testing.T) {
		var deltas []string
		req := activities.ChatRequest{
			Model:    model,
			Messages: userTurn("Count to three."),
			Options:  activities.ModelOptions{NumPredict: 8, Seed: ptr(7)},
		}
		resp, err := c.Chat(ctx, req, func(d string) { deltas = append(deltas, d) })
		if err != nil {
			t.Fatalf("Chat: %v", err)
		}
		t.Logf("%d deltas %q, %d+%d tokens, done %q", len(deltas), deltas, resp.PromptTokens, resp.CompletionTokens, resp.DoneReason)
		if got := strings.Join(deltas, ""); got != resp.Content {
			t.Errorf("deltas join to %q, Content is %q", got, resp.Content)
		}
		if resp.Content != "" && len(deltas) == 0 {
			t.Error("a non-empty answer came without deltas")
		}
		ref, err := native.Chat(ctx, req, func(string) {})
		if err != nil {
			t.Fatalf("native Chat: %v", err)
		}
		if resp.PromptTokens <= 0 || resp.PromptTokens != ref.PromptTokens || resp.CompletionTokens != ref.CompletionTokens {
			t.Errorf("usage %d+%d, native API %d+%d: want the server's counts (stream_options.include_usage)",
				resp.PromptTokens, resp.CompletionTokens, ref.PromptTokens, ref.CompletionTokens)
		}
	})

	t.Run("StructuredOutput", func(t *testing.T) {
		// response_format json_schema becomes Ollama's format, whose
		// grammar makes even random weights follow the schema.
		schema := `{"type":"object","properties":{
			"mood":{"type":"string","enum":["happy","sad","calm"]},
			"ok":{"type":"boolean"},
			"level":{"type":"integer","enum":[1,2,3]}},
			"required":["mood","ok","level"]}`
		for seed := range 3 {
			resp, err := c.Chat(ctx, activities.ChatRequest{
				Model:    model,
				Messages: userTurn("Describe your mood as JSON."),
				Format:   []byte(schema),
				Options:  activities.ModelOptions{NumPredict: 1024, Seed: ptr(seed)},
			}, nil)
			if err != nil {
				t.Fatalf("Chat: %v", err)
			}
			var got struct {
				Mood  *string `json:"mood"`
				OK    *bool   `json:"ok"`
				Level *int    `json:"level"`
			}
			dec := json.NewDecoder(strings.NewReader(resp.Content))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&got); err != nil {
				t.Fatalf("seed %d: answer %q (done %q) is not the schema's JSON: %v", seed, resp.Content, resp.DoneReason, err)
			}
			if got.Mood == nil || got.OK == nil || got.Level == nil {
				t.Fatalf("seed %d: answer %q lacks a required field", seed, resp.Content)
			}
			if !strings.Contains("happy sad calm", *got.Mood) || *got.Level < 1 || *got.Level > 3 {
				t.Errorf("seed %d: answer %q breaks the schema's enums", seed, resp.Content)
			}
			t.Logf("seed %d: %q (%d tokens, done %q)", seed, resp.Content, resp.CompletionTokens, resp.DoneReason)
		}
	})

	t.Run("JSONMode", func(t *testing.T) {
		// response_format json_object: the server takes it (random
		// weights may not close the object within the cap).
		resp, err := c.Chat(ctx, activities.ChatRequest{
			Model: model, Messages: userTurn("Answer in JSON."), Format: []byte("json"),
			Options: activities.ModelOptions{NumPredict: 16, Seed: ptr(2)},
		}, nil)
		if err != nil {
			t.Fatalf("Chat: %v", err)
		}
		if s := strings.TrimSpace(resp.Content); s != "" && !strings.HasPrefix(s, "{") && !strings.HasPrefix(s, "[") {
			t.Errorf("JSON mode answered %q", resp.Content)
		}
		t.Logf("%q (done %q)", resp.Content, resp.DoneReason)
	})

	t.Run("Embed", func(t *testing.T) {
		texts := []string{"hello", "world", "hello"}
		vs, err := c.Embed(ctx, model, texts)
		if err != nil {
			t.Fatalf("Embed: %v", err)
		}
		if len(vs) != len(texts) {
			t.Fatalf("%d vectors for %d texts", len(vs), len(texts))
		}
		ref, err := native.Embed(ctx, model, texts)
		if err != nil {
			t.Fatalf("native Embed: %v", err)
		}
		for i, v := range vs {
			if len(v) != ollamatest.EmbeddingLength {
				t.Fatalf("vector %d has dimension %d, want %d", i, len(v), ollamatest.EmbeddingLength)
			}
			for j, x := range v {
				if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
					t.Fatalf("vector %d holds %v", i, x)
				}
				if math.Abs(float64(x-ref[i][j])) > 1e-6 {
					t.Fatalf("vector %d [%d] = %v, native API %v", i, j, x, ref[i][j])
				}
			}
		}
		if fmt.Sprint(vs[0]) == fmt.Sprint(vs[1]) {
			t.Error("different texts gave the same vector")
		}
		if n, err := c.Dimension(ctx, model); err != nil || n != ollamatest.EmbeddingLength {
			t.Errorf("Dimension = %d, %v; want %d", n, err, ollamatest.EmbeddingLength)
		}
	})

	t.Run("MissingModel", func(t *testing.T) {
		for _, stream := range []bool{false, true} {
			var onDelta func(string)
			if stream {
				onDelta = func(string) {}
			}
			_, err := c.Chat(ctx, activities.ChatRequest{Model: "no-such-model", Messages: userTurn("hi")}, onDelta)
			me := wantModelError(t, err)
			if me.Retryable || me.StatusCode != http.StatusNotFound || !strings.Contains(me.Message, "model 'no-such-model' not found") {
				t.Errorf("stream=%v: got %+v, want a non-retryable HTTP 404 carrying the server's message", stream, me)
			}
			if !activities.IsPermanent(err) {
				t.Errorf("stream=%v: IsPermanent = false", stream)
			}
			t.Logf("stream=%v: %v", stream, err)
		}
		_, err := c.Embed(ctx, "no-such-model", []string{"x"})
		if me := wantModelError(t, err); me.Retryable || me.StatusCode != http.StatusNotFound {
			t.Errorf("Embed: got %+v, want a non-retryable HTTP 404", me)
		}
	})

	t.Run("ToolsUnsupported", func(t *testing.T) {
		// The tiny model's template has no tools section: the server
		// refuses, permanently, in the words the planner looks for to fall
		// back to JSON mode.
		_, err := c.Chat(ctx, activities.ChatRequest{
			Model:    model,
			Messages: userTurn("What time is it?"),
			Tools:    []activities.ToolSpec{{Name: "clock", Parameters: json.RawMessage(`{"type":"object","properties":{}}`)}},
			Options:  activities.ModelOptions{NumPredict: 8},
		}, nil)
		me := wantModelError(t, err)
		if me.Retryable || me.StatusCode != http.StatusBadRequest || !strings.Contains(me.Message, "does not support tools") {
			t.Errorf("got %+v, want a non-retryable HTTP 400 \"does not support tools\"", me)
		}
	})
}

// TestRealOpenAIKilledMidStream kills the server (and its model runner)
// while an answer streams: the interrupted call is a retryable model error,
// and so is the next call to the dead server.
func TestRealOpenAIKilledMidStream(t *testing.T) {
	srv, c, _ := realServer(t)
	ctx := t.Context()

	var deltas int
	start := time.Now()
	_, err := c.Chat(ctx, activities.ChatRequest{
		Model:    srv.Model,
		Messages: userTurn("Tell me a long story."),
		// max_tokens the model's whole context (this API takes no num_ctx:
		// the server's default applies, and generation goes on past it):
		// the kill on the first delta comes long before the end.
		Options: activities.ModelOptions{NumPredict: ollamatest.ContextLength, Seed: ptr(3)},
	}, func(string) {
		deltas++
		if deltas == 1 {
			srv.Kill()
		}
	})
	t.Logf("after %d deltas and %s: %v", deltas, time.Since(start).Round(time.Millisecond), err)
	if deltas == 0 || err == nil {
		t.Fatalf("the answer ended (%d deltas, err %v) before the server was killed", deltas, err)
	}
	me := wantModelError(t, err)
	if !me.Retryable || me.StatusCode != 0 {
		t.Errorf("got %+v, want a retryable error without an HTTP status", me)
	}
	_, err = c.Chat(ctx, activities.ChatRequest{Model: srv.Model, Messages: userTurn("hi")}, nil)
	if me := wantModelError(t, err); !me.Retryable {
		t.Errorf("Chat to the dead server: got %+v, want retryable", me)
	}
	_, err = c.Embed(ctx, srv.Model, []string{"x"})
	if me := wantModelError(t, err); !me.Retryable {
		t.Errorf("Embed on the dead server: got %+v, want retryable", me)
	}
}

// TestRealOpenAILongPrompt: this API cannot ask for a context (no num_ctx),
// so a prompt longer than the server's default arrives whole only when the
// server serves the model with a context that holds it — here a Modelfile's
// num_ctx, as vLLM's --max-model-len or llama.cpp's -c would — and is cut
// to the default otherwise. ContextLength is the configured context (the
// session check's), since Ollama's /v1/models does not say.
func TestRealOpenAILongPrompt(t *testing.T) {
	srv, c, _ := realServer(t)
	ctx := t.Context()
	longModel := ollamatest.ModelName + "-long"
	if err := srv.CreateModel(longModel, fmt.Sprintf("PARAMETER num_ctx %d", ollamatest.ContextLength)); err != nil {
		t.Fatal(err)
	}
	long := userTurn(strings.Repeat("a long prompt that must arrive whole ", 45)) // ~1,700 of the tiny model's tokens
	prompt := func(model string) int {
		t.Helper()
		resp, err := c.Chat(ctx, activities.ChatRequest{Model: model, Messages: long, Options: activities.ModelOptions{NumPredict: 1}}, func(string) {})
		if err != nil {
			t.Fatal(err)
		}
		return resp.PromptTokens
	}
	whole, cut := prompt(longModel), prompt(srv.Model)
	t.Logf("usage.prompt_tokens through /v1: %d served with num_ctx %d, %d with the server's default %d", whole, ollamatest.ContextLength, cut, ollamatest.ServerDefaultContext)
	if whole <= ollamatest.ServerDefaultContext || whole >= ollamatest.ContextLength {
		t.Errorf("served with num_ctx %d the prompt counted %d tokens, want it whole (over the default %d)", ollamatest.ContextLength, whole, ollamatest.ServerDefaultContext)
	}
	if cut > ollamatest.ServerDefaultContext {
		t.Errorf("with the server's default the prompt counted %d tokens, over the default context %d: the test proves nothing", cut, ollamatest.ServerDefaultContext)
	}

	if n, err := c.ContextLength(ctx, longModel); err != nil || n != 0 {
		t.Errorf("ContextLength from Ollama's /v1/models = %d, %v; want 0 (it does not say)", n, err)
	}
	sized, err := openai.New(openai.Config{BaseURL: srv.URL + "/v1", ContextLength: ollamatest.ContextLength})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := sized.ContextLength(ctx, longModel); err != nil || n != ollamatest.ContextLength {
		t.Errorf("configured ContextLength = %d, %v; want %d", n, err, ollamatest.ContextLength)
	}
}
