package workflows_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/convo"
	"github.com/ctxflow/ctxflow/workflows"
)

// send sends a turn update at the given delay and records its outcome.
func send(env *testsuite.TestWorkflowEnvironment, at time.Duration, req workflows.TurnRequest) *outcome {
	o := &outcome{}
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(workflows.UpdateTurn, workflows.TurnUpdateID(workflows.UpdateTurn, req), &testsuite.TestUpdateCallback{
			OnAccept: func() {}, OnReject: func(err error) { o.rejected, o.done = err, true },
			OnComplete: func(v any, err error) { o.result, _ = v.(workflows.TurnResult); o.err, o.done = err, true },
		}, req)
	}, at)
	return o
}

// cancelTurn sends a cancel of a turn at the given delay.
func cancelTurn(env *testsuite.TestWorkflowEnvironment, at time.Duration, turnID string, then func()) *outcome {
	o := &outcome{}
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(workflows.UpdateCancelTurn, fmt.Sprint("cancel/", turnID, "/", at), &testsuite.TestUpdateCallback{
			OnAccept: func() {}, OnReject: func(err error) { o.rejected, o.done = err, true },
			OnComplete: func(v any, err error) { o.result, _ = v.(workflows.TurnResult); o.err, o.done = err, true },
		}, turnID)
		if then != nil {
			then()
		}
	}, at)
	return o
}

func viewHas(req activities.PlanRequest, text string) bool {
	for _, m := range req.View {
		if m.Role == "user" && strings.Contains(m.Content, text) {
			return true
		}
	}
	return false
}

// A question sent with busy=steer while the session's task runs (here: it
// waits for an approval) is not queued: it is given to the task, which
// reads it before its next step — the next step's prompt holds it, and the
// task's state lists it. busy=reject meanwhile is a conflict.
func TestSteeringGuidanceReachesTheNextStep(t *testing.T) {
	h := newApprovalHarness(t, dropPlan)
	task := send(h.env, time.Minute, workflows.TurnRequest{TurnID: "t1", Question: "Clean up the import tables", Kind: workflows.KindTask})
	steer := send(h.env, 2*time.Minute, workflows.TurnRequest{TurnID: "g1", Question: "only drop tables of 2024", Busy: workflows.BusySteer})
	reject := send(h.env, 3*time.Minute, workflows.TurnRequest{TurnID: "r1", Question: "what time is it?", Busy: workflows.BusyReject})
	taskID := workflows.TaskWorkflowID("t1", "s1", "t1")
	h.env.RegisterDelayedCallback(func() {
		err := h.env.UpdateWorkflowByID(taskID, workflows.UpdateApproval, "a1", &testsuite.TestUpdateCallback{
			OnAccept: func() {}, OnReject: func(err error) { t.Errorf("approval rejected: %v", err) }, OnComplete: func(any, error) {},
		}, workflows.ApprovalDecision{CallID: "s1.c1", Decision: workflows.DecisionApprove})
		if err != nil {
			t.Errorf("approve: %v", err)
		}
	}, 4*time.Minute)
	h.env.ExecuteWorkflow(workflows.SessionWorkflowName, workflows.SessionInput{Tenant: "t1", SessionID: "s1", Limits: workflows.Limits{IdleTTL: time.Hour}})

	if task.result.Type != workflows.TypeApproval {
		t.Fatalf("task turn = %s %s %q (%s)", task.result.Status, task.result.Type, task.result.Answer, task.result.Error)
	}
	if steer.rejected != nil || steer.result.Status != workflows.TurnCompleted || steer.result.Type != workflows.TypeSteer {
		t.Fatalf("steer turn = %+v (rejected: %v)", steer.result, steer.rejected)
	}
	if reject.rejected == nil || codeOf(reject.rejected) != activities.CodeConflict {
		t.Errorf("busy=reject while the task runs: %v (code %q), want a conflict", reject.rejected, codeOf(reject.rejected))
	}
	reqs := h.planner.requests()
	if len(reqs) != 2 {
		t.Fatalf("planner asked %d times, want 2", len(reqs))
	}
	if viewHas(reqs[0], "only drop tables of 2024") || !viewHas(reqs[1], "Guidance from the user: only drop tables of 2024") {
		t.Errorf("step 2's prompt lacks the guidance: %+v", reqs[1].View)
	}
	if n := h.called("drop_table"); n != 1 {
		t.Errorf("drop_table ran %d times, want once", n)
	}
	// The steering question was not queued as a turn of its own.
	st := (&harness{env: h.env}).state(t)
	if st.Turns != 1 || len(st.Pending) != 0 || st.Task.Status != workflows.TaskFinished {
		t.Errorf("session: %d turns, %d pending, task %+v", st.Turns, len(st.Pending), st.Task)
	}
}

// "继续，<guidance>" resumes the paused task with the guidance: the step
// after the pause sees the continue and then the guidance.
func TestContinueWithGuidance(t *testing.T) {
	h := newTaskHarness(t, func(n int, req activities.PlanRequest) activities.PlanStep {
		if n == 1 {
			return use("list_tables", struct{}{})
		}
		return activities.PlanStep{Answer: "2024 orders: 12"}
	})
	send(h.env, time.Minute, workflows.TurnRequest{TurnID: "t1", Question: "How many orders?", Kind: workflows.KindTask, MaxSteps: 1})
	cont := send(h.env, 2*time.Minute, workflows.TurnRequest{TurnID: "c1", Question: "继续，只看2024年的订单"})
	api := send(h.env, 3*time.Minute, workflows.TurnRequest{TurnID: "c2", Question: "continue", Kind: workflows.KindContinue, Guidance: "x", Busy: "never"})
	h.env.ExecuteWorkflow(workflows.SessionWorkflowName, workflows.SessionInput{Tenant: "t1", SessionID: "s1", Limits: workflows.Limits{IdleTTL: time.Hour}})

	if cont.result.Type != workflows.TypeFinish || cont.result.Answer != "2024 orders: 12" {
		t.Fatalf("继续，… = %s %s %q (%s)", cont.result.Status, cont.result.Type, cont.result.Answer, cont.result.Error)
	}
	reqs := h.planner.requests()
	if len(reqs) != 2 || !viewHas(reqs[1], "Guidance from the user: 只看2024年的订单") {
		t.Fatalf("step 2's prompt lacks the guidance: %+v", reqs[len(reqs)-1].View)
	}
	if g := cont.result.Task.Guidance; len(g) != 1 || g[0].TurnID != "c1" || g[0].Step != 2 {
		t.Errorf("task guidance = %+v", g)
	}
	if api.rejected == nil || codeOf(api.rejected) != activities.CodeInvalidArgument {
		t.Errorf("a bad busy value: %v, want invalid_argument", api.rejected)
	}
}

// blockingModel streams a first fragment, then writes nothing more until
// released (or cancelled).
type blockingModel struct {
	mu      sync.Mutex
	calls   []activities.ChatRequest
	block   bool
	release chan struct{}
}

func (m *blockingModel) Chat(ctx context.Context, req activities.ChatRequest, stream func(string)) (activities.ChatResponse, error) {
	m.mu.Lock()
	m.calls = append(m.calls, req)
	block := m.block
	m.block = false
	m.mu.Unlock()
	if !block {
		return activities.ChatResponse{Content: fmt.Sprintf("answer to: %s", req.Messages[len(req.Messages)-1].Content), Model: req.Model}, nil
	}
	if stream != nil {
		stream("The first part")
	}
	select {
	case <-ctx.Done():
		return activities.ChatResponse{}, ctx.Err()
	case <-m.release:
		return activities.ChatResponse{}, context.Canceled
	}
}

// A cancel during a streamed model call stops the call; the turn ends
// cancelled and the session goes on with the next turn; cancelling a
// finished turn is a conflict, an unknown one not found.
func TestCancelDuringStreamedModelCall(t *testing.T) {
	model := &blockingModel{block: true, release: make(chan struct{})}
	var once sync.Once
	release := func() { once.Do(func() { close(model.release) }) }
	t.Cleanup(release)
	h := newHarness(t)
	h.env = newHarnessWith(t, h.store, func(s *activities.Session, env *testsuite.TestWorkflowEnvironment) { s.Model = model }).env
	first := send(h.env, time.Minute, workflows.TurnRequest{TurnID: "q1", Question: "Tell me a long story"})
	// Sent while the call runs (an activity is running: wall time).
	cancel := cancelTurn(h.env, time.Minute+300*time.Millisecond, "q1", release)
	second := send(h.env, 2*time.Minute, workflows.TurnRequest{TurnID: "q2", Question: "And a short one?"})
	again := cancelTurn(h.env, 3*time.Minute, "q1", nil)
	unknown := cancelTurn(h.env, 3*time.Minute, "nope", nil)
	h.env.ExecuteWorkflow(workflows.SessionWorkflowName, workflows.SessionInput{Tenant: "t1", SessionID: "s1", Limits: workflows.Limits{IdleTTL: time.Hour}})

	if cancel.rejected != nil || cancel.result.Status != workflows.TurnCancelled {
		t.Fatalf("cancel = %+v (rejected: %v)", cancel.result, cancel.rejected)
	}
	if first.result.Status != workflows.TurnCancelled || first.err != nil {
		t.Errorf("the cancelled turn = %s %q (%s)", first.result.Status, first.result.Answer, first.result.Error)
	}
	if second.result.Status != workflows.TurnCompleted || !strings.Contains(second.result.Answer, "And a short one?") {
		t.Errorf("the next turn = %+v", second.result)
	}
	if again.rejected == nil || codeOf(again.rejected) != activities.CodeConflict {
		t.Errorf("cancel of a finished turn: %v, want a conflict", again.rejected)
	}
	if unknown.rejected == nil || codeOf(unknown.rejected) != activities.CodeNotFound {
		t.Errorf("cancel of an unknown turn: %v, want not found", unknown.rejected)
	}
	if st := h.state(t); st.Health != workflows.HealthOK || st.Turns != 2 {
		t.Errorf("session after the cancel: health %s, %d turns", st.Health, st.Turns)
	}
}

// The partial answer of a cancelled turn is kept in the transcript but
// never shown to the model.
func TestCancelledAnswerIsLeftOutOfTheView(t *testing.T) {
	msgs := []convo.Message{
		{ID: "u1", Role: convo.RoleUser, Content: "Tell me a story"},
		{ID: "a1", ParentID: "u1", Role: convo.RoleAssistant, Content: "Once upon", Meta: map[string]string{convo.MetaStatus: convo.StatusCancelled}},
		{ID: "u2", ParentID: "a1", Role: convo.RoleUser, Content: "A short one"},
	}
	view, err := convo.ToModelMessages(msgs)
	if err != nil {
		t.Fatal(err)
	}
	if len(view) != 2 || view[0].Content != "Tell me a story" || view[1].Content != "A short one" {
		t.Errorf("view = %+v", view)
	}
}
