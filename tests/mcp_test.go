package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/ctxflow/ctxflow/tests/fakeollama"
	"github.com/ctxflow/ctxflow/tests/mcptest"
	"github.com/ctxflow/ctxflow/workflows"
)

// offeredTools are the names of the functions a model request offers.
func offeredTools(req fakeollama.ChatRequestLite) []string {
	var tools []struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	_ = json.Unmarshal(req.Tools, &tools)
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = t.Function.Name
	}
	return names
}

// textCall is a tool call written as text, in Qwen's tag.
func textCall(name string, args any) string {
	b, _ := json.Marshal(map[string]any{"name": name, "arguments": args})
	return "<tool_call>\n" + string(b) + "\n</tool_call>"
}

// TestAgentTaskWithMCPServers (issue 25, item 2): a real MCP server
// (@modelcontextprotocol/server-everything, installed from the npm
// registry by scripts/mcp-server.sh) serves the agent twice: over stdio,
// run by the worker, and over streamable HTTP. A task's model is offered
// their tools under wire names and calls one; the result reaches the next
// step and the task finishes. A worker killed during a slow call: the call
// (read-only, so retried) is made again by the next worker and the task
// finishes. A server that goes down after the task listed its tools: the
// call is an observation and the task finishes. A call of a session whose
// approveTools names the server waits, and runs once approved. The recorded histories
// replay with the servers stopped.
func TestAgentTaskWithMCPServers(t *testing.T) {
	cmd := mcptest.Command(t)
	web := mcptest.StartHTTP(t)
	s := startStack(t, stackOptions{extraEnv: []string{
		"CTXFLOW_MCP_SERVERS=everything=stdio:" + strings.Join(cmd, " ") + " stdio; web=" + web.URL,
		"CTXFLOW_MCP_TIMEOUT=30s",
	}})
	s.startWorker()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	var tasks []string // workflow ids to replay

	t.Run("a call", func(t *testing.T) {
		script := &textCallScript{step: func(req fakeollama.ChatRequestLite) string {
			if m := lastMessage(req); m.Role == "tool" {
				return "The tool said: " + m.Content
			}
			return "Let me add them.\n" + textCall("mcp__everything__get-sum", map[string]int{"a": 2, "b": 3})
		}}
		s.model.SetReply(script.reply)
		defer s.model.SetReply(nil)
		res, err := s.task(ctx, "mcp", map[string]any{"goal": "What is 2 + 3?", "taskId": "sum"})
		if err != nil || res.Type != workflows.TypeFinish || res.Task == nil || res.Task.Status != workflows.TaskFinished {
			t.Fatalf("task: %v %+v\n%s", err, res, s.workerLogs())
		}
		if res.Answer != "The tool said: The sum of 2 and 3 is 5." {
			t.Errorf("answer %q", res.Answer)
		}
		st := res.Task
		if len(st.Steps) != 2 || st.Steps[0].Tool != "mcp:everything/get-sum" || !st.Steps[0].OK {
			t.Fatalf("steps: %+v", st.Steps)
		}
		offered := offeredTools(script.requests()[0])
		for _, want := range []string{"run_sql", "mcp__everything__echo", "mcp__everything__get-sum", "mcp__web__trigger-long-running-operation"} {
			if !slices.Contains(offered, want) {
				t.Errorf("the model was not offered %s: %v", want, offered)
			}
		}
		for _, name := range offered {
			if strings.ContainsAny(name, ":/") {
				t.Errorf("offered %q, not a wire name", name)
			}
		}
		tasks = append(tasks, workflows.TaskWorkflowID(workflows.DefaultTenant, "mcp", "sum"))
	})

	t.Run("an approved call", func(t *testing.T) {
		script := &textCallScript{step: func(req fakeollama.ChatRequestLite) string {
			if m := lastMessage(req); m.Role == "tool" {
				return "The tool said: " + m.Content
			}
			return "Let me echo it.\n" + textCall("mcp__everything__echo", map[string]string{"message": "approved"})
		}}
		s.model.SetReply(script.reply)
		defer s.model.SetReply(nil)
		if code, err := s.do(ctx, http.MethodPost, "/v1/sessions", map[string]any{"sessionId": "mcp-gate",
			"config": map[string]any{"approveTools": []string{"mcp:everything/*"}}}, nil); code != http.StatusCreated {
			t.Fatalf("create session: %d %v", code, err)
		}
		res, err := s.task(ctx, "mcp-gate", map[string]any{"goal": "Echo a word.", "taskId": "echo"})
		if err != nil || res.Type != workflows.TypeApproval || len(res.Pending) != 1 || res.Pending[0].Tool != "mcp:everything/echo" {
			t.Fatalf("task: %v %+v\n%s", err, res, s.workerLogs())
		}
		out, code, err := s.approval(ctx, "mcp-gate", "echo", res.Pending[0].CallID, map[string]any{"decision": "approve"})
		if err != nil || code != http.StatusOK || out.Type != workflows.TypeFinish || out.Task.Status != workflows.TaskFinished {
			t.Fatalf("approve: %d %v %+v\n%s", code, err, out, s.workerLogs())
		}
		if want := "The tool said: Echo: approved"; out.Task.Answer != want {
			t.Errorf("answer %q, want %q", out.Task.Answer, want)
		}
		tasks = append(tasks, workflows.TaskWorkflowID(workflows.DefaultTenant, "mcp-gate", "echo"))
	})

	t.Run("a worker kill during a slow call", func(t *testing.T) {
		var asked atomic.Int32
		script := &textCallScript{step: func(req fakeollama.ChatRequestLite) string {
			if m := lastMessage(req); m.Role == "tool" {
				return "Done: " + m.Content
			}
			asked.Add(1)
			return textCall("mcp__web__trigger-long-running-operation", map[string]int{"duration": 6, "steps": 3})
		}}
		s.model.SetReply(script.reply)
		defer s.model.SetReply(nil)
		type result struct {
			res taskReply
			err error
		}
		done := make(chan result, 1)
		go func() {
			res, err := s.task(ctx, "mcp", map[string]any{"goal": "Run the long operation.", "taskId": "slow"})
			done <- result{res, err}
		}()
		for deadline := time.Now().Add(time.Minute); asked.Load() == 0; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the task's first step never asked the model\n%s", s.workerLogs())
			}
		}
		time.Sleep(1500 * time.Millisecond) // the call runs (6 s)
		s.killWorker()
		s.startWorker()
		r := <-done
		if r.err != nil || r.res.Type != workflows.TypeFinish || r.res.Task == nil || r.res.Task.Status != workflows.TaskFinished {
			t.Fatalf("task: %v %+v\n%s", r.err, r.res, s.workerLogs())
		}
		if want := "Done: Long running operation completed. Duration: 6 seconds, Steps: 3."; r.res.Answer != want {
			t.Errorf("answer %q, want %q", r.res.Answer, want)
		}
		wid := workflows.TaskWorkflowID(workflows.DefaultTenant, "mcp", "slow")
		if n := callAttempts(t, s, wid, "mcp:web/trigger-long-running-operation"); n < 2 {
			t.Errorf("the call was started %d times: the worker was not killed during it", n)
		}
		tasks = append(tasks, wid)
	})

	t.Run("a server down after the listing", func(t *testing.T) {
		script := &textCallScript{step: func(req fakeollama.ChatRequestLite) string {
			if m := lastMessage(req); m.Role == "tool" {
				return "Observed: " + m.Content
			}
			web.Stop() // listed, now gone
			return textCall("mcp__web__echo", map[string]string{"message": "anyone?"})
		}}
		s.model.SetReply(script.reply)
		defer s.model.SetReply(nil)
		res, err := s.task(ctx, "mcp", map[string]any{"goal": "Echo through the web server.", "taskId": "down"})
		if err != nil || res.Type != workflows.TypeFinish || res.Task == nil || res.Task.Status != workflows.TaskFinished {
			t.Fatalf("task: %v %+v\n%s", err, res, s.workerLogs())
		}
		st := res.Task
		if len(st.Steps) != 2 || st.Steps[0].Tool != "mcp:web/echo" || st.Steps[0].OK ||
			!strings.Contains(st.Steps[0].Observation, "the tool failed after its retries") || !strings.Contains(res.Answer, "mcp server web") {
			t.Fatalf("steps: %+v, answer %q", st.Steps, res.Answer)
		}
		tasks = append(tasks, workflows.TaskWorkflowID(workflows.DefaultTenant, "mcp", "down"))
	})

	// Replay: the workflow code alone, with every server stopped.
	s.stopWorker()
	web.Stop()
	for _, wid := range tasks {
		h, err := fetchHistory(ctx, s.client, wid, "")
		if err != nil {
			t.Fatal(err)
		}
		r := worker.NewWorkflowReplayer()
		r.RegisterWorkflowWithOptions(workflows.TaskWorkflow, workflow.RegisterOptions{Name: workflows.TaskWorkflowName})
		if err := r.ReplayWorkflowHistory(nil, h); err != nil {
			t.Errorf("replay %s: %v", wid, err)
		}
	}
	if os.Getenv("CTXFLOW_RECORD_HISTORY") == "1" && len(tasks) > 1 {
		writeHistory(t, ctx, s, tasks[1], "", "testdata/task_mcp.json")
	}
}

// callAttempts is how many times the activity of a call of tool was
// started in a workflow's history (its latest attempt).
func callAttempts(t *testing.T, s *stack, wid, tool string) int {
	t.Helper()
	h, err := fetchHistory(t.Context(), s.client, wid, "")
	if err != nil {
		t.Fatal(err)
	}
	scheduled := map[int64]bool{}
	attempts := 0
	for _, ev := range h.Events {
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			if strings.HasSuffix(string(ev.GetUserMetadata().GetSummary().GetData()), fmt.Sprintf("%s\"", tool)) {
				scheduled[ev.GetEventId()] = true
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			if a := ev.GetActivityTaskStartedEventAttributes(); scheduled[a.GetScheduledEventId()] {
				attempts = max(attempts, int(a.GetAttempt()))
			}
		}
	}
	return attempts
}
