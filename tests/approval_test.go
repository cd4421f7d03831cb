package tests

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ctxflow/ctxflow/tests/fakeollama"
	"github.com/ctxflow/ctxflow/workflows"
)

// approvalReply is the answer of POST .../approvals/{callId}.
type approvalReply struct {
	Type string              `json:"type"`
	Task workflows.TaskState `json:"task"`
}

func (s apiClient) approval(ctx context.Context, session, taskID, callID string, body map[string]any) (approvalReply, int, error) {
	var out approvalReply
	code, err := s.do(ctx, http.MethodPost, "/v1/sessions/"+session+"/tasks/"+taskID+"/approvals/"+callID, body, &out)
	return out, code, err
}

// TestAgentTaskApprovalGate (issue 25, item 1): a session whose config
// names run_sql in approveTools; the task's run_sql call waits for
// approval: the turn answers with type approval and the pending call, the
// task's CtxStatus is awaiting_approval, GET task and session list the
// call. The worker is killed with SIGKILL while the task waits; after a
// new worker starts, the approval runs the call once and the task
// finishes. A rejected call is an observation, and the task continues.
func TestAgentTaskApprovalGate(t *testing.T) {
	s := startStack(t, stackOptions{})
	s.startWorker()
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	shop := filepath.Join(s.dataDir, "demo", "shop.db")

	const call = "I will count them.\n<tool_call>\n{\"name\": \"run_sql\", \"arguments\": {\"sql\": \"SELECT count(*) AS n FROM customers WHERE city = 'Berlin'\"}}\n</tool_call>"
	script := &textCallScript{step: func(req fakeollama.ChatRequestLite) string {
		if m := lastMessage(req); m.Role == "tool" {
			if strings.Contains(m.Content, "rejected by the user") {
				return "I was not allowed to count them."
			}
			return countAnswer(m.Content)
		}
		return call
	}}
	s.model.SetReply(script.reply)
	defer s.model.SetReply(nil)

	if code, err := s.do(ctx, http.MethodPost, "/v1/sessions", map[string]any{"sessionId": "gate",
		"config": map[string]any{"approveTools": []string{"run_sql"}}}, nil); code != http.StatusCreated {
		t.Fatalf("create session: %d %v", code, err)
	}

	t.Run("approve after a kill", func(t *testing.T) {
		res, err := s.task(ctx, "gate", map[string]any{"goal": "How many customers live in 'Berlin'?", "taskId": "approved"})
		if err != nil || res.Type != workflows.TypeApproval || len(res.Pending) != 1 {
			t.Fatalf("task: %v %+v\n%s", err, res, s.workerLogs())
		}
		p := res.Pending[0]
		if p.Tool != "run_sql" || !strings.Contains(p.Arguments, "Berlin") || p.Reason != "I will count them." || p.CallID == "" {
			t.Fatalf("pending = %+v", p)
		}
		wid := workflows.TaskWorkflowID(workflows.DefaultTenant, "gate", "approved")
		if st := s.searchStatus(t, ctx, wid); st != workflows.TaskAwaiting {
			t.Errorf("CtxStatus = %q, want %s", st, workflows.TaskAwaiting)
		}
		st, err := s.taskState(ctx, "gate", "approved")
		if err != nil || st.Status != workflows.TaskAwaiting || len(st.Pending) != 1 || st.Pending[0].CallID != p.CallID {
			t.Fatalf("GET task: %v %s %+v", err, st.Status, st.Pending)
		}
		type sessionView struct {
			Task struct {
				Status  string                  `json:"status"`
				Pending []workflows.PendingCall `json:"pending"`
			} `json:"task"`
		}
		var view sessionView
		if _, err := s.do(ctx, http.MethodGet, "/v1/sessions/gate", nil, &view); err != nil || view.Task.Status != workflows.TaskAwaiting ||
			len(view.Task.Pending) != 1 {
			t.Errorf("GET session: %v %+v", err, view)
		}
		if st := s.searchStatus(t, ctx, workflows.SessionWorkflowID(workflows.DefaultTenant, "gate")); st != workflows.TaskAwaiting {
			t.Errorf("the session's CtxStatus = %q, want %s", st, workflows.TaskAwaiting)
		}

		s.killWorker()
		s.startWorker()
		s.waitWorkerReady()

		// Bad requests first: a wrong tenant, an unknown call, a bad decision.
		if code := postAs(t, ctx, s.apiClient, "other", "/v1/sessions/gate/tasks/approved/approvals/"+p.CallID, `{"decision": "approve"}`); code != http.StatusNotFound {
			t.Errorf("another tenant: %d, want 404", code)
		}
		if _, code, _ := s.approval(ctx, "gate", "approved", "s9.c1", map[string]any{"decision": "approve"}); code != http.StatusNotFound {
			t.Errorf("unknown call: %d, want 404", code)
		}
		if _, code, _ := s.approval(ctx, "gate", "approved", p.CallID, map[string]any{"decision": "maybe"}); code != http.StatusBadRequest {
			t.Errorf("bad decision: %d, want 400", code)
		}
		if _, code, _ := s.approval(ctx, "gate", "approved", p.CallID, map[string]any{"decision": "edit", "arguments": []int{1}}); code != http.StatusBadRequest {
			t.Errorf("edit with an array: %d, want 400", code)
		}

		out, code, err := s.approval(ctx, "gate", "approved", p.CallID, map[string]any{"decision": "approve"})
		if err != nil || code != http.StatusOK || out.Type != workflows.TypeFinish || out.Task.Status != workflows.TaskFinished {
			t.Fatalf("approve: %d %v %+v\n%s", code, err, out, s.workerLogs())
		}
		if want := fmt.Sprintf("There are %d customers.", customersIn(t, shop, "Berlin")); out.Task.Answer != want {
			t.Errorf("answer %q, want %q", out.Task.Answer, want)
		}
		if st := out.Task; st.Step != 2 || len(st.Steps) != 2 || st.Steps[0].Tool != "run_sql" || !st.Steps[0].OK || len(st.Pending) != 0 {
			t.Fatalf("steps: %d %+v", st.Step, st.Steps)
		}
		// The call ran once: one result in the transcript's model view.
		reqs := script.requests()
		last := reqs[len(reqs)-1].Messages
		tools := 0
		for _, m := range last {
			if m.Role == "tool" {
				tools++
			}
		}
		if tools != 1 {
			t.Errorf("the last step saw %d tool results, want 1", tools)
		}
		// The task ended: its calls can no longer be decided.
		if _, code, _ := s.approval(ctx, "gate", "approved", p.CallID, map[string]any{"decision": "reject"}); code != http.StatusConflict {
			t.Errorf("a decision after the end: %d, want 409", code)
		}
		// The session learned the end from the task's event.
		deadline := time.Now().Add(30 * time.Second)
		for {
			view = sessionView{}
			_, _ = s.do(ctx, http.MethodGet, "/v1/sessions/gate", nil, &view)
			if view.Task.Status == workflows.TaskFinished && len(view.Task.Pending) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the session shows %+v", view)
			}
			time.Sleep(50 * time.Millisecond)
		}
	})

	t.Run("reject", func(t *testing.T) {
		res, err := s.task(ctx, "gate", map[string]any{"goal": "How many customers live in 'Berlin'?", "taskId": "rejected"})
		if err != nil || res.Type != workflows.TypeApproval || len(res.Pending) != 1 {
			t.Fatalf("task: %v %+v\n%s", err, res, s.workerLogs())
		}
		out, code, err := s.approval(ctx, "gate", "rejected", res.Pending[0].CallID, map[string]any{"decision": "reject", "message": "not during business hours"})
		if err != nil || code != http.StatusOK || out.Type != workflows.TypeFinish || out.Task.Answer != "I was not allowed to count them." {
			t.Fatalf("reject: %d %v %+v\n%s", code, err, out, s.workerLogs())
		}
		if st := out.Task; len(st.Steps) != 2 || st.Steps[0].OK || !strings.Contains(st.Steps[0].Observation, "rejected by the user: not during business hours") {
			t.Fatalf("steps: %+v", st.Steps)
		}
	})

	// CTXFLOW_RECORD_HISTORY=1 records the histories of an approved task
	// (across the kill), a rejected one and their session, for
	// TestReplayRecordedHistories.
	if os.Getenv("CTXFLOW_RECORD_HISTORY") == "1" {
		writeHistory(t, ctx, s, workflows.TaskWorkflowID(workflows.DefaultTenant, "gate", "approved"), "", "testdata/task_approval.json")
		writeHistory(t, ctx, s, workflows.TaskWorkflowID(workflows.DefaultTenant, "gate", "rejected"), "", "testdata/task_approval_rejected.json")
		writeHistory(t, ctx, s, workflows.SessionWorkflowID(workflows.DefaultTenant, "gate"), "", "testdata/task_approval_session.json")
	}
}

// postAs posts a JSON body as a tenant and returns the status.
func postAs(t *testing.T, ctx context.Context, c apiClient, tenant, path, body string) int {
	t.Helper()
	c.tenant = tenant
	code, _ := c.do(ctx, http.MethodPost, path, []byte(body), nil)
	return code
}
