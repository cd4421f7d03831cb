package workflows_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/activities/tiktoken"
	"github.com/ctxflow/ctxflow/activities/transcript"
	"github.com/ctxflow/ctxflow/convo"
	"github.com/ctxflow/ctxflow/workflows"
)

// scriptedPlanner plans from a script: step n's decision is plan(n, req).
type scriptedPlanner struct {
	mu   sync.Mutex
	plan func(n int, req activities.PlanRequest) activities.PlanStep
	reqs []activities.PlanRequest
}

func (p *scriptedPlanner) Next(_ context.Context, req activities.PlanRequest) (activities.PlanStep, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reqs = append(p.reqs, req)
	return p.plan(req.Step, req), nil
}

func (p *scriptedPlanner) requests() []activities.PlanRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]activities.PlanRequest(nil), p.reqs...)
}

func use(tool string, args any) activities.PlanStep {
	b, _ := json.Marshal(args)
	return activities.PlanStep{Calls: []convo.ToolCall{{Name: tool, Args: b}}}
}

type tablesOut struct {
	Tables []string `json:"tables"`
}

func (r tablesOut) Facts() activities.KnownFacts { return activities.KnownFacts{Tables: r.Tables} }

// fakeTools are the tools of the task tests: list_tables and
// describe_table answer, refuse says no (an error for the model), boom's
// database is down (an infrastructure failure, retried, then observed).
func fakeTools(calls *sync.Map) []activities.Tool {
	count := func(name string) {
		n, _ := calls.LoadOrStore(name, new(int))
		*(n.(*int))++
	}
	ro := activities.ToolPolicy{Timeout: 10 * time.Second, ReadOnly: true}
	return []activities.Tool{
		activities.NewTool("list_tables", "List the tables.", ro, func(context.Context, struct{}) (any, error) {
			count("list_tables")
			return tablesOut{Tables: []string{"customers", "orders"}}, nil
		}),
		activities.NewTool("describe_table", "Describe a table.", ro, func(_ context.Context, a struct {
			Table string `json:"table"`
		}) (any, error) {
			count("describe_table")
			return map[string]string{"table": a.Table, "columns": "id, name"}, nil
		}),
		activities.NewTool("refuse", "Refuses.", ro, func(context.Context, struct{}) (any, error) {
			count("refuse")
			return nil, fmt.Errorf("%w: no such column: nope", activities.ErrToolFailed)
		}),
		activities.NewTool("boom", "Its database is down.", activities.ToolPolicy{Timeout: time.Second, ReadOnly: true}, func(context.Context, struct{}) (any, error) {
			count("boom")
			return nil, errors.New("connection refused")
		}),
	}
}

type taskHarness struct {
	env     *testsuite.TestWorkflowEnvironment
	planner *scriptedPlanner
	store   *transcript.FileStore
	calls   *sync.Map
}

func newTaskHarness(t *testing.T, plan func(n int, req activities.PlanRequest) activities.PlanStep) *taskHarness {
	t.Helper()
	p := &scriptedPlanner{plan: plan}
	h := newTaskHarnessWith(t, p)
	h.planner = p
	return h
}

// newTaskHarnessWith is a task harness whose steps planner plans.
func newTaskHarnessWith(t *testing.T, planner activities.Planner) *taskHarness {
	t.Helper()
	store := newStore(t)
	tok, err := tiktoken.New("cl100k_base")
	if err != nil {
		t.Fatal(err)
	}
	h := &taskHarness{store: store, calls: &sync.Map{}}
	h.env = newHarnessWith(t, store, func(s *activities.Session, env *testsuite.TestWorkflowEnvironment) {
		env.RegisterWorkflowWithOptions(workflows.TaskWorkflow, workflow.RegisterOptions{Name: workflows.TaskWorkflowName})
		env.RegisterActivity(&activities.Agent{Transcript: store, Tools: fakeTools(h.calls), Planner: planner, Tokenizer: tok})
	}).env
	return h
}

func (h *taskHarness) called(tool string) int {
	n, ok := h.calls.Load(tool)
	if !ok {
		return 0
	}
	return *(n.(*int))
}

func taskInput(maxSteps int) workflows.TaskInput {
	return workflows.TaskInput{Tenant: "t1", SessionID: "s1", TaskID: "task-1", Goal: "How many customers are there?", MaxSteps: maxSteps, Model: "m",
		Limits: workflows.Limits{LLMTimeout: 10 * time.Second}}
}

func (h *taskHarness) result(t *testing.T) workflows.TaskState {
	t.Helper()
	if !h.env.IsWorkflowCompleted() {
		t.Fatal("the task did not end")
	}
	if err := h.env.GetWorkflowError(); err != nil {
		t.Fatalf("task error: %v", err)
	}
	var st workflows.TaskState
	if err := h.env.GetWorkflowResult(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

// A reply that is not valid JSON is an error observation the next step
// sees; the task goes on; a refused tool, an unknown tool and a tool whose
// database is down are observations too, never the end of the task.
func TestTaskTurnsFailuresIntoObservations(t *testing.T) {
	h := newTaskHarness(t, func(n int, req activities.PlanRequest) activities.PlanStep {
		switch n {
		case 1:
			return use("list_tables", struct{}{})
		case 2:
			return activities.PlanStep{ParseError: "invalid character 'S' looking for beginning of value", Raw: "Sure! I will call describe_table."}
		case 3:
			return use("refuse", struct{}{})
		case 4:
			return use("drop_everything", struct{}{})
		case 5:
			return use("boom", struct{}{})
		case 6:
			return use("describe_table", map[string]int{"table": 7})
		}
		return activities.PlanStep{Answer: "There are 500 customers."}
	})
	h.env.ExecuteWorkflow(workflows.TaskWorkflowName, taskInput(12))
	st := h.result(t)

	if st.Status != workflows.TaskFinished || st.Answer != "There are 500 customers." || st.Step != 7 {
		t.Fatalf("task = %s at step %d: %q (%s)", st.Status, st.Step, st.Answer, st.Error)
	}
	want := []struct {
		tool string
		ok   bool
		obs  string
	}{
		{"list_tables", true, "customers"},
		{"", false, "json_parse_error"},
		{"refuse", false, "no such column"},
		{"drop_everything", false, "unknown tool"},
		{"boom", false, "failed after its retries"},
		{"describe_table", false, "invalid arguments"},
		{"", true, "500 customers"},
	}
	for i, w := range want {
		s := st.Steps[i]
		if s.N != i+1 || s.Tool != w.tool || s.OK != w.ok || !strings.Contains(s.Observation, w.obs) {
			t.Errorf("step %d = %+v, want tool %q ok %v observing %q", i+1, s, w.tool, w.ok, w.obs)
		}
	}
	// Step 3 saw step 2's parse error as an observation, with a format
	// example; the database that was down was tried 3 times.
	reqs := h.planner.requests()
	seen := reqs[2].View[len(reqs[2].View)-1]
	if seen.Role != "user" || !strings.Contains(seen.Content, "json_parse_error") || !strings.Contains(seen.Content, "tool name") {
		t.Errorf("step 3 saw %+v", seen)
	}
	if n := h.called("boom"); n != 3 {
		t.Errorf("boom tried %d times, want 3", n)
	}
	if len(st.Facts.ErrorHistory) != 4 || st.Facts.Tables[0] != "customers" {
		t.Errorf("facts = %+v", st.Facts)
	}
	// The transcript holds every step, every call answered.
	branch, err := h.store.Branch(context.Background(), activities.TaskKey(activities.SessionKey{Tenant: "t1", SessionID: "s1"}, "task-1"), st.Leaf)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := convo.ToModelMessages(branch); err != nil {
		t.Errorf("the task transcript does not pair its calls: %v", err)
	}
}

// At its step limit a task writes a progress summary and waits, durably,
// for continue; then it goes on at the next step with another budget.
func TestTaskPausesAtItsLimitAndContinues(t *testing.T) {
	h := newTaskHarness(t, func(n int, req activities.PlanRequest) activities.PlanStep {
		if n <= 4 {
			return use("describe_table", map[string]string{"table": fmt.Sprint("t", n)})
		}
		return activities.PlanStep{Answer: fmt.Sprintf("done after %d steps", n-1)}
	})
	var paused workflows.TaskState
	h.env.RegisterDelayedCallback(func() {
		v, err := h.env.QueryWorkflow(workflows.QueryState)
		if err != nil {
			t.Error(err)
			return
		}
		_ = v.Get(&paused)
		h.env.SignalWorkflow(workflows.SignalContinue, nil)
	}, time.Hour) // a paused task waits as long as it takes
	h.env.ExecuteWorkflow(workflows.TaskWorkflowName, taskInput(3))
	st := h.result(t)

	if paused.Status != workflows.TaskPaused || paused.Step != 3 || !strings.Contains(paused.Summary, "Goal: How many customers") {
		t.Fatalf("paused state = %+v", paused)
	}
	if st.Status != workflows.TaskFinished || st.Answer != "done after 4 steps" || st.Step != 5 || st.Pauses != 1 || st.Budget != 6 {
		t.Errorf("final = %s step %d pauses %d budget %d: %q", st.Status, st.Step, st.Pauses, st.Budget, st.Answer)
	}
	// Step 4 (after continue) saw the pause and the continue in its view.
	step4 := h.planner.requests()[3]
	var sawContinue bool
	for _, m := range step4.View {
		sawContinue = sawContinue || (m.Role == "user" && m.Content == "continue")
	}
	if step4.Step != 4 || !sawContinue {
		t.Errorf("step 4 = %d, saw the continue: %v", step4.Step, sawContinue)
	}
}

// In a session, a second task starts with what the first found: its
// planner sees the known tables and does not list them again.
func TestSecondTaskUsesKnownTables(t *testing.T) {
	h := newTaskHarness(t, func(n int, req activities.PlanRequest) activities.PlanStep {
		if len(req.Facts.Tables) == 0 {
			return use("list_tables", struct{}{})
		}
		return activities.PlanStep{Answer: "tables: " + strings.Join(req.Facts.Tables, ", ")}
	})
	var first, second workflows.TurnResult
	for i, out := range []*workflows.TurnResult{&first, &second} {
		req := workflows.TurnRequest{TurnID: fmt.Sprint("task-", i), Question: "Which tables are there?", Kind: workflows.KindTask}
		h.env.RegisterDelayedCallback(func() {
			h.env.UpdateWorkflow(workflows.UpdateTurn, workflows.TurnUpdateID(workflows.UpdateTurn, req), &testsuite.TestUpdateCallback{
				OnAccept: func() {}, OnReject: func(err error) { t.Errorf("rejected: %v", err) },
				OnComplete: func(v any, err error) {
					if err != nil {
						t.Error(err)
					}
					*out, _ = v.(workflows.TurnResult)
				},
			}, req)
		}, time.Duration(i+1)*time.Minute)
	}
	h.env.ExecuteWorkflow(workflows.SessionWorkflowName, workflows.SessionInput{Tenant: "t1", SessionID: "s1", Limits: workflows.Limits{IdleTTL: time.Hour}})

	for _, r := range []workflows.TurnResult{first, second} {
		if r.Status != workflows.TurnCompleted || r.Type != workflows.TypeFinish || r.Answer != "tables: customers, orders" {
			t.Fatalf("task turn = %s %s %q (%s)", r.Status, r.Type, r.Answer, r.Error)
		}
	}
	if n := h.called("list_tables"); n != 1 {
		t.Errorf("list_tables called %d times, want once: the second task knew the tables", n)
	}
	if second.Task == nil || second.Task.Step != 1 || !strings.Contains(h.planner.requests()[2].View[0].Content, "tables: customers, orders") {
		t.Errorf("the second task's prompt lacks the known tables: %+v", second.Task)
	}
}

// A session turn starts a task, answers with its pause, answers other
// questions meanwhile, and "继续" resumes the task to its answer.
func TestSessionPausesAndContinuesATask(t *testing.T) {
	h := newTaskHarness(t, func(n int, req activities.PlanRequest) activities.PlanStep {
		if n <= 2 {
			return use("describe_table", map[string]string{"table": fmt.Sprint("t", n)})
		}
		return activities.PlanStep{Answer: "500 customers"}
	})
	turns := []workflows.TurnRequest{
		{TurnID: "t1", Question: "How many customers are there?", Kind: workflows.KindTask, MaxSteps: 2},
		{TurnID: "t2", Question: "By the way, what time is it?"},
		{TurnID: "t3", Question: "继续"},
		{TurnID: "t4", Question: "continue", Kind: workflows.KindContinue},
	}
	out := make([]*outcome, len(turns))
	for i, req := range turns {
		out[i] = &outcome{}
		h.env.RegisterDelayedCallback(func() {
			h.env.UpdateWorkflow(workflows.UpdateTurn, workflows.TurnUpdateID(workflows.UpdateTurn, req), &testsuite.TestUpdateCallback{
				OnAccept: func() {}, OnReject: func(err error) { out[i].rejected = err },
				OnComplete: func(v any, err error) { out[i].result, _ = v.(workflows.TurnResult); out[i].err = err },
			}, req)
		}, time.Duration(i+1)*time.Minute)
	}
	h.env.ExecuteWorkflow(workflows.SessionWorkflowName, workflows.SessionInput{Tenant: "t1", SessionID: "s1", Limits: workflows.Limits{IdleTTL: time.Hour}})

	pause, chat, cont := out[0].result, out[1].result, out[2].result
	if pause.Type != workflows.TypePause || !strings.Contains(pause.Answer, "Continue?") || pause.Task.Status != workflows.TaskPaused {
		t.Fatalf("first turn = %s %q %+v", pause.Type, pause.Answer, pause.Task)
	}
	if chat.Type != "" || chat.Status != workflows.TurnCompleted {
		t.Errorf("a question while paused = %+v", chat)
	}
	if cont.Type != workflows.TypeFinish || cont.Answer != "500 customers" || cont.Task.Step != 3 {
		t.Errorf("继续 = %s %q %+v", cont.Type, cont.Answer, cont.Task)
	}
	if out[3].rejected == nil || !strings.Contains(out[3].rejected.Error(), "no paused task") {
		t.Errorf("continue with nothing paused = %+v", out[3])
	}
}

// Ten continues sent at once for one pause: the first resumes the task, the
// other nine are refused as conflicts, not each resuming it again.
func TestConcurrentContinuesResumeOnce(t *testing.T) {
	h := newTaskHarness(t, func(n int, req activities.PlanRequest) activities.PlanStep {
		if n <= 3 {
			return use("describe_table", map[string]string{"table": fmt.Sprint("t", n)})
		}
		return activities.PlanStep{Answer: "done"}
	})
	send := func(at time.Duration, req workflows.TurnRequest) *outcome {
		o := &outcome{}
		h.env.RegisterDelayedCallback(func() {
			h.env.UpdateWorkflow(workflows.UpdateTurn, workflows.TurnUpdateID(workflows.UpdateTurn, req), &testsuite.TestUpdateCallback{
				OnAccept: func() {}, OnReject: func(err error) { o.rejected = err },
				OnComplete: func(v any, err error) { o.result, _ = v.(workflows.TurnResult); o.err = err },
			}, req)
		}, at)
		return o
	}
	send(time.Minute, workflows.TurnRequest{TurnID: "task", Question: "Describe the tables", Kind: workflows.KindTask, MaxSteps: 2})
	var conts []*outcome
	for i := range 10 {
		conts = append(conts, send(2*time.Minute, workflows.TurnRequest{TurnID: fmt.Sprint("c", i), Question: "continue", Kind: workflows.KindContinue}))
	}
	h.env.ExecuteWorkflow(workflows.SessionWorkflowName, workflows.SessionInput{Tenant: "t1", SessionID: "s1", Limits: workflows.Limits{IdleTTL: time.Hour}})

	resumed, refused := 0, 0
	for _, o := range conts {
		switch {
		case o.rejected != nil && strings.Contains(o.rejected.Error(), "already queued"):
			refused++
		case o.rejected == nil && o.result.Status == workflows.TurnCompleted:
			resumed++
		default:
			t.Errorf("continue: %+v", o)
		}
	}
	if resumed != 1 || refused != 9 {
		t.Errorf("%d continues resumed the task and %d were refused, want 1 and 9", resumed, refused)
	}
	if n := h.called("describe_table"); n != 3 {
		t.Errorf("describe_table called %d times, want 3: two steps before the pause, one after the one continue, then the answer", n)
	}
}

// Two calls in one step (parallel calls, or an array written as text) and
// their results are one branch: the next step sees both calls answered.
// (Each result hung below its own call, and the view of the next step
// failed: "unanswered tool call".)
func TestTaskStepWithTwoCalls(t *testing.T) {
	h := newTaskHarness(t, func(n int, req activities.PlanRequest) activities.PlanStep {
		if n == 1 {
			return activities.PlanStep{Calls: []convo.ToolCall{
				{Name: "list_tables", Args: json.RawMessage(`{}`)},
				{Name: "describe_table", Args: json.RawMessage(`{"table": "customers"}`)},
			}}
		}
		return activities.PlanStep{Answer: "two tables; customers has id and name"}
	})
	h.env.ExecuteWorkflow(workflows.TaskWorkflowName, taskInput(5))
	st := h.result(t)
	if st.Status != workflows.TaskFinished || h.called("list_tables") != 1 || h.called("describe_table") != 1 {
		t.Fatalf("task %+v, calls %d/%d", st, h.called("list_tables"), h.called("describe_table"))
	}
	reqs := h.planner.requests()
	view := reqs[len(reqs)-1].View
	var results int
	for _, m := range view {
		if m.Role == "tool" {
			results++
		}
	}
	if results != 2 {
		t.Errorf("step 2 saw %d tool results, want 2: %+v", results, view)
	}
}

// thinkingPlanner's every step thinks until its context ends or wait
// passes; returned says whether a step answered.
type thinkingPlanner struct {
	wait     time.Duration
	mu       sync.Mutex
	returned bool
	canceled bool
}

func (p *thinkingPlanner) Next(ctx context.Context, _ activities.PlanRequest) (activities.PlanStep, error) {
	select {
	case <-ctx.Done():
		p.mu.Lock()
		p.canceled = true
		p.mu.Unlock()
		return activities.PlanStep{}, ctx.Err()
	case <-time.After(p.wait):
	}
	p.mu.Lock()
	p.returned = true
	p.mu.Unlock()
	return use("list_tables", struct{}{}), nil
}

// A cancel while the task's model thinks cancels the model call: the task
// ends canceled at once, without waiting for the answer, and runs no tool.
func TestTaskCancelStopsItsModelCall(t *testing.T) {
	planner := &thinkingPlanner{wait: 20 * time.Second}
	h := newTaskHarnessWith(t, planner)
	env := h.env
	// Sent while the first step thinks (an activity runs: wall time).
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(workflows.SignalCancel, nil) }, 500*time.Millisecond)
	start := time.Now()
	env.ExecuteWorkflow(workflows.TaskWorkflowName, taskInput(10))
	took := time.Since(start)

	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("task: completed %v, error %v", env.IsWorkflowCompleted(), env.GetWorkflowError())
	}
	var st workflows.TaskState
	if err := env.GetWorkflowResult(&st); err != nil {
		t.Fatal(err)
	}
	planner.mu.Lock()
	returned := planner.returned
	planner.mu.Unlock()
	if st.Status != workflows.TaskCanceled || returned || took > 10*time.Second {
		t.Errorf("status %s after %s, the model answered: %v; want canceled at once, the call cancelled", st.Status, took, returned)
	}
	if h.called("list_tables") > 0 {
		t.Error("a tool ran after the cancel")
	}
}
