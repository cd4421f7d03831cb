package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctxflow/ctxflow/workflows"
)

// syncBuffer is the REPL's output, read by the fake API while it streams.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func sendEvent(w http.ResponseWriter, event, id string, data any) {
	b, _ := json.Marshal(data)
	if id != "" {
		fmt.Fprintf(w, "id: %s\n", id)
	}
	fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b)
	w.(http.Flusher).Flush()
}

func apiErr(w http.ResponseWriter, status int, code, msg string) {
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": code, "message": msg}})
}

// fakeAPI fakes the routes `ctxflow chat` uses, for session s1 with key k.
func fakeAPI(t *testing.T, out *syncBuffer) (*httptest.Server, *string) {
	steps := []workflows.Step{{Name: "load_context", Status: "ok", DurationMS: 2}, {Name: "generate", Status: "ok", DurationMS: 25}, {Name: "save", Status: "ok", DurationMS: 1}}
	at := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	result := func(id, answer string) workflows.TurnResult {
		return workflows.TurnResult{TurnID: id, Status: workflows.TurnCompleted, Answer: answer, Steps: steps, Engine: "ollama", Model: "qwen2.5:0.5b", ReceivedAt: at, CompletedAt: at.Add(1500 * time.Millisecond)}
	}
	const task = `{"turnId": "rows", "status": "completed", "answer": %q, "task": {"taskId": "rows", "status": %q, "step": %d, "engine": "offline"}, "steps": [{"name": "task", "status": "ok", "durationMs": 1200}]}`
	canned := map[string]string{ // route → answer
		"GET /v1/sessions/s1": `{"tenant": "default", "sessionId": "s1", "status": "idle", "health": "ok", "turns": 3, "messages": 6, "activeLeaf": "t2.a",
			"summaryText": "用户问了\n两件事", "task": {"taskId": "rows", "status": "paused", "step": 3, "pauses": 1}}`,
		"POST /v1/sessions/s1/tasks":    fmt.Sprintf(task, "Goal: How many rows?\nDone: 3 steps.", "paused", 3),
		"POST /v1/sessions/s1/continue": fmt.Sprintf(task, "14 tables, 12850 rows.", "finished", 6),
		"POST /v1/sessions/s1/branch":   `{"sessionId": "s1", "activeLeaf": "t0.a"}`,
		"GET /v1/sessions/s1/steps": `{"turns": [{"turnId": "old", "status": "completed"},
			{"turnId": "last", "status": "completed", "steps": [{"name": "rewrite_query", "status": "ok", "durationMs": 3, "details": {"rewritten": "你好吗"}}]}]}`,
		"GET /v1/sessions/s1/tree": `{"activeLeaf": "t3.a", "roots": ["t0.u"], "nodes": [
			{"id": "t0.u", "role": "user", "preview": "Hello", "children": ["t0.a"]}, {"id": "t0.a", "role": "assistant", "preview": "Hi\nthere", "children": ["t1.u", "t3.u"]},
			{"id": "t1.u", "role": "user", "preview": "What is it?", "children": ["t1.a"]}, {"id": "t1.a", "role": "assistant", "preview": "A service.", "children": []},
			{"id": "t3.u", "role": "user", "preview": "什么是持久化工作流？", "children": ["t3.a"]}, {"id": "t3.a", "role": "assistant", "preview": "一种工作流。", "children": []}]}`,
	}
	var lastEventID string
	mux := http.NewServeMux()
	for route, answer := range canned {
		mux.HandleFunc(route, func(w http.ResponseWriter, r *http.Request) {
			var body struct {
				Goal, FromMessageID string
				Config              struct{ MaxSteps int }
			}
			_ = json.NewDecoder(r.Body).Decode(&body)
			switch {
			case r.Method == http.MethodPost && r.URL.Query().Get("wait") != "true" && !strings.HasSuffix(route, "branch"):
				apiErr(w, 400, "invalid_argument", "no wait")
			case strings.HasSuffix(route, "tasks") && (body.Goal != "How many rows?" || body.Config.MaxSteps != 3):
				apiErr(w, 400, "invalid_argument", fmt.Sprintf("task %+v", body))
			case strings.HasSuffix(route, "branch") && body.FromMessageID != "t0.a":
				apiErr(w, 404, "not_found", "message "+body.FromMessageID+" not found")
			default:
				_, _ = io.WriteString(w, answer)
			}
		})
	}
	mux.HandleFunc("GET /v1/sessions/{id}", func(w http.ResponseWriter, r *http.Request) {
		apiErr(w, 404, "not_found", "session "+r.PathValue("id")+" not found")
	})
	mux.HandleFunc("POST /v1/sessions/s1/turns", func(w http.ResponseWriter, r *http.Request) {
		var body struct{ Question, TurnID string }
		_ = json.NewDecoder(r.Body).Decode(&body)
		if r.Header.Get("Accept") != "text/event-stream" || body.TurnID == "" {
			apiErr(w, 400, "invalid_argument", "want a stream with a turn id")
			return
		}
		if body.Question == "bad" {
			apiErr(w, 400, "invalid_argument", "question is too\nlong")
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		sendEvent(w, "accepted", "0", map[string]string{"turnId": body.TurnID})
		sendEvent(w, "step", "1", map[string]string{"name": "load_context", "status": "running"})
		sendEvent(w, "step", "2", steps[0])
		switch body.Question {
		case "你好":
			// Each token is sent once the previous one is on the screen.
			shown := ""
			for _, tok := range []string{"你好，", "我是", "ctxflow。"} {
				for deadline := time.Now().Add(5 * time.Second); !strings.HasSuffix(out.String(), shown); time.Sleep(5 * time.Millisecond) {
					if time.Now().After(deadline) {
						t.Errorf("%q not shown before the next token: %q", shown, out.String())
						return
					}
				}
				sendEvent(w, "token", "", map[string]any{"text": tok})
				shown += tok
			}
			sendEvent(w, "final", "8", result(body.TurnID, "你好，我是ctxflow。"))
		case "drop":
			sendEvent(w, "token", "", map[string]any{"text": "Hi"})
			sendEvent(w, "token", "", map[string]any{"text": "Hello ", "reset": true})
			panic(http.ErrAbortHandler) // the connection drops
		case "fail":
			sendEvent(w, "error", "5", map[string]any{"error": map[string]string{"code": "unavailable", "message": "model unavailable"}})
			res := result(body.TurnID, "")
			res.Status, res.Steps = workflows.TurnFailed, []workflows.Step{steps[0], {Name: "generate", Status: "failed", DurationMS: 4100}}
			sendEvent(w, "final", "6", res)
		}
	})
	mux.HandleFunc("GET /v1/sessions/s1/turns/{turn}/events", func(w http.ResponseWriter, r *http.Request) {
		lastEventID = r.Header.Get("Last-Event-ID")
		w.Header().Set("Content-Type", "text/event-stream")
		sendEvent(w, "step", "3", map[string]string{"name": "generate", "status": "running"})
		sendEvent(w, "token", "", map[string]any{"text": "IGNORED"})
		sendEvent(w, "final", "8", result(r.PathValue("turn"), "Hello world"))
	})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer k" {
			apiErr(w, 401, "unauthenticated", "missing or unknown API key")
			return
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &lastEventID
}

// TestChatREPL drives the REPL against a fake API: streamed tokens shown
// as they come and once, the steps line, a stream dropped and resumed
// with Last-Event-ID, a failed turn, API errors as one line, the task
// commands, /branch, /tree, /session, /steps.
func TestChatREPL(t *testing.T) {
	var out syncBuffer
	srv, lastEventID := fakeAPI(t, &out)
	in := strings.Join([]string{"你好", "drop", "fail", "bad", "/task How many rows?", "/continue", "/branch t0.a", "/branch nope",
		"/tree", "/session", "/steps", "/nope", "/quit", "never asked"}, "\n")
	done := make(chan struct{})
	go func() {
		defer close(done)
		chatREPL(t.Context(), chatOptions{API: srv.URL + "/", Key: "k", Session: "s1", MaxSteps: 3}, strings.NewReader(in), &out)
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatalf("the REPL did not end; output:\n%s", out.String())
	}
	got := out.String()
	steps := "  steps: load_context 2ms → generate 25ms → save 1ms (1.5s in all, ollama qwen2.5:0.5b"
	want := []string{
		"ctxflow chat: session s1 at " + srv.URL + " (/help for commands)\n3 turns so far\ns1> ",
		"你好，我是ctxflow。\n" + steps + ")\ns1> ",
		"Hi\n[the model call was retried: the answer starts again]\nHello world\n" + steps + ", stream resumed 1×)\ns1> ",
		"error unavailable: model unavailable\n  steps: load_context 2ms → generate 4.1s failed (1.5s in all, ollama qwen2.5:0.5b)\ns1> ",
		"error invalid_argument: question is too long\ns1> ",
		"Goal: How many rows?\nDone: 3 steps.\ntask rows paused at step 3: /continue goes on\n  steps: task 1.2s (offline)\ns1> ",
		"14 tables, 12850 rows.\ntask rows finished at step 6\n",
		"active leaf: t0.a (the next question follows it)\ns1> ",
		"error not_found: message nope not found\ns1> ",
		"t0.u user: Hello\nt0.a assistant: Hi there\n+ t1.u user: What is it?\n  t1.a assistant: A service.\n+ t3.u user: 什么是持久化工作流？\n  t3.a assistant: 一种工作流。  ← active\ns1> ",
		"session s1 (tenant default): idle, health ok\n  3 turns, 6 messages, tokens 0 → 0 (0 trimmed), active leaf t2.a\n  summary: 用户问了 两件事\n  task rows: paused at step 3, paused 1×\ns1> ",
		"turn last (completed)\n  rewrite_query   ok          3ms  {\"rewritten\":\"你好吗\"}\ns1> ",
		"unknown command /nope (/help lists them)\ns1> ",
	}
	rest := got
	for _, w := range want {
		i := strings.Index(rest, w)
		if i < 0 {
			t.Fatalf("output lacks (in order) %q; output:\n%s", w, got)
		}
		rest = rest[i+len(w):]
	}
	if rest != "" {
		t.Errorf("after /quit: %q", rest)
	}
	if strings.Contains(got, "IGNORED") || strings.Count(got, "你好，我是") != 1 {
		t.Errorf("tokens after a resume, or an answer shown twice:\n%s", got)
	}
	if *lastEventID != "2" {
		t.Errorf("resumed with Last-Event-ID %q, want 2", *lastEventID)
	}
}

// TestChatErrors: a wrong key, a new session, an API that is not there,
// /help, and the end of the input (Ctrl-D) as the end of the REPL.
func TestChatErrors(t *testing.T) {
	var out syncBuffer
	srv, _ := fakeAPI(t, &out)
	chatREPL(t.Context(), chatOptions{API: srv.URL, Key: "wrong", Session: "s1"}, strings.NewReader("hi\n"), &out)
	chatREPL(t.Context(), chatOptions{API: srv.URL, Key: "k", Session: "s2"}, strings.NewReader("/help\n/task\n"), &out)
	srv.Close()
	chatREPL(t.Context(), chatOptions{API: srv.URL, Session: "s1"}, strings.NewReader("hi"), &out)
	got := out.String()
	for _, w := range []string{
		"error unauthenticated: missing or unknown API key\ns1> error unauthenticated: missing or unknown API key\ns1> \n",
		"a new session\ns2> " + chatHelp + "s2> usage: /task GOAL\ns2> \n",
		"s1 at " + srv.URL + " (/help for commands)\nerror network: Get \"" + srv.URL + "/v1/sessions/s1\": dial tcp",
		"s1> error network: Post \"" + srv.URL + "/v1/sessions/s1/turns\": dial tcp",
	} {
		if !strings.Contains(got, w) {
			t.Errorf("output lacks %q; output:\n%s", w, got)
		}
	}
}
