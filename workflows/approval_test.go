package workflows_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/activities/tiktoken"
	"github.com/ctxflow/ctxflow/convo"
	"github.com/ctxflow/ctxflow/workflows"
)

// approvalHarness is a task harness whose agent has, besides the fake
// tools, drop_table (declared to require approval) and run_sql (gated
// only when the session's approveTools names it); sqls records the
// statements run_sql ran.
type approvalHarness struct {
	*taskHarness
	mu   sync.Mutex
	sqls []string
}

func newApprovalHarness(t *testing.T, plan func(n int, req activities.PlanRequest) activities.PlanStep) *approvalHarness {
	t.Helper()
	store := newStore(t)
	tok, err := tiktoken.New("cl100k_base")
	if err != nil {
		t.Fatal(err)
	}
	h := &approvalHarness{taskHarness: &taskHarness{planner: &scriptedPlanner{plan: plan}, store: store, calls: &sync.Map{}}}
	tools := append(fakeTools(h.calls),
		activities.NewTool("drop_table", "Drops a table.", activities.ToolPolicy{Timeout: 10 * time.Second, RequiresApproval: true}, func(_ context.Context, a struct {
			Table string `json:"table"`
		}) (any, error) {
			n, _ := h.calls.LoadOrStore("drop_table", new(int))
			*(n.(*int))++
			return map[string]string{"dropped": a.Table}, nil
		}),
		activities.NewTool("run_sql", "Runs SQL.", activities.ToolPolicy{Timeout: 10 * time.Second}, func(_ context.Context, a struct {
			SQL string `json:"sql"`
		}) (any, error) {
			h.mu.Lock()
			h.sqls = append(h.sqls, a.SQL)
			h.mu.Unlock()
			return map[string]int{"count": 500}, nil
		}))
	h.env = newHarnessWith(t, store, func(s *activities.Session, env *testsuite.TestWorkflowEnvironment) {
		env.RegisterWorkflowWithOptions(workflows.TaskWorkflow, workflow.RegisterOptions{Name: workflows.TaskWorkflowName})
		env.RegisterActivity(&activities.Agent{Transcript: store, Tools: tools, Planner: h.planner, Tokenizer: tok})
	}).env
	return h
}

// decision is the outcome of an approval update.
type decision struct {
	rejected error
	state    workflows.TaskState
	err      error
	done     bool
}

// decide sends a decision at the given delay.
func (h *approvalHarness) decide(at time.Duration, id string, d workflows.ApprovalDecision) *decision {
	out := &decision{}
	h.env.RegisterDelayedCallback(func() {
		h.env.UpdateWorkflow(workflows.UpdateApproval, id, &testsuite.TestUpdateCallback{
			OnAccept: func() {},
			OnReject: func(err error) { out.rejected, out.done = err, true },
			OnComplete: func(v any, err error) {
				if st, ok := v.(workflows.TaskState); ok {
					out.state = st
				}
				out.err, out.done = err, true
			},
		}, d)
	}, at)
	return out
}

// state queries the task at the given delay.
func (h *approvalHarness) state(t *testing.T, at time.Duration) *workflows.TaskState {
	st := &workflows.TaskState{}
	h.env.RegisterDelayedCallback(func() {
		v, err := h.env.QueryWorkflow(workflows.QueryState)
		if err != nil {
			t.Errorf("query: %v", err)
			return
		}
		if err := v.Get(st); err != nil {
			t.Error(err)
		}
	}, at)
	return st
}

func codeOf(err error) string {
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) {
		return ae.Type()
	}
	return ""
}

func dropPlan(n int, req activities.PlanRequest) activities.PlanStep {
	if n == 1 {
		s := use("drop_table", map[string]string{"table": "tmp_orders"})
		s.Thought = "tmp_orders is a leftover of an import"
		return s
	}
	return activities.PlanStep{Answer: "Done."}
}

// A declared tool waits, durably, for approval: the task shows the
// pending call (tool, arguments, the model's reason) and the status
// awaiting_approval; approve runs it once; the same decision again is
// idempotent, another decision a conflict, an unknown call not found, a
// bad decision invalid.
func TestApprovalApproveRunsTheCall(t *testing.T) {
	h := newApprovalHarness(t, func(n int, req activities.PlanRequest) activities.PlanStep {
		if n == 1 {
			return activities.PlanStep{Thought: "tmp_orders and tmp_lines are leftovers of an import", Calls: []convo.ToolCall{
				{Name: "drop_table", Args: json.RawMessage(`{"table": "tmp_orders"}`)},
				{Name: "drop_table", Args: json.RawMessage(`{"table": "tmp_lines"}`)},
			}}
		}
		return activities.PlanStep{Answer: "Done."}
	})
	approve := func(call string) workflows.ApprovalDecision {
		return workflows.ApprovalDecision{CallID: call, Decision: workflows.DecisionApprove}
	}
	waiting := h.state(t, time.Hour)
	first := h.decide(time.Hour+time.Minute, "u1", approve("s1.c1"))
	again := h.decide(time.Hour+2*time.Minute, "u2", approve("s1.c1"))
	other := h.decide(time.Hour+2*time.Minute, "u3", workflows.ApprovalDecision{CallID: "s1.c1", Decision: workflows.DecisionReject})
	unknown := h.decide(time.Hour+2*time.Minute, "u4", approve("s9.c1"))
	bad := h.decide(time.Hour+2*time.Minute, "u5", workflows.ApprovalDecision{CallID: "s1.c2", Decision: workflows.DecisionEdit})
	still := h.state(t, time.Hour+3*time.Minute)
	last := h.decide(2*time.Hour, "u6", approve("s1.c2"))
	h.env.ExecuteWorkflow(workflows.TaskWorkflowName, taskInput(12))
	st := h.result(t)

	if waiting.Status != workflows.TaskAwaiting || len(waiting.Pending) != 2 {
		t.Fatalf("while waiting: %s, pending %+v", waiting.Status, waiting.Pending)
	}
	p := waiting.Pending[0]
	if p.CallID != "s1.c1" || p.Tool != "drop_table" || !strings.Contains(p.Arguments, "tmp_orders") || !strings.Contains(p.Reason, "leftovers of an import") || p.ExpiresAt != nil {
		t.Errorf("pending = %+v", p)
	}
	if !first.done || first.rejected != nil || first.err != nil || first.state.Status != workflows.TaskAwaiting || first.state.Pending[0].Decision != workflows.DecisionApprove {
		t.Errorf("first approval = %+v, want at once, the other call still waiting", first)
	}
	if !again.done || again.rejected != nil || again.err != nil {
		t.Errorf("the same decision again = %+v, want accepted", again)
	}
	if codeOf(other.rejected) != activities.CodeConflict {
		t.Errorf("another decision = %+v, want a conflict", other)
	}
	if codeOf(unknown.rejected) != activities.CodeNotFound {
		t.Errorf("unknown call = %+v, want not found", unknown)
	}
	if codeOf(bad.rejected) != activities.CodeInvalidArgument {
		t.Errorf("edit without arguments = %+v, want invalid", bad)
	}
	if still.Status != workflows.TaskAwaiting || len(still.Steps) != 0 {
		t.Errorf("with one call decided: %s, steps %+v", still.Status, still.Steps)
	}
	if !last.done || last.rejected != nil || last.err != nil || last.state.Status != workflows.TaskFinished {
		t.Errorf("last approval = %+v, want the task's end", last)
	}
	if st.Status != workflows.TaskFinished || st.Answer != "Done." || len(st.Pending) != 0 {
		t.Fatalf("task = %s %q, pending %v (%s)", st.Status, st.Answer, st.Pending, st.Error)
	}
	if n := h.called("drop_table"); n != 2 {
		t.Errorf("drop_table ran %d times, want 2", n)
	}
	if s := st.Steps[0]; s.Tool != "drop_table" || !s.OK || !strings.Contains(s.Observation, "dropped") {
		t.Errorf("step 1 = %+v", s)
	}
}

// approveTools gates a tool by a pattern; edit runs the call with the new
// arguments.
func TestApprovalEditRunsWithNewArguments(t *testing.T) {
	h := newApprovalHarness(t, func(n int, req activities.PlanRequest) activities.PlanStep {
		if n == 1 {
			return activities.PlanStep{Calls: []convo.ToolCall{
				{Name: "list_tables", Args: json.RawMessage(`{}`)},
				{Name: "run_sql", Args: json.RawMessage(`{"sql": "SELECT * FROM customers"}`)},
			}}
		}
		return activities.PlanStep{Answer: "500."}
	})
	waiting := h.state(t, time.Hour)
	d := h.decide(2*time.Hour, "e1", workflows.ApprovalDecision{CallID: "s1.c2", Decision: workflows.DecisionEdit,
		Arguments: json.RawMessage(`{"sql": "SELECT count(*) FROM customers"}`)})
	in := taskInput(12)
	in.ApproveTools = []string{"run_*"}
	h.env.ExecuteWorkflow(workflows.TaskWorkflowName, in)
	st := h.result(t)

	if len(waiting.Pending) != 1 || waiting.Pending[0].CallID != "s1.c2" || waiting.Pending[0].Tool != "run_sql" {
		t.Fatalf("pending = %+v (list_tables needs no approval)", waiting.Pending)
	}
	if len(waiting.Steps) != 0 {
		t.Errorf("a call of the step ran before the step's approvals: %+v", waiting.Steps)
	}
	if !d.done || d.rejected != nil || d.err != nil {
		t.Errorf("edit = %+v", d)
	}
	if len(h.sqls) != 1 || h.sqls[0] != "SELECT count(*) FROM customers" {
		t.Errorf("run_sql ran %q, want the edited statement once", h.sqls)
	}
	if st.Status != workflows.TaskFinished || len(st.Steps) != 3 || !strings.Contains(st.Steps[1].Args, "count(*)") {
		t.Errorf("task = %s, steps %+v", st.Status, st.Steps)
	}
}

// reject is an observation with the person's message, and the loop goes
// on: the next step sees it.
func TestApprovalRejectIsAnObservation(t *testing.T) {
	h := newApprovalHarness(t, dropPlan)
	d := h.decide(time.Hour, "r1", workflows.ApprovalDecision{CallID: "s1.c1", Decision: workflows.DecisionReject, Message: "we still need it"})
	h.env.ExecuteWorkflow(workflows.TaskWorkflowName, taskInput(12))
	st := h.result(t)

	if !d.done || d.rejected != nil || d.err != nil {
		t.Errorf("reject = %+v", d)
	}
	if h.called("drop_table") != 0 {
		t.Error("a rejected call ran")
	}
	if st.Status != workflows.TaskFinished || len(st.Steps) != 2 || st.Steps[0].OK || !strings.Contains(st.Steps[0].Observation, "rejected by the user: we still need it") {
		t.Fatalf("task = %s, steps %+v", st.Status, st.Steps)
	}
	reqs := h.planner.requests()
	seen := reqs[1].View[len(reqs[1].View)-1]
	if !strings.Contains(seen.Content, "rejected by the user: we still need it") {
		t.Errorf("step 2 saw %+v", seen)
	}
}

// approvalTimeout rejects a call nobody decided in time, and the loop
// goes on.
func TestApprovalExpires(t *testing.T) {
	h := newApprovalHarness(t, dropPlan)
	waiting := h.state(t, time.Minute)
	in := taskInput(12)
	in.ApprovalTimeout = 2 * time.Hour
	h.env.ExecuteWorkflow(workflows.TaskWorkflowName, in)
	st := h.result(t)

	if len(waiting.Pending) != 1 || waiting.Pending[0].ExpiresAt == nil {
		t.Fatalf("pending = %+v, want an expiry", waiting.Pending)
	}
	if h.called("drop_table") != 0 || st.Status != workflows.TaskFinished || !strings.Contains(st.Steps[0].Observation, "rejected by the user: no decision within 2h0m0s") {
		t.Fatalf("task = %s, steps %+v", st.Status, st.Steps)
	}
}
