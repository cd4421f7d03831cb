package telemetry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/api"
	"github.com/ctxflow/ctxflow/internal/config"
	"github.com/ctxflow/ctxflow/internal/devserver"
	"github.com/ctxflow/ctxflow/internal/telemetry"
	"github.com/ctxflow/ctxflow/tests/fakeollama"
	"github.com/ctxflow/ctxflow/worker"
	"github.com/ctxflow/ctxflow/workflows"
)

// spanTree is one trace's spans, by id.
type spanTree map[string]tracetest.SpanStub

// trace is the spans of the trace whose HTTP request span has attribute
// ctxflow.turn = turn.
func traceOf(spans tracetest.SpanStubs, route, turn string) spanTree {
	var id string
	for _, s := range spans {
		if s.Name == "POST "+route && attr(s, "ctxflow.turn").AsString() == turn {
			id = s.SpanContext.TraceID().String()
		}
	}
	tree := spanTree{}
	for _, s := range spans {
		if id != "" && s.SpanContext.TraceID().String() == id {
			tree[s.SpanContext.SpanID().String()] = s
		}
	}
	return tree
}

// find is the trace's span named name whose parent is named parent (ok
// false if none).
func (t spanTree) find(name, parent string) (tracetest.SpanStub, bool) {
	for _, s := range t {
		if s.Name == name && t[s.Parent.SpanID().String()].Name == parent {
			return s, true
		}
	}
	return tracetest.SpanStub{}, false
}

// path is the names of s and its ancestors, s first.
func (t spanTree) path(s tracetest.SpanStub) []string {
	names := []string{s.Name}
	for p, ok := t[s.Parent.SpanID().String()]; ok; p, ok = t[p.Parent.SpanID().String()] {
		names = append(names, p.Name)
	}
	return names
}

func (t spanTree) names() []string {
	var out []string
	for _, s := range t {
		out = append(out, s.Name)
	}
	slices.Sort(out)
	return out
}

func attr(s tracetest.SpanStub, key string) attribute.Value {
	for _, a := range s.Attributes {
		if string(a.Key) == key {
			return a.Value
		}
	}
	return attribute.Value{}
}

// TestGenAITraceTree (issue 27, item 5): one turn's trace, read from an
// in-memory exporter, runs from the API's request through the session
// workflow's update to the Generate activity, whose child is the GenAI
// span "chat <model>" with the model, its token usage, its finish reason
// and the session as the conversation; an agent task's trace has the span
// "execute_tool <tool>" under its CallTool activity, with the call's id.
// The stack is the production wiring: an embedded Temporal server, the
// worker's ports (the fake Ollama as the model) and the API.
func TestGenAITraceTree(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	quiet := slog.New(slog.DiscardHandler)

	const toolCall = "<tool_call>\n{\"name\": \"search_knowledge\", \"arguments\": {\"query\": \"opening hours\"}}\n</tool_call>"
	fake := fakeollama.New(fakeollama.Options{Reply: func(req fakeollama.ChatRequestLite) string {
		switch {
		case len(req.Tools) > 0 && req.Messages[len(req.Messages)-1].Role == "tool":
			return "The knowledge base does not say."
		case len(req.Tools) > 0: // the task's first step
			return toolCall
		case len(req.Format) > 0:
			return fakeollama.SchemaReply(req)
		}
		return fakeollama.DefaultReply(req)
	}})
	model := httptest.NewServer(fake)
	defer model.Close()
	dir := t.TempDir()
	for k, v := range map[string]string{
		"CTXFLOW_DATA_DIR": dir, "OLLAMA_HOST": model.URL, "CTXFLOW_MODEL_PROVIDER": "ollama",
		"CTXFLOW_TRANSCRIPT_FSYNC": "false", "CTXFLOW_OTEL": "off",
	} {
		t.Setenv(k, v)
	}
	cfg, err := config.Load()
	if err != nil {
		t.Fatal(err)
	}

	exp := tracetest.NewInMemoryExporter()
	tel, err := telemetry.New(ctx, telemetry.WithExporter(telemetry.Options{Service: "ctxflow-test", Logger: quiet}, exp))
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.WithoutCancel(ctx))
	srv, err := devserver.Start(ctx, devserver.Options{SearchAttributes: workflows.SearchAttributes(), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	copts := client.Options{HostPort: srv.FrontendHostPort(), Namespace: srv.Namespace(), Logger: sdklog.NewStructuredLogger(quiet)}
	tel.ClientOptions(&copts)
	c, err := client.DialContext(ctx, copts)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ports, err := worker.BuildPorts(ctx, cfg, quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer ports.Close()
	w := worker.New(c, ports, 0, worker.Version{})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	h := api.New(c, api.Options{Defaults: cfg.Session, Limits: cfg.Limits, Transcripts: ports.Session.Transcript,
		Broker: ports.Broker, Logger: quiet, Metrics: tel.Handler()}).Handler()
	post := func(path string, body map[string]any) {
		t.Helper()
		b, _ := json.Marshal(body)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequestWithContext(ctx, http.MethodPost, path, bytes.NewReader(b)))
		if rec.Code != http.StatusOK {
			t.Fatalf("POST %s: %d %s", path, rec.Code, rec.Body)
		}
	}

	post("/v1/sessions/traced/turns?wait=true", map[string]any{"turnId": "t1", "question": "What is ctxflow?"})
	turn := traceOf(exp.GetSpans(), "/v1/sessions/:id/turns", "t1")
	chat, ok := turn.find("chat "+fakeollama.DefaultModel, "RunActivity:Generate")
	if !ok {
		t.Fatalf("the turn's trace has no chat span under RunActivity:Generate: %v", turn.names())
	}
	path := strings.Join(turn.path(chat), " < ")
	for _, want := range []string{"chat qwen2.5:0.5b < RunActivity:Generate < StartActivity:Generate < ", "HandleUpdate:turn", "POST /v1/sessions/:id/turns"} {
		if !strings.Contains(path, want) {
			t.Errorf("chat span's ancestry %q lacks %q", path, want)
		}
	}
	if !strings.HasSuffix(path, "POST /v1/sessions/:id/turns") {
		t.Errorf("chat span's root: %q", path)
	}
	for key, want := range map[string]string{
		"gen_ai.operation.name": "chat", "gen_ai.request.model": fakeollama.DefaultModel, "gen_ai.response.model": fakeollama.DefaultModel,
		"gen_ai.provider.name": "ollama", "gen_ai.conversation.id": "traced", "ctxflow.tenant": workflows.DefaultTenant,
	} {
		if got := attr(chat, key).String(); got != want {
			t.Errorf("chat span %s = %q, want %q", key, got, want)
		}
	}
	if got := attr(chat, "gen_ai.response.finish_reasons").AsStringSlice(); !slices.Equal(got, []string{"stop"}) {
		t.Errorf("chat span finish reasons %q", got)
	}
	for _, key := range []string{"gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"} {
		if n := attr(chat, key).AsInt64(); n <= 0 {
			t.Errorf("chat span %s = %d", key, n)
		}
	}
	if chat.SpanKind.String() != "client" {
		t.Errorf("chat span kind %s", chat.SpanKind)
	}

	post("/v1/sessions/traced/tasks?wait=true", map[string]any{"goal": "When does the shop open?", "taskId": "k1"})
	var tool tracetest.SpanStub
	var task spanTree
	for _, s := range exp.GetSpans() {
		if s.Name == "execute_tool search_knowledge" {
			tool, task = s, traceOf(exp.GetSpans(), "/v1/sessions/:id/tasks", "k1")
		}
	}
	if tool.Name == "" {
		t.Fatalf("no execute_tool span among %d", len(exp.GetSpans()))
	}
	if _, ok := task[tool.SpanContext.SpanID().String()]; !ok {
		t.Errorf("the tool span is not in the task request's trace (%d spans: %v)", len(task), task.names())
	}
	if p := task.path(tool); len(p) < 2 || p[1] != "RunActivity:CallTool" {
		t.Errorf("tool span's ancestry: %v", p)
	}
	for key, want := range map[string]string{
		"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search_knowledge", "gen_ai.tool.type": "function",
		"gen_ai.conversation.id": "traced",
	} {
		if got := attr(tool, key).String(); got != want {
			t.Errorf("tool span %s = %q, want %q", key, got, want)
		}
	}
	if id := attr(tool, "gen_ai.tool.call.id").AsString(); id == "" {
		t.Error("tool span without gen_ai.tool.call.id")
	}
	// The task's steps asked the model too: chat spans under its planner's
	// activity, in the same conversation.
	var plans int
	for _, s := range task {
		if strings.HasPrefix(s.Name, "chat ") && attr(s, "gen_ai.conversation.id").AsString() == "traced" {
			plans++
		}
	}
	if plans == 0 {
		t.Errorf("the task's trace has no chat span: %v", task.names())
	}
}

// failing is a chat model and a tool that fail.
type failing struct{ err error }

func (f failing) Chat(context.Context, activities.ChatRequest, func(string)) (activities.ChatResponse, error) {
	return activities.ChatResponse{}, f.err
}

// TestGenAIFailures: a failed model call or tool call is an error span
// with error.type; outside an activity nothing is recorded.
func TestGenAIFailures(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tel, err := telemetry.New(t.Context(), telemetry.WithExporter(telemetry.Options{Logger: slog.New(slog.DiscardHandler)}, exp))
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(t.Context())
	boom := &activities.ModelError{Message: "model \"x\" not found", StatusCode: 404}
	model := telemetry.TraceModel(failing{boom}, "ollama")
	tools := telemetry.TraceTools([]activities.Tool{activities.NewTool("fail", "fails", activities.ToolPolicy{},
		func(context.Context, struct{}) (any, error) {
			return nil, fmt.Errorf("%w: no such table", activities.ErrToolFailed)
		})})
	if _, err := model.Chat(t.Context(), activities.ChatRequest{Model: "x"}, nil); err == nil {
		t.Fatal("no error")
	}
	if n := len(exp.GetSpans()); n != 0 {
		t.Fatalf("%d spans outside an activity", n)
	}

	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.SetWorkerOptions(sdkworker.Options{Interceptors: telemetry.WorkerInterceptors()})
	env.RegisterActivityWithOptions(func(ctx context.Context, in activities.CallToolInput) error {
		_, _ = model.Chat(ctx, activities.ChatRequest{Model: "x"}, nil)
		_, _ = tools[0].Call(ctx, nil)
		return nil
	}, activity.RegisterOptions{Name: "CallTool"})
	if _, err := env.ExecuteActivity("CallTool", activities.CallToolInput{CallID: "s1.c1"}); err != nil {
		t.Fatal(err)
	}
	spans := exp.GetSpans()
	if len(spans) != 2 || spans[0].Name != "chat x" || spans[1].Name != "execute_tool fail" {
		t.Fatalf("spans %v", spans)
	}
	for _, sp := range spans {
		if sp.Status.Code != codes.Error || attr(sp, "error.type").AsString() == "" {
			t.Errorf("span %s: status %v, error.type %q", sp.Name, sp.Status, attr(sp, "error.type").AsString())
		}
	}
	if got := attr(spans[1], "gen_ai.tool.call.id").AsString(); got != "s1.c1" {
		t.Errorf("tool call id %q", got)
	}
}
