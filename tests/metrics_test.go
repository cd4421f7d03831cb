package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/ctxflow/ctxflow/internal/telemetry"
	"github.com/ctxflow/ctxflow/tests/fakeollama"
)

// metrics scrapes a /metrics endpoint.
type metrics map[string]*dto.MetricFamily

func scrape(t *testing.T, url string) metrics {
	t.Helper()
	resp, err := httpClient.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", url, resp.StatusCode)
	}
	fams, err := new(expfmt.TextParser).TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse %s: %v", url, err)
	}
	return fams
}

// total sums the samples of a family whose labels include want: counter
// values, or histogram counts. ok is false when there is none.
func (m metrics) total(name string, want ...string) (sum float64, ok bool) {
	for _, s := range m[name].GetMetric() {
		match := true
		for i := 0; i+1 < len(want); i += 2 {
			if !slices.ContainsFunc(s.GetLabel(), func(l *dto.LabelPair) bool { return l.GetName() == want[i] && l.GetValue() == want[i+1] }) {
				match = false
			}
		}
		if !match {
			continue
		}
		ok = true
		if h := s.GetHistogram(); h != nil {
			sum += float64(h.GetSampleCount())
		} else {
			sum += s.GetCounter().GetValue() + s.GetGauge().GetValue()
		}
	}
	return sum, ok
}

// TestDevMetricsAndTraces: `ctxflow dev` serves every metric on the API's
// port (HTTP, turns and steps, model tokens, summaries, the Temporal SDK's
// own), and with CTXFLOW_OTEL=stdout writes one trace per turn, from the
// HTTP request through the session workflow to the activities.
func TestDevMetricsAndTraces(t *testing.T) {
	fake := httptest.NewServer(fakeollama.New(fakeollama.Options{}))
	defer fake.Close()
	dir := t.TempDir()
	httpPort := freePort(t)
	env := []string{
		fmt.Sprintf("CTXFLOW_HTTP_ADDR=127.0.0.1:%d", httpPort),
		"CTXFLOW_UI_PORT=0",
		fmt.Sprintf("CTXFLOW_TEMPORAL_PORT=%d", freePort(t)),
		"CTXFLOW_DATA_DIR=" + dir,
		"CTXFLOW_TRANSCRIPT_FSYNC=false",
		"OLLAMA_HOST=" + fake.URL,
		"CTXFLOW_OTEL=stdout",
	}
	api := apiClient{base: fmt.Sprintf("http://127.0.0.1:%d", httpPort)}
	log := filepath.Join(dir, "dev.log")
	startDev(t, env, api, log)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	for i, q := range []string{"What is ctxflow?", "How do I run it?"} {
		if res, _, err := api.turn(ctx, "obs", fmt.Sprintf("m%d", i+1), q); err != nil || res.Status != "completed" {
			t.Fatalf("turn %d: %v %+v", i+1, err, res)
		}
	}
	if code, err := api.do(ctx, http.MethodPost, "/v1/sessions/obs/compress", nil, nil); code != http.StatusAccepted {
		t.Fatalf("compress: %d %v", code, err)
	}
	var m metrics
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		m = scrape(t, api.base+"/metrics")
		if _, ok := m.total("ctxflow_summary_cache_total"); ok || time.Now().After(deadline) {
			break
		}
	}

	if n, _ := m.total("ctxflow_turn_latency_seconds", "outcome", "completed", "workflow_type", "SessionWorkflow"); n != 2 {
		t.Errorf("completed turns = %g, want 2", n)
	}
	for _, step := range []string{"load_context", "generate", "save"} {
		if n, _ := m.total("ctxflow_turn_step_latency_seconds", "step", step, "status", "ok"); n != 2 {
			t.Errorf("step %s observed %g times, want 2", step, n)
		}
	}
	if b := m["ctxflow_turn_step_latency_seconds"].GetMetric(); len(b) == 0 || len(b[0].GetHistogram().GetBucket()) < 10 {
		t.Errorf("step latency buckets: %v", b)
	}
	if n, _ := m.total("ctxflow_summary_cache_total", "result", "miss"); n != 1 {
		t.Errorf("summaries by the model = %g, want 1", n)
	}
	for _, dir := range []string{"in", "out"} {
		if n, _ := m.total("ctxflow_model_tokens_total", "direction", dir, "activity_type", "Generate"); n <= 0 {
			t.Errorf("model tokens %s = %g", dir, n)
		}
	}
	if n, _ := m.total("ctxflow_http_request_duration_seconds", "route", "/v1/sessions/:id/turns", "method", "POST", "status", "200"); n != 2 {
		t.Errorf("HTTP turn requests = %g, want 2", n)
	}
	for _, name := range []string{"temporal_request_total", "temporal_workflow_task_execution_latency_seconds", "temporal_activity_execution_latency_seconds", "go_goroutines"} {
		if _, ok := m.total(name); !ok {
			t.Errorf("/metrics has no %s", name)
		}
	}

	// One trace per turn: the request's span, the update, the workflow's
	// handling of it and the turn's activities share a trace id.
	byTrace := map[string][]telemetry.SpanLine{}
	traceOf := map[string]string{} // turn → trace
	for deadline := time.Now().Add(10 * time.Second); len(traceOf) < 2 && time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		clear(byTrace)
		data, _ := os.ReadFile(log)
		for l := range strings.Lines(string(data)) {
			var s telemetry.SpanLine
			if !strings.HasPrefix(l, `{"traceId"`) || json.Unmarshal([]byte(l), &s) != nil {
				continue
			}
			byTrace[s.TraceID] = append(byTrace[s.TraceID], s)
			if s.Name == "POST /v1/sessions/:id/turns" {
				traceOf[s.Attributes["ctxflow.turn"]] = s.TraceID
			}
		}
	}
	if len(traceOf) != 2 || traceOf["m1"] == traceOf["m2"] {
		t.Fatalf("request spans by turn: %v", traceOf)
	}
	for _, turn := range []string{"m1", "m2"} {
		var names []string
		for _, s := range byTrace[traceOf[turn]] {
			names = append(names, s.Name)
			if s.Service != "ctxflow-dev" {
				t.Errorf("span %s of service %q", s.Name, s.Service)
			}
		}
		for _, want := range []string{"UpdateWithStartWorkflow:turn", "HandleUpdate:turn", "RunActivity:LoadContext", "StartActivity:Generate", "RunActivity:Generate", "RunActivity:SaveAnswer"} {
			if !slices.Contains(names, want) {
				t.Errorf("trace of turn %s has no %s span: %v", turn, want, names)
			}
		}
	}
}

// TestWorkerAndAPIMetrics: in the production shape, `ctxflow worker`
// serves its metrics on CTXFLOW_METRICS_ADDR (the turns, steps, rewrites
// and tokens it ran, the SDK's worker metrics) and `ctxflow api` on its
// own port (requests and the SDK's client metrics).
func TestWorkerAndAPIMetrics(t *testing.T) {
	workerMetrics := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	s := startStack(t, stackOptions{extraEnv: []string{"CTXFLOW_METRICS_ADDR=" + workerMetrics}})
	s.startWorker()
	s.ingestREADME(t)
	_, api := startAPI(t, append(slices.Clone(s.env), "CTXFLOW_ALLOW_ANONYMOUS=true"), s.dataDir)
	for i, q := range []string{"What is ctxflow?", "How do I run it?"} {
		if res, _, err := api.turn(t.Context(), "split", fmt.Sprintf("w%d", i+1), q); err != nil || res.Status != "completed" {
			t.Fatalf("turn %d: %v %+v\n%s", i+1, err, res, s.workerLogs())
		}
	}

	w := scrape(t, "http://"+workerMetrics+"/metrics")
	if n, _ := w.total("ctxflow_turn_latency_seconds", "outcome", "completed"); n != 2 {
		t.Errorf("worker: completed turns = %g, want 2", n)
	}
	if n, _ := w.total("ctxflow_turn_step_latency_seconds", "step", "corrective_rag"); n != 2 {
		t.Errorf("worker: corrective_rag steps = %g, want 2", n)
	}
	if n, _ := w.total("ctxflow_rewrites_total", "kind", "question"); n != 1 {
		t.Errorf("worker: question rewrites = %g, want 1 (the follow-up)", n)
	}
	if n, _ := w.total("ctxflow_model_tokens_total", "direction", "in"); n <= 0 {
		t.Errorf("worker: model tokens in = %g", n)
	}
	for _, name := range []string{"temporal_worker_task_slots_available", "temporal_activity_execution_latency_seconds", "temporal_workflow_completed_total"} {
		if _, ok := w.total(name); !ok {
			t.Errorf("worker: /metrics has no %s", name)
		}
	}

	a := scrape(t, api.base+"/metrics")
	if n, _ := a.total("ctxflow_http_request_duration_seconds", "route", "/v1/sessions/:id/turns", "status", "200"); n != 2 {
		t.Errorf("api: turn requests = %g, want 2", n)
	}
	if n, _ := a.total("temporal_long_request_total", "operation", "ExecuteMultiOperation", "workflow_type", "SessionWorkflow"); n != 2 {
		t.Errorf("api: the Temporal client's update-with-start requests = %g, want 2", n)
	}
	if _, ok := a.total("ctxflow_turn_latency_seconds"); ok {
		t.Error("api: reports turns, which the worker runs")
	}
}
