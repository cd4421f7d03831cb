package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctxflow/ctxflow/tests/fakeollama"
	"github.com/ctxflow/ctxflow/workflows"
)

// textCallScript scripts the fake model for an agent task: a request
// offering tools (a step of the task, native tools mode) gets step(req),
// any other the fake's default reply. It keeps the steps' requests.
type textCallScript struct {
	mu   sync.Mutex
	step func(req fakeollama.ChatRequestLite) string
	reqs []fakeollama.ChatRequestLite
}

func (s *textCallScript) reply(req fakeollama.ChatRequestLite) string {
	if len(req.Tools) == 0 {
		return fakeollama.DefaultReply(req)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs = append(s.reqs, req)
	return s.step(req)
}

func (s *textCallScript) requests() []fakeollama.ChatRequestLite {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]fakeollama.ChatRequestLite(nil), s.reqs...)
}

// lastMessage is the last message of a request.
func lastMessage(req fakeollama.ChatRequestLite) fakeollama.MessageLite {
	return req.Messages[len(req.Messages)-1]
}

// countAnswer is the final answer the script gives once it sees run_sql's
// result: the query's one value.
func countAnswer(result string) string {
	var r struct {
		Rows [][]any `json:"rows"`
	}
	if err := json.Unmarshal([]byte(result), &r); err != nil || len(r.Rows) != 1 || len(r.Rows[0]) != 1 {
		return "the script could not read the result: " + result
	}
	return fmt.Sprintf("There are %v customers.", r.Rows[0][0])
}

// TestAgentTaskToolCallsWrittenAsText (issue 24, item 4): the model takes
// tools, but writes its tool call in its reply's text, as small local
// models do. A call in Qwen's <tool_call> tag is run as a call (the next
// step sees it as one, with its result) and the task finishes with the
// model's answer; a broken attempt (a Python dict) is a json_parse_error
// observation with the raw reply and the expected format, which the next
// step sees, and the task still finishes. Before, both replies were the
// task's final answer at step 1.
func TestAgentTaskToolCallsWrittenAsText(t *testing.T) {
	s := startStack(t, stackOptions{})
	s.startWorker()
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	shop := filepath.Join(s.dataDir, "demo", "shop.db")

	t.Run("a call in a tag", func(t *testing.T) {
		const call = "I will count them.\n<tool_call>\n{\"name\": \"run_sql\", \"arguments\": {\"sql\": \"SELECT count(*) AS n FROM customers WHERE city = 'Berlin'\"}}\n</tool_call>"
		script := &textCallScript{step: func(req fakeollama.ChatRequestLite) string {
			if m := lastMessage(req); m.Role == "tool" {
				return countAnswer(m.Content)
			}
			return call
		}}
		s.model.SetReply(script.reply)
		defer s.model.SetReply(nil)

		res, err := s.task(ctx, "text", map[string]any{"goal": "How many customers live in 'Berlin'?", "taskId": "tagged"})
		if err != nil || res.Type != workflows.TypeFinish || res.Task == nil || res.Task.Status != workflows.TaskFinished {
			t.Fatalf("task: %v %+v\n%s", err, res, s.workerLogs())
		}
		if want := fmt.Sprintf("There are %d customers.", customersIn(t, shop, "Berlin")); res.Answer != want {
			t.Errorf("answer %q, want %q", res.Answer, want)
		}
		st := res.Task
		if st.Step != 2 || len(st.Steps) != 2 || st.Steps[0].Tool != "run_sql" || !st.Steps[0].OK || !strings.Contains(st.Steps[0].Args, "Berlin") {
			t.Fatalf("steps: %d %+v", st.Step, st.Steps)
		}
		// Step 2 saw the call as a call (the view's assistant tool call,
		// after the prose before it), and its result.
		reqs := script.requests()
		if len(reqs) != 2 {
			t.Fatalf("%d steps asked the model, want 2", len(reqs))
		}
		msgs := reqs[1].Messages
		n := len(msgs)
		if n < 3 || msgs[n-3].Content != "I will count them." || !strings.Contains(string(msgs[n-2].ToolCalls), `"run_sql"`) || msgs[n-1].Role != "tool" {
			t.Errorf("step 2 saw %+v", msgs)
		}
		s.killWorker() // release the transcripts
		checkTaskTranscript(t, filepath.Join(s.dataDir, "transcripts", workflows.DefaultTenant, "text:task:tagged.jsonl"), 1)
		s.startWorker()
	})

	t.Run("a broken attempt", func(t *testing.T) {
		const broken = `{'name': 'run_sql', 'arguments': {'sql': 'SELECT count(*) AS n FROM customers'}}`
		const fixed = "Sorry. The call:\n```json\n{\"name\": \"run_sql\", \"arguments\": {\"sql\": \"SELECT count(*) AS n FROM customers\"}}\n```"
		script := &textCallScript{step: func(req fakeollama.ChatRequestLite) string {
			switch m := lastMessage(req); {
			case m.Role == "tool":
				return countAnswer(m.Content)
			case strings.Contains(m.Content, "json_parse_error"):
				return fixed
			}
			return broken
		}}
		s.model.SetReply(script.reply)
		defer s.model.SetReply(nil)

		res, err := s.task(ctx, "text", map[string]any{"goal": "How many customers are there?", "taskId": "broken"})
		if err != nil || res.Type != workflows.TypeFinish || res.Task == nil || res.Task.Status != workflows.TaskFinished {
			t.Fatalf("task: %v %+v\n%s", err, res, s.workerLogs())
		}
		if want := fmt.Sprintf("There are %d customers.", shopCounts(t, shop)["customers"]); res.Answer != want {
			t.Errorf("answer %q, want %q", res.Answer, want)
		}
		st := res.Task
		if st.Step != 3 || len(st.Steps) != 3 || st.Steps[0].Tool != "" || st.Steps[0].OK || !strings.HasPrefix(st.Steps[0].Observation, "json_parse_error: ") ||
			st.Steps[1].Tool != "run_sql" || !st.Steps[1].OK {
			t.Fatalf("steps: %d %+v", st.Step, st.Steps)
		}
		// Step 2 saw the raw reply and the json_parse_error observation,
		// with the raw reply and a format example.
		reqs := script.requests()
		if len(reqs) != 3 {
			t.Fatalf("%d steps asked the model, want 3", len(reqs))
		}
		msgs := reqs[1].Messages
		n := len(msgs)
		var obs struct {
			Type, Error, Raw, Expected string
		}
		if n < 2 || msgs[n-2].Role != "assistant" || msgs[n-2].Content != broken || msgs[n-1].Role != "user" ||
			json.Unmarshal([]byte(msgs[n-1].Content), &obs) != nil {
			t.Fatalf("step 2 saw %+v", msgs)
		}
		if obs.Type != "json_parse_error" || obs.Raw != broken || obs.Error == "" || !strings.Contains(obs.Expected, `"tool": "<tool name>"`) {
			t.Errorf("the observation is %+v", obs)
		}
	})
}
