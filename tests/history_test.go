package tests

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"google.golang.org/protobuf/proto"

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
	sizes := map[int]int{}
	runs := map[int]string{}
	start := time.Now()
	for i := 1; i <= 200; i++ {
		res, _, err := s.turn(ctx, "long", fmt.Sprintf("t%d", i), fmt.Sprintf("question number %d", i))
		if err != nil || res.Status != workflows.TurnCompleted {
			t.Fatalf("turn %d: %v %+v\n%s", i, err, res, s.workerLogs())
		}
		switch i {
		case 5, 10, 195, 200:
			n, run, err := historyBytes(ctx, s, wid)
			if err != nil {
				t.Fatal(err)
			}
			sizes[i], runs[i] = n, run
		}
	}
	elapsed := time.Since(start)
	if runs[5] != runs[10] || runs[195] != runs[200] {
		t.Fatalf("measurement windows straddle a continue-as-new: %v", runs)
	}
	if runs[10] == runs[200] {
		t.Fatal("the session never continued as new")
	}
	early := float64(sizes[10]-sizes[5]) / 5
	late := float64(sizes[200]-sizes[195]) / 5
	t.Logf("200 turns in %s (%.1f ms/turn); history bytes per turn: %.0f at turn 10, %.0f at turn 200 (ratio %.2f); run size at turn 200: %d bytes",
		elapsed.Round(time.Millisecond), float64(elapsed.Milliseconds())/200, early, late, late/early, sizes[200])
	if late > 1.2*early {
		t.Errorf("history bytes per turn grew from %.0f (turn 10) to %.0f (turn 200)", early, late)
	}

	var st workflows.SessionState
	if _, err := s.do(ctx, http.MethodGet, "/v1/sessions/long", nil, &st); err != nil {
		t.Fatal(err)
	}
	if st.Turns != 200 || st.Messages != 400 || st.Runs < 200/every {
		t.Errorf("state: turns=%d messages=%d runs=%d", st.Turns, st.Messages, st.Runs)
	}
	// The model still sees a bounded window: 10 rounds, not 200.
	if last, ok := s.model.LastChat(); !ok || len(last.Messages) > 1+2*10+1 {
		t.Errorf("last model call saw %d messages, want at most %d", len(last.Messages), 1+2*10+1)
	}
}
