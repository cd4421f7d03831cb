package tests

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ctxflow/ctxflow/tests/fakeollama"
	"github.com/ctxflow/ctxflow/workflows"
)

// storyWords is a long answer, streamed a word every chunk delay.
var storyWords = strings.Repeat("once upon a time there was a durable workflow that never forgot a word ", 20)

// TestSteerAndCancelOverHTTP (issue 25, item 3): a question sent with
// busy=steer while a task runs (its tool blocked on the locked shop)
// answers at once with type steer, busy=reject meanwhile is a 409, and the
// task's next step reads the guidance; a streamed answer cancelled while
// the model writes it ends its stream with a cancelled event, keeps the
// partial answer (not shown to the model afterwards), and the session
// answers the next turn; a second cancel is a 409.
func TestSteerAndCancelOverHTTP(t *testing.T) {
	fake := fakeollama.New(fakeollama.Options{ChunkDelay: 100 * time.Millisecond})
	fs := httptest.NewServer(fake)
	t.Cleanup(fs.Close)
	s := startStack(t, stackOptions{extraEnv: []string{"OLLAMA_HOST=" + fs.URL}}) // the last value wins
	s.startWorker()
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	shop := filepath.Join(s.dataDir, "demo", "shop.db")

	const call = "I will count them.\n<tool_call>\n{\"name\": \"run_sql\", \"arguments\": {\"sql\": \"SELECT count(*) AS n FROM orders\"}}\n</tool_call>"
	script := &textCallScript{step: func(req fakeollama.ChatRequestLite) string {
		for _, m := range req.Messages {
			if m.Role == "user" && strings.Contains(m.Content, "Guidance from the user: only 2024 orders") {
				return "Counted the 2024 orders only."
			}
		}
		return call
	}}
	thinking := make(chan struct{}) // closed when the slow task's model call is done with
	var thinks atomic.Int32
	fake.SetReply(func(req fakeollama.ChatRequestLite) string {
		if len(req.Tools) == 0 && lastMessage(req).Content == "Tell me a long story" {
			return storyWords
		}
		for _, m := range req.Messages {
			if m.Role == "user" && strings.Contains(m.Content, "Write a long report") {
				thinks.Add(1)
				select { // a model that takes its time
				case <-thinking:
				case <-time.After(time.Minute):
				}
				return "The report."
			}
		}
		return script.reply(req)
	})

	t.Run("steer", func(t *testing.T) {
		if res, _, err := s.turn(ctx, "steer", "hello", "hello"); err != nil || res.Status != workflows.TurnCompleted {
			t.Fatalf("first turn: %v %+v\n%s", err, res, s.workerLogs())
		}
		unlock := lockShop(t, shop)
		defer unlock()
		if code, err := s.do(ctx, http.MethodPost, "/v1/sessions/steer/tasks", map[string]any{"goal": "How many orders are there?", "taskId": "count"}, nil); code != http.StatusAccepted {
			t.Fatalf("task: %d %v", code, err)
		}
		s.awaitToolActivity(t, ctx, workflows.TaskWorkflowID(workflows.DefaultTenant, "steer", "count"))
		var steered workflows.TurnResult
		code, err := s.do(ctx, http.MethodPost, "/v1/sessions/steer/turns?wait=true", map[string]any{"question": "only 2024 orders", "busy": "steer", "turnId": "g1"}, &steered)
		if code != http.StatusOK || steered.Type != workflows.TypeSteer || steered.Status != workflows.TurnCompleted {
			t.Fatalf("steer: %d %v %+v", code, err, steered)
		}
		if code, _ := s.do(ctx, http.MethodPost, "/v1/sessions/steer/turns", map[string]any{"question": "and the time?", "busy": "reject"}, nil); code != http.StatusConflict {
			t.Errorf("busy=reject while the task runs: %d, want 409", code)
		}
		unlock()
		for {
			st, err := s.taskState(ctx, "steer", "count")
			if err == nil && st.Status == workflows.TaskFinished {
				if st.Answer != "Counted the 2024 orders only." || len(st.Guidance) != 1 || st.Guidance[0].TurnID != "g1" {
					t.Fatalf("task: %q guidance %+v", st.Answer, st.Guidance)
				}
				break
			}
			if ctx.Err() != nil || (err == nil && st.Status != workflows.TaskRunning) {
				t.Fatalf("task: %v %+v\n%s", err, st, s.workerLogs())
			}
			time.Sleep(100 * time.Millisecond)
		}
	})

	// stopStory asks session for the long story as a stream, cancels the
	// turn "long" while the model writes it, and reads the stream to its
	// end: the cancel's answer, and the stream's last event.
	stopStory := func(t *testing.T, session string) (res workflows.TurnResult, code int, last string, err error) {
		events := s.openStream(ctx, t, http.MethodPost, "/v1/sessions/"+session+"/turns", map[string]any{"question": "Tell me a long story", "turnId": "long"})
		// The worker's tokens do not reach this process's API (no shared
		// broker): wait for the generate step, then for a few fragments.
		for e := range events {
			if e.name == "step" && strings.Contains(e.data, `"generate"`) && strings.Contains(e.data, `"running"`) {
				break
			}
		}
		time.Sleep(time.Second)
		code, err = s.do(ctx, http.MethodPost, "/v1/sessions/"+session+"/turns/long/cancel", nil, &res)
		for e := range events {
			last = e.name
		}
		return res, code, last, err
	}

	t.Run("cancel", func(t *testing.T) {
		res, code, last, err := stopStory(t, "stop")
		if code != http.StatusOK || res.Status != workflows.TurnCancelled || res.Answer == "" || len(res.Answer) >= len(strings.TrimSpace(storyWords)) {
			t.Fatalf("cancel: %d %v %s %q\n%s", code, err, res.Status, res.Answer, s.workerLogs())
		}
		if last != "cancelled" {
			t.Errorf("the stream ended with %q, want cancelled", last)
		}
		next, _, err := s.turn(ctx, "stop", "next", "And now a short one?")
		if err != nil || next.Status != workflows.TurnCompleted {
			t.Fatalf("next turn: %v %+v", err, next)
		}
		if req, ok := fake.LastChat(); ok {
			for _, m := range req.Messages {
				if m.Role == "assistant" && strings.Contains(m.Content, "once upon") {
					t.Errorf("the model saw the cancelled answer: %+v", req.Messages)
				}
			}
		}
		if code, _ := s.do(ctx, http.MethodPost, "/v1/sessions/stop/turns/long/cancel", nil, nil); code != http.StatusConflict {
			t.Errorf("cancel of a finished turn: %d, want 409", code)
		}
		if code, _ := s.do(ctx, http.MethodPost, "/v1/sessions/stop/turns/nope/cancel", nil, nil); code != http.StatusNotFound {
			t.Errorf("cancel of an unknown turn: %d, want 404", code)
		}
	})

	t.Run("continue a cancelled answer", func(t *testing.T) {
		stopped, code, _, err := stopStory(t, "resume")
		if code != http.StatusOK || stopped.Answer == "" {
			t.Fatalf("cancel: %d %v %+v", code, err, stopped)
		}
		res, _, err := s.turn(ctx, "resume", "more", "继续")
		if err != nil || res.Status != workflows.TurnCompleted || res.Steps[0].Details["continues"] == nil {
			t.Fatalf("continue: %v %+v", err, res)
		}
		req, _ := fake.LastChat()
		n := len(req.Messages)
		if n < 2 || req.Messages[n-2].Role != "assistant" || req.Messages[n-2].Content != stopped.Answer || req.Messages[n-1].Content != "继续" {
			t.Errorf("the model was not shown the answer it continues: %+v", req.Messages)
		}
		if os.Getenv("CTXFLOW_RECORD_HISTORY") == "1" {
			writeHistory(t, ctx, s, workflows.SessionWorkflowID(workflows.DefaultTenant, "resume"), "", "testdata/session_continue_cancelled.json")
		}
	})

	t.Run("cancel a task while its model thinks", func(t *testing.T) {
		defer close(thinking)
		if code, err := s.do(ctx, http.MethodPost, "/v1/sessions/slow/tasks", map[string]any{"goal": "Write a long report", "taskId": "report"}, nil); code != http.StatusAccepted {
			t.Fatalf("task: %d %v", code, err)
		}
		for thinks.Load() == 0 {
			if ctx.Err() != nil {
				t.Fatalf("the task never asked the model\n%s", s.workerLogs())
			}
			time.Sleep(20 * time.Millisecond)
		}
		start := time.Now()
		var res workflows.TurnResult
		code, err := s.do(ctx, http.MethodPost, "/v1/sessions/slow/turns/report/cancel", nil, &res)
		took := time.Since(start)
		if code != http.StatusOK || res.Status != workflows.TurnCancelled {
			t.Fatalf("cancel: %d %v %+v\n%s", code, err, res, s.workerLogs())
		}
		// The model would take a minute: the cancel did not wait for it.
		if took > 30*time.Second {
			t.Errorf("the cancel answered after %s: it waited for the model", took)
		}
		st, err := s.taskState(ctx, "slow", "report")
		if err != nil || st.Status != workflows.TaskCanceled || st.Answer != "" {
			t.Errorf("task after the cancel: %v %s %q", err, st.Status, st.Answer)
		}
		if os.Getenv("CTXFLOW_RECORD_HISTORY") == "1" {
			writeHistory(t, ctx, s, workflows.TaskWorkflowID(workflows.DefaultTenant, "slow", "report"), "", "testdata/task_cancel_think.json")
		}
	})

	// CTXFLOW_RECORD_HISTORY=1 records the steered task, its session and
	// the session with the cancelled turn, for TestReplayRecordedHistories.
	if os.Getenv("CTXFLOW_RECORD_HISTORY") == "1" {
		writeHistory(t, ctx, s, workflows.TaskWorkflowID(workflows.DefaultTenant, "steer", "count"), "", "testdata/task_steer.json")
		writeHistory(t, ctx, s, workflows.SessionWorkflowID(workflows.DefaultTenant, "steer"), "", "testdata/task_steer_session.json")
		writeHistory(t, ctx, s, workflows.SessionWorkflowID(workflows.DefaultTenant, "stop"), "", "testdata/session_cancel.json")
	}
}
