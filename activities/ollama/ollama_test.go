package ollama_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/activities/ollama"
	"github.com/ctxflow/ctxflow/convo"
	"github.com/ctxflow/ctxflow/tests/fakeollama"
)

// serve starts h and returns a client for it.
func serve(t testing.TB, cfg ollama.Config, h http.HandlerFunc) *ollama.Client {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	cfg.Host = srv.URL
	c, err := ollama.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c
}

// line writes one NDJSON line and flushes it.
func line(w http.ResponseWriter, v any) {
	b, _ := json.Marshal(v)
	_, _ = w.Write(append(b, '\n'))
	_ = http.NewResponseController(w).Flush()
}

func fragment(s string) map[string]any {
	return map[string]any{"model": "m", "message": map[string]any{"role": "assistant", "content": s}, "done": false}
}

func final(prompt, eval int) map[string]any {
	return map[string]any{"model": "m:latest", "message": map[string]any{"role": "assistant", "content": ""},
		"done": true, "done_reason": "stop", "prompt_eval_count": prompt, "eval_count": eval}
}

// hangUp closes the client's connection in the middle of the response.
func hangUp(t *testing.T, w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		t.Errorf("hijack: %v", err)
		return
	}
	_ = conn.Close()
}

// waitForClient returns when the client has gone. The server notices that
// only once the request body has been read to its end.
func waitForClient(r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	<-r.Context().Done()
}

func userMsg(s string) []convo.ModelMessage { return []convo.ModelMessage{{Role: "user", Content: s}} }

func TestChatStreamsDeltasInOrder(t *testing.T) {
	var streamed any
	c := serve(t, ollama.Config{}, func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		streamed = body["stream"]
		w.Header().Set("Content-Type", "application/x-ndjson")
		for _, s := range []string{"Hel", "lo, ", "", "world"} {
			line(w, fragment(s))
		}
		line(w, final(12, 3))
	})
	var deltas []string
	resp, err := c.Chat(t.Context(), activities.ChatRequest{Model: "m", Messages: userMsg("hi")}, func(d string) {
		deltas = append(deltas, d)
	})
	if err != nil {
		t.Fatalf("Chat: %v", err)
	}
	if streamed != true {
		t.Errorf(`request "stream" = %v, want true`, streamed)
	}
	if want := []string{"Hel", "lo, ", "world"}; !reflect.DeepEqual(deltas, want) {
		t.Errorf("deltas = %q, want %q", deltas, want)
	}
	want := activities.ChatResponse{Content: "Hello, world", Model: "m:latest", PromptTokens: 12, CompletionTokens: 3, DoneReason: "stop"}
	if !reflect.DeepEqual(resp, want) {
		t.Errorf("resp = %+v, want %+v", resp, want)
	}
}

func TestChatWithoutOnDeltaDoesNotStream(t *testing.T) {
	c := serve(t, ollama.Config{}, func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		if body["stream"] != false {
			t.Errorf(`request "stream" = %v, want false`, body["stream"])
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"model": "m", "message": map[string]any{"role": "assistant", "content": "all at once"},
			"done": true, "prompt_eval_count": 5, "eval_count": 4})
	})
	resp, err := c.Chat(t.Context(), activities.ChatRequest{Model: "m", Messages: userMsg("hi")}, nil)
	if err != nil {
		t.Fatalf("Chat: %v", err)
	}
	want := activities.ChatResponse{Content: "all at once", Model: "m", PromptTokens: 5, CompletionTokens: 4}
	if !reflect.DeepEqual(resp, want) {
		t.Errorf("resp = %+v, want %+v", resp, want)
	}
}

func TestChatSendsRequest(t *testing.T) {
	temp, seed := 0.3, 42
	tests := []struct {
		name string
		cfg  ollama.Config
		req  activities.ChatRequest
		want string // the JSON body, less "model" and "stream"
	}{
		{
			name: "defaults leave everything out",
			req:  activities.ChatRequest{Messages: userMsg("hi")},
			want: `{"messages":[{"role":"user","content":"hi"}],"options":null}`,
		},
		{
			name: "options, schema format, keep-alive",
			cfg:  ollama.Config{KeepAlive: 10 * time.Minute},
			req: activities.ChatRequest{
				Messages: userMsg("hi"),
				Options:  activities.ModelOptions{Temperature: &temp, NumCtx: 4096, NumPredict: 128, Seed: &seed},
				Format:   []byte(` {"type":"object","properties":{"a":{"type":"string"}}} `),
			},
			want: `{"messages":[{"role":"user","content":"hi"}],
				"format":{"type":"object","properties":{"a":{"type":"string"}}},"keep_alive":"10m0s",
				"options":{"temperature":0.3,"num_ctx":4096,"num_predict":128,"seed":42}}`,
		},
		{
			name: "the client's num_ctx on every call",
			cfg:  ollama.Config{NumCtx: 8192},
			req:  activities.ChatRequest{Messages: userMsg("hi"), Options: activities.ModelOptions{NumPredict: 64}},
			want: `{"messages":[{"role":"user","content":"hi"}],"options":{"num_ctx":8192,"num_predict":64}}`,
		},
		{
			name: "a call's own num_ctx wins",
			cfg:  ollama.Config{NumCtx: 8192},
			req:  activities.ChatRequest{Messages: userMsg("hi"), Options: activities.ModelOptions{NumCtx: 2048}},
			want: `{"messages":[{"role":"user","content":"hi"}],"options":{"num_ctx":2048}}`,
		},
		{
			name: "json mode, zero temperature and seed, keep loaded",
			cfg:  ollama.Config{KeepAlive: -1},
			req: activities.ChatRequest{
				Messages: userMsg("hi"),
				Options:  activities.ModelOptions{Temperature: new(float64), Seed: new(int), NumPredict: -1},
				Format:   []byte("json"),
			},
			want: `{"messages":[{"role":"user","content":"hi"}],"format":"json","keep_alive":-1,
				"options":{"temperature":0,"seed":0,"num_predict":-1}}`,
		},
		{
			name: "tool calls and tool results",
			req: activities.ChatRequest{Messages: []convo.ModelMessage{
				{Role: "system", Content: "use tools"},
				{Role: "user", Content: "find go"},
				{Role: "assistant", ToolCalls: []convo.ToolCall{
					{ID: "c1", Name: "search", Args: json.RawMessage(`{"q":"go","k":3}`)},
					{ID: "c2", Name: "list_tables"},
				}},
				{Role: "tool", Content: "3 hits", ToolCallID: "c1", ToolName: "search"},
				{Role: "tool", Content: "users", ToolCallID: "c2", ToolName: "list_tables"},
			}},
			want: `{"messages":[
				{"role":"system","content":"use tools"},
				{"role":"user","content":"find go"},
				{"role":"assistant","content":"","tool_calls":[
					{"id":"c1","function":{"index":0,"name":"search","arguments":{"q":"go","k":3}}},
					{"id":"c2","function":{"index":1,"name":"list_tables","arguments":{}}}]},
				{"role":"tool","content":"3 hits","tool_name":"search","tool_call_id":"c1"},
				{"role":"tool","content":"users","tool_name":"list_tables","tool_call_id":"c2"}],
				"options":null}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got map[string]any
			c := serve(t, tt.cfg, func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/api/chat" || r.Method != http.MethodPost {
					t.Errorf("request %s %s", r.Method, r.URL.Path)
				}
				_ = json.NewDecoder(r.Body).Decode(&got)
				line(w, final(1, 1))
			})
			tt.req.Model = "qwen2.5:0.5b"
			if _, err := c.Chat(t.Context(), tt.req, func(string) {}); err != nil {
				t.Fatalf("Chat: %v", err)
			}
			if got["model"] != "qwen2.5:0.5b" || got["stream"] != true {
				t.Errorf("model, stream = %v, %v", got["model"], got["stream"])
			}
			delete(got, "model")
			delete(got, "stream")
			var want map[string]any
			if err := json.Unmarshal([]byte(tt.want), &want); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				g, _ := json.Marshal(got)
				w, _ := json.Marshal(want)
				t.Errorf("body\n got %s\nwant %s", g, w)
			}
		})
	}
}

func TestChatRejectsInvalidRequests(t *testing.T) {
	tests := []struct {
		name string
		req  activities.ChatRequest
	}{
		{"empty model", activities.ChatRequest{Messages: userMsg("x")}},
		{"unknown role", activities.ChatRequest{Model: "m", Messages: []convo.ModelMessage{{Role: "tool_call"}}}},
		{"tool arguments not an object", activities.ChatRequest{Model: "m", Messages: []convo.ModelMessage{
			{Role: "assistant", ToolCalls: []convo.ToolCall{{Name: "f", Args: json.RawMessage(`[1]`)}}}}}},
		{"tool arguments not JSON", activities.ChatRequest{Model: "m", Messages: []convo.ModelMessage{
			{Role: "assistant", ToolCalls: []convo.ToolCall{{Name: "f", Args: json.RawMessage(`{"a":`)}}}}}},
		{"format not JSON", activities.ChatRequest{Model: "m", Messages: userMsg("x"), Format: []byte("{")}},
		{"negative num_ctx", activities.ChatRequest{Model: "m", Messages: userMsg("x"), Options: activities.ModelOptions{NumCtx: -1}}},
		{"num_predict below -2", activities.ChatRequest{Model: "m", Messages: userMsg("x"), Options: activities.ModelOptions{NumPredict: -3}}},
	}
	var calls atomic.Int64
	c := serve(t, ollama.Config{}, func(w http.ResponseWriter, r *http.Request) { calls.Add(1) })
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := c.Chat(t.Context(), tt.req, nil)
			me, ok := errors.AsType[*activities.ModelError](err)
			if !ok || me.Retryable || me.StatusCode != 0 || !strings.Contains(me.Message, "invalid request") {
				t.Errorf("err = %#v, want a permanent invalid-request ModelError", err)
			}
		})
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("server called %d times for invalid requests", n)
	}
}

func TestChatErrorClassification(t *testing.T) {
	status := func(code int, body string) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(code)
			_, _ = io.WriteString(w, body)
		}
	}
	tests := []struct {
		name      string
		handler   func(t *testing.T) http.HandlerFunc
		retryable bool
		status    int
		message   string // part of ModelError.Message
		cause     error  // errors.Is(err, cause) if not nil
	}{
		{"404 model not found", func(*testing.T) http.HandlerFunc {
			return status(404, `{"error":"model \"nope\" not found, try pulling it first"}`)
		}, false, 404, `HTTP 404: model "nope" not found, try pulling it first`, nil},
		{"400 bad request", func(*testing.T) http.HandlerFunc {
			return status(400, `{"error":"invalid format"}`)
		}, false, 400, "HTTP 400: invalid format", nil},
		{"401 unauthorized", func(*testing.T) http.HandlerFunc {
			return status(401, `{"error":"unauthorized","signin_url":"https://ollama.com/connect"}`)
		}, false, 401, "unauthorized (sign in at https://ollama.com/connect)", nil},
		{"403 forbidden", func(*testing.T) http.HandlerFunc { return status(403, `{"error":"cloud disabled"}`) }, false, 403, "cloud disabled", nil},
		{"404 with empty body", func(*testing.T) http.HandlerFunc { return status(404, ``) }, false, 404, "HTTP 404: Not Found", nil},
		{"501 not implemented", func(*testing.T) http.HandlerFunc { return status(501, `{"error":"no"}`) }, false, 501, "no", nil},
		{"429 too many requests", func(*testing.T) http.HandlerFunc { return status(429, `{"error":"slow down"}`) }, true, 429, "slow down", nil},
		{"499 request canceled", func(*testing.T) http.HandlerFunc { return status(499, `{"error":"request canceled"}`) }, true, 499, "request canceled", nil},
		{"500 runner died", func(*testing.T) http.HandlerFunc {
			return status(500, `{"error":"llama runner process has terminated"}`)
		}, true, 500, "HTTP 500: llama runner process has terminated", nil},
		{"503 busy", func(*testing.T) http.HandlerFunc {
			return status(503, `{"error":"server busy, please try again.  maximum pending requests exceeded"}`)
		}, true, 503, "server busy", nil},
		{"503 with empty body", func(*testing.T) http.HandlerFunc { return status(503, ``) }, true, 503, "Service Unavailable", nil},
		{"502 from a proxy, HTML body", func(*testing.T) http.HandlerFunc {
			return status(502, "<html><body>bad gateway</body></html>\n")
		}, true, 502, "bad gateway", nil},
		{"error reported mid-stream", func(*testing.T) http.HandlerFunc {
			return func(w http.ResponseWriter, _ *http.Request) {
				line(w, fragment("partial "))
				line(w, map[string]any{"error": "an error was encountered while running the model"})
			}
		}, true, 0, "ollama chat", nil},
		{"server closes mid-stream", func(t *testing.T) http.HandlerFunc {
			return func(w http.ResponseWriter, _ *http.Request) {
				line(w, fragment("partial "))
				hangUp(t, w)
			}
		}, true, 0, "ollama chat", io.ErrUnexpectedEOF},
		{"stream ends without final message", func(*testing.T) http.HandlerFunc {
			return func(w http.ResponseWriter, _ *http.Request) { line(w, fragment("partial ")) }
		}, true, 0, "ollama chat", nil},
		{"not Ollama: a 200 that is not NDJSON", func(*testing.T) http.HandlerFunc {
			return func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "hello\n") }
		}, true, 0, "ollama chat", nil},
	}
	for _, tt := range tests {
		for _, stream := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/stream=%v", tt.name, stream), func(t *testing.T) {
				c := serve(t, ollama.Config{}, tt.handler(t))
				var onDelta func(string)
				if stream {
					onDelta = func(string) {}
				}
				_, err := c.Chat(t.Context(), activities.ChatRequest{Model: "nope", Messages: userMsg("x")}, onDelta)
				me, ok := errors.AsType[*activities.ModelError](err)
				if !ok {
					t.Fatalf("err = %#v, want a *ModelError", err)
				}
				t.Logf("err: %v", err)
				if me.Retryable != tt.retryable || me.StatusCode != tt.status || activities.IsPermanent(err) == tt.retryable {
					t.Errorf("Retryable, StatusCode = %v, %d; want %v, %d (err: %v)", me.Retryable, me.StatusCode, tt.retryable, tt.status, err)
				}
				if !strings.Contains(me.Message, tt.message) {
					t.Errorf("Message = %q, want it to contain %q", me.Message, tt.message)
				}
				if tt.cause != nil && !errors.Is(err, tt.cause) {
					t.Errorf("err = %v, want it to wrap %v", err, tt.cause)
				}
			})
		}
	}
}

func TestChatConnectionRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	c, err := ollama.New(ollama.Config{Host: addr})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Chat(t.Context(), activities.ChatRequest{Model: "m", Messages: userMsg("x")}, func(string) {})
	me, ok := errors.AsType[*activities.ModelError](err)
	if !ok || !me.Retryable || me.StatusCode != 0 {
		t.Fatalf("err = %#v, want a retryable ModelError", err)
	}
	if !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("err = %v, want it to say connection refused", err)
	}
	if err := c.Ping(t.Context()); !errors.As(err, &me) || !me.Retryable {
		t.Errorf("Ping = %v, want a retryable ModelError", err)
	}
}

func TestChatTimeout(t *testing.T) {
	tests := []struct {
		name    string
		handler http.HandlerFunc
	}{
		{"before the first byte", func(_ http.ResponseWriter, r *http.Request) { waitForClient(r) }},
		{"mid-stream", func(w http.ResponseWriter, r *http.Request) {
			line(w, fragment("slow "))
			waitForClient(r)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := serve(t, ollama.Config{Timeout: 200 * time.Millisecond}, tt.handler)
			begin := time.Now()
			_, err := c.Chat(t.Context(), activities.ChatRequest{Model: "m", Messages: userMsg("x")}, func(string) {})
			if d := time.Since(begin); d > 5*time.Second {
				t.Errorf("Chat took %v with a 200ms timeout", d)
			}
			me, ok := errors.AsType[*activities.ModelError](err)
			if !ok || !me.Retryable || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(me.Message, "200ms") {
				t.Errorf("err = %#v, want a retryable timeout ModelError", err)
			}
		})
	}
}

func TestChatCallerContextEnds(t *testing.T) {
	block := func(w http.ResponseWriter, r *http.Request) {
		line(w, fragment("first "))
		waitForClient(r)
	}

	t.Run("canceled mid-stream", func(t *testing.T) {
		c := serve(t, ollama.Config{}, block)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		_, err := c.Chat(ctx, activities.ChatRequest{Model: "m", Messages: userMsg("x")}, func(string) { cancel() })
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled", err)
		}
		if _, ok := errors.AsType[*activities.ModelError](err); ok {
			t.Errorf("err = %#v: a caller's cancellation is not a model error", err)
		}
	})

	t.Run("caller's deadline before the call's timeout", func(t *testing.T) {
		c := serve(t, ollama.Config{Timeout: time.Minute}, block)
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		_, err := c.Chat(ctx, activities.ChatRequest{Model: "m", Messages: userMsg("x")}, nil)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("err = %v, want context.DeadlineExceeded", err)
		}
		if _, ok := errors.AsType[*activities.ModelError](err); ok {
			t.Errorf("err = %#v: the caller's deadline is not a model error", err)
		}
	})

	t.Run("already canceled", func(t *testing.T) {
		c := serve(t, ollama.Config{}, block)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if _, err := c.Chat(ctx, activities.ChatRequest{Model: "m", Messages: userMsg("x")}, nil); !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled", err)
		}
		if err := c.Ping(ctx); !errors.Is(err, context.Canceled) {
			t.Errorf("Ping = %v, want context.Canceled", err)
		}
		if _, err := c.HasModel(ctx, "m"); !errors.Is(err, context.Canceled) {
			t.Errorf("HasModel = %v, want context.Canceled", err)
		}
	})
}

func TestPing(t *testing.T) {
	c := serve(t, ollama.Config{}, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/version" {
			http.NotFound(w, r)
			return
		}
		_, _ = io.WriteString(w, `{"version":"0.17.4"}`)
	})
	if err := c.Ping(t.Context()); err != nil {
		t.Errorf("Ping: %v", err)
	}

	c = serve(t, ollama.Config{}, func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, `{"error":"starting"}`, http.StatusServiceUnavailable)
	})
	err := c.Ping(t.Context())
	if me, ok := errors.AsType[*activities.ModelError](err); !ok || !me.Retryable || me.StatusCode != 503 {
		t.Errorf("Ping = %#v, want a retryable 503", err)
	}
}

func TestHasModel(t *testing.T) {
	fake := fakeollama.New(fakeollama.Options{Models: []string{"qwen2.5:0.5b", "llama3"}})
	c := serve(t, ollama.Config{}, fake.ServeHTTP)
	for name, want := range map[string]bool{"qwen2.5:0.5b": true, "llama3": true, "llama3:latest": true, "qwen2.5:7b": false, "nope": false} {
		got, err := c.HasModel(t.Context(), name)
		if err != nil || got != want {
			t.Errorf("HasModel(%q) = %v, %v; want %v, nil", name, got, err, want)
		}
	}
	if _, err := c.HasModel(t.Context(), " "); !activities.IsPermanent(err) {
		t.Errorf("HasModel(blank) = %v, want a permanent error", err)
	}

	c = serve(t, ollama.Config{}, func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, `{"error":"boom"}`, http.StatusInternalServerError)
	})
	got, err := c.HasModel(t.Context(), "m")
	if me, ok := errors.AsType[*activities.ModelError](err); got || !ok || !me.Retryable {
		t.Errorf("HasModel on a failing server = %v, %#v; want false and a retryable error", got, err)
	}
}

// TestAgainstFake runs the adapter against the end-to-end fake.
func TestAgainstFake(t *testing.T) {
	fake := fakeollama.New(fakeollama.Options{})
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	c, err := ollama.New(ollama.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := c.Ping(ctx); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	req := activities.ChatRequest{
		Model: fakeollama.DefaultModel,
		Messages: []convo.ModelMessage{
			{Role: "user", Content: "first"}, {Role: "assistant", Content: "ok"}, {Role: "user", Content: "and then?"},
		},
		Options: activities.ModelOptions{NumCtx: 2048},
	}
	var deltas []string
	resp, err := c.Chat(ctx, req, func(d string) { deltas = append(deltas, d) })
	if err != nil {
		t.Fatalf("Chat: %v", err)
	}
	if want := "answer 2 to: and then?"; resp.Content != want || strings.Join(deltas, "") != want || len(deltas) < 2 {
		t.Errorf("content %q, deltas %q; want %q streamed", resp.Content, deltas, want)
	}
	if resp.PromptTokens != 4 || resp.CompletionTokens != len(deltas) || resp.Model != fakeollama.DefaultModel {
		t.Errorf("resp = %+v", resp)
	}
	if last, _ := fake.LastChat(); last.Options["num_ctx"] != float64(2048) {
		t.Errorf("fake saw options %v", last.Options)
	}

	resp, err = c.Chat(ctx, req, nil)
	if err != nil || resp.Content != "answer 2 to: and then?" {
		t.Errorf("non-stream: %+v, %v", resp, err)
	}

	fake.FailNext(1, http.StatusServiceUnavailable)
	if _, err := c.Chat(ctx, req, nil); activities.IsPermanent(err) || err == nil {
		t.Errorf("injected 503: %v, want a retryable error", err)
	}
	fake.BreakNext(1)
	if _, err := c.Chat(ctx, req, func(string) {}); activities.IsPermanent(err) || err == nil {
		t.Errorf("broken stream: %v, want a retryable error", err)
	}
	req.Model = "missing:1b"
	_, err = c.Chat(ctx, req, func(string) {})
	if me, ok := errors.AsType[*activities.ModelError](err); !ok || me.Retryable || me.StatusCode != 404 ||
		!strings.Contains(me.Message, `model "missing:1b" not found, try pulling it first`) {
		t.Errorf("unknown model: %#v", err)
	}
	if calls := fake.Calls(); calls.Chat != 5 || calls.Version != 1 {
		t.Errorf("fake calls = %+v", calls)
	}
}

// TestChatLongLines: a line longer than the pooled first buffer (64 KB)
// grows it, up to the SDK's 8 MB, and the stream goes on after it.
func TestChatLongLines(t *testing.T) {
	long := strings.Repeat("长", 100_000) // 300 KB of UTF-8 in one line
	c := serve(t, ollama.Config{}, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		line(w, fragment(long))
		line(w, fragment("!"))
		line(w, final(1, 2))
	})
	for range 2 { // the second call reuses the pooled buffer
		resp, err := c.Chat(t.Context(), activities.ChatRequest{Model: "m", Messages: userMsg("hi")}, func(string) {})
		if err != nil || resp.Content != long+"!" {
			t.Fatalf("Chat: %d bytes, %v; want %d", len(resp.Content), err, len(long)+1)
		}
	}
}

// BenchmarkChat is one streamed call against a local server: its
// allocations are what the worker's garbage collector pays a model call.
func BenchmarkChat(b *testing.B) {
	c := serve(b, ollama.Config{}, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		for _, s := range []string{"Hello", ", ", "world"} {
			line(w, fragment(s))
		}
		line(w, final(12, 3))
	})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Chat(b.Context(), activities.ChatRequest{Model: "m", Messages: userMsg("hi")}, func(string) {}); err != nil {
			b.Fatal(err)
		}
	}
}

// Pull reports each progress message; a model the registry does not have
// is a permanent error.
func TestPull(t *testing.T) {
	c := serve(t, ollama.Config{Timeout: time.Millisecond}, func(w http.ResponseWriter, r *http.Request) {
		var req struct{ Model string }
		_ = json.NewDecoder(r.Body).Decode(&req)
		if r.URL.Path != "/api/pull" || req.Model == "missing" {
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"error":"pull model manifest: file does not exist"}`))
			return
		}
		line(w, map[string]any{"status": "pulling manifest"})
		time.Sleep(5 * time.Millisecond) // longer than the per-call timeout: a pull has none
		line(w, map[string]any{"status": "pulling abc", "digest": "sha256:abc", "total": 100, "completed": 50})
		line(w, map[string]any{"status": "success"})
	})
	var got []string
	err := c.Pull(t.Context(), "qwen2.5:0.5b", func(status string, completed, total int64) {
		got = append(got, fmt.Sprintf("%s %d/%d", status, completed, total))
	})
	if want := []string{"pulling manifest 0/0", "pulling abc 50/100", "success 0/0"}; err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("Pull = %v, progress %q; want %q", err, got, want)
	}
	err = c.Pull(t.Context(), "missing", nil)
	if me, ok := errors.AsType[*activities.ModelError](err); !ok || me.Retryable {
		t.Errorf("Pull of a missing model = %v, want a permanent model error", err)
	}
}
