package workflows

import (
	"time"

	"go.temporal.io/sdk/workflow"
)

// Metrics the workflows record through the SDK's metrics handler, which
// records nothing while a workflow replays. A Prometheus exporter names
// them with their unit and kind: ctxflow_turn_latency_seconds,
// ctxflow_turn_step_latency_seconds, ctxflow_rewrites_total,
// ctxflow_summary_cache_total.
const (
	// MetricTurnLatency is a turn's time from the session receiving it to
	// its result, by outcome: completed, degraded (completed with a
	// degraded step), failed, rejected. Its count counts turns.
	MetricTurnLatency = "ctxflow_turn_latency"
	// MetricStepLatency is a turn step's duration, by step and status (ok
	// or failed).
	MetricStepLatency = "ctxflow_turn_step_latency"
	// MetricRewrites counts query rewrites, by kind: question (a follow-up
	// made to stand alone) or corrective (the corrective loop's retry).
	MetricRewrites = "ctxflow_rewrites"
	// MetricSummaryCache counts running-summary calls by result: hit (a
	// stored or cached summary reused) or miss (the model summarised).
	MetricSummaryCache = "ctxflow_summary_cache"
)

// TraceContextKey is the workflow.Context key under which the worker's
// tracing interceptor keeps the current span (its SpanContextKey). A turn
// update's handler runs under the caller's span; the session keeps that
// value and runs the turn under it, so that the turn's activities and
// child workflows join the caller's trace rather than the session's first.
type TraceContextKey struct{}

func recordTurn(ctx workflow.Context, res *TurnResult) {
	if res.ReceivedAt.IsZero() {
		return
	}
	outcome := res.Status
	if outcome == TurnCompleted {
		for _, st := range res.Steps {
			if st.Status == "degraded" {
				outcome = "degraded"
			}
		}
	}
	workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"outcome": outcome}).
		Timer(MetricTurnLatency).Record(res.CompletedAt.Sub(res.ReceivedAt))
}

func recordStep(ctx workflow.Context, name, status string, d time.Duration) {
	workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"step": name, "status": status}).Timer(MetricStepLatency).Record(d)
}

func countRewrite(ctx workflow.Context, kind string) {
	workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"kind": kind}).Counter(MetricRewrites).Inc(1)
}

func countSummary(ctx workflow.Context, hit bool) {
	result := "miss"
	if hit {
		result = "hit"
	}
	workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"result": result}).Counter(MetricSummaryCache).Inc(1)
}
