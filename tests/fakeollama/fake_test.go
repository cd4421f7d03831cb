package fakeollama_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ollama/ollama/api"

	"github.com/ctxflow/ctxflow/tests/fakeollama"
)

// start serves a fake and returns it with a real Ollama SDK client for it.
func start(t *testing.T, opts fakeollama.Options) (*fakeollama.Fake, *api.Client, *httptest.Server) {
	t.Helper()
	fake := fakeollama.New(opts)
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	base, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return fake, api.NewClient(base, srv.Client()), srv
}

func ptr[T any](v T) *T { return &v }

// chat runs one chat call and returns every response line.
func chat(t *testing.T, c *api.Client, req *api.ChatRequest) ([]api.ChatResponse, error) {
	t.Helper()
	var got []api.ChatResponse
	err := c.Chat(t.Context(), req, func(r api.ChatResponse) error {
		got = append(got, r)
		return nil
	})
	return got, err
}

func content(rs []api.ChatResponse) string {
	var b strings.Builder
	for _, r := range rs {
		b.WriteString(r.Message.Content)
	}
	return b.String()
}

func TestVersionTagsShowHeartbeat(t *testing.T) {
	fake, c, _ := start(t, fakeollama.Options{Models: []string{"qwen2.5:0.5b", "llama3"}})
	ctx := t.Context()

	if err := c.Heartbeat(ctx); err != nil {
		t.Fatalf("Heartbeat: %v", err)
	}
	v, err := c.Version(ctx)
	if err != nil || v != fakeollama.Version {
		t.Fatalf("Version = %q, %v; want %q", v, err, fakeollama.Version)
	}
	list, err := c.List(ctx)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	var names []string
	for _, m := range list.Models {
		names = append(names, m.Name)
		if m.Digest == "" || m.Details.Format != "gguf" {
			t.Errorf("model %q lacks digest or details: %+v", m.Name, m)
		}
	}
	if got := strings.Join(names, ","); got != "qwen2.5:0.5b,llama3" {
		t.Errorf("List names = %s", got)
	}

	for _, name := range []string{"qwen2.5:0.5b", "llama3", "llama3:latest", "LLAMA3"} {
		if _, err := c.Show(ctx, &api.ShowRequest{Model: name}); err != nil {
			t.Errorf("Show(%q): %v", name, err)
		}
	}
	_, err = c.Show(ctx, &api.ShowRequest{Model: "nope"})
	var se api.StatusError
	if !errors.As(err, &se) || se.StatusCode != http.StatusNotFound || se.ErrorMessage != "model 'nope' not found" {
		t.Errorf("Show(nope) = %#v, want a 404 StatusError", err)
	}

	want := fakeollama.CallCounts{Version: 1, Tags: 1, Show: 5}
	if got := fake.Calls(); got != want {
		t.Errorf("Calls = %+v, want %+v", got, want)
	}
}

func TestChatStreams(t *testing.T) {
	fake, c, _ := start(t, fakeollama.Options{})
	got, err := chat(t, c, &api.ChatRequest{
		Model: fakeollama.DefaultModel,
		Messages: []api.Message{
			{Role: "system", Content: "be brief"},
			{Role: "user", Content: "hello there"},
			{Role: "assistant", Content: "hi"},
			{Role: "user", Content: "what is up"},
		},
	})
	if err != nil {
		t.Fatalf("Chat: %v", err)
	}
	if len(got) < 3 {
		t.Fatalf("got %d lines, want a stream of several", len(got))
	}
	for _, r := range got[:len(got)-1] {
		if r.Done || r.Message.Content == "" || r.Message.Role != "assistant" {
			t.Errorf("fragment %+v: want a non-final assistant fragment", r)
		}
	}
	final := got[len(got)-1]
	if !final.Done || final.DoneReason != "stop" || final.Message.Content != "" {
		t.Errorf("final = %+v, want done with reason stop and no content", final)
	}
	if want := "answer 2 to: what is up"; content(got) != want {
		t.Errorf("content = %q, want %q", content(got), want)
	}
	if final.PromptEvalCount != 8 || final.EvalCount != len(got)-1 {
		t.Errorf("counts = %d/%d, want 8/%d", final.PromptEvalCount, final.EvalCount, len(got)-1)
	}
	if final.Model != fakeollama.DefaultModel {
		t.Errorf("model = %q", final.Model)
	}
	if last, ok := fake.LastChat(); !ok || len(last.Messages) != 4 || !last.Stream {
		t.Errorf("LastChat = %+v, %v", last, ok)
	}
}

func TestChatNonStream(t *testing.T) {
	_, c, _ := start(t, fakeollama.Options{})
	got, err := chat(t, c, &api.ChatRequest{
		Model:    fakeollama.DefaultModel,
		Stream:   ptr(false),
		Messages: []api.Message{{Role: "user", Content: "one two"}},
	})
	if err != nil {
		t.Fatalf("Chat: %v", err)
	}
	if len(got) != 1 || !got[0].Done || got[0].Message.Content != "answer 1 to: one two" {
		t.Fatalf("got %+v, want one final answer", got)
	}
	if got[0].PromptEvalCount != 2 || got[0].EvalCount != 5 {
		t.Errorf("counts = %d/%d, want 2/5", got[0].PromptEvalCount, got[0].EvalCount)
	}
}

func TestChatUnknownModel(t *testing.T) {
	_, c, _ := start(t, fakeollama.Options{})
	for _, stream := range []bool{true, false} {
		_, err := chat(t, c, &api.ChatRequest{Model: "nope:1b", Stream: &stream, Messages: []api.Message{{Role: "user", Content: "x"}}})
		var se api.StatusError
		if !errors.As(err, &se) || se.StatusCode != http.StatusNotFound ||
			se.ErrorMessage != `model "nope:1b" not found, try pulling it first` {
			t.Errorf("stream=%v: err = %#v, want 404 with Ollama's message", stream, err)
		}
	}
}

func TestChatNumPredictTruncates(t *testing.T) {
	_, c, _ := start(t, fakeollama.Options{})
	got, err := chat(t, c, &api.ChatRequest{
		Model:    fakeollama.DefaultModel,
		Messages: []api.Message{{Role: "user", Content: "long question"}},
		Options:  map[string]any{"num_predict": 2},
	})
	if err != nil {
		t.Fatalf("Chat: %v", err)
	}
	final := got[len(got)-1]
	if content(got) != "answer 1 " || final.DoneReason != "length" || final.EvalCount != 2 {
		t.Errorf("content %q, reason %q, eval %d; want truncation to 2 fragments", content(got), final.DoneReason, final.EvalCount)
	}
}

func TestChatCustomReplySeesRequest(t *testing.T) {
	var seen fakeollama.ChatRequestLite
	var mu sync.Mutex
	_, c, _ := start(t, fakeollama.Options{Reply: func(req fakeollama.ChatRequestLite) string {
		mu.Lock()
		defer mu.Unlock()
		seen = req
		return "custom"
	}})
	args := api.NewToolCallFunctionArguments()
	args.Set("q", "go")
	got, err := chat(t, c, &api.ChatRequest{
		Model:     fakeollama.DefaultModel,
		Format:    json.RawMessage(`"json"`),
		KeepAlive: &api.Duration{Duration: time.Minute},
		Options:   map[string]any{"temperature": 0.2, "seed": 7},
		Messages: []api.Message{
			{Role: "user", Content: "find go"},
			{Role: "assistant", ToolCalls: []api.ToolCall{{ID: "c1", Function: api.ToolCallFunction{Name: "search", Arguments: args}}}},
			{Role: "tool", Content: "3 hits", ToolName: "search", ToolCallID: "c1"},
		},
	})
	if err != nil || content(got) != "custom" {
		t.Fatalf("Chat = %q, %v", content(got), err)
	}
	mu.Lock()
	defer mu.Unlock()
	if string(seen.Format) != `"json"` || string(seen.KeepAlive) != `"1m0s"` ||
		seen.Options["temperature"] != 0.2 || seen.Options["seed"] != float64(7) {
		t.Errorf("request = %+v", seen)
	}
	if len(seen.Messages) != 3 || !strings.Contains(string(seen.Messages[1].ToolCalls), `"search"`) ||
		seen.Messages[2].ToolName != "search" || seen.Messages[2].ToolCallID != "c1" {
		t.Errorf("messages = %+v", seen.Messages)
	}
}

// TestSetReply: a script set after the fake started makes the replies and
// sees the tools a request offers; nil gives the default replies again.
func TestSetReply(t *testing.T) {
	fake, c, _ := start(t, fakeollama.Options{})
	var tools json.RawMessage
	var mu sync.Mutex
	fake.SetReply(func(req fakeollama.ChatRequestLite) string {
		mu.Lock()
		defer mu.Unlock()
		tools = req.Tools
		return `{"name": "search", "arguments": {}}`
	})
	req := &api.ChatRequest{Model: fakeollama.DefaultModel, Messages: []api.Message{{Role: "user", Content: "find go"}},
		Tools: api.Tools{{Type: "function", Function: api.ToolFunction{Name: "search", Description: "Search."}}}}
	got, err := chat(t, c, req)
	if err != nil || content(got) != `{"name": "search", "arguments": {}}` {
		t.Fatalf("Chat = %q, %v", content(got), err)
	}
	mu.Lock()
	if !strings.Contains(string(tools), `"search"`) {
		t.Errorf("the script saw tools %s", tools)
	}
	mu.Unlock()
	fake.SetReply(nil)
	if got, err := chat(t, c, req); err != nil || content(got) != "answer 1 to: find go" {
		t.Fatalf("Chat after SetReply(nil) = %q, %v", content(got), err)
	}
}

func TestSchemaReply(t *testing.T) {
	const text = "answer 1 to: q"
	tests := []struct {
		name, format, want string
	}{
		{"json mode", `"json"`, `{"answer":"answer 1 to: q"}`},
		{"enum and bounded number", `{"type":"object","properties":{"intent":{"type":"string","enum":["qa","task"]},"confidence":{"type":"number","minimum":0,"maximum":0.8}},"required":["intent"]}`,
			`{"confidence":0.8,"intent":"qa"}`},
		{"nested", `{"properties":{"docs":{"type":"array","items":{"type":"object","properties":{"id":{"type":"integer"},"ok":{"type":"boolean"}}}},"why":{"type":["string","null"]}}}`,
			`{"docs":[{"id":1,"ok":true}],"why":"answer 1 to: q"}`},
		{"anyOf and const", `{"type":"object","properties":{"a":{"anyOf":[{"type":"integer"},{"type":"string"}]},"b":{"const":"x"}}}`,
			`{"a":1,"b":"x"}`},
		{"plain string schema", `{"type":"string"}`, `"answer 1 to: q"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := fakeollama.ChatRequestLite{
				Format:   json.RawMessage(tt.format),
				Messages: []fakeollama.MessageLite{{Role: "user", Content: "q"}},
			}
			if got := fakeollama.SchemaReply(req); got != tt.want {
				t.Errorf("SchemaReply = %s, want %s", got, tt.want)
			}
		})
	}
	if got := fakeollama.DefaultReply(fakeollama.ChatRequestLite{Messages: []fakeollama.MessageLite{{Role: "user", Content: "q"}}}); got != text {
		t.Errorf("DefaultReply = %q", got)
	}

	// Through the server: a format without Options.Reply gives the schema reply.
	_, c, _ := start(t, fakeollama.Options{})
	got, err := chat(t, c, &api.ChatRequest{
		Model:    fakeollama.DefaultModel,
		Format:   json.RawMessage(tests[1].format),
		Messages: []api.Message{{Role: "user", Content: "q"}},
	})
	if err != nil || content(got) != tests[1].want {
		t.Errorf("chat with schema = %q, %v; want %s", content(got), err, tests[1].want)
	}
}

func TestFailNext(t *testing.T) {
	fake, c, _ := start(t, fakeollama.Options{Delay: time.Hour}) // failures skip Delay
	fake.FailNext(2, http.StatusServiceUnavailable)
	req := &api.ChatRequest{Model: fakeollama.DefaultModel, Messages: []api.Message{{Role: "user", Content: "x"}}}
	for i := range 2 {
		_, err := chat(t, c, req)
		var se api.StatusError
		if !errors.As(err, &se) || se.StatusCode != http.StatusServiceUnavailable || se.ErrorMessage != "fakeollama: injected failure" {
			t.Fatalf("call %d: err = %#v, want an injected 503", i, err)
		}
	}
	fake.FailNext(1, 0) // not an error status: 500
	if _, err := chat(t, c, req); !strings.Contains(err.Error(), "500") {
		t.Fatalf("err = %v, want 500", err)
	}
	if got := fake.Calls(); got.Chat != 3 || got.Failed != 3 {
		t.Errorf("Calls = %+v", got)
	}
}

func TestBreakNext(t *testing.T) {
	fake, c, _ := start(t, fakeollama.Options{})
	req := &api.ChatRequest{Model: fakeollama.DefaultModel, Messages: []api.Message{{Role: "user", Content: "a b c"}}}

	fake.BreakNext(1)
	got, err := chat(t, c, req)
	// The SDK ends quietly on a broken stream; what shows is the missing
	// final message.
	if err != nil {
		t.Logf("broken stream: %v", err)
	}
	if len(got) != 1 || got[0].Done || got[0].Message.Content != "answer " {
		t.Errorf("broken stream gave %+v, want one fragment and no final message", got)
	}

	fake.BreakNext(1)
	req.Stream = ptr(false)
	if _, err := chat(t, c, req); err == nil {
		t.Error("broken non-stream answer: want an error")
	}

	req.Stream = nil
	got, err = chat(t, c, req)
	if err != nil || !got[len(got)-1].Done {
		t.Errorf("after the breaks: %v, %+v; want a full answer", err, got)
	}
	if calls := fake.Calls(); calls.Chat != 3 || calls.Failed != 2 {
		t.Errorf("Calls = %+v", calls)
	}
}

func TestDelayHonoursCancel(t *testing.T) {
	fake, c, srv := start(t, fakeollama.Options{Delay: time.Hour})
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	begin := time.Now()
	err := c.Chat(ctx, &api.ChatRequest{Model: fakeollama.DefaultModel, Messages: []api.Message{{Role: "user", Content: "x"}}},
		func(api.ChatResponse) error { return nil })
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want the client's deadline", err)
	}
	srv.Close() // waits for the handler: it must have given up its Delay
	if d := time.Since(begin); d > 5*time.Second {
		t.Errorf("took %v: the fake did not stop waiting when the client left", d)
	}
	if fake.Calls().Chat != 1 {
		t.Errorf("Calls = %+v", fake.Calls())
	}
}

func TestDelayAndConcurrency(t *testing.T) {
	fake, c, _ := start(t, fakeollama.Options{Delay: 50 * time.Millisecond, ChunkDelay: time.Millisecond})
	const n = 20
	var wg sync.WaitGroup
	errs := make(chan error, n)
	begin := time.Now()
	for range n {
		wg.Go(func() {
			var b strings.Builder
			err := c.Chat(t.Context(), &api.ChatRequest{Model: fakeollama.DefaultModel, Messages: []api.Message{{Role: "user", Content: "same"}}},
				func(r api.ChatResponse) error { b.WriteString(r.Message.Content); return nil })
			if err == nil && b.String() != "answer 1 to: same" {
				err = errors.New("reply " + b.String())
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if d := time.Since(begin); d < 50*time.Millisecond {
		t.Errorf("answers came after %v, before Delay", d)
	}
	if got := fake.Calls().Chat; got != n {
		t.Errorf("Calls().Chat = %d, want %d", got, n)
	}
}

func TestBadRequests(t *testing.T) {
	_, _, srv := start(t, fakeollama.Options{})
	tests := []struct {
		method, path, body string
		status             int
	}{
		{"POST", "/api/chat", `{`, http.StatusBadRequest},
		{"POST", "/api/chat", `{"messages":[]}`, http.StatusBadRequest},
		{"POST", "/api/show", `{}`, http.StatusBadRequest},
		{"GET", "/api/chat", ``, http.StatusMethodNotAllowed},
		{"GET", "/api/nothing", ``, http.StatusNotFound},
	}
	for _, tt := range tests {
		req, err := http.NewRequestWithContext(t.Context(), tt.method, srv.URL+tt.path, strings.NewReader(tt.body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != tt.status {
			t.Errorf("%s %s %s: status %d, want %d", tt.method, tt.path, tt.body, resp.StatusCode, tt.status)
		}
	}
}
