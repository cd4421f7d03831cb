package tests

import (
	"context"
	"fmt"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/workflow"

	"github.com/ctxflow/ctxflow/worker"
	"github.com/ctxflow/ctxflow/workflows"
)

// deployChange is the change the second build of TestDeployNewVersion
// makes to the session workflow, gated as every change is.
const deployChange = "deploy-test-change"

// changedSession is the session workflow of the second build: a new path,
// taken by runs that start on it, recorded in their histories.
func changedSession(ctx workflow.Context, in workflows.SessionInput) error {
	if workflow.GetVersion(ctx, deployChange, workflow.DefaultVersion, 1) == 1 {
		workflow.GetLogger(ctx).Info("session on the second build's path")
	}
	return workflows.SessionWorkflow(ctx, in)
}

// TestDeployNewVersion deploys a second build with a changed session
// workflow while sessions and a paused agent task are live, as
// docs/operations.md says to: workers of version v2 start beside v1's,
// v2 is promoted, v1's workers stop. The running sessions and the paused
// task move to v2 at their next workflow task (auto-upgrade) on the
// workflow's old path, a new session takes the new one, and every turn is
// answered once.
func TestDeployNewVersion(t *testing.T) {
	s := startStack(t, stackOptions{})
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	ports := s.inProcessPorts(t, "CTXFLOW_MODEL_PROVIDER=offline")
	v1 := worker.Version{Deployment: "ctxflow-test", BuildID: "v1"}
	v2 := worker.Version{Deployment: "ctxflow-test", BuildID: "v2"}

	w1 := worker.New(s.client, ports, 0, v1)
	if err := w1.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			w1.Stop()
		}
	}()
	if err := worker.Promote(ctx, s.client, v1); err != nil {
		t.Fatal(err)
	}
	turn := func(session, id, q string) workflows.TurnResult {
		t.Helper()
		res, _, err := s.turn(ctx, session, id, q)
		if err != nil || res.Status != workflows.TurnCompleted {
			t.Fatalf("%s %s %q: %v %+v", session, id, q, err, res)
		}
		return res
	}
	for _, id := range []string{"a", "b"} {
		turn(id, "t1", "What is a durable workflow?")
	}
	paused, err := s.task(ctx, "agent", map[string]any{"goal": "How many customers are there?", "taskId": "k", "config": map[string]int{"maxSteps": 2}})
	if err != nil || paused.Type != workflows.TypePause {
		t.Fatalf("task: %v %+v", err, paused)
	}
	for _, id := range []string{"a", "agent"} {
		if got := s.buildOf(t, ctx, workflows.SessionWorkflowID(workflows.DefaultTenant, id)); got != "v1" {
			t.Errorf("session %s runs on %q before the deploy, want v1", id, got)
		}
	}

	// The deploy: v2 beside v1, promoted, then v1 stops.
	w2 := worker.New(s.client, ports, 0, v2)
	w2.RegisterWorkflowWithOptions(changedSession, workflow.RegisterOptions{Name: workflows.SessionWorkflowName, DisableAlreadyRegisteredCheck: true})
	if err := w2.Start(); err != nil {
		t.Fatal(err)
	}
	defer w2.Stop()
	if err := worker.Promote(ctx, s.client, v2); err != nil {
		t.Fatal(err)
	}
	w1.Stop()
	stopped = true

	// Every turn is answered once: two messages a turn.
	for _, id := range []string{"a", "b"} {
		if res := turn(id, "t2", "How does it survive a crash?"); res.SessionInfo.Messages != 4 {
			t.Errorf("session %s after its second turn: %+v", id, res.SessionInfo)
		}
	}
	if res := turn("agent", "go", "继续"); res.Type != workflows.TypeFinish {
		t.Errorf("继续 after the deploy: %+v", res)
	}
	if got := s.buildOf(t, ctx, workflows.TaskWorkflowID(workflows.DefaultTenant, "agent", "k")); got != "v2" {
		t.Errorf("the paused task finished on %q, want v2", got)
	}
	if res := turn("c", "t1", "What is a durable workflow?"); res.SessionInfo.Messages != 2 {
		t.Errorf("new session after the deploy: %+v", res.SessionInfo)
	}
	for _, id := range []string{"a", "b", "agent", "c"} {
		wid := workflows.SessionWorkflowID(workflows.DefaultTenant, id)
		if got := s.buildOf(t, ctx, wid); got != "v2" {
			t.Errorf("session %s runs on %q after the deploy, want v2", id, got)
		}
		// The sessions that ran on v1 replay on v2 by the old path; the
		// one started on v2 records the new one.
		if got, want := s.hasChange(t, ctx, wid, deployChange), id == "c"; got != want {
			t.Errorf("session %s: change %q recorded %v, want %v", id, deployChange, got, want)
		}
	}
	st, err := worker.Status(ctx, s.client, v2.Deployment)
	if err != nil || st.Current != "v2" || len(st.Versions) != 2 {
		t.Errorf("deployment status: %v %+v", err, st)
	}
}

// buildOf is the build id the workflow's last workflow task ran on.
func (s *stack) buildOf(t *testing.T, ctx context.Context, wid string) string {
	t.Helper()
	d, err := s.client.DescribeWorkflowExecution(ctx, wid, "")
	if err != nil {
		t.Fatal(err)
	}
	return d.GetWorkflowExecutionInfo().GetVersioningInfo().GetDeploymentVersion().GetBuildId()
}

// hasChange reports a GetVersion marker for change in the history of the
// workflow's current run.
func (s *stack) hasChange(t *testing.T, ctx context.Context, wid, change string) bool {
	t.Helper()
	it := s.client.GetWorkflowHistory(ctx, wid, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		m := ev.GetMarkerRecordedEventAttributes()
		if m == nil || m.GetMarkerName() != "Version" {
			continue
		}
		if p := m.GetDetails()["change-id"]; p != nil && len(p.GetPayloads()) > 0 && string(p.GetPayloads()[0].GetData()) == fmt.Sprintf("%q", change) {
			return true
		}
	}
	return false
}
