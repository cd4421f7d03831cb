package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"google.golang.org/grpc"

	"github.com/ctxflow/ctxflow/activities"
)

// scrape serves GET /metrics and parses the answer.
func scrape(t *testing.T, h http.Handler) map[string]*dto.MetricFamily {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if w.Code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", w.Code, w.Body)
	}
	families, err := new(expfmt.TextParser).TextToMetricFamilies(w.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v\n%s", err, w.Body)
	}
	return families
}

// sample finds the sample of a family whose labels include want.
func sample(families map[string]*dto.MetricFamily, name string, want map[string]string) *dto.Metric {
	f := families[name]
	if f == nil {
		return nil
	}
	for _, m := range f.GetMetric() {
		ok := true
		for k, v := range want {
			if !slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool { return l.GetName() == k && l.GetValue() == v }) {
				ok = false
			}
		}
		if ok {
			return m
		}
	}
	return nil
}

// TestMetricsRegistry: what goes through the Temporal SDK's handler (as
// workflows and activities record) and the API's requests land in one
// registry, with Prometheus names, kinds and second buckets.
func TestMetricsRegistry(t *testing.T) {
	m, err := NewMetrics(slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Shutdown(context.Background())
	h := m.Temporal()
	h.WithTags(map[string]string{"kind": "question"}).Counter("ctxflow_rewrites").Inc(2)
	h.WithTags(map[string]string{"outcome": "completed"}).Timer("ctxflow_turn_latency").Record(300 * time.Millisecond)
	m.ObserveRequest("POST", "/v1/sessions/:id/turns", 200, 40*time.Millisecond)
	m.ObserveRequest("POST", "/v1/sessions/:id/turns", 200, 2*time.Second)

	fams := scrape(t, m)
	if s := sample(fams, "ctxflow_rewrites_total", map[string]string{"kind": "question"}); s == nil || s.GetCounter().GetValue() != 2 ||
		fams["ctxflow_rewrites_total"].GetType() != dto.MetricType_COUNTER {
		t.Errorf("ctxflow_rewrites_total = %v", fams["ctxflow_rewrites_total"])
	}
	lat := sample(fams, "ctxflow_turn_latency_seconds", map[string]string{"outcome": "completed"})
	if lat == nil || lat.GetHistogram().GetSampleCount() != 1 {
		t.Fatalf("ctxflow_turn_latency_seconds = %v", fams["ctxflow_turn_latency_seconds"])
	}
	for _, b := range lat.GetHistogram().GetBucket() { // seconds, not OpenTelemetry's millisecond defaults
		if want := uint64(0); b.GetUpperBound() >= 0.5 {
			want = 1
			if b.GetCumulativeCount() != want {
				t.Errorf("bucket le=%g has %d", b.GetUpperBound(), b.GetCumulativeCount())
			}
		} else if b.GetUpperBound() <= 0.25 && b.GetCumulativeCount() != want {
			t.Errorf("bucket le=%g has %d", b.GetUpperBound(), b.GetCumulativeCount())
		}
	}
	req := sample(fams, "ctxflow_http_request_duration_seconds", map[string]string{"route": "/v1/sessions/:id/turns", "method": "POST", "status": "200"})
	if req == nil || req.GetHistogram().GetSampleCount() != 2 || req.GetHistogram().GetSampleSum() < 2 {
		t.Errorf("ctxflow_http_request_duration_seconds = %v", fams["ctxflow_http_request_duration_seconds"])
	}
	if fams["go_goroutines"] == nil || fams["process_cpu_seconds_total"] == nil {
		t.Error("no Go runtime or process metrics")
	}
	for name, f := range fams {
		for _, s := range f.GetMetric() {
			for _, l := range s.GetLabel() {
				if strings.HasPrefix(l.GetName(), "otel_") {
					t.Errorf("%s has the label %s", name, l.GetName())
				}
			}
		}
	}
}

// chatModel answers with fixed token counts.
type chatModel struct{ err error }

func (c chatModel) Chat(context.Context, activities.ChatRequest, func(string)) (activities.ChatResponse, error) {
	if c.err != nil {
		return activities.ChatResponse{}, c.err
	}
	return activities.ChatResponse{Content: "hi", Model: "m1", PromptTokens: 7, CompletionTokens: 3}, nil
}

// TestMeterModel: model calls made by an activity count their tokens in
// and out, tagged with the model and the activity; calls outside an
// activity are not counted.
func TestMeterModel(t *testing.T) {
	m, err := NewMetrics(slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	var s testsuite.WorkflowTestSuite
	s.SetMetricsHandler(m.Temporal())
	env := s.NewTestActivityEnvironment()
	model, failing := MeterModel(chatModel{}, "m1", "m2"), MeterModel(chatModel{err: errors.New("down")}, "m1", "m2")
	answer := func(ctx context.Context) (string, error) {
		resp, err := model.Chat(ctx, activities.ChatRequest{Model: "m1"}, nil)
		_, _ = failing.Chat(ctx, activities.ChatRequest{Model: "m2"}, nil)
		_, _ = failing.Chat(ctx, activities.ChatRequest{Model: "<script>any text a tenant picks"}, nil)
		return resp.Content, err
	}
	env.RegisterActivityWithOptions(answer, activity.RegisterOptions{Name: "Answer"})
	for range 2 {
		if _, err := env.ExecuteActivity("Answer"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := model.Chat(context.Background(), activities.ChatRequest{Model: "m1"}, nil); err != nil {
		t.Fatal(err)
	}

	fams := scrape(t, m)
	for dir, want := range map[string]float64{"in": 14, "out": 6} {
		s := sample(fams, "ctxflow_model_tokens_total", map[string]string{"direction": dir, "model": "m1", "activity_type": "Answer"})
		if s == nil || s.GetCounter().GetValue() != want {
			t.Errorf("tokens %s = %v, want %g", dir, fams["ctxflow_model_tokens_total"], want)
		}
	}
	if s := sample(fams, "ctxflow_model_call_latency_seconds", map[string]string{"model": "m2", "outcome": "error"}); s == nil || s.GetHistogram().GetSampleCount() != 2 {
		t.Errorf("failed calls = %v", fams["ctxflow_model_call_latency_seconds"])
	}
	if s := sample(fams, "ctxflow_model_tokens_total", map[string]string{"model": "m2"}); s != nil {
		t.Errorf("a failed call counted tokens: %v", s)
	}
	// A model that is not configured is "other", not its name.
	if s := sample(fams, "ctxflow_model_call_latency_seconds", map[string]string{"model": OtherModel, "outcome": "error"}); s == nil || s.GetHistogram().GetSampleCount() != 2 {
		t.Errorf("calls of a model that is not configured = %v", fams["ctxflow_model_call_latency_seconds"])
	}
}

// TestActivityLogs: an activity's logger names the session and turn of its
// input.
func TestActivityLogs(t *testing.T) {
	var buf bytes.Buffer
	var s testsuite.WorkflowTestSuite
	s.SetLogger(sdklog.NewStructuredLogger(slog.New(slog.NewJSONHandler(&buf, nil))))
	env := s.NewTestActivityEnvironment()
	env.SetWorkerOptions(worker.Options{Interceptors: WorkerInterceptors()})
	env.RegisterActivityWithOptions(func(ctx context.Context, in activities.GenerateInput) error {
		activity.GetLogger(ctx).Info("generating")
		return nil
	}, activity.RegisterOptions{Name: "Generate"})
	in := activities.GenerateInput{Session: activities.SessionKey{Tenant: "acme", SessionID: "s1"}, TurnID: "t7"}
	if _, err := env.ExecuteActivity("Generate", in); err != nil {
		t.Fatal(err)
	}
	var line map[string]any
	for l := range strings.Lines(buf.String()) {
		if strings.Contains(l, `"generating"`) {
			if err := json.Unmarshal([]byte(l), &line); err != nil {
				t.Fatal(err)
			}
		}
	}
	if line["session"] != "acme/s1" || line["turn"] != "t7" {
		t.Errorf("activity log line = %v", line)
	}

	for _, tc := range []struct {
		args []any
		want []any
	}{
		{[]any{in.Session, "t7"}, []any{"session", "acme/s1"}},
		{[]any{&in}, []any{"session", "acme/s1", "turn", "t7"}},
		{[]any{activities.StartTaskInput{Task: activities.SessionKey{Tenant: "acme", SessionID: "s1/task/k1"}}}, []any{"task", "acme/s1/task/k1"}},
		{[]any{activities.CallToolInput{Task: activities.SessionKey{Tenant: "acme", SessionID: "s1:task:k1"}, CallID: "s1.c1"}}, []any{"task", "acme/s1:task:k1", "call", "s1.c1"}},
		{[]any{nil, (*activities.GenerateInput)(nil), 3, activities.GenerateInput{}}, nil},
	} {
		if got := activityAttrs(tc.args); !slices.Equal(got, tc.want) {
			t.Errorf("activityAttrs(%v) = %v, want %v", tc.args, got, tc.want)
		}
	}
}

// TestLogHandler: a record logged with a context carries the context's
// attributes and trace.
func TestLogHandler(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(LogHandler(slog.NewJSONHandler(&buf, nil))).With("component", "api")
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1, 2}, SpanID: trace.SpanID{3}, TraceFlags: trace.FlagsSampled})
	ctx := WithLogAttrs(trace.ContextWithSpanContext(context.Background(), sc), "session", "s1")
	ctx = WithLogAttrs(ctx, "turn", "t1")
	log.InfoContext(ctx, "http", "status", 200)
	log.Info("plain")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	var first, second map[string]any
	if len(lines) != 2 || json.Unmarshal([]byte(lines[0]), &first) != nil || json.Unmarshal([]byte(lines[1]), &second) != nil {
		t.Fatalf("log = %s", buf.String())
	}
	if first["session"] != "s1" || first["turn"] != "t1" || first["component"] != "api" || first["traceId"] != sc.TraceID().String() || first["spanId"] != sc.SpanID().String() {
		t.Errorf("line = %v", first)
	}
	if _, ok := second["session"]; ok {
		t.Errorf("a line without context has attributes: %v", second)
	}
}

// TestStdoutTracing: the stdout exporter writes a JSON line per span; the
// client options get the tracing interceptor and the metrics handler.
func TestStdoutTracing(t *testing.T) {
	if _, err := New(t.Context(), Options{Tracing: "jaeger"}); err == nil {
		t.Error("an unknown exporter was accepted")
	}
	off, err := New(t.Context(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	var opts client.Options
	off.ClientOptions(&opts)
	if opts.MetricsHandler == nil || len(opts.Interceptors) != 0 {
		t.Errorf("tracing off: options %+v", opts)
	}
	var nilTel *Telemetry
	nilTel.ClientOptions(&opts)
	if nilTel.Handler() != nil || nilTel.Shutdown(t.Context()) != nil {
		t.Error("a nil Telemetry is not inert")
	}

	var buf bytes.Buffer
	tel, err := New(t.Context(), Options{Service: "ctxflow-test", Tracing: "stdout", Stdout: &buf})
	if err != nil {
		t.Fatal(err)
	}
	tel.ClientOptions(&opts)
	if len(opts.Interceptors) != 1 {
		t.Errorf("tracing on: %d interceptors", len(opts.Interceptors))
	}
	ctx, parent := otel.Tracer("t").Start(t.Context(), "parent")
	_, child := otel.Tracer("t").Start(ctx, "child")
	child.End()
	parent.End()
	if err := tel.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	var spans []SpanLine
	for l := range strings.Lines(buf.String()) {
		var s SpanLine
		if err := json.Unmarshal([]byte(l), &s); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		spans = append(spans, s)
	}
	if len(spans) != 2 || spans[0].Name != "child" || spans[1].Name != "parent" || spans[0].TraceID != spans[1].TraceID ||
		spans[0].ParentID != spans[1].SpanID || spans[1].ParentID != "" || spans[0].Service != "ctxflow-test" {
		t.Errorf("spans = %+v", spans)
	}
}

// collector is an OTLP trace receiver.
type collector struct {
	coltrace.UnimplementedTraceServiceServer
	spans chan string
}

func (c *collector) Export(_ context.Context, req *coltrace.ExportTraceServiceRequest) (*coltrace.ExportTraceServiceResponse, error) {
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				c.spans <- s.GetName()
			}
		}
	}
	return &coltrace.ExportTraceServiceResponse{}, nil
}

// TestOTLPTracing: CTXFLOW_OTEL=otlp sends the spans over gRPC to the
// endpoint OpenTelemetry's variables name.
func TestOTLPTracing(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &collector{spans: make(chan string, 10)}
	srv := grpc.NewServer()
	coltrace.RegisterTraceServiceServer(srv, c)
	go func() { _ = srv.Serve(ln) }()
	defer srv.Stop()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+ln.Addr().String())

	tel, err := New(t.Context(), Options{Service: "ctxflow-test", Tracing: "otlp"})
	if err != nil {
		t.Fatal(err)
	}
	_, span := otel.Tracer("t").Start(t.Context(), "exported")
	span.End()
	if err := tel.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	select {
	case name := <-c.spans:
		if name != "exported" {
			t.Errorf("collector got %q", name)
		}
	default:
		t.Error("the collector got no span")
	}
}

// okModel answers every call.
type okModel struct{}

func (okModel) Chat(_ context.Context, req activities.ChatRequest, _ func(string)) (activities.ChatResponse, error) {
	return activities.ChatResponse{Content: "hi", Model: req.Model, PromptTokens: 3, CompletionTokens: 1, DoneReason: "stop"}, nil
}

// TestOTLPGenAI: with CTXFLOW_OTEL=otlp, the GenAI span of a model call in
// an activity reaches the collector.
func TestOTLPGenAI(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &collector{spans: make(chan string, 10)}
	srv := grpc.NewServer()
	coltrace.RegisterTraceServiceServer(srv, c)
	go func() { _ = srv.Serve(ln) }()
	defer srv.Stop()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+ln.Addr().String())
	tel, err := New(t.Context(), Options{Service: "ctxflow-worker", Tracing: "otlp"})
	if err != nil {
		t.Fatal(err)
	}
	model := TraceModel(okModel{}, "ollama")
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.SetWorkerOptions(worker.Options{Interceptors: WorkerInterceptors()})
	env.RegisterActivityWithOptions(func(ctx context.Context) error {
		_, err := model.Chat(ctx, activities.ChatRequest{Model: "m"}, nil)
		return err
	}, activity.RegisterOptions{Name: "Generate"})
	if _, err := env.ExecuteActivity("Generate"); err != nil {
		t.Fatal(err)
	}
	if err := tel.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	select {
	case name := <-c.spans:
		if name != "chat m" {
			t.Errorf("collector got %q", name)
		}
	default:
		t.Error("the collector got no span")
	}
}
