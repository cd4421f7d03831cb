package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/workflows"
)

// TestPostTask: a task is a task turn whose goal is the question and
// whose turn id is the task id.
func TestPostTask(t *testing.T) {
	f := newFake(t)
	got := recordUpdate(t, f, submitted(t))
	h := server(f)
	w := do(h, http.MethodPost, "/v1/sessions/s1/tasks", `{"goal":"How many rows does each table have?","taskId":"t-7","config":{"maxSteps":5}}`)
	var resp struct{ SessionID, TurnID, TaskID, Status string }
	decode(t, w, &resp)
	if w.Code != http.StatusAccepted || resp.TaskID != "t-7" || resp.TurnID != "t-7" || resp.Status != workflows.TurnQueued {
		t.Fatalf("POST task = %d %+v", w.Code, resp)
	}
	u := (*got)[0].UpdateOptions
	req := u.Args[0].(workflows.TurnRequest)
	if u.UpdateName != workflows.UpdateSubmit || req.Kind != workflows.KindTask || req.MaxSteps != 5 ||
		req.Question != "How many rows does each table have?" || req.TurnID != "t-7" {
		t.Errorf("update %q with %+v", u.UpdateName, req)
	}
	// A task id is generated when none is given.
	decode(t, do(h, http.MethodPost, "/v1/sessions/s1/tasks", `{"goal":"again"}`), &resp)
	if !strings.HasPrefix(resp.TaskID, "turn-") {
		t.Errorf("generated task id %q", resp.TaskID)
	}

	n := len(*got)
	for _, body := range []string{`{}`, `{"goal":""}`, `{"goal":"x","config":{"maxSteps":500}}`, `{"goal":"x","config":{"maxSteps":-1}}`, `{"goal":"x","taskId":"a/b"}`, `{"goal":"x","extra":1}`} {
		wantError(t, do(h, http.MethodPost, "/v1/sessions/s1/tasks", body), http.StatusBadRequest, "invalid_argument")
	}
	if len(*got) != n {
		t.Error("a bad task reached the session")
	}
}

func TestGetTask(t *testing.T) {
	f := newFake(t)
	st := workflows.TaskState{TaskID: "t-7", WorkflowID: "session/default/s1/task/t-7", Goal: "count rows", Status: workflows.TaskPaused, Step: 12, Budget: 24,
		Steps: []activities.StepRecord{{N: 1, Tool: "list_tables", Observation: "customers, orders"}}, Summary: "Done so far: listed tables."}
	f.QueryWorkflowFn = func(_ context.Context, workflowID, _, queryType string, _ ...any) (converter.EncodedValue, error) {
		if queryType != workflows.QueryState {
			t.Errorf("query %q", queryType)
		}
		if workflowID != st.WorkflowID {
			return nil, serviceerror.NewNotFound("workflow not found")
		}
		return encode(t, st), nil
	}
	h := server(f)
	w := do(h, http.MethodGet, "/v1/sessions/s1/tasks/t-7", "")
	var resp struct {
		SessionID, Type string
		Task            workflows.TaskState
	}
	decode(t, w, &resp)
	if w.Code != http.StatusOK || resp.Type != workflows.TypePause || resp.Task.Step != 12 || len(resp.Task.Steps) != 1 || resp.Task.Steps[0].Tool != "list_tables" {
		t.Errorf("GET task = %d %+v", w.Code, resp)
	}
	wantError(t, do(h, http.MethodGet, "/v1/sessions/s1/tasks/t-8", ""), http.StatusNotFound, "not_found")
	wantError(t, do(h, http.MethodGet, "/v1/sessions/s1/tasks/.x", ""), http.StatusBadRequest, "invalid_argument")
}

func TestDeleteTask(t *testing.T) {
	const wid = "session/default/s1/task/t-7"
	for _, tc := range []struct {
		name      string
		signalErr error
		exists    bool
		get       func(context.Context, any) error
		status    int
		code      string
	}{
		{name: "canceled", get: result(t, nil), status: http.StatusNoContent},
		{name: "slow to end", get: func(context.Context, any) error { return context.DeadlineExceeded }, status: http.StatusAccepted},
		{name: "already ended", signalErr: serviceerror.NewNotFound("workflow execution already completed"), exists: true, status: http.StatusConflict, code: "conflict"},
		{name: "unknown", signalErr: serviceerror.NewNotFound("workflow not found"), status: http.StatusNotFound, code: "not_found"},
		{name: "temporal down", signalErr: serviceerror.NewUnavailable("down"), status: http.StatusServiceUnavailable, code: "unavailable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t)
			f.SignalWorkflowFn = func(_ context.Context, workflowID, _, signal string, _ any) error {
				if workflowID != wid || signal != workflows.SignalCancel {
					t.Errorf("signal %q to %q", signal, workflowID)
				}
				return tc.signalErr
			}
			f.DescribeWorkflowExecutionFn = func(context.Context, string, string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
				if tc.exists {
					return &workflowservice.DescribeWorkflowExecutionResponse{}, nil
				}
				return nil, serviceerror.NewNotFound("workflow not found")
			}
			f.GetWorkflowFn = func(context.Context, string, string) client.WorkflowRun { return run{id: wid, get: tc.get} }
			w := do(server(f), http.MethodDelete, "/v1/sessions/s1/tasks/t-7", "")
			if tc.code != "" {
				wantError(t, w, tc.status, tc.code)
			} else if w.Code != tc.status {
				t.Errorf("DELETE = %d %s", w.Code, w.Body)
			}
		})
	}
}
