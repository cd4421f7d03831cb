package openai_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/activities/openai"
	"github.com/ctxflow/ctxflow/convo"
)

// serve starts h and returns a client for it, at base URL <server>/v1.
func serve(t testing.TB, cfg openai.Config, h http.HandlerFunc) *openai.Client {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	cfg.BaseURL = srv.URL + "/v1"
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	c, err := openai.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c
}

// decode reads a request's JSON body.
func decode(t testing.TB, r *http.Request) map[string]any {
	t.Helper()
	var body map[string]any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		t.Errorf("request body: %v", err)
	}
	return body
}

// reply writes v as a JSON answer.
func reply(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// event writes one server-sent event and flushes it; a string is sent as is.
func event(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "text/event-stream")
	b, ok := v.(string)
	if !ok {
		j, _ := json.Marshal(v)
		b = string(j)
	}
	_, _ = fmt.Fprintf(w, "data: %s\n\n", b)
	_ = http.NewResponseController(w).Flush()
}

// completion is a whole answer with one choice.
func completion(msg map[string]any, finish string, prompt, completionTokens int) map[string]any {
	msg["role"] = "assistant"
	return map[string]any{
		"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m-2024",
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
		"usage":   map[string]any{"prompt_tokens": prompt, "completion_tokens": completionTokens, "total_tokens": prompt + completionTokens},
	}
}

// chunk is a streamed piece of the first choice; finish "" sends null.
func chunk(delta map[string]any, finish string) map[string]any {
	var fr any
	if finish != "" {
		fr = finish
	}
	return map[string]any{
		"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m-2024",
		"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": fr}},
	}
}

// usage is the last chunk of a stream with include_usage.
func usage(prompt, completionTokens int) map[string]any {
	return map[string]any{
		"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m-2024", "choices": []any{},
		"usage": map[string]any{"prompt_tokens": prompt, "completion_tokens": completionTokens, "total_tokens": prompt + completionTokens},
	}
}

func ptr[T any](v T) *T { return &v }

func userMsg(s string) []convo.ModelMessage { return []convo.ModelMessage{{Role: "user", Content: s}} }

func TestChatSendsTheRequestAndReadsTheAnswer(t *testing.T) {
	var body map[string]any
	var path, auth string
	c := serve(t, openai.Config{APIKey: "sk-test"}, func(w http.ResponseWriter, r *http.Request) {
		path, auth, body = r.URL.Path, r.Header.Get("Authorization"), decode(t, r)
		reply(w, completion(map[string]any{"content": "Paris."}, "stop", 42, 3))
	})
	resp, err := c.Chat(context.Background(), activities.ChatRequest{
		Model: "m",
		Messages: []convo.ModelMessage{
			{Role: "system", Content: "Be brief."},
			{Role: "user", Content: "Tables?"},
			{Role: "assistant", ToolCalls: []convo.ToolCall{{ID: "c1", Name: "list_tables", Args: json.RawMessage(`{"schema": "main"}`)}}},
			{Role: "tool", ToolCallID: "c1", ToolName: "list_tables", Content: `["cities"]`},
			{Role: "assistant", Content: "One table."},
			{Role: "user", Content: "Capital of France?"},
		},
		Options: activities.ModelOptions{Temperature: ptr(0.0), Seed: ptr(7), NumPredict: 64, NumCtx: 8192},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := activities.ChatResponse{Content: "Paris.", Model: "m-2024", PromptTokens: 42, CompletionTokens: 3, DoneReason: "stop"}
	if !reflect.DeepEqual(resp, want) {
		t.Errorf("response = %+v\nwant %+v", resp, want)
	}
	if path != "/v1/chat/completions" || auth != "Bearer sk-test" {
		t.Errorf("request to %s with Authorization %q", path, auth)
	}
	msgs, _ := json.Marshal(body["messages"])
	wantMsgs := `[{"content":"Be brief.","role":"system"},{"content":"Tables?","role":"user"},` +
		`{"role":"assistant","tool_calls":[{"function":{"arguments":"{\"schema\": \"main\"}","name":"list_tables"},"id":"c1","type":"function"}]},` +
		`{"content":"[\"cities\"]","role":"tool","tool_call_id":"c1"},{"content":"One table.","role":"assistant"},{"content":"Capital of France?","role":"user"}]`
	if string(msgs) != wantMsgs {
		t.Errorf("messages sent = %s\nwant %s", msgs, wantMsgs)
	}
	for k, v := range map[string]any{"model": "m", "temperature": 0.0, "seed": 7.0, "max_tokens": 64.0} {
		if body[k] != v {
			t.Errorf("%s = %v, want %v", k, body[k], v)
		}
	}
	for _, k := range []string{"stream", "stream_options", "tools", "response_format", "num_ctx"} {
		if _, ok := body[k]; ok {
			t.Errorf("request has %s: %v", k, body[k])
		}
	}
}

func TestChatStreamsDeltasAndUsage(t *testing.T) {
	var body map[string]any
	c := serve(t, openai.Config{}, func(w http.ResponseWriter, r *http.Request) {
		body = decode(t, r)
		event(w, chunk(map[string]any{"role": "assistant", "content": ""}, ""))
		for _, s := range []string{"Hel", "lo, ", "", "world"} {
			event(w, chunk(map[string]any{"content": s}, ""))
		}
		event(w, chunk(map[string]any{}, "length"))
		event(w, usage(17, 4))
		event(w, "[DONE]")
	})
	var deltas []string
	resp, err := c.Chat(context.Background(), activities.ChatRequest{Model: "m", Messages: userMsg("hi"), Options: activities.ModelOptions{NumPredict: -1}},
		func(d string) { deltas = append(deltas, d) })
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(deltas, []string{"Hel", "lo, ", "world"}) {
		t.Errorf("deltas = %q", deltas)
	}
	want := activities.ChatResponse{Content: "Hello, world", Model: "m-2024", PromptTokens: 17, CompletionTokens: 4, DoneReason: "length"}
	if !reflect.DeepEqual(resp, want) {
		t.Errorf("response = %+v\nwant %+v", resp, want)
	}
	if body["stream"] != true || !reflect.DeepEqual(body["stream_options"], map[string]any{"include_usage": true}) {
		t.Errorf("stream = %v, stream_options = %v; want true and include_usage", body["stream"], body["stream_options"])
	}
	if _, ok := body["max_tokens"]; ok {
		t.Errorf("num_predict -1 sent max_tokens %v", body["max_tokens"])
	}
}

// queryArgs are the arguments of the tool of the tool-call tests.
type queryArgs struct {
	SQL string `json:"sql" desc:"the query"`
}

func TestChatToolCalls(t *testing.T) {
	queryTool := activities.NewTool("query", "run read-only SQL", activities.ToolPolicy{ReadOnly: true},
		func(ctx context.Context, a queryArgs) (any, error) { return a.SQL, nil })
	whole := func(calls ...any) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			reply(w, completion(map[string]any{"content": nil, "tool_calls": calls}, "tool_calls", 10, 5))
		}
	}
	call := func(id, name, args string) map[string]any {
		return map[string]any{"id": id, "type": "function", "function": map[string]any{"name": name, "arguments": args}}
	}
	streamed := func(pieces ...map[string]any) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			for _, p := range pieces {
				event(w, chunk(map[string]any{"tool_calls": []any{p}}, ""))
			}
			event(w, chunk(map[string]any{}, "tool_calls"))
			event(w, usage(10, 5))
			event(w, "[DONE]")
		}
	}
	piece := func(index int, id, name, args string) map[string]any {
		p := map[string]any{"index": index, "function": map[string]any{"arguments": args}}
		if id != "" {
			p["id"], p["type"] = id, "function"
			p["function"].(map[string]any)["name"] = name
		}
		return p
	}
	tests := []struct {
		name   string
		stream bool
		h      http.HandlerFunc
		want   []convo.ToolCall
		// refused: the calls whose arguments the tool must refuse;
		// unreadable: those the adapter warns about.
		refused, unreadable map[int]bool
	}{
		{"whole", false, whole(call("c1", "query", `{ "sql": "select 1" }`), call("", "query", "")),
			[]convo.ToolCall{{ID: "c1", Name: "query", Args: json.RawMessage(`{"sql":"select 1"}`)}, {ID: "call_1", Name: "query", Args: json.RawMessage(`{}`)}},
			map[int]bool{1: true}, nil}, // {} lacks the required sql
		{"streamed in pieces", true, streamed(
			piece(0, "c1", "query", ""), piece(0, "", "", `{"sql": "sel`), piece(0, "", "", `ect 1"}`),
			piece(1, "c2", "query", `{"sql":`), piece(1, "", "", ` "select 2"}`)),
			[]convo.ToolCall{{ID: "c1", Name: "query", Args: json.RawMessage(`{"sql":"select 1"}`)}, {ID: "c2", Name: "query", Args: json.RawMessage(`{"sql":"select 2"}`)}}, nil, nil},
		{"whole calls at one index", true, streamed(piece(0, "a", "query", `{"sql":"select 1"}`), piece(0, "b", "query", `{"sql":"select 2"}`)),
			[]convo.ToolCall{{ID: "a", Name: "query", Args: json.RawMessage(`{"sql":"select 1"}`)}, {ID: "b", Name: "query", Args: json.RawMessage(`{"sql":"select 2"}`)}}, nil, nil},
		{"encoded twice", false, whole(call("c1", "query", `"{\"sql\": \"select 1\"}"`)),
			[]convo.ToolCall{{ID: "c1", Name: "query", Args: json.RawMessage(`{"sql":"select 1"}`)}}, nil, nil},
		{"invalid JSON", false, whole(call("c1", "query", `{"sql": "select 1"`)),
			[]convo.ToolCall{{ID: "c1", Name: "query", Args: json.RawMessage(`"{\"sql\": \"select 1\""`)}}, map[int]bool{0: true}, map[int]bool{0: true}},
		{"invalid JSON streamed", true, streamed(piece(0, "c1", "query", `{sql: 1}`)),
			[]convo.ToolCall{{ID: "c1", Name: "query", Args: json.RawMessage(`"{sql: 1}"`)}}, map[int]bool{0: true}, map[int]bool{0: true}},
		{"not an object", false, whole(call("c1", "query", `["select 1"]`)),
			[]convo.ToolCall{{ID: "c1", Name: "query", Args: json.RawMessage(`"[\"select 1\"]"`)}}, map[int]bool{0: true}, map[int]bool{0: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var log bytes.Buffer
			c := serve(t, openai.Config{Logger: slog.New(slog.NewTextHandler(&log, nil))}, tc.h)
			var onDelta func(string)
			if tc.stream {
				onDelta = func(string) {}
			}
			resp, err := c.Chat(context.Background(), activities.ChatRequest{Model: "m", Messages: userMsg("count"), Tools: []activities.ToolSpec{queryTool.Spec()}}, onDelta)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(resp.ToolCalls, tc.want) {
				t.Errorf("tool calls = %s\nwant %s", fmtCalls(resp.ToolCalls), fmtCalls(tc.want))
			}
			if resp.DoneReason != "tool_calls" || resp.PromptTokens != 10 || resp.Content != "" {
				t.Errorf("response = %+v", resp)
			}
			// Unreadable arguments stay valid JSON (the transcript stores
			// them) and become the agent's error observation: the tool
			// refuses them as arguments that do not fit.
			for i, call := range resp.ToolCalls {
				if !json.Valid(call.Args) {
					t.Errorf("call %d: arguments %s are not JSON", i, call.Args)
				}
				_, err := queryTool.Call(context.Background(), call.Args)
				if refused := errors.Is(err, activities.ErrToolArgs); refused != tc.refused[i] {
					t.Errorf("call %d (%s): tool error %v, want refused = %v", i, call.Args, err, tc.refused[i])
				}
				warned := strings.Contains(log.String(), "id="+call.ID+" ")
				if warned != tc.unreadable[i] {
					t.Errorf("call %d (%s): warned = %v, want %v; log:\n%s", i, call.Args, warned, tc.unreadable[i], log.String())
				}
			}
		})
	}
}

func fmtCalls(cs []convo.ToolCall) string {
	var b strings.Builder
	for _, c := range cs {
		fmt.Fprintf(&b, "%s %s %s; ", c.ID, c.Name, c.Args)
	}
	return b.String()
}

func TestChatOffersToolsAndSendsTheirCallsBack(t *testing.T) {
	var body map[string]any
	c := serve(t, openai.Config{}, func(w http.ResponseWriter, r *http.Request) {
		body = decode(t, r)
		reply(w, completion(map[string]any{"content": "done"}, "stop", 1, 1))
	})
	_, err := c.Chat(context.Background(), activities.ChatRequest{
		Model: "m",
		Messages: []convo.ModelMessage{
			{Role: "user", Content: "go"},
			// The unreadable arguments of an earlier call go back as the
			// model wrote them.
			{Role: "assistant", Content: "Let me look.", ToolCalls: []convo.ToolCall{{ID: "c1", Name: "query", Args: json.RawMessage(`"{sql: 1}"`)}, {ID: "c2", Name: "list_tables"}}},
		},
		Tools: []activities.ToolSpec{
			{Name: "query", Description: "run read-only SQL", Parameters: json.RawMessage(`{"type":"object","properties":{"sql":{"type":"string"}},"required":["sql"]}`)},
			{Name: "list_tables"},
		},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tools, _ := json.Marshal(body["tools"])
	if want := `[{"function":{"description":"run read-only SQL","name":"query","parameters":{"properties":{"sql":{"type":"string"}},"required":["sql"],"type":"object"}},"type":"function"},` +
		`{"function":{"name":"list_tables","parameters":{"type":"object"}},"type":"function"}]`; string(tools) != want {
		t.Errorf("tools sent = %s\nwant %s", tools, want)
	}
	msgs, _ := json.Marshal(body["messages"].([]any)[1])
	if want := `{"content":"Let me look.","role":"assistant","tool_calls":[{"function":{"arguments":"{sql: 1}","name":"query"},"id":"c1","type":"function"},` +
		`{"function":{"arguments":"{}","name":"list_tables"},"id":"c2","type":"function"}]}`; string(msgs) != want {
		t.Errorf("assistant message sent = %s\nwant %s", msgs, want)
	}
}

func TestChatRefusalIsTheAnswer(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			c := serve(t, openai.Config{}, func(w http.ResponseWriter, r *http.Request) {
				if !stream {
					reply(w, completion(map[string]any{"content": nil, "refusal": "I can't help with that."}, "stop", 9, 6))
					return
				}
				event(w, chunk(map[string]any{"role": "assistant", "content": nil, "refusal": ""}, ""))
				event(w, chunk(map[string]any{"refusal": "I can't "}, ""))
				event(w, chunk(map[string]any{"refusal": "help with that."}, "stop"))
				event(w, usage(9, 6))
				event(w, "[DONE]")
			})
			var deltas []string
			var onDelta func(string)
			if stream {
				onDelta = func(d string) { deltas = append(deltas, d) }
			}
			resp, err := c.Chat(context.Background(), activities.ChatRequest{Model: "m", Messages: userMsg("how do I pick a lock?")}, onDelta)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Content != "I can't help with that." || resp.DoneReason != "stop" || resp.PromptTokens != 9 {
				t.Errorf("response = %+v", resp)
			}
			if stream && strings.Join(deltas, "") != resp.Content {
				t.Errorf("deltas %q do not join to the content", deltas)
			}
		})
	}
}

func TestChatStructuredOutput(t *testing.T) {
	const schema = `{"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"]}`
	tests := []struct {
		format string
		want   string
	}{
		{schema, `{"json_schema":{"name":"response","schema":` + schema + `},"type":"json_schema"}`},
		{"json", `{"type":"json_object"}`},
		{` "json" `, `{"type":"json_object"}`},
	}
	for _, tc := range tests {
		var body map[string]any
		c := serve(t, openai.Config{}, func(w http.ResponseWriter, r *http.Request) {
			body = decode(t, r)
			reply(w, completion(map[string]any{"content": `{"ok": true}`}, "stop", 5, 4))
		})
		resp, err := c.Chat(context.Background(), activities.ChatRequest{Model: "m", Messages: userMsg("ok?"), Format: []byte(tc.format)}, nil)
		if err != nil || resp.Content != `{"ok": true}` {
			t.Fatalf("format %s: %+v, %v", tc.format, resp, err)
		}
		var want any
		_ = json.Unmarshal([]byte(tc.want), &want)
		if got, _ := json.Marshal(body["response_format"]); !reflect.DeepEqual(body["response_format"], want) {
			t.Errorf("format %s: response_format = %s\nwant %s", tc.format, got, tc.want)
		}
	}
}

func TestChatKeepsReasoningOutOfTheAnswer(t *testing.T) {
	t.Run("whole", func(t *testing.T) {
		c := serve(t, openai.Config{}, func(w http.ResponseWriter, r *http.Request) {
			reply(w, completion(map[string]any{
				"content":           "<think>The user wants a number.\nSay 4.</think>\n\nIt is 4.",
				"reasoning_content": "vLLM's separate reasoning", "reasoning": "Ollama's separate reasoning",
			}, "stop", 8, 20))
		})
		resp, err := c.Chat(context.Background(), activities.ChatRequest{Model: "m", Messages: userMsg("2+2?")}, nil)
		if err != nil || resp.Content != "It is 4." {
			t.Fatalf("content = %q, %v; want the answer alone", resp.Content, err)
		}
	})
	t.Run("streamed", func(t *testing.T) {
		c := serve(t, openai.Config{}, func(w http.ResponseWriter, r *http.Request) {
			event(w, chunk(map[string]any{"role": "assistant", "reasoning_content": "separate ", "reasoning": "fields"}, ""))
			for _, s := range []string{"<thi", "nk>Let me", " think.</th", "ink>", "\n\n", "It is", " 4. <", "3 is less."} {
				event(w, chunk(map[string]any{"content": s}, ""))
			}
			event(w, chunk(map[string]any{}, "stop"))
			event(w, "[DONE]")
		})
		var deltas []string
		resp, err := c.Chat(context.Background(), activities.ChatRequest{Model: "m", Messages: userMsg("2+2?")}, func(d string) { deltas = append(deltas, d) })
		if err != nil {
			t.Fatal(err)
		}
		if resp.Content != "It is 4. <3 is less." || strings.Join(deltas, "") != resp.Content {
			t.Errorf("content %q, deltas %q; want the answer alone", resp.Content, deltas)
		}
		if resp.PromptTokens != 0 {
			t.Errorf("PromptTokens = %d without a usage chunk, want 0 (unknown)", resp.PromptTokens)
		}
	})
}

func TestNewReadsNoEnvironment(t *testing.T) {
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { t.Error("OPENAI_BASE_URL was used") }))
	defer elsewhere.Close()
	t.Setenv("OPENAI_BASE_URL", elsewhere.URL)
	t.Setenv("OPENAI_API_KEY", "sk-from-the-environment")
	var requests atomic.Int32
	c := serve(t, openai.Config{}, func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		if auth := r.Header.Get("Authorization"); auth != "" {
			t.Errorf("Authorization %q sent without Config.APIKey", auth)
		}
		reply(w, completion(map[string]any{"content": "hi"}, "stop", 1, 1))
	})
	if _, err := c.Chat(context.Background(), activities.ChatRequest{Model: "m", Messages: userMsg("hi")}, nil); err != nil || requests.Load() != 1 {
		t.Fatalf("err %v after %d requests", err, requests.Load())
	}
}

func TestNewChecksTheBaseURL(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"http://127.0.0.1:8000/v1/", "http://127.0.0.1:8000/v1"},
		{" https://api.openai.com/v1 ", "https://api.openai.com/v1"},
		{"http://llama:8080", "http://llama:8080"},
		{"", ""}, {"127.0.0.1:8000/v1", ""}, {"ftp://host/v1", ""}, {"http:///v1", ""}, {"http://h/v1?x=1", ""},
	} {
		c, err := openai.New(openai.Config{BaseURL: tc.in})
		switch {
		case tc.want == "" && err == nil:
			t.Errorf("New(%q) accepted", tc.in)
		case tc.want != "" && (err != nil || c.BaseURL() != tc.want):
			t.Errorf("New(%q) = %v; want base URL %q", tc.in, err, tc.want)
		}
	}
}

func TestChatRejectsInvalidRequests(t *testing.T) {
	var calls atomic.Int32
	c := serve(t, openai.Config{}, func(w http.ResponseWriter, r *http.Request) { calls.Add(1) })
	for _, tc := range []struct {
		name string
		req  activities.ChatRequest
	}{
		{"no model", activities.ChatRequest{Messages: userMsg("x")}},
		{"unknown role", activities.ChatRequest{Model: "m", Messages: []convo.ModelMessage{{Role: "robot", Content: "x"}}}},
		{"bad format", activities.ChatRequest{Model: "m", Messages: userMsg("x"), Format: []byte("yaml")}},
		{"format not an object", activities.ChatRequest{Model: "m", Messages: userMsg("x"), Format: []byte("[1]")}},
		{"tool without name", activities.ChatRequest{Model: "m", Messages: userMsg("x"), Tools: []activities.ToolSpec{{Parameters: json.RawMessage(`{}`)}}}},
		{"tool schema not an object", activities.ChatRequest{Model: "m", Messages: userMsg("x"), Tools: []activities.ToolSpec{{Name: "q", Parameters: json.RawMessage(`[1, 2]`)}}}},
		{"negative num_ctx", activities.ChatRequest{Model: "m", Messages: userMsg("x"), Options: activities.ModelOptions{NumCtx: -1}}},
		{"num_predict below -2", activities.ChatRequest{Model: "m", Messages: userMsg("x"), Options: activities.ModelOptions{NumPredict: -3}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Chat(context.Background(), tc.req, nil)
			me, ok := errors.AsType[*activities.ModelError](err)
			if !ok || me.Retryable || me.StatusCode != 0 || !strings.Contains(me.Message, "invalid request") {
				t.Errorf("err = %v, want a permanent invalid-request ModelError", err)
			}
		})
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("server called %d times for invalid requests", n)
	}
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

// waitForClient returns when the client has gone.
func waitForClient(r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	<-r.Context().Done()
}
