package telemetry

import (
	"context"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/ctxflow/ctxflow/activities"
)

// Names of the model metrics, recorded through the activity's metrics
// handler, so that they carry its activity_type, workflow_type, namespace
// and task_queue; Prometheus names them ctxflow_model_tokens_total and
// ctxflow_model_call_latency_seconds.
const (
	MetricModelTokens  = "ctxflow_model_tokens"
	MetricModelLatency = "ctxflow_model_call_latency"
)

// MeterModel wraps a chat model so that every call made by an activity
// (answers, summaries, grading, rewrites, plans) counts the tokens the
// provider reports, in (prompt) and out (completion), and its latency.
// Calls outside an activity (start-up checks) are not counted. The model
// label is one of the configured models, else "other": a session may name
// any model, and a label a tenant could write would grow the series without
// bound on an unauthenticated /metrics.
func MeterModel(m activities.ChatModel, configured ...string) activities.ChatModel {
	known := map[string]bool{}
	for _, c := range configured {
		known[c] = true
	}
	return meteredModel{m, known}
}

// OtherModel is the model label of a model that is not configured.
const OtherModel = "other"

type meteredModel struct {
	activities.ChatModel
	known map[string]bool
}

func (m meteredModel) Chat(ctx context.Context, req activities.ChatRequest, onDelta func(string)) (activities.ChatResponse, error) {
	start := time.Now()
	resp, err := m.ChatModel.Chat(ctx, req, onDelta)
	if !activity.IsActivity(ctx) {
		return resp, err
	}
	model := resp.Model
	if model == "" {
		model = req.Model
	}
	if !m.known[model] {
		model = OtherModel
	}
	outcome := "ok"
	if err != nil {
		outcome = "error"
	}
	h := activity.GetMetricsHandler(ctx).WithTags(map[string]string{"model": model})
	h.WithTags(map[string]string{"outcome": outcome}).Timer(MetricModelLatency).Record(time.Since(start))
	if resp.PromptTokens > 0 {
		h.WithTags(map[string]string{"direction": "in"}).Counter(MetricModelTokens).Inc(int64(resp.PromptTokens))
	}
	if resp.CompletionTokens > 0 {
		h.WithTags(map[string]string{"direction": "out"}).Counter(MetricModelTokens).Inc(int64(resp.CompletionTokens))
	}
	return resp, err
}
