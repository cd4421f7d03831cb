package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/client"

	"github.com/ctxflow/ctxflow/api"
	"github.com/ctxflow/ctxflow/internal/telemetry"
)

// TestMetrics: GET /metrics serves Options.Metrics, which records every
// request by route template (never by path), method and status.
func TestMetrics(t *testing.T) {
	if w := do(server(newFake(t)), http.MethodGet, "/metrics", ""); w.Code != http.StatusNotFound {
		t.Errorf("GET /metrics without a handler = %d, want 404", w.Code)
	}

	m, err := telemetry.NewMetrics(slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	f := newFake(t)
	recordUpdate(t, f, submitted(t))
	opts := options()
	opts.Metrics = m
	h := api.New(f, opts).Handler()
	for _, r := range []struct{ method, path, body string }{
		{http.MethodPost, "/v1/sessions/s1/turns", `{"question":"hi"}`},
		{http.MethodPost, "/v1/sessions/s2/turns", `{"question":"hi"}`},
		{http.MethodPost, "/v1/sessions/s2/turns", `{"question":""}`},
		{http.MethodGet, "/healthz", ""},
		{http.MethodGet, "/no/such/route", ""},
	} {
		do(h, r.method, r.path, r.body)
	}
	w := do(h, http.MethodGet, "/metrics", "")
	if w.Code != http.StatusOK {
		t.Fatalf("GET /metrics = %d %s", w.Code, w.Body)
	}
	body := w.Body.String()
	for _, want := range []string{
		`ctxflow_http_request_duration_seconds_count{method="POST",route="/v1/sessions/:id/turns",status="202"} 2`,
		`ctxflow_http_request_duration_seconds_count{method="POST",route="/v1/sessions/:id/turns",status="400"} 1`,
		`ctxflow_http_request_duration_seconds_count{method="GET",route="/healthz",status="200"} 1`,
		`ctxflow_http_request_duration_seconds_count{method="GET",route="unmatched",status="404"} 1`,
		`ctxflow_http_request_duration_seconds_bucket{method="GET",route="/healthz",status="200",le="0.005"}`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics has no %s", want)
		}
	}
	if strings.Contains(body, "s1") || strings.Contains(body, "/no/such") {
		t.Error("a path became a label value")
	}
}

// TestRequestTelemetry: a request joins the caller's trace (the Temporal
// client is called under the request's span, so the workflow's spans hang
// below it), and its access log line names the tenant, session, turn and
// trace, even for a turn id the API chose.
func TestRequestTelemetry(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	prevTP, prevProp := otel.GetTracerProvider(), otel.GetTextMapPropagator()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t.Cleanup(func() { otel.SetTracerProvider(prevTP); otel.SetTextMapPropagator(prevProp) })

	f := newFake(t)
	var clientSpan trace.SpanContext
	recordUpdate(t, f, func(opts client.UpdateWithStartWorkflowOptions) (client.WorkflowUpdateHandle, error) {
		return submitted(t)(opts)
	})
	inner := f.UpdateWithStartWorkflowFn
	f.UpdateWithStartWorkflowFn = func(ctx context.Context, opts client.UpdateWithStartWorkflowOptions) (client.WorkflowUpdateHandle, error) {
		clientSpan = trace.SpanContextFromContext(ctx)
		return inner(ctx, opts)
	}
	var logs bytes.Buffer
	opts := options()
	opts.Logger = slog.New(telemetry.LogHandler(slog.NewJSONHandler(&logs, nil)))
	h := api.New(f, opts).Handler()

	const caller = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	w := do(h, http.MethodPost, "/v1/sessions/s1/turns", `{"question":"hi"}`, "traceparent", caller, "X-Tenant-ID", "acme")
	if w.Code != http.StatusAccepted {
		t.Fatalf("status %d %s", w.Code, w.Body)
	}
	var resp struct{ TurnID string }
	decode(t, w, &resp)

	spans := rec.Ended()
	if len(spans) != 1 {
		t.Fatalf("%d spans", len(spans))
	}
	s := spans[0]
	if s.Name() != "POST /v1/sessions/:id/turns" || s.SpanContext().TraceID().String() != "0af7651916cd43dd8448eb211c80319c" ||
		s.Parent().SpanID().String() != "b7ad6b7169203331" || s.SpanKind() != trace.SpanKindServer {
		t.Errorf("span %s: trace %s, parent %s", s.Name(), s.SpanContext().TraceID(), s.Parent().SpanID())
	}
	if clientSpan.SpanID() != s.SpanContext().SpanID() {
		t.Errorf("the Temporal client was called under span %s, not the request's %s", clientSpan.SpanID(), s.SpanContext().SpanID())
	}

	var line map[string]any
	for l := range strings.Lines(logs.String()) {
		if strings.Contains(l, `"msg":"http"`) {
			if err := json.Unmarshal([]byte(l), &line); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := map[string]any{"tenant": "acme", "session": "s1", "turn": resp.TurnID, "traceId": "0af7651916cd43dd8448eb211c80319c", "status": float64(202)}
	for k, v := range want {
		if line[k] != v {
			t.Errorf("access log %s = %v, want %v (line %v)", k, line[k], v, line)
		}
	}
	if resp.TurnID == "" {
		t.Error("no turn id")
	}

	// Probes are not traced.
	do(h, http.MethodGet, "/healthz", "")
	if n := len(rec.Ended()); n != 1 {
		t.Errorf("%d spans after a probe, want 1", n)
	}

	// The turn from the path; an invalid session id is not logged.
	logs.Reset()
	do(h, http.MethodGet, "/v1/sessions/bad%20id/turns/t-42", "")
	if l := logs.String(); !strings.Contains(l, `"turn":"t-42"`) || strings.Contains(l, `"session"`) {
		t.Errorf("access log of an invalid session id: %s", l)
	}
}
