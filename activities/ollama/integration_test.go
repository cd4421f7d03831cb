package ollama_test

// Integration tests against a real Ollama server (docs/architecture.md §11): the
// v0.17.4 binary that scripts/ollama-test-server.sh builds, serving a tiny
// random-weight llama model written by the test suite (tests/ollamatest).
//
// They run when the script's cached binary exists, or when
// CTXFLOW_OLLAMA_TESTS=1 (then a binary that cannot be built fails them);
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
	"github.com/ctxflow/ctxflow/convo"
	"github.com/ctxflow/ctxflow/tests/ollamatest"
)

// realServer starts a server for t, or skips t when the integration tests are
// not wanted.
func realServer(t *testing.T) (*ollamatest.Server, *ollama.Client) {
	t.Helper()
	if ok, why := ollamatest.Wanted(); !ok {
		t.Skip("real Ollama server: " + why)
	}
	srv := ollamatest.Start(t)
	c, err := ollama.New(ollama.Config{Host: srv.URL, Timeout: 2 * time.Minute})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return srv, c
}

func ptr[T any](v T) *T { return &v }

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

func TestRealOllama(t *testing.T) {
	srv, c := realServer(t)
	ctx := t.Context()
	model := srv.Model

	t.Run("Ping", func(t *testing.T) {
		if err := c.Ping(ctx); err != nil {
			t.Fatalf("Ping: %v", err)
		}
	})

	t.Run("HasModel", func(t *testing.T) {
		for name, want := range map[string]bool{model: true, model + ":latest": true, "no-such-model": false} {
			got, err := c.HasModel(ctx, name)
			if err != nil || got != want {
				t.Errorf("HasModel(%q) = %v, %v; want %v, nil", name, got, err, want)
			}
		}
	})

	t.Run("Chat", func(t *testing.T) {
		start := time.Now()
		resp, err := c.Chat(ctx, activities.ChatRequest{
			Model:    model,
			Messages: userTurn("Say hello."),
			Options:  activities.ModelOptions{NumPredict: 8, Seed: ptr(1), Temperature: ptr(0.8)},
		}, nil)
		if err != nil {
			t.Fatalf("Chat: %v", err)
		}
		t.Logf("%s: %q, %d+%d tokens, done %q", time.Since(start).Round(time.Millisecond), resp.Content,
			resp.PromptTokens, resp.CompletionTokens, resp.DoneReason)
		if resp.Model != model { // the server echoes the name asked for
			t.Errorf("Model = %q, want %q", resp.Model, model)
		}
		if resp.PromptTokens <= 0 {
			t.Errorf("PromptTokens = %d, want > 0", resp.PromptTokens)
		}
		if resp.CompletionTokens < 1 || resp.CompletionTokens > 8 {
			t.Errorf("CompletionTokens = %d, want 1..8 (num_predict 8)", resp.CompletionTokens)
		}
		if resp.CompletionTokens == 8 && resp.DoneReason != "length" {
			t.Errorf("DoneReason = %q after num_predict tokens, want length", resp.DoneReason)
		}
	})

	t.Run("SeedIsReproducible", func(t *testing.T) {
		req := activities.ChatRequest{
			Model:    model,
			Messages: userTurn("Pick a word."),
			Options:  activities.ModelOptions{NumPredict: 8, Seed: ptr(42), Temperature: ptr(1.0)},
		}
		a, err := c.Chat(ctx, req, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, err := c.Chat(ctx, req, nil)
		if err != nil {
			t.Fatal(err)
		}
		if a.Content != b.Content {
			t.Errorf("same seed, different answers: %q and %q", a.Content, b.Content)
		}
	})

	t.Run("Stream", func(t *testing.T) {
		var deltas []string
		resp, err := c.Chat(ctx, activities.ChatRequest{
			Model:    model,
			Messages: userTurn("Count to three."),
			Options:  activities.ModelOptions{NumPredict: 8, Seed: ptr(7)},
		}, func(d string) { deltas = append(deltas, d) })
		if err != nil {
			t.Fatalf("Chat: %v", err)
		}
		t.Logf("%d deltas %q, done %q", len(deltas), deltas, resp.DoneReason)
		if got := strings.Join(deltas, ""); got != resp.Content {
			t.Errorf("deltas join to %q, Content is %q", got, resp.Content)
		}
		if resp.CompletionTokens < 1 || resp.CompletionTokens > 8 {
			t.Errorf("CompletionTokens = %d, want 1..8", resp.CompletionTokens)
		}
		if resp.Content != "" && len(deltas) == 0 {
			t.Error("a non-empty answer came without deltas")
		}
	})

	t.Run("DefaultNumPredict", func(t *testing.T) {
		// No num_predict: the Modelfile's PARAMETER bounds the answer.
		resp, err := c.Chat(ctx, activities.ChatRequest{Model: model, Messages: userTurn("Go on.")}, nil)
		if err != nil {
			t.Fatalf("Chat: %v", err)
		}
		if resp.CompletionTokens > ollamatest.DefaultNumPredict {
			t.Errorf("CompletionTokens = %d, want <= %d", resp.CompletionTokens, ollamatest.DefaultNumPredict)
		}
	})

	t.Run("StructuredOutput", func(t *testing.T) {
		// Grammar-constrained sampling makes even random weights produce
		// JSON that follows the schema. Enums and booleans keep it short.
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
			if resp.DoneReason != "stop" {
				t.Errorf("seed %d: done %q, want stop (the grammar ends the answer)", seed, resp.DoneReason)
			}
			t.Logf("seed %d: %q (%d tokens)", seed, resp.Content, resp.CompletionTokens)
		}
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
		for i, v := range vs {
			if len(v) != ollamatest.EmbeddingLength {
				t.Errorf("vector %d has dimension %d, want %d", i, len(v), ollamatest.EmbeddingLength)
			}
			for _, x := range v {
				if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
					t.Fatalf("vector %d holds %v", i, x)
				}
			}
		}
		if fmt.Sprint(vs[0]) != fmt.Sprint(vs[2]) {
			t.Error("the same text embedded twice gave different vectors")
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
			if me.Retryable || me.StatusCode != http.StatusNotFound || !strings.Contains(me.Message, "not found") {
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
		// The tiny model's template has no tools section: the server refuses
		// the request, and the refusal is permanent.
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

// TestRealOllamaKilledMidStream kills the server (and its model runner) while
// an answer streams: the interrupted call is a retryable model error, and so
// is the next call to the dead server.
func TestRealOllamaKilledMidStream(t *testing.T) {
	srv, c := realServer(t)
	ctx := t.Context()

	var deltas int
	start := time.Now()
	_, err := c.Chat(ctx, activities.ChatRequest{
		Model:    srv.Model,
		Messages: userTurn("Tell me a long story."),
		// Fill the whole context (about 2000 tokens, some 0.4 s of
		// generation): the kill on the first delta comes long before the end.
		Options: activities.ModelOptions{NumPredict: -2, NumCtx: ollamatest.ContextLength, Seed: ptr(3)},
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
	if activities.IsPermanent(err) {
		t.Error("IsPermanent = true")
	}

	err = c.Ping(ctx)
	if me := wantModelError(t, err); !me.Retryable {
		t.Errorf("Ping of the dead server: got %+v, want retryable", me)
	}
	_, err = c.Chat(ctx, activities.ChatRequest{Model: srv.Model, Messages: userTurn("hi")}, nil)
	if me := wantModelError(t, err); !me.Retryable {
		t.Errorf("Chat to the dead server: got %+v, want retryable", me)
	}
}

// TestRealOllamaNumCtx: a prompt longer than the server's default context
// arrives whole when the client asks for a context that holds it (num_ctx
// on every call), and is cut to the default without. ContextLength reads
// the model's own context from /api/show and caps the configured one.
func TestRealOllamaNumCtx(t *testing.T) {
	srv, plain := realServer(t)
	ctx := t.Context()
	sized, err := ollama.New(ollama.Config{Host: srv.URL, Timeout: 2 * time.Minute, NumCtx: ollamatest.ContextLength})
	if err != nil {
		t.Fatal(err)
	}
	long := userTurn(strings.Repeat("a long prompt that must arrive whole ", 45)) // ~1,700 of the tiny model's tokens
	prompt := func(c *ollama.Client) int {
		t.Helper()
		resp, err := c.Chat(ctx, activities.ChatRequest{Model: srv.Model, Messages: long, Options: activities.ModelOptions{NumPredict: 1}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return resp.PromptTokens
	}
	whole, cut := prompt(sized), prompt(plain)
	t.Logf("prompt_eval_count: %d with num_ctx %d, %d with the server's default %d", whole, ollamatest.ContextLength, cut, ollamatest.ServerDefaultContext)
	if whole <= ollamatest.ServerDefaultContext || whole >= ollamatest.ContextLength {
		t.Errorf("with num_ctx the prompt counted %d tokens, want it whole (over the default %d)", whole, ollamatest.ServerDefaultContext)
	}
	if cut > ollamatest.ServerDefaultContext {
		t.Errorf("without num_ctx the prompt counted %d tokens, over the server's default context %d: the test proves nothing", cut, ollamatest.ServerDefaultContext)
	}

	for _, tc := range []struct {
		c    *ollama.Client
		want int
	}{{sized, ollamatest.ContextLength}, {plain, ollamatest.ContextLength}} {
		if n, err := tc.c.ContextLength(ctx, srv.Model); err != nil || n != tc.want {
			t.Errorf("ContextLength = %d, %v; want %d", n, err, tc.want)
		}
	}
	big, _ := ollama.New(ollama.Config{Host: srv.URL, NumCtx: 1 << 20})
	if n, err := big.ContextLength(ctx, srv.Model); err != nil || n != ollamatest.ContextLength {
		t.Errorf("ContextLength with num_ctx 1M = %d, %v; want the model's %d", n, err, ollamatest.ContextLength)
	}
	if _, err := sized.ContextLength(ctx, "no-such-model"); err == nil || wantModelError(t, err).Retryable {
		t.Errorf("ContextLength of an unknown model: %v, want a permanent error", err)
	}
}
