package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/proto"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/convo"
	"github.com/ctxflow/ctxflow/worker"
	"github.com/ctxflow/ctxflow/workflows"
)

// historyBytes returns the size of the latest run's history and its run id.
func historyBytes(ctx context.Context, s *stack, workflowID string) (int, string, error) {
	desc, err := s.client.DescribeWorkflowExecution(ctx, workflowID, "")
	if err != nil {
		return 0, "", err
	}
	runID := desc.GetWorkflowExecutionInfo().GetExecution().GetRunId()
	it := s.client.GetWorkflowHistory(ctx, workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	n := 0
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return 0, "", err
		}
		n += proto.Size(ev)
	}
	return n, runID, nil
}

// TestHistoryStaysBounded drives one session through 200 turns and checks
// that the workflow history is bounded: the session continued as new, and
// the history bytes a turn adds at turn 200 are within 1.2× of turn 10.
func TestHistoryStaysBounded(t *testing.T) {
	const every = 60 // runs hold turns 1-60, 61-120, 121-180, 181-240
	s := startStack(t, stackOptions{limits: workflows.Limits{ContinueAsNewEvery: every}})
	s.startWorker()
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()

	wid := workflows.SessionWorkflowID(workflows.DefaultTenant, "long")
	// After every turn: the latest run and its history size. A turn's cost
	// is the growth of its run's history (turns that start a run are left
	// out: their run also carries the continue-as-new input).
	points := make([]histPoint, 201)
	var boundaries []int
	var turnTime time.Duration
	for i := 1; i <= 200; i++ {
		t0 := time.Now()
		res, _, err := s.turn(ctx, "long", fmt.Sprintf("t%d", i), fmt.Sprintf("question number %d", i))
		turnTime += time.Since(t0)
		if err != nil || res.Status != workflows.TurnCompleted {
			t.Fatalf("turn %d: %v %+v\n%s", i, err, res, s.workerLogs())
		}
		n, run, err := historyBytes(ctx, s, wid)
		if err != nil {
			t.Fatal(err)
		}
		points[i] = histPoint{run, n}
		if i > 1 && run != points[i-1].run {
			boundaries = append(boundaries, i)
		}
	}
	perTurn := func(from, to int) float64 { // mean growth over turns from..to within one run
		sum, n := 0, 0
		for i := from; i <= to; i++ {
			if points[i].run == points[i-1].run {
				sum += points[i].size - points[i-1].size
				n++
			}
		}
		if n == 0 {
			t.Fatalf("no turn in %d..%d shares a run with the one before", from, to)
		}
		return float64(sum) / float64(n)
	}
	early, late := perTurn(6, 10), perTurn(191, 200)
	t.Logf("200 turns, %.1f ms/turn through the API; runs changed at turns %v; history bytes per turn: %.0f at turn 10, %.0f at turn 200 (ratio %.2f); largest run: %d bytes",
		float64(turnTime.Milliseconds())/200, boundaries, early, late, late/early, largest(points))
	if len(boundaries) < 200/every-1 {
		t.Errorf("the session continued as new at turns %v, want about every %d turns", boundaries, every)
	}
	if late > 1.2*early {
		t.Errorf("history bytes per turn grew from %.0f (turn 10) to %.0f (turn 200)", early, late)
	}

	var st workflows.SessionState
	if _, err := s.do(ctx, http.MethodGet, "/v1/sessions/long", nil, &st); err != nil {
		t.Fatal(err)
	}
	if st.Turns != 200 || st.Messages < 400 || st.Runs < 200/every-1 { // messages include summary records
		t.Errorf("state: turns=%d messages=%d runs=%d", st.Turns, st.Messages, st.Runs)
	}
	// The model still sees a bounded window: 10 rounds, not 200.
	if last, ok := s.model.LastChat(); !ok || len(last.Messages) > 1+2*10+1 {
		t.Errorf("last model call saw %d messages, want at most %d", len(last.Messages), 1+2*10+1)
	}
}

// histPoint is a session's latest run and its history size after a turn.
type histPoint struct {
	run  string
	size int
}

func largest(points []histPoint) int {
	m := 0
	for _, p := range points {
		m = max(m, p.size)
	}
	return m
}

// longPlanner runs steps-1 queries of 100 order lines each (a large
// result a step), then answers.
type longPlanner struct{ steps int }

func (p longPlanner) Next(_ context.Context, req activities.PlanRequest) (activities.PlanStep, error) {
	if req.Step >= p.steps {
		return activities.PlanStep{Answer: fmt.Sprintf("done after %d steps", req.Step)}, nil
	}
	args, _ := json.Marshal(map[string]string{"sql": fmt.Sprintf("SELECT * FROM order_items WHERE id > %d ORDER BY id LIMIT 100", req.Step*10)})
	return activities.PlanStep{Calls: []convo.ToolCall{{Name: "run_sql", Args: args}}}, nil
}

// TestTaskHistoryBytes runs agent tasks of 50 and 200 steps, each step a
// query with a result of about 10 KB, on a worker in this process (the
// task started alone, without a session) and measures their histories:
// the results live in the transcript, so a step costs the history a few
// kilobytes of ids and compact records, not its result.
func TestTaskHistoryBytes(t *testing.T) {
	s := startStack(t, stackOptions{})
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	ports := s.inProcessPorts(t, "CTXFLOW_MODEL_PROVIDER=offline")
	for _, steps := range []int{50, 200} {
		ports.Agent.Planner = longPlanner{steps: steps}
		w := worker.New(s.client, ports, 0, worker.Version{})
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
		id := fmt.Sprintf("history-%d", steps)
		t0 := time.Now()
		run, err := s.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: workflows.TaskQueue}, workflows.TaskWorkflowName,
			workflows.TaskInput{Tenant: workflows.DefaultTenant, SessionID: "alone", TaskID: id, Goal: "read order lines", MaxSteps: steps, Model: "offline"})
		if err != nil {
			t.Fatal(err)
		}
		var st workflows.TaskState
		if err := run.Get(ctx, &st); err != nil || st.Status != workflows.TaskFinished || st.Step != steps {
			t.Fatalf("%d-step task: %v, %s at step %d (%s)", steps, err, st.Status, st.Step, st.Error)
		}
		took := time.Since(t0)
		w.Stop()
		n, _, err := historyBytes(ctx, s, id)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%d-step task: %d history bytes (%.1f KB a step), %s (%.0f ms a step)", steps, n, float64(n)/float64(steps)/1024, took.Round(time.Millisecond), float64(took.Milliseconds())/float64(steps))
		// A step's result is ~10 KB; the history holds its ids and a
		// compact record, under 4 KB a step whatever the task's length.
		if n > steps*4<<10 {
			t.Errorf("%d-step task: %d history bytes, want under %d", steps, n, steps*4<<10)
		}
	}
}
