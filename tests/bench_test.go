package tests

import (
	"fmt"
	"slices"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/ctxflow/ctxflow/workflows"
)

// BenchmarkTurn measures a whole turn through Temporal — update-with-start,
// load context, generate (an instant fake model), save — against the
// embedded server and a `ctxflow worker` process: the orchestration cost
// per turn (DESIGN.md §9, target ≤ 25 ms p50). It reports p50 and p99.
func BenchmarkTurn(b *testing.B) {
	s := startStack(b, stackOptions{})
	s.startWorker()
	benchTurns(b, s, func(i int) string { return fmt.Sprintf("question %d", i) })
}

// BenchmarkQATurn measures a turn on the qa route over the ingested README
// with the offline engine: load context, rewrite the question, the
// corrective child workflow (retrieve, grade every document in parallel
// activities, generate), save. The question passes the grader in one
// round, so this is the loop's floor.
func BenchmarkQATurn(b *testing.B) {
	s := startStack(b, stackOptions{extraEnv: []string{"CTXFLOW_MODEL_PROVIDER=offline"}})
	s.startWorker()
	s.ingestREADME(b)
	benchTurns(b, s, func(int) string { return "Which vector stores can hold the knowledge base?" })
}

// benchTurns runs turns of one session and reports their p50 and p99.
func benchTurns(b *testing.B, s *stack, question func(i int) string) {
	ctx := b.Context()
	in := workflows.SessionInput{Tenant: workflows.DefaultTenant, SessionID: "bench", Config: []byte(`{"enableSummarization": false}`)}
	opts := client.StartWorkflowOptions{
		ID: workflows.SessionWorkflowID(in.Tenant, in.SessionID), TaskQueue: workflows.TaskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
	}
	turn := func(i int) time.Duration {
		start := time.Now()
		req := workflows.TurnRequest{TurnID: fmt.Sprintf("b%d", i), Question: question(i)}
		h, err := s.client.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
			StartWorkflowOperation: s.client.NewWithStartWorkflowOperation(opts, workflows.SessionWorkflowName, in),
			UpdateOptions: client.UpdateWorkflowOptions{
				UpdateID: req.TurnID, UpdateName: workflows.UpdateTurn, Args: []any{req},
				WaitForStage: client.WorkflowUpdateStageCompleted,
			},
		})
		var res workflows.TurnResult
		if err == nil {
			err = h.Get(ctx, &res)
		}
		if err != nil || res.Status != workflows.TurnCompleted {
			b.Fatalf("turn %d: %v %+v", i, err, res)
		}
		return time.Since(start)
	}
	for i := range 5 { // warm up: worker connections, sticky cache
		turn(-1 - i)
	}
	var durations []time.Duration
	for i := 0; b.Loop(); i++ {
		durations = append(durations, turn(i))
	}
	slices.Sort(durations)
	b.ReportMetric(float64(durations[len(durations)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(durations[len(durations)*99/100].Microseconds())/1000, "p99-ms")
}
