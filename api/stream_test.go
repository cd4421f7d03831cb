package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/activities/broker"
	"github.com/ctxflow/ctxflow/api"
	"github.com/ctxflow/ctxflow/workflows"
)

type event struct{ id, name, data string }

// events parses a server-sent event stream.
func events(t *testing.T, body string) []event {
	t.Helper()
	var out []event
	var e event
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if e.name != "" {
				out = append(out, e)
			}
			e = event{}
		case strings.HasPrefix(line, "id: "):
			e.id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "event: "):
			e.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			e.data = strings.TrimPrefix(line, "data: ")
		}
	}
	return out
}

// answerOf is the text the token events of evs make (a reset starts it
// again) and how many there are.
func answerOf(evs []event) (string, int) {
	var text strings.Builder
	n := 0
	for _, e := range evs {
		if e.name != "token" {
			continue
		}
		var d struct {
			Text  string
			Reset bool
		}
		_ = json.Unmarshal([]byte(e.data), &d)
		if d.Reset {
			text.Reset()
		}
		text.WriteString(d.Text)
		n++
	}
	return text.String(), n
}

// scriptedTurn is a turn seen by successive turn queries: queued, in its
// steps (the answer streamed while it generates), then done.
func scriptedTurn(t *testing.T, f *fakeClient, b activities.Broker) {
	step := func(n string) workflows.Step { return workflows.Step{Name: n, Status: "ok", DurationMS: 3} }
	script := []workflows.TurnResult{
		{TurnID: "t1", Status: workflows.TurnQueued},
		{TurnID: "t1", Status: workflows.TurnRunning, RunningStep: "load_context"},
		{TurnID: "t1", Status: workflows.TurnRunning, RunningStep: "generate", Steps: []workflows.Step{step("load_context")}},
		{TurnID: "t1", Status: workflows.TurnRunning, RunningStep: "save", Steps: []workflows.Step{step("load_context"), step("generate")}},
		{TurnID: "t1", Status: workflows.TurnCompleted, Answer: "你好, world", Steps: []workflows.Step{step("load_context"), step("generate"), step("save")}},
	}
	var mu sync.Mutex
	n := 0
	f.QueryWorkflowFn = func(ctx context.Context, _, _, queryType string, _ ...any) (converter.EncodedValue, error) {
		mu.Lock()
		defer mu.Unlock()
		if queryType != workflows.QueryTurn {
			t.Errorf("query %s", queryType)
		}
		r := script[min(n, len(script)-1)]
		if n == 2 { // the session starts generate (and says so), the model writes, twice: a retry starts again
			topic := activities.TurnTopic(activities.SessionKey{Tenant: "default", SessionID: "s1"}, "t1")
			end, _ := json.Marshal(step("load_context"))
			for _, d := range []activities.Delta{{Step: &activities.StepDelta{Index: 0, End: end}}, {Step: &activities.StepDelta{Index: 1, Name: "generate"}},
				{Call: 1, Text: "你"}, {Call: 2, Text: "你好"}, {Call: 2, Text: ", world"}} {
				_ = b.Publish(ctx, topic, d)
			}
		}
		n++
		return encode(t, r), nil
	}
}

func TestStreamTurn(t *testing.T) {
	f := newFake(t)
	b := broker.NewLocal()
	scriptedTurn(t, f, b)
	recordUpdate(t, f, submitted(t))
	opts := options()
	opts.Broker = b
	h := api.New(f, opts).Handler()

	w := do(h, http.MethodPost, "/v1/sessions/s1/turns", `{"question":"你好","turnId":"t1"}`, "Accept", "text/event-stream")
	if w.Code != http.StatusOK || w.Header().Get("Content-Type") != "text/event-stream" {
		t.Fatalf("stream = %d %v %s", w.Code, w.Header(), w.Body)
	}
	var got []string
	evs := events(t, w.Body.String())
	for _, e := range evs {
		got = append(got, e.id+":"+e.name)
	}
	tokens, _ := answerOf(evs)
	want := "0:accepted 1:step 2:step 3:step :token :token :token 4:step 5:step 6:step 9:final"
	if strings.Join(got, " ") != want {
		t.Errorf("events\n got %s\nwant %s", strings.Join(got, " "), want)
	}
	if tokens != "你好, world" {
		t.Errorf("tokens make %q", tokens)
	}
	var final workflows.TurnResult
	if err := json.Unmarshal([]byte(evs[len(evs)-1].data), &final); err != nil || final.Answer != "你好, world" || len(final.Steps) != 3 {
		t.Errorf("final %+v %v", final, err)
	}

	// Resuming after event 4 sends what came after it, once the turn is
	// done: the last step and the final result.
	w = do(h, http.MethodGet, "/v1/sessions/s1/turns/t1/events", "", "Last-Event-ID", "4")
	got = nil
	for _, e := range events(t, w.Body.String()) {
		got = append(got, e.id+":"+e.name)
	}
	if strings.Join(got, " ") != "6:step 9:final" {
		t.Errorf("resumed events: %v", got)
	}
	wantError(t, do(h, http.MethodGet, "/v1/sessions/s1/turns/t1/events", "", "Last-Event-ID", "x"), http.StatusBadRequest, "invalid_argument")
}

// TestStreamWhileTheQueryWaits: a turn query waits while the session's
// workflow task runs (a fast model's whole turn is one), and meanwhile the
// stream goes on: the steps the workflow publishes on the broker and the
// model's tokens reach the client before the query answers. Events from
// both sources are sent once each, in id order.
func TestStreamWhileTheQueryWaits(t *testing.T) {
	f := newFake(t)
	b := broker.NewLocal()
	topic := activities.TurnTopic(activities.SessionKey{Tenant: "default", SessionID: "s1"}, "t1")
	step := func(n string) workflows.Step { return workflows.Step{Name: n, Status: "ok", DurationMS: 3} }
	end := func(i int, n string) activities.Delta {
		b, _ := json.Marshal(step(n))
		return activities.Delta{Step: &activities.StepDelta{Index: i, End: b}}
	}
	start := func(i int, n string) activities.Delta {
		return activities.Delta{Step: &activities.StepDelta{Index: i, Name: n}}
	}
	seen := make(chan struct{}) // the client has read the second token
	var once sync.Once
	f.QueryWorkflowFn = func(ctx context.Context, _, _, _ string, _ ...any) (converter.EncodedValue, error) {
		once.Do(func() {
			for _, d := range []activities.Delta{start(0, "load_context"), end(0, "load_context"), start(1, "generate"),
				{Call: 7, Text: "One. "}, start(1, "generate"), {Call: 7, Text: "Two."}} {
				_ = b.Publish(ctx, topic, d)
			}
			select { // the workflow task ends when the model has answered
			case <-seen:
			case <-time.After(10 * time.Second):
			}
			_ = b.Publish(ctx, topic, end(1, "generate"))
			_ = b.Publish(ctx, topic, start(2, "save"))
		})
		return encode(t, workflows.TurnResult{TurnID: "t1", Status: workflows.TurnCompleted, Answer: "One. Two.",
			Steps: []workflows.Step{step("load_context"), step("generate"), step("save")}}), nil
	}
	recordUpdate(t, f, submitted(t))
	opts := options()
	opts.Broker = b
	srv := httptest.NewServer(api.New(f, opts).Handler())
	defer srv.Close()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/v1/sessions/s1/turns", strings.NewReader(`{"question":"hi","turnId":"t1"}`))
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got []string
	tokens := 0
	var e event
	for sc := bufio.NewScanner(resp.Body); sc.Scan(); {
		switch line := sc.Text(); {
		case line == "":
			got = append(got, e.id+":"+e.name)
			if e.name == "token" {
				if tokens++; tokens == 2 {
					close(seen)
				}
			}
			e = event{}
		case strings.HasPrefix(line, "id: "):
			e.id = line[4:]
		case strings.HasPrefix(line, "event: "):
			e.name = line[7:]
		}
	}
	want := "0:accepted 1:step 2:step 3:step :token :token 4:step 5:step 6:step 9:final"
	if strings.Join(got, " ") != want {
		t.Errorf("events\n got %s\nwant %s", strings.Join(got, " "), want)
	}
	select {
	case <-seen:
	default:
		t.Error("the tokens came only after the turn query answered")
	}
}

// TestStreamStartsAtTheFirstStep: the session accepts a fast model's turn
// only when the workflow task that runs the whole turn ends, so a stream
// starts at the turn's first step on the broker, before the submission
// answers; a submission that fails after all ends the stream with an
// error event.
func TestStreamStartsAtTheFirstStep(t *testing.T) {
	for _, fail := range []bool{false, true} {
		f := newFake(t)
		b := broker.NewLocal()
		topic := activities.TurnTopic(activities.SessionKey{Tenant: "default", SessionID: "s1"}, "t1")
		seen := make(chan struct{}) // the client has read a token
		f.UpdateWithStartWorkflowFn = func(ctx context.Context, opts client.UpdateWithStartWorkflowOptions) (client.WorkflowUpdateHandle, error) {
			_ = b.Publish(ctx, topic, activities.Delta{Step: &activities.StepDelta{Index: 0, Name: "generate"}})
			_ = b.Publish(ctx, topic, activities.Delta{Call: 1, Text: "Hi."})
			select {
			case <-seen:
			case <-time.After(10 * time.Second):
			}
			if fail {
				return nil, temporal.NewNonRetryableApplicationError("turn id reused", activities.CodeConflict, nil)
			}
			return submitted(t)(opts)
		}
		f.QueryWorkflowFn = func(context.Context, string, string, string, ...any) (converter.EncodedValue, error) {
			select {
			case <-seen:
				if fail { // (a turn refused has no result; a poll's answer never comes before the error here)
					return encode(t, workflows.TurnResult{TurnID: "t1", Status: workflows.TurnQueued}), nil
				}
				return encode(t, workflows.TurnResult{TurnID: "t1", Status: workflows.TurnCompleted, Answer: "Hi.",
					Steps: []workflows.Step{{Name: "generate", Status: "ok"}}}), nil
			default:
				return encode(t, workflows.TurnResult{TurnID: "t1", Status: workflows.TurnQueued}), nil
			}
		}
		opts := options()
		opts.Broker = b
		srv := httptest.NewServer(api.New(f, opts).Handler())
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/v1/sessions/s1/turns", strings.NewReader(`{"question":"hi","turnId":"t1"}`))
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		var e event
		for sc := bufio.NewScanner(resp.Body); sc.Scan(); {
			switch line := sc.Text(); {
			case line == "":
				if got = append(got, e.id+":"+e.name); e.name == "token" {
					close(seen)
				}
				if e.name == "error" && !strings.Contains(e.data, `"conflict"`) {
					t.Errorf("error event %s", e.data)
				}
				e = event{}
			case strings.HasPrefix(line, "id: "):
				e.id = line[4:]
			case strings.HasPrefix(line, "event: "):
				e.name = line[7:]
			case strings.HasPrefix(line, "data: "):
				e.data = line[6:]
			}
		}
		_ = resp.Body.Close()
		srv.Close()
		want := "0:accepted 1:step :token 2:step 5:final"
		if fail {
			want = "0:accepted 1:step :token :error"
		}
		if strings.Join(got, " ") != want {
			t.Errorf("failing submission %v: events\n got %s\nwant %s", fail, strings.Join(got, " "), want)
		}
	}
}

// The tokens of a stream add up to the answer before the final event, when
// deltas come after the turn's result (the broker delivers them apart),
// never come, come in part, or come from another call.
func TestStreamTokensAddUpToTheAnswer(t *testing.T) {
	const answer = "你好, world"
	topic := activities.TurnTopic(activities.SessionKey{Tenant: "default", SessionID: "s1"}, "t1")
	for _, tc := range []struct {
		name         string
		during, late []activities.Delta // published while it runs / just after it is done
		tokens       int
	}{
		{name: "late", late: []activities.Delta{{Call: 1, Text: "你好"}, {Call: 1, Text: ", world\n"}}, tokens: 2},
		{name: "none", tokens: 1},
		{name: "part", during: []activities.Delta{{Call: 1, Text: " 你好"}}, tokens: 2},
		{name: "another call", during: []activities.Delta{{Call: 1, Text: "bye"}}, tokens: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t)
			b := broker.NewLocal()
			var mu sync.Mutex
			n := 0
			f.QueryWorkflowFn = func(ctx context.Context, _, _, _ string, _ ...any) (converter.EncodedValue, error) {
				mu.Lock()
				defer mu.Unlock()
				n++
				if n == 1 {
					for _, d := range tc.during {
						_ = b.Publish(ctx, topic, d)
					}
					return encode(t, workflows.TurnResult{TurnID: "t1", Status: workflows.TurnRunning, RunningStep: "generate"}), nil
				}
				if n == 2 {
					time.AfterFunc(50*time.Millisecond, func() {
						for _, d := range tc.late {
							_ = b.Publish(context.Background(), topic, d)
						}
					})
				}
				return encode(t, workflows.TurnResult{TurnID: "t1", Status: workflows.TurnCompleted, Answer: answer}), nil
			}
			recordUpdate(t, f, submitted(t))
			opts := options()
			opts.Broker = b
			w := do(api.New(f, opts).Handler(), http.MethodPost, "/v1/sessions/s1/turns", `{"question":"你好","turnId":"t1"}`, "Accept", "text/event-stream")
			evs := events(t, w.Body.String())
			text, tokens := answerOf(evs)
			if last := evs[len(evs)-1].name; strings.TrimSpace(text) != answer || tokens != tc.tokens || last != "final" {
				t.Errorf("%d tokens make %q, then %q; want %d making %q, then the final event", tokens, text, last, tc.tokens, answer)
			}
		})
	}
}

// A turn that fails streams an error before its final result; a turn the
// session refuses is a plain JSON error, before any stream.
func TestStreamTurnErrors(t *testing.T) {
	f := newFake(t)
	f.QueryWorkflowFn = func(context.Context, string, string, string, ...any) (converter.EncodedValue, error) {
		return encode(t, workflows.TurnResult{TurnID: "t1", Status: workflows.TurnFailed, ErrorCode: activities.CodeUnavailable, Error: "model unavailable",
			Steps: []workflows.Step{{Name: "load_context", Status: "ok"}, {Name: "generate", Status: "failed"}}}), nil
	}
	recordUpdate(t, f, submitted(t))
	h := server(f)
	var got []string
	for _, e := range events(t, do(h, http.MethodPost, "/v1/sessions/s1/turns", `{"question":"hi","turnId":"t1"}`, "Accept", "text/event-stream").Body.String()) {
		got = append(got, e.id+":"+e.name)
	}
	if strings.Join(got, " ") != "0:accepted 2:step 4:step 6:error 7:final" {
		t.Errorf("events %v", got)
	}
	f2 := newFake(t)
	recordUpdate(t, f2, func(client.UpdateWithStartWorkflowOptions) (client.WorkflowUpdateHandle, error) {
		return nil, temporal.NewNonRetryableApplicationError("turn id reused", activities.CodeConflict, nil)
	})
	wantError(t, do(server(f2), http.MethodPost, "/v1/sessions/s1/turns", `{"question":"hi"}`, "Accept", "text/event-stream"), http.StatusConflict, "conflict")
	wantError(t, do(server(f2), http.MethodPost, "/v1/sessions/s1/turns", `{"question":""}`, "Accept", "text/event-stream"), http.StatusBadRequest, "invalid_argument")
}

// TestStreamClientGone: a client that leaves a stream before its turn is
// queued is not a server failure: the access log says 499, never 5xx.
func TestStreamClientGone(t *testing.T) {
	f := newFake(t)
	entered := make(chan struct{})
	f.UpdateWithStartWorkflowFn = func(ctx context.Context, _ client.UpdateWithStartWorkflowOptions) (client.WorkflowUpdateHandle, error) {
		close(entered)
		<-ctx.Done()
		return nil, ctx.Err()
	}
	var logs bytes.Buffer
	opts := options()
	opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	h := api.New(f, opts).Handler()
	ctx, cancel := context.WithCancel(t.Context())
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/v1/sessions/s1/turns", strings.NewReader(`{"question":"hi"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	go func() { <-entered; cancel() }()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != 499 || strings.Contains(logs.String(), "status=5") || !strings.Contains(logs.String(), "status=499") {
		t.Errorf("answered %d; log:\n%s", w.Code, logs.String())
	}
}
