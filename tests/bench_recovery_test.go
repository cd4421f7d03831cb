package tests

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/ctxflow/ctxflow/workflows"
)

// BenchmarkWorkerKill measures recovery from a worker crash: sessions
// served by a worker that is then killed (SIGKILL, no goodbye to the
// server) get their first turn, and a query, after a new worker starts.
// Each iteration kills the worker, starts a new one and, once it polls,
// sends the first turn to one session and a query (GET /v1/sessions/{id})
// to another; both had their last workflow task on the dead worker, so
// the server holds them on its sticky queue. It reports the first turn's
// time from the new worker's start (process start to answer: the row of
// `make bench`) and from its request, the query's, and how long the
// worker took to poll.
func BenchmarkWorkerKill(b *testing.B) {
	s := startStack(b, stackOptions{})
	s.startWorker()
	s.waitWorkerReady()
	ctx := b.Context()
	var fromStart, fromRequest, query, ready []time.Duration
	for i := 0; b.Loop(); i++ {
		turnID, queryID := fmt.Sprintf("kill-turn-%d", i), fmt.Sprintf("kill-query-%d", i)
		for _, id := range []string{turnID, queryID} { // on the worker to be killed
			for j := range 2 {
				if res, _, err := s.turn(ctx, id, fmt.Sprintf("w%d", j), "hello"); err != nil || res.Status != workflows.TurnCompleted {
					b.Fatalf("%s: %v %+v", id, err, res)
				}
			}
		}
		s.killWorker()
		start := time.Now()
		s.startWorker()
		s.waitWorkerReady()
		ready = append(ready, time.Since(start))
		sent := time.Now()
		if res, _, err := s.turn(ctx, turnID, "after", "after the crash"); err != nil || res.Status != workflows.TurnCompleted {
			b.Fatalf("turn after the crash: %v %+v", err, res)
		}
		fromStart, fromRequest = append(fromStart, time.Since(start)), append(fromRequest, time.Since(sent))
		asked := time.Now()
		var st workflows.SessionState
		if _, err := s.do(ctx, http.MethodGet, "/v1/sessions/"+queryID, nil, &st); err != nil || st.Turns != 2 {
			b.Fatalf("query after the crash: %v %+v", err, st)
		}
		query = append(query, time.Since(asked))
		if i == 0 {
			b.Logf("first turn after the crash, from its request: %s", workflowTaskTrail(b, s, turnID, sent))
		}
	}
	b.ReportMetric(ms(quantile(fromStart, 0.5)), "first-turn-after-kill-ms")
	b.ReportMetric(ms(quantile(fromStart, 1)), "first-turn-after-kill-max-ms")
	b.ReportMetric(ms(quantile(fromRequest, 0.5)), "first-turn-from-request-ms")
	b.ReportMetric(ms(quantile(query, 0.5)), "query-after-kill-ms")
	b.ReportMetric(ms(quantile(query, 1)), "query-after-kill-max-ms")
	b.ReportMetric(ms(quantile(ready, 0.5)), "worker-ready-ms")
}

// workflowTaskTrail lists the workflow-task events of a session's newest
// run since t, each with its time after t: where a turn waited.
func workflowTaskTrail(b *testing.B, s *stack, id string, t time.Time) string {
	wid := workflows.SessionWorkflowID(workflows.DefaultTenant, id)
	h, err := fetchHistory(b.Context(), s.client, wid, "")
	if err != nil {
		return fmt.Sprintf("(no history: %v)", err)
	}
	var parts []string
	for _, ev := range h.Events {
		at := ev.GetEventTime().AsTime()
		if at.Before(t) {
			continue
		}
		name := strings.TrimPrefix(ev.GetEventType().String(), "EVENT_TYPE_")
		if a := ev.GetWorkflowTaskTimedOutEventAttributes(); a != nil {
			name += "(" + strings.TrimPrefix(a.GetTimeoutType().String(), "TIMEOUT_TYPE_") + ")"
		}
		if a := ev.GetWorkflowTaskScheduledEventAttributes(); a != nil && a.GetTaskQueue().GetKind() == enumspb.TASK_QUEUE_KIND_STICKY {
			name += "(sticky)"
		}
		parts = append(parts, fmt.Sprintf("%s +%dms", name, at.Sub(t).Milliseconds()))
	}
	return strings.Join(parts, ", ")
}
