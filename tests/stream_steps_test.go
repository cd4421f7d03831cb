package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ctxflow/ctxflow/tests/fakeollama"
	"github.com/ctxflow/ctxflow/workflows"
)

// timedEvent is a stream's event and when it came.
type timedEvent struct {
	sseEvent
	at time.Time
}

// streamed is a streamed turn's events, in order, and its final result.
type streamed struct {
	events []timedEvent
	final  workflows.TurnResult
}

// streamTurn posts a streamed turn and reads it to its end.
func (s apiClient) streamTurn(ctx context.Context, t *testing.T, session, turnID, question string) streamed {
	t.Helper()
	var out streamed
	for e := range s.openStream(ctx, t, http.MethodPost, "/v1/sessions/"+session+"/turns", map[string]string{"question": question, "turnId": turnID}) {
		out.events = append(out.events, timedEvent{e, time.Now()})
		if e.name == "final" {
			_ = json.Unmarshal([]byte(e.data), &out.final)
		}
	}
	if out.final.Status != workflows.TurnCompleted {
		t.Fatalf("turn %s: final %+v; events %s", turnID, out.final, out.names())
	}
	return out
}

func (s streamed) names() string {
	var names []string
	for _, e := range s.events {
		names = append(names, e.id+":"+e.name)
	}
	return strings.Join(names, " ")
}

// first is the index of the first event named name and matching ok (nil:
// any), or -1.
func (s streamed) first(name string, ok func(data map[string]any) bool) int {
	for i, e := range s.events {
		var data map[string]any
		_ = json.Unmarshal([]byte(e.data), &data)
		if e.name == name && (ok == nil || ok(data)) {
			return i
		}
	}
	return -1
}

// tokens is the text of the token events before the final event, and how
// many there are.
func (s streamed) tokens() (string, int) {
	var text strings.Builder
	n := 0
	for _, e := range s.events {
		if e.name == "final" {
			break
		}
		if e.name != "token" {
			continue
		}
		addToken(&text, e.data)
		n++
	}
	return text.String(), n
}

// addToken adds a token event's text to the answer so far (a reset event
// starts it again).
func addToken(text *strings.Builder, data string) {
	var d struct {
		Text  string
		Reset bool
	}
	_ = json.Unmarshal([]byte(data), &d)
	if d.Reset {
		text.Reset()
	}
	text.WriteString(d.Text)
}

// running matches a step event that says the step named name runs.
func running(name string) func(map[string]any) bool {
	return func(d map[string]any) bool { return d["name"] == name && d["status"] == "running" }
}

// checkStreams: the stream's steps come as they start and end — each of
// the turn's steps starts ("running") and ends in the stream, in id order,
// and the first step event comes before the model's first token, so before
// the model call ends — and several tokens come before the final event,
// making its answer.
func checkStreams(t *testing.T, s streamed, minTokens int) {
	t.Helper()
	if len(s.events) == 0 || s.events[0].name != "accepted" {
		t.Fatalf("events %s", s.names())
	}
	firstStep, firstToken := s.first("step", nil), s.first("token", nil)
	if firstStep < 0 || firstToken < 0 || firstStep > firstToken || s.first("step", running("generate")) > firstToken {
		t.Errorf("the first step event (%d) and generate's start (%d) should come before the first token (%d): %s",
			firstStep, s.first("step", running("generate")), firstToken, s.names())
	}
	for i, st := range s.final.Steps {
		start, end := s.first("step", running(st.Name)), -1
		for j, e := range s.events {
			if e.id == fmt.Sprint(2*i+2) && e.name == "step" {
				end = j
			}
		}
		if start < 0 || end < start || s.events[start].id != fmt.Sprint(2*i+1) {
			t.Errorf("step %d %s: started at event %d, ended at %d: %s", i, st.Name, start, end, s.names())
		}
	}
	text, n := s.tokens()
	if n < minTokens || strings.TrimSpace(text) != s.final.Answer {
		t.Errorf("%d tokens before the final event making %q; want at least %d making the answer %q", n, text, minTokens, s.final.Answer)
	}
}

// inTask reports a turn whose generate step ran in the workflow task (a
// fast model): the turn query cannot answer until the task ends.
func inTask(res workflows.TurnResult) bool {
	for _, st := range res.Steps {
		if st.Name == "generate" {
			return st.Details["inWorkflowTask"] == true
		}
	}
	return false
}

// TestStreamsStream (issue 26, item 5) runs `ctxflow dev` on a fake Ollama
// that writes a word every 40 ms, fast enough to be called inside the
// turn's workflow task after the first turn (CTXFLOW_FAST_MODEL=5s): the
// case whose steps used to come only with the end of the turn, and its
// tokens only after the turn query answered. A streamed turn's step events
// come as its steps start and end, the first before the model call ends,
// and the answer's tokens one by one before the final event.
func TestStreamsStream(t *testing.T) {
	const chunk = 40 * time.Millisecond
	fake := fakeollama.New(fakeollama.Options{ChunkDelay: chunk})
	const answer = "Durable workflows keep their state. A crashed worker is replaced by another. The history replays and the turn goes on."
	fake.SetReply(func(req fakeollama.ChatRequestLite) string {
		if len(req.Format) > 0 && string(req.Format) != "null" {
			return fakeollama.SchemaReply(req)
		}
		return answer
	})
	fs := httptest.NewServer(fake)
	defer fs.Close()
	dir := t.TempDir()
	port := freePort(t)
	api := apiClient{base: fmt.Sprintf("http://127.0.0.1:%d", port)}
	startDev(t, []string{
		fmt.Sprintf("CTXFLOW_HTTP_ADDR=127.0.0.1:%d", port), "CTXFLOW_UI_PORT=0",
		fmt.Sprintf("CTXFLOW_TEMPORAL_PORT=%d", freePort(t)), "CTXFLOW_DATA_DIR=" + dir,
		"CTXFLOW_TRANSCRIPT_FSYNC=false", "OLLAMA_HOST=" + fs.URL, "CTXFLOW_FAST_MODEL=5s",
	}, api, filepath.Join(dir, "dev.log"))
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	for i, q := range []string{"How do durable workflows survive a crash?", "And what happens to the turn?"} {
		s := api.streamTurn(ctx, t, "live", fmt.Sprintf("t%d", i+1), q)
		checkStreams(t, s, 10)
		// The model writes for about as long as its words take; the first
		// step event came before it started, the final event after.
		words := len(strings.Fields(answer))
		first := s.events[s.first("step", nil)].at
		if took := s.events[len(s.events)-1].at.Sub(first); took < time.Duration(words-2)*chunk {
			t.Errorf("turn %d: %s from the first step event to the final one; the model alone writes for %s", i+1, took, time.Duration(words)*chunk)
		}
		if i == 1 && !inTask(s.final) {
			t.Errorf("the second turn's model call was not in the workflow task (the case to check): %+v", s.final.Steps)
		}
		t.Logf("turn %d: %s", i+1, s.names())
	}
}

// TestOfflineStreamsSentences: the offline engine streams its answer a
// sentence at a time, through `ctxflow dev`, with the steps as they start
// and end (an answer from a small knowledge base, in English and Chinese:
// the corrective loop's qa route).
func TestOfflineStreamsSentences(t *testing.T) {
	dir := t.TempDir()
	port := freePort(t)
	api := apiClient{base: fmt.Sprintf("http://127.0.0.1:%d", port)}
	startDev(t, []string{
		fmt.Sprintf("CTXFLOW_HTTP_ADDR=127.0.0.1:%d", port), "CTXFLOW_UI_PORT=0",
		fmt.Sprintf("CTXFLOW_TEMPORAL_PORT=%d", freePort(t)), "CTXFLOW_DATA_DIR=" + dir,
		"CTXFLOW_TRANSCRIPT_FSYNC=false", "CTXFLOW_MODEL_PROVIDER=offline",
	}, api, filepath.Join(dir, "dev.log"))
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	doc := `{"id": "durable-1", "text": "Temporal keeps workflows durable. A worker that crashes is replaced by another. The new worker replays the history and the workflow goes on."}` + "\n" +
		`{"id": "durable-2", "text": "持久化工作流不会丢失状态。工作进程崩溃后，另一个工作进程会重放历史，工作流继续执行。"}` + "\n"
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, api.base+"/v1/documents?id=durable&wait=true", strings.NewReader(doc))
	req.Header.Set("Content-Type", "application/x-ndjson")
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("upload: %d", resp.StatusCode)
	}
	for i, q := range []string{"How does Temporal keep workflows durable when a worker crashes?", "工作进程崩溃后工作流会怎样？"} {
		s := api.streamTurn(ctx, t, "offline", fmt.Sprintf("t%d", i+1), q)
		checkStreams(t, s, 2)
		t.Logf("turn %d: %s\n%s", i+1, s.names(), s.final.Answer)
	}
}
