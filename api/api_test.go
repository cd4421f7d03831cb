package api_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/api"
	"github.com/ctxflow/ctxflow/workflows"
)

// fakeClient is a Temporal client whose methods used by the API run the
// matching …Fn field. Any other method panics (the embedded interface is
// nil); a used method whose Fn is nil fails the test.
type fakeClient struct {
	client.Client

	t     testing.TB
	mu    sync.Mutex
	calls []string

	CheckHealthFn               func(ctx context.Context, req *client.CheckHealthRequest) (*client.CheckHealthResponse, error)
	ExecuteWorkflowFn           func(ctx context.Context, opts client.StartWorkflowOptions, workflow any, args ...any) (client.WorkflowRun, error)
	SignalWithStartWorkflowFn   func(ctx context.Context, workflowID, signalName string, signalArg any, opts client.StartWorkflowOptions, workflow any, args ...any) (client.WorkflowRun, error)
	SignalWorkflowFn            func(ctx context.Context, workflowID, runID, signalName string, arg any) error
	QueryWorkflowFn             func(ctx context.Context, workflowID, runID, queryType string, args ...any) (converter.EncodedValue, error)
	UpdateWorkflowFn            func(ctx context.Context, opts client.UpdateWorkflowOptions) (client.WorkflowUpdateHandle, error)
	UpdateWithStartWorkflowFn   func(ctx context.Context, opts client.UpdateWithStartWorkflowOptions) (client.WorkflowUpdateHandle, error)
	ListWorkflowFn              func(ctx context.Context, req *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error)
	DescribeWorkflowExecutionFn func(ctx context.Context, workflowID, runID string) (*workflowservice.DescribeWorkflowExecutionResponse, error)
	GetWorkflowFn               func(ctx context.Context, workflowID, runID string) client.WorkflowRun
}

var _ client.Client = (*fakeClient)(nil)

func newFake(t testing.TB) *fakeClient { return &fakeClient{t: t} }

func (f *fakeClient) record(name string, fn any) bool {
	f.mu.Lock()
	f.calls = append(f.calls, name)
	f.mu.Unlock()
	if reflect.ValueOf(fn).IsNil() {
		f.t.Errorf("unexpected call to %s", name)
		return false
	}
	return true
}

// called returns the names of the methods called, in order.
func (f *fakeClient) called() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

var errUnexpected = errors.New("unexpected call")

func (f *fakeClient) CheckHealth(ctx context.Context, req *client.CheckHealthRequest) (*client.CheckHealthResponse, error) {
	if !f.record("CheckHealth", f.CheckHealthFn) {
		return nil, errUnexpected
	}
	return f.CheckHealthFn(ctx, req)
}

func (f *fakeClient) ExecuteWorkflow(ctx context.Context, opts client.StartWorkflowOptions, workflow any, args ...any) (client.WorkflowRun, error) {
	if !f.record("ExecuteWorkflow", f.ExecuteWorkflowFn) {
		return nil, errUnexpected
	}
	return f.ExecuteWorkflowFn(ctx, opts, workflow, args...)
}

func (f *fakeClient) SignalWithStartWorkflow(ctx context.Context, workflowID, signalName string, signalArg any, opts client.StartWorkflowOptions, workflow any, args ...any) (client.WorkflowRun, error) {
	if !f.record("SignalWithStartWorkflow", f.SignalWithStartWorkflowFn) {
		return nil, errUnexpected
	}
	return f.SignalWithStartWorkflowFn(ctx, workflowID, signalName, signalArg, opts, workflow, args...)
}

func (f *fakeClient) SignalWorkflow(ctx context.Context, workflowID, runID, signalName string, arg any) error {
	if !f.record("SignalWorkflow", f.SignalWorkflowFn) {
		return errUnexpected
	}
	return f.SignalWorkflowFn(ctx, workflowID, runID, signalName, arg)
}

func (f *fakeClient) QueryWorkflow(ctx context.Context, workflowID, runID, queryType string, args ...any) (converter.EncodedValue, error) {
	if !f.record("QueryWorkflow", f.QueryWorkflowFn) {
		return nil, errUnexpected
	}
	return f.QueryWorkflowFn(ctx, workflowID, runID, queryType, args...)
}

func (f *fakeClient) UpdateWorkflow(ctx context.Context, opts client.UpdateWorkflowOptions) (client.WorkflowUpdateHandle, error) {
	if !f.record("UpdateWorkflow", f.UpdateWorkflowFn) {
		return nil, errUnexpected
	}
	return f.UpdateWorkflowFn(ctx, opts)
}

func (f *fakeClient) UpdateWithStartWorkflow(ctx context.Context, opts client.UpdateWithStartWorkflowOptions) (client.WorkflowUpdateHandle, error) {
	if !f.record("UpdateWithStartWorkflow", f.UpdateWithStartWorkflowFn) {
		return nil, errUnexpected
	}
	return f.UpdateWithStartWorkflowFn(ctx, opts)
}

// NewWithStartWorkflowOperation records the start request; the
// UpdateWithStartWorkflowFn finds it in its options.
func (f *fakeClient) NewWithStartWorkflowOperation(opts client.StartWorkflowOptions, workflow any, args ...any) client.WithStartWorkflowOperation {
	f.mu.Lock()
	f.calls = append(f.calls, "NewWithStartWorkflowOperation")
	f.mu.Unlock()
	return &startOp{opts: opts, workflow: workflow, args: args}
}

func (f *fakeClient) ListWorkflow(ctx context.Context, req *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error) {
	if !f.record("ListWorkflow", f.ListWorkflowFn) {
		return nil, errUnexpected
	}
	return f.ListWorkflowFn(ctx, req)
}

type startOp struct {
	opts     client.StartWorkflowOptions
	workflow any
	args     []any
}

func (*startOp) Get(context.Context) (client.WorkflowRun, error) { return nil, errUnexpected }

// value encodes v as Temporal would send it, for query results.
type value struct{ p *commonpb.Payload }

func encode(t testing.TB, v any) value {
	t.Helper()
	p, err := converter.GetDefaultDataConverter().ToPayload(v)
	if err != nil {
		t.Fatal(err)
	}
	return value{p}
}

func (v value) HasValue() bool { return v.p != nil }
func (v value) Get(ptr any) error {
	return converter.GetDefaultDataConverter().FromPayload(v.p, ptr)
}

// handle is an update handle whose outcome is a value or an error.
type handle struct {
	id  string
	val value
	err error
}

func (h handle) WorkflowID() string { return "" }
func (h handle) RunID() string      { return "" }
func (h handle) UpdateID() string   { return h.id }
func (h handle) Get(_ context.Context, ptr any) error {
	if h.err != nil {
		return h.err
	}
	if ptr == nil {
		return nil
	}
	return h.val.Get(ptr)
}

func options() api.Options {
	return api.Options{
		Defaults:        workflows.DefaultSessionConfig(),
		Limits:          workflows.DefaultLimits(),
		TurnWaitTimeout: 5 * time.Second,
		Logger:          slog.New(slog.DiscardHandler),
	}
}

func server(f *fakeClient) http.Handler { return api.New(f, options()).Handler() }

// do sends a request; header pairs follow the body.
func do(h http.Handler, method, path, body string, header ...string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

type errorBody struct {
	Error struct {
		Code      string `json:"code"`
		Message   string `json:"message"`
		RequestID string `json:"requestId"`
	} `json:"error"`
	Turn *workflows.TurnResult `json:"turn"`
}

// wantError checks an error answer and returns its body.
func wantError(t *testing.T, w *httptest.ResponseRecorder, status int, code string) errorBody {
	t.Helper()
	if w.Code != status {
		t.Errorf("status = %d, want %d; body %s", w.Code, status, w.Body)
	}
	if ct := w.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("Content-Type = %q, want JSON", ct)
	}
	var b errorBody
	if err := json.Unmarshal(w.Body.Bytes(), &b); err != nil {
		t.Fatalf("error body %q: %v", w.Body, err)
	}
	if b.Error.Code != code {
		t.Errorf("error code = %q, want %q; body %s", b.Error.Code, code, w.Body)
	}
	if b.Error.Message == "" {
		t.Error("error without a message")
	}
	if b.Error.RequestID == "" || b.Error.RequestID != w.Header().Get("X-Request-ID") {
		t.Errorf("error requestId = %q, header %q", b.Error.RequestID, w.Header().Get("X-Request-ID"))
	}
	return b
}

func decode(t *testing.T, w *httptest.ResponseRecorder, v any) {
	t.Helper()
	if err := json.Unmarshal(w.Body.Bytes(), v); err != nil {
		t.Fatalf("body %q: %v", w.Body, err)
	}
}

func TestHealthz(t *testing.T) {
	f := newFake(t)
	w := do(server(f), http.MethodGet, "/healthz", "")
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"ok"`) {
		t.Errorf("GET /healthz = %d %s", w.Code, w.Body)
	}
	if len(f.called()) != 0 {
		t.Errorf("healthz called Temporal: %v", f.called())
	}
}

func TestReadyz(t *testing.T) {
	f := newFake(t)
	var healthy error
	f.CheckHealthFn = func(ctx context.Context, _ *client.CheckHealthRequest) (*client.CheckHealthResponse, error) {
		if _, ok := ctx.Deadline(); !ok {
			t.Error("CheckHealth without a deadline")
		}
		return &client.CheckHealthResponse{}, healthy
	}
	h := server(f)
	if w := do(h, http.MethodGet, "/readyz", ""); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "ready") {
		t.Errorf("GET /readyz with Temporal up = %d %s", w.Code, w.Body)
	}
	healthy = errors.New("connection refused")
	b := wantError(t, do(h, http.MethodGet, "/readyz", ""), http.StatusServiceUnavailable, "unavailable")
	if !strings.Contains(b.Error.Message, "connection refused") {
		t.Errorf("message %q does not say why", b.Error.Message)
	}
}

func TestPanicIsInternalError(t *testing.T) {
	f := newFake(t)
	f.CheckHealthFn = func(context.Context, *client.CheckHealthRequest) (*client.CheckHealthResponse, error) {
		panic("boom")
	}
	wantError(t, do(server(f), http.MethodGet, "/readyz", ""), http.StatusInternalServerError, "internal")
}

func TestRequestID(t *testing.T) {
	h := server(newFake(t))
	w := do(h, http.MethodGet, "/healthz", "")
	id := w.Header().Get("X-Request-ID")
	if !regexp.MustCompile(`^req-[0-9a-f]{24}$`).MatchString(id) {
		t.Errorf("generated X-Request-ID = %q", id)
	}
	if id2 := do(h, http.MethodGet, "/healthz", "").Header().Get("X-Request-ID"); id2 == id {
		t.Errorf("two requests got the same id %q", id)
	}
	if got := do(h, http.MethodGet, "/healthz", "", "X-Request-ID", "client-42").Header().Get("X-Request-ID"); got != "client-42" {
		t.Errorf("X-Request-ID = %q, want the client's", got)
	}
	long := strings.Repeat("x", 129)
	if got := do(h, http.MethodGet, "/healthz", "", "X-Request-ID", long).Header().Get("X-Request-ID"); got == long || got == "" {
		t.Errorf("an over-long request id was kept: %q", got)
	}
	// Errors carry it too.
	b := wantError(t, do(h, http.MethodGet, "/nope", "", "X-Request-ID", "client-43"), http.StatusNotFound, "not_found")
	if b.Error.RequestID != "client-43" {
		t.Errorf("error requestId = %q", b.Error.RequestID)
	}
}

func TestUnknownRouteAndMethod(t *testing.T) {
	f := newFake(t)
	h := server(f)
	wantError(t, do(h, http.MethodGet, "/v2/sessions", ""), http.StatusNotFound, "not_found")
	wantError(t, do(h, http.MethodGet, "/v1/sessions/s1/nothing", ""), http.StatusNotFound, "not_found")
	wantError(t, do(h, http.MethodPut, "/v1/sessions/s1", "{}"), http.StatusMethodNotAllowed, "invalid_argument")
	wantError(t, do(h, http.MethodDelete, "/v1/sessions", ""), http.StatusMethodNotAllowed, "invalid_argument")
	if len(f.called()) != 0 {
		t.Errorf("Temporal called: %v", f.called())
	}
}

func TestBodyLimit(t *testing.T) {
	f := newFake(t)
	opts := options()
	opts.MaxBodyBytes = 2048
	h := api.New(f, opts).Handler()
	big := `{"question":"` + strings.Repeat("a", 3000) + `"}`

	b := wantError(t, do(h, http.MethodPost, "/v1/sessions/s1/turns", big), http.StatusRequestEntityTooLarge, "too_large")
	if !strings.Contains(b.Error.Message, "2048") {
		t.Errorf("message %q does not give the limit", b.Error.Message)
	}

	// Chunked: no Content-Length, the limit applies while reading.
	for _, path := range []string{"/v1/sessions/s1/turns", "/v1/sessions", "/v1/sessions/s1/continue"} {
		req := httptest.NewRequest(http.MethodPost, path, struct{ io.Reader }{strings.NewReader(big)})
		req.ContentLength = -1
		req.TransferEncoding = []string{"chunked"}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		wantError(t, w, http.StatusRequestEntityTooLarge, "too_large")
	}
	if len(f.called()) != 0 {
		t.Errorf("Temporal called for an oversized body: %v", f.called())
	}
}

func TestMalformedBodies(t *testing.T) {
	for _, tc := range []struct {
		name, path, body, want string
	}{
		{"unknown field", "/v1/sessions", `{"sessionId":"a","colour":"red"}`, "colour"},
		{"unknown turn field", "/v1/sessions/s1/turns", `{"question":"hi","stream":true}`, "stream"},
		{"unknown continue field", "/v1/sessions/s1/continue", `{"turn":"x"}`, "turn"},
		{"not json", "/v1/sessions/s1/turns", `question=hi`, "request body"},
		{"two values", "/v1/sessions/s1/turns", `{"question":"hi"} {"question":"again"}`, "more than one"},
		{"trailing brace", "/v1/sessions/s1/turns", `{"question":"hi"}}`, "more than one"},
		{"wrong type", "/v1/sessions/s1/turns", `{"question":42}`, "question"},
		{"empty turn body", "/v1/sessions/s1/turns", ``, "empty"},
		{"invalid UTF-8 in create", "/v1/sessions", "{\"title\":\"caf\xe9\"}", "UTF-8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t)
			b := wantError(t, do(server(f), http.MethodPost, tc.path, tc.body), http.StatusBadRequest, "invalid_argument")
			if !strings.Contains(b.Error.Message, tc.want) {
				t.Errorf("message %q does not mention %q", b.Error.Message, tc.want)
			}
			if len(f.called()) != 0 {
				t.Errorf("Temporal called: %v", f.called())
			}
		})
	}
}

func TestTurnValidation(t *testing.T) {
	long := strings.Repeat("a", workflows.DefaultMaxQuestionBytes+1)
	for _, tc := range []struct {
		name, path, body, want string
		header                 []string
	}{
		{name: "empty question", body: `{"question":""}`, want: "empty"},
		{name: "no question", body: `{}`, want: "empty"},
		{name: "blank question", body: `{"question":"  \n\t "}`, want: "empty"},
		{name: "question over 32 KiB", body: `{"question":"` + long + `"}`, want: "over the 32768-byte limit"},
		{name: "invalid UTF-8", body: "{\"question\":\"caf\xe9 au lait\"}", want: "UTF-8"},
		{name: "invalid UTF-8 in the config", body: "{\"question\":\"hi\",\"config\":{\"llmModel\":\"\xff\"}}", want: "UTF-8"},
		{name: "unknown option", body: `{"question":"hi","config":{"temperature":0.2}}`, want: "temperature"},
		{name: "session-only option", body: `{"question":"hi","config":{"embeddingModel":"x"}}`, want: "embeddingModel"},
		{name: "option of the wrong type", body: `{"question":"hi","config":{"topK":"5"}}`, want: "topK"},
		{name: "topK out of range", body: `{"question":"hi","config":{"topK":0}}`, want: "topK"},
		{name: "maxTokens out of range", body: `{"question":"hi","config":{"maxTokens":10}}`, want: "maxTokens"},
		{name: "unknown strategy", body: `{"question":"hi","config":{"windowStrategy":"all"}}`, want: "windowStrategy"},
		{name: "bad turn id", body: `{"question":"hi","turnId":"../etc"}`, want: "turnId"},
		{name: "bad session id", path: "/v1/sessions/-dash/turns", body: `{"question":"hi"}`, want: "sessionId"},
		{name: "session id too long", path: "/v1/sessions/" + strings.Repeat("s", 129) + "/turns", body: `{"question":"hi"}`, want: "sessionId"},
		{name: "bad tenant", body: `{"question":"hi"}`, header: []string{"X-Tenant-ID", "acme corp"}, want: "tenant"},
		{name: "bad tenant with slash", body: `{"question":"hi"}`, header: []string{"X-Tenant-ID", "a/b"}, want: "tenant"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := tc.path
			if path == "" {
				path = "/v1/sessions/s1/turns"
			}
			for _, wait := range []string{"", "?wait=true"} {
				f := newFake(t)
				b := wantError(t, do(server(f), http.MethodPost, path+wait, tc.body, tc.header...), http.StatusBadRequest, "invalid_argument")
				if !strings.Contains(b.Error.Message, tc.want) {
					t.Errorf("message %q does not mention %q", b.Error.Message, tc.want)
				}
				if len(f.called()) != 0 {
					t.Errorf("Temporal called for a bad turn: %v", f.called())
				}
			}
		})
	}
}

// signalTurn records a signal-with-start.
type signalTurn struct {
	workflowID, signal string
	req                workflows.TurnRequest
	opts               client.StartWorkflowOptions
	workflow           any
	in                 workflows.SessionInput
}

func recordSignal(t *testing.T, f *fakeClient) *[]signalTurn {
	var got []signalTurn
	f.SignalWithStartWorkflowFn = func(ctx context.Context, workflowID, signalName string, signalArg any, opts client.StartWorkflowOptions, workflow any, args ...any) (client.WorkflowRun, error) {
		req, ok := signalArg.(workflows.TurnRequest)
		if !ok {
			t.Errorf("signal arg is a %T", signalArg)
		}
		if len(args) != 1 {
			t.Fatalf("workflow args = %v", args)
		}
		in, ok := args[0].(workflows.SessionInput)
		if !ok {
			t.Errorf("workflow arg is a %T", args[0])
		}
		got = append(got, signalTurn{workflowID, signalName, req, opts, workflow, in})
		return nil, nil
	}
	return &got
}

// checkStart checks the options of a session workflow started for a turn.
func checkStart(t *testing.T, opts client.StartWorkflowOptions, workflow any, in workflows.SessionInput, tenant, id string) {
	t.Helper()
	wid := "session/" + tenant + "/" + id
	if opts.ID != wid || opts.TaskQueue != workflows.TaskQueue {
		t.Errorf("start options ID %q, task queue %q; want %q, %q", opts.ID, opts.TaskQueue, wid, workflows.TaskQueue)
	}
	if opts.WorkflowIDConflictPolicy != enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING {
		t.Errorf("conflict policy = %v, want USE_EXISTING", opts.WorkflowIDConflictPolicy)
	}
	if v, ok := opts.TypedSearchAttributes.GetKeyword(workflows.SAttrTenant); !ok || v != tenant {
		t.Errorf("CtxTenant = %q, %v; want %q", v, ok, tenant)
	}
	if v, ok := opts.TypedSearchAttributes.GetKeyword(workflows.SAttrStatus); !ok || v != workflows.StatusIdle {
		t.Errorf("CtxStatus = %q, %v; want idle", v, ok)
	}
	if !strings.Contains(opts.StaticSummary, id) {
		t.Errorf("static summary %q does not name the session", opts.StaticSummary)
	}
	if workflow != workflows.SessionWorkflowName {
		t.Errorf("workflow = %v, want %s", workflow, workflows.SessionWorkflowName)
	}
	if in.Tenant != tenant || in.SessionID != id || !reflect.DeepEqual(in.Limits, workflows.DefaultLimits()) {
		t.Errorf("session input = %+v", in)
	}
	var cfg workflows.SessionConfig
	if err := json.Unmarshal(in.Config, &cfg); err != nil || cfg != workflows.DefaultSessionConfig() {
		t.Errorf("session input config = %s, %v; want the defaults", in.Config, err)
	}
}

// submitted answers the submit update with a queued result.
func submitted(t *testing.T) func(opts client.UpdateWithStartWorkflowOptions) (client.WorkflowUpdateHandle, error) {
	return func(opts client.UpdateWithStartWorkflowOptions) (client.WorkflowUpdateHandle, error) {
		req := opts.UpdateOptions.Args[0].(workflows.TurnRequest)
		return handle{id: opts.UpdateOptions.UpdateID, val: encode(t, workflows.TurnResult{TurnID: req.TurnID, Status: workflows.TurnQueued})}, nil
	}
}

// TestTurnSubmit: an asynchronous turn is the submit update, which the
// session validates against its own config before it answers 202.
func TestTurnSubmit(t *testing.T) {
	f := newFake(t)
	got := recordUpdate(t, f, submitted(t))
	h := server(f)

	w := do(h, http.MethodPost, "/v1/sessions/s1/turns", `{"question":"What is Temporal?"}`)
	if w.Code != http.StatusAccepted {
		t.Fatalf("status = %d, want 202; body %s", w.Code, w.Body)
	}
	var resp struct{ SessionID, TurnID, Status string }
	decode(t, w, &resp)
	if !regexp.MustCompile(`^turn-[0-9a-f]{24}$`).MatchString(resp.TurnID) || resp.SessionID != "s1" || resp.Status != workflows.TurnQueued {
		t.Errorf("answer = %+v", resp)
	}
	if len(*got) != 1 {
		t.Fatalf("%d updates, want 1", len(*got))
	}
	u := (*got)[0]
	req := u.UpdateOptions.Args[0].(workflows.TurnRequest)
	if u.UpdateOptions.UpdateName != workflows.UpdateSubmit || u.UpdateOptions.UpdateID != workflows.TurnUpdateID(workflows.UpdateSubmit, req) ||
		u.UpdateOptions.WaitForStage != client.WorkflowUpdateStageCompleted {
		t.Errorf("update options = %+v", u.UpdateOptions)
	}
	if req.TurnID != resp.TurnID || req.Question != "What is Temporal?" || len(req.Config) != 0 {
		t.Errorf("turn request = %+v", req)
	}
	op := u.StartWorkflowOperation.(*startOp)
	checkStart(t, op.opts, op.workflow, op.args[0].(workflows.SessionInput), "default", "s1")

	// A client-chosen turn id, a tenant and per-turn options pass through.
	w = do(h, http.MethodPost, "/v1/sessions/s2/turns", `{"question":"again","turnId":"t-1","config":{"topK":3}}`, "X-Tenant-ID", "acme")
	if w.Code != http.StatusAccepted {
		t.Fatalf("status = %d; body %s", w.Code, w.Body)
	}
	decode(t, w, &resp)
	u = (*got)[1]
	req = u.UpdateOptions.Args[0].(workflows.TurnRequest)
	op = u.StartWorkflowOperation.(*startOp)
	if resp.TurnID != "t-1" || req.TurnID != "t-1" || op.opts.ID != "session/acme/s2" || string(req.Config) != `{"topK":3}` {
		t.Errorf("answer %+v, request %+v", resp, req)
	}
	checkStart(t, op.opts, op.workflow, op.args[0].(workflows.SessionInput), "acme", "s2")

	// A question of exactly 32 KiB is fine.
	q := strings.Repeat("b", workflows.DefaultMaxQuestionBytes)
	if w := do(h, http.MethodPost, "/v1/sessions/s1/turns", `{"question":"`+q+`"}`); w.Code != http.StatusAccepted {
		t.Errorf("32 KiB question: status %d %s", w.Code, w.Body)
	}
	// ?wait=false is the default; anything but true or false is refused.
	if w := do(h, http.MethodPost, "/v1/sessions/s1/turns?wait=false", `{"question":"x"}`); w.Code != http.StatusAccepted {
		t.Errorf("wait=false: status %d", w.Code)
	}
	n := len(*got)
	wantError(t, do(h, http.MethodPost, "/v1/sessions/s1/turns?wait=maybe", `{"question":"x"}`), http.StatusBadRequest, "invalid_argument")
	if len(*got) != n {
		t.Error("?wait=maybe reached the session")
	}
	for _, c := range f.called() {
		if c == "SignalWithStartWorkflow" {
			t.Errorf("a turn went as a signal without ResourceExhausted")
		}
	}
}

// TestTurnSubmitFallsBackToSignal: a session with the server's limit of
// updates in flight gets the turn as a signal.
func TestTurnSubmitFallsBackToSignal(t *testing.T) {
	f := newFake(t)
	recordUpdate(t, f, func(client.UpdateWithStartWorkflowOptions) (client.WorkflowUpdateHandle, error) {
		return nil, serviceerror.NewResourceExhausted(enumspb.RESOURCE_EXHAUSTED_CAUSE_CONCURRENT_LIMIT, "too many in-flight updates")
	})
	got := recordSignal(t, f)
	w := do(server(f), http.MethodPost, "/v1/sessions/s1/turns", `{"question":"What is Temporal?","turnId":"t-3"}`)
	if w.Code != http.StatusAccepted {
		t.Fatalf("status = %d, want 202; body %s", w.Code, w.Body)
	}
	if len(*got) != 1 {
		t.Fatalf("%d signals, want 1", len(*got))
	}
	s := (*got)[0]
	if s.workflowID != "session/default/s1" || s.signal != workflows.SignalTurn || s.req.TurnID != "t-3" {
		t.Errorf("signal %q to %q: %+v", s.signal, s.workflowID, s.req)
	}
	checkStart(t, s.opts, s.workflow, s.in, "default", "s1")
}

func TestTurnSubmitErrors(t *testing.T) {
	for _, tc := range []struct {
		err    error
		status int
		code   string
	}{
		{serviceerror.NewUnavailable("frontend down"), http.StatusServiceUnavailable, "unavailable"},
		{serviceerror.NewInvalidArgument("bad"), http.StatusBadRequest, "invalid_argument"},
		{temporal.NewNonRetryableApplicationError("config: maxRounds 0 out of range", activities.CodeInvalidArgument, nil), http.StatusBadRequest, "invalid_argument"},
		{temporal.NewNonRetryableApplicationError("turn id reused", activities.CodeConflict, nil), http.StatusConflict, "conflict"},
		{errors.New("odd"), http.StatusInternalServerError, "internal"},
	} {
		f := newFake(t)
		recordUpdate(t, f, func(client.UpdateWithStartWorkflowOptions) (client.WorkflowUpdateHandle, error) {
			return nil, tc.err
		})
		wantError(t, do(server(f), http.MethodPost, "/v1/sessions/s1/turns", `{"question":"hi"}`), tc.status, tc.code)
	}
}

// recordUpdate answers update-with-start with h and records the call.
func recordUpdate(t *testing.T, f *fakeClient, answer func(opts client.UpdateWithStartWorkflowOptions) (client.WorkflowUpdateHandle, error)) *[]client.UpdateWithStartWorkflowOptions {
	var got []client.UpdateWithStartWorkflowOptions
	f.UpdateWithStartWorkflowFn = func(ctx context.Context, opts client.UpdateWithStartWorkflowOptions) (client.WorkflowUpdateHandle, error) {
		if _, ok := ctx.Deadline(); !ok {
			t.Error("update-with-start without a deadline")
		}
		got = append(got, opts)
		return answer(opts)
	}
	return &got
}

func TestTurnWait(t *testing.T) {
	f := newFake(t)
	var res workflows.TurnResult
	got := recordUpdate(t, f, func(opts client.UpdateWithStartWorkflowOptions) (client.WorkflowUpdateHandle, error) {
		req := opts.UpdateOptions.Args[0].(workflows.TurnRequest)
		res = workflows.TurnResult{
			TurnID: req.TurnID, Status: workflows.TurnCompleted, Question: req.Question, Answer: "A durable execution engine.",
			Steps:       []workflows.Step{{Name: "generate", Status: "ok", DurationMS: 12}},
			SessionInfo: workflows.SessionInfo{SessionID: "s1", Turns: 1, Messages: 2, Health: workflows.HealthOK},
			Engine:      "offline", CompletedAt: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC),
		}
		return handle{id: opts.UpdateOptions.UpdateID, val: encode(t, res)}, nil
	})
	w := do(server(f), http.MethodPost, "/v1/sessions/s1/turns?wait=true", `{"question":"What is Temporal?","turnId":"t-9"}`)
	if w.Code != http.StatusOK {
		t.Fatalf("status = %d, want 200; body %s", w.Code, w.Body)
	}
	var answer workflows.TurnResult
	decode(t, w, &answer)
	if !reflect.DeepEqual(answer, res) {
		t.Errorf("answer = %+v, want %+v", answer, res)
	}
	if len(*got) != 1 {
		t.Fatalf("%d updates, want 1", len(*got))
	}
	u := (*got)[0]
	if u.UpdateOptions.UpdateID != workflows.TurnUpdateID(workflows.UpdateTurn, workflows.TurnRequest{TurnID: "t-9", Question: "What is Temporal?"}) || u.UpdateOptions.UpdateName != workflows.UpdateTurn ||
		u.UpdateOptions.WaitForStage != client.WorkflowUpdateStageCompleted {
		t.Errorf("update options = %+v", u.UpdateOptions)
	}
	if req, ok := u.UpdateOptions.Args[0].(workflows.TurnRequest); !ok || req.TurnID != "t-9" || req.Question != "What is Temporal?" {
		t.Errorf("update args = %+v", u.UpdateOptions.Args)
	}
	op, ok := u.StartWorkflowOperation.(*startOp)
	if !ok {
		t.Fatalf("start operation is a %T", u.StartWorkflowOperation)
	}
	checkStart(t, op.opts, op.workflow, op.args[0].(workflows.SessionInput), "default", "s1")
	if want := []string{"NewWithStartWorkflowOperation", "UpdateWithStartWorkflow"}; !reflect.DeepEqual(f.called(), want) {
		t.Errorf("calls = %v, want %v", f.called(), want)
	}

	// Without a turnId the generated one is in the update id.
	do(server(f), http.MethodPost, "/v1/sessions/s1/turns?wait=1", `{"question":"again"}`)
	if len(*got) != 2 {
		t.Fatalf("%d updates, want 2", len(*got))
	}
	u = (*got)[1]
	if req := u.UpdateOptions.Args[0].(workflows.TurnRequest); !strings.HasPrefix(req.TurnID, "turn-") || u.UpdateOptions.UpdateID != workflows.TurnUpdateID(workflows.UpdateTurn, req) {
		t.Errorf("update id %q, request %+v", u.UpdateOptions.UpdateID, req)
	}
}

func TestTurnWaitOutcomes(t *testing.T) {
	for _, tc := range []struct {
		name      string
		status    string
		updateErr error // from UpdateWithStartWorkflow
		getErr    error // from the handle
		code      int
		errCode   string
	}{
		{name: "failed turn", status: workflows.TurnFailed, code: http.StatusServiceUnavailable, errCode: "unavailable"},
		{name: "rejected turn", status: workflows.TurnRejected, code: http.StatusBadRequest, errCode: "invalid_argument"},
		{name: "validator rejects", getErr: temporal.NewNonRetryableApplicationError("question is empty", activities.CodeInvalidArgument, nil), code: http.StatusBadRequest, errCode: "invalid_argument"},
		{name: "session closing", getErr: temporal.NewNonRetryableApplicationError("closing", activities.CodeConflict, nil), code: http.StatusConflict, errCode: "conflict"},
		{name: "frontend down", updateErr: serviceerror.NewUnavailable("down"), code: http.StatusServiceUnavailable, errCode: "unavailable"},
		{name: "deadline", getErr: context.DeadlineExceeded, code: http.StatusServiceUnavailable, errCode: "unavailable"},
		{name: "other", updateErr: errors.New("odd"), code: http.StatusInternalServerError, errCode: "internal"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t)
			recordUpdate(t, f, func(opts client.UpdateWithStartWorkflowOptions) (client.WorkflowUpdateHandle, error) {
				if tc.updateErr != nil {
					return nil, tc.updateErr
				}
				res := workflows.TurnResult{TurnID: opts.UpdateOptions.Args[0].(workflows.TurnRequest).TurnID, Status: tc.status, Error: "model unreachable",
					SessionInfo: workflows.SessionInfo{Health: workflows.HealthDegraded}}
				return handle{val: encode(t, res), err: tc.getErr}, nil
			})
			b := wantError(t, do(server(f), http.MethodPost, "/v1/sessions/s1/turns?wait=true", `{"question":"hi","turnId":"t-1"}`), tc.code, tc.errCode)
			if tc.status != "" {
				if b.Turn == nil || b.Turn.TurnID != "t-1" || b.Turn.Status != tc.status {
					t.Errorf("turn field = %+v, want the %s turn", b.Turn, tc.status)
				}
				if !strings.Contains(b.Error.Message, "model unreachable") {
					t.Errorf("message %q does not say why", b.Error.Message)
				}
			}
			for _, c := range f.called() {
				if c == "SignalWithStartWorkflow" {
					t.Error("fell back to a signal without ResourceExhausted")
				}
			}
		})
	}
}

// TestTurnWaitFallsBackToSignal: when the session has too many updates in
// flight the turn is queued as a signal and its result polled.
func TestTurnWaitFallsBackToSignal(t *testing.T) {
	f := newFake(t)
	recordUpdate(t, f, func(client.UpdateWithStartWorkflowOptions) (client.WorkflowUpdateHandle, error) {
		return nil, serviceerror.NewResourceExhausted(enumspb.RESOURCE_EXHAUSTED_CAUSE_CONCURRENT_LIMIT, "too many in-flight updates")
	})
	signals := recordSignal(t, f)
	var queries []string
	f.QueryWorkflowFn = func(ctx context.Context, workflowID, runID, queryType string, args ...any) (converter.EncodedValue, error) {
		if _, ok := ctx.Deadline(); !ok {
			t.Error("query without a deadline")
		}
		if workflowID != "session/default/s1" || queryType != workflows.QueryTurn || len(args) != 1 || args[0] != "t-5" {
			t.Errorf("query %q on %q with %v", queryType, workflowID, args)
		}
		queries = append(queries, queryType)
		switch len(queries) {
		case 1: // the signal is not processed yet
			return nil, serviceerror.NewQueryFailed(`turn "t-5" not found`)
		case 2, 3:
			return encode(t, workflows.TurnResult{TurnID: "t-5", Status: workflows.TurnQueued}), nil
		}
		return encode(t, workflows.TurnResult{TurnID: "t-5", Status: workflows.TurnCompleted, Answer: "done"}), nil
	}
	w := do(server(f), http.MethodPost, "/v1/sessions/s1/turns?wait=true", `{"question":"hi","turnId":"t-5"}`)
	if w.Code != http.StatusOK {
		t.Fatalf("status = %d, want 200; body %s", w.Code, w.Body)
	}
	var res workflows.TurnResult
	decode(t, w, &res)
	if res.Status != workflows.TurnCompleted || res.Answer != "done" {
		t.Errorf("answer = %+v", res)
	}
	if len(*signals) != 1 || (*signals)[0].req.TurnID != "t-5" || (*signals)[0].signal != workflows.SignalTurn {
		t.Errorf("signals = %+v", *signals)
	}
	if len(queries) != 4 {
		t.Errorf("%d polls, want 4 (not found, queued, queued, completed)", len(queries))
	}
}

func TestTurnWaitFallbackTimesOut(t *testing.T) {
	f := newFake(t)
	recordUpdate(t, f, func(client.UpdateWithStartWorkflowOptions) (client.WorkflowUpdateHandle, error) {
		return nil, serviceerror.NewResourceExhausted(enumspb.RESOURCE_EXHAUSTED_CAUSE_CONCURRENT_LIMIT, "busy")
	})
	recordSignal(t, f)
	f.QueryWorkflowFn = func(context.Context, string, string, string, ...any) (converter.EncodedValue, error) {
		return encode(t, workflows.TurnResult{TurnID: "t-6", Status: workflows.TurnRunning}), nil
	}
	opts := options()
	opts.TurnWaitTimeout = 300 * time.Millisecond
	start := time.Now()
	b := wantError(t, do(api.New(f, opts).Handler(), http.MethodPost, "/v1/sessions/s1/turns?wait=true", `{"question":"hi","turnId":"t-6"}`), http.StatusServiceUnavailable, "unavailable")
	if !strings.Contains(b.Error.Message, "/v1/sessions/s1/turns/t-6") {
		t.Errorf("message %q does not say where to fetch the turn", b.Error.Message)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("took %s with a 300ms wait timeout", d)
	}
}

// A query the session's sticky worker did not take in time (the server
// then clears the stickiness) is asked again, and answered by any worker.
func TestQueryAskedAgainAfterTheStickyTimeout(t *testing.T) {
	f := newFake(t)
	calls := 0
	f.QueryWorkflowFn = func(context.Context, string, string, string, ...any) (converter.EncodedValue, error) {
		if calls++; calls == 1 {
			return nil, serviceerror.NewDeadlineExceeded("context deadline exceeded")
		}
		return encode(t, workflows.SessionState{SessionID: "s1", Status: workflows.StatusIdle}), nil
	}
	if w := do(server(f), http.MethodGet, "/v1/sessions/s1", ""); w.Code != http.StatusOK || calls != 2 {
		t.Fatalf("status %d after %d queries, want 200 after 2; body %s", w.Code, calls, w.Body)
	}
}

func TestGetSession(t *testing.T) {
	state := workflows.SessionState{
		Tenant: "default", SessionID: "s1", Title: "demo", Config: workflows.DefaultSessionConfig(),
		Status: workflows.StatusIdle, Health: workflows.HealthOK, Turns: 3, Messages: 6, ActiveLeaf: "m6",
		CreatedAt: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), UpdatedAt: time.Date(2025, 1, 2, 0, 0, 0, 0, time.UTC),
	}
	deleted := state
	deleted.Status = workflows.StatusDeleted
	for _, tc := range []struct {
		name    string
		val     value
		err     error
		status  int
		errCode string
	}{
		{name: "ok", val: encode(t, state), status: http.StatusOK},
		{name: "unknown", err: serviceerror.NewNotFound("workflow not found"), status: http.StatusNotFound, errCode: "not_found"},
		{name: "deleted", val: encode(t, deleted), status: http.StatusNotFound, errCode: "not_found"},
		{name: "no worker", err: context.DeadlineExceeded, status: http.StatusServiceUnavailable, errCode: "unavailable"},
		{name: "server deadline", err: serviceerror.NewDeadlineExceeded("context deadline exceeded"), status: http.StatusServiceUnavailable, errCode: "unavailable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t)
			f.QueryWorkflowFn = func(ctx context.Context, workflowID, runID, queryType string, args ...any) (converter.EncodedValue, error) {
				if _, ok := ctx.Deadline(); !ok {
					t.Error("query without a deadline")
				}
				if workflowID != "session/acme/s1" || runID != "" || queryType != workflows.QueryState || len(args) != 0 {
					t.Errorf("query %q on %q/%q with %v", queryType, workflowID, runID, args)
				}
				return tc.val, tc.err
			}
			w := do(server(f), http.MethodGet, "/v1/sessions/s1", "", "X-Tenant-ID", "acme")
			if tc.errCode != "" {
				wantError(t, w, tc.status, tc.errCode)
				return
			}
			if w.Code != tc.status {
				t.Fatalf("status = %d; body %s", w.Code, w.Body)
			}
			var got struct {
				workflows.SessionState
				MessagesURL string `json:"messagesUrl"`
			}
			decode(t, w, &got)
			if !reflect.DeepEqual(got.SessionState, state) || got.MessagesURL != "/v1/sessions/s1/messages" {
				t.Errorf("state = %+v, want %+v and the messages URL", got, state)
			}
		})
	}
	f := newFake(t)
	wantError(t, do(server(f), http.MethodGet, "/v1/sessions/has%20space", ""), http.StatusBadRequest, "invalid_argument")
	if len(f.called()) != 0 {
		t.Errorf("Temporal called for a bad id: %v", f.called())
	}
}

// describing answers DescribeWorkflowExecution: not found for ids in
// missing, else a run whose CtxStatus is status.
func describing(t *testing.T, f *fakeClient, status string, missing ...string) {
	f.DescribeWorkflowExecutionFn = func(_ context.Context, workflowID, _ string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
		for _, m := range missing {
			if strings.HasSuffix(workflowID, "/"+m) {
				return nil, serviceerror.NewNotFound("workflow not found")
			}
		}
		return &workflowservice.DescribeWorkflowExecutionResponse{WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{
			Execution: &commonpb.WorkflowExecution{WorkflowId: workflowID, RunId: "r1"},
			SearchAttributes: &commonpb.SearchAttributes{IndexedFields: map[string]*commonpb.Payload{
				workflows.SAttrStatus.GetName(): encode(t, status).p,
			}},
		}}, nil
	}
}

// TestDeleteSession: DELETE closes the session with the close update and
// answers once it is deleted; an unknown or deleted session is 404.
func TestDeleteSession(t *testing.T) {
	f := newFake(t)
	describing(t, f, workflows.StatusIdle, "gone")
	got := recordUpdate(t, f, func(client.UpdateWithStartWorkflowOptions) (client.WorkflowUpdateHandle, error) {
		return handle{}, nil
	})
	w := do(server(f), http.MethodDelete, "/v1/sessions/s1", "")
	if w.Code != http.StatusNoContent || w.Body.Len() != 0 {
		t.Errorf("DELETE = %d %q, want 204 and no body", w.Code, w.Body)
	}
	if len(*got) != 1 {
		t.Fatalf("%d updates, want 1", len(*got))
	}
	u := (*got)[0]
	if u.UpdateOptions.UpdateName != workflows.UpdateClose || !reflect.DeepEqual(u.UpdateOptions.Args, []any{workflows.CloseRequest{Delete: true}}) ||
		u.UpdateOptions.WaitForStage != client.WorkflowUpdateStageCompleted {
		t.Errorf("close update = %+v", u.UpdateOptions)
	}
	if op := u.StartWorkflowOperation.(*startOp); op.opts.ID != "session/default/s1" {
		t.Errorf("start = %+v", op.opts)
	}
	wantError(t, do(server(f), http.MethodDelete, "/v1/sessions/gone", ""), http.StatusNotFound, "not_found")

	f = newFake(t)
	describing(t, f, workflows.StatusDeleted)
	wantError(t, do(server(f), http.MethodDelete, "/v1/sessions/s1", ""), http.StatusNotFound, "not_found")
}

func TestCompress(t *testing.T) {
	f := newFake(t)
	var signals []string
	f.SignalWorkflowFn = func(_ context.Context, workflowID, _, signalName string, arg any) error {
		signals = append(signals, workflowID+" "+signalName)
		if arg != nil {
			t.Errorf("compress signal arg = %v", arg)
		}
		return nil
	}
	w := do(server(f), http.MethodPost, "/v1/sessions/s1/compress", "", "X-Tenant-ID", "acme")
	if w.Code != http.StatusAccepted {
		t.Errorf("status = %d; body %s", w.Code, w.Body)
	}
	if want := []string{"session/acme/s1 " + workflows.SignalCompress}; !reflect.DeepEqual(signals, want) {
		t.Errorf("signals = %v, want %v", signals, want)
	}
}

func TestGetSteps(t *testing.T) {
	steps := []workflows.TurnSteps{{TurnID: "t-1", Status: workflows.TurnCompleted, Steps: []workflows.Step{
		{Name: "rewrite query", Status: "ok", DurationMS: 3}, {Name: "generate", Status: "degraded", DurationMS: 40},
	}}}
	f := newFake(t)
	f.QueryWorkflowFn = func(_ context.Context, workflowID, _, queryType string, _ ...any) (converter.EncodedValue, error) {
		if workflowID != "session/default/s1" || queryType != workflows.QuerySteps {
			t.Errorf("query %q on %q", queryType, workflowID)
		}
		return encode(t, steps), nil
	}
	w := do(server(f), http.MethodGet, "/v1/sessions/s1/steps", "")
	if w.Code != http.StatusOK {
		t.Fatalf("status = %d; body %s", w.Code, w.Body)
	}
	var got struct {
		SessionID string                `json:"sessionId"`
		Turns     []workflows.TurnSteps `json:"turns"`
	}
	decode(t, w, &got)
	if got.SessionID != "s1" || !reflect.DeepEqual(got.Turns, steps) {
		t.Errorf("steps = %+v", got)
	}
}

func TestGetTurn(t *testing.T) {
	f := newFake(t)
	f.QueryWorkflowFn = func(_ context.Context, workflowID, _, queryType string, args ...any) (converter.EncodedValue, error) {
		if queryType != workflows.QueryTurn || len(args) != 1 {
			t.Fatalf("query %q with %v", queryType, args)
		}
		if args[0] != "t-1" {
			return nil, serviceerror.NewQueryFailed(fmt.Sprintf("turn %q not found", args[0]))
		}
		return encode(t, workflows.TurnResult{TurnID: "t-1", Status: workflows.TurnCompleted, Answer: "yes"}), nil
	}
	h := server(f)
	w := do(h, http.MethodGet, "/v1/sessions/s1/turns/t-1", "")
	var res workflows.TurnResult
	decode(t, w, &res)
	if w.Code != http.StatusOK || res.TurnID != "t-1" || res.Answer != "yes" {
		t.Errorf("GET turn = %d %+v", w.Code, res)
	}
	wantError(t, do(h, http.MethodGet, "/v1/sessions/s1/turns/t-2", ""), http.StatusNotFound, "not_found")
	n := len(f.called())
	wantError(t, do(h, http.MethodGet, "/v1/sessions/s1/turns/.hidden", ""), http.StatusBadRequest, "invalid_argument")
	if len(f.called()) != n {
		t.Error("Temporal called for a bad turn id")
	}
}

// TestContinue: POST /continue is a continue turn (the session refuses it
// in its validator when no task is paused); ?wait=true waits for the
// task's next event.
func TestContinue(t *testing.T) {
	for _, tc := range []struct {
		name, path, body string
		update           string
		updateErr        error
		status           int
		errCode          string
	}{
		{name: "queued", path: "/v1/sessions/s1/continue", body: `{"turnId":"t-1"}`, update: workflows.UpdateSubmit, status: http.StatusAccepted},
		{name: "no body", path: "/v1/sessions/s1/continue", update: workflows.UpdateSubmit, status: http.StatusAccepted},
		{name: "waits", path: "/v1/sessions/s1/continue?wait=true", update: workflows.UpdateTurn, status: http.StatusOK},
		{name: "nothing paused", path: "/v1/sessions/s1/continue", update: workflows.UpdateSubmit,
			updateErr: temporal.NewNonRetryableApplicationError("session default/s1 has no paused task to continue", activities.CodeConflict, nil),
			status:    http.StatusConflict, errCode: "conflict"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t)
			got := recordUpdate(t, f, func(opts client.UpdateWithStartWorkflowOptions) (client.WorkflowUpdateHandle, error) {
				if tc.updateErr != nil {
					return nil, tc.updateErr
				}
				req := opts.UpdateOptions.Args[0].(workflows.TurnRequest)
				return handle{id: opts.UpdateOptions.UpdateID, val: encode(t, workflows.TurnResult{TurnID: req.TurnID, Status: workflows.TurnCompleted, Type: workflows.TypeFinish, Answer: "done"})}, nil
			})
			w := do(server(f), http.MethodPost, tc.path, tc.body)
			if len(*got) != 1 {
				t.Fatalf("%d updates, want 1", len(*got))
			}
			u := (*got)[0].UpdateOptions
			req := u.Args[0].(workflows.TurnRequest)
			if u.UpdateName != tc.update || req.Kind != workflows.KindContinue || req.Question != "continue" || req.TurnID == "" {
				t.Errorf("update %q with %+v", u.UpdateName, req)
			}
			if tc.body != "" && req.TurnID != "t-1" {
				t.Errorf("turn id %q, want t-1", req.TurnID)
			}
			if tc.errCode != "" {
				b := wantError(t, w, tc.status, tc.errCode)
				if !strings.Contains(b.Error.Message, "no paused task") {
					t.Errorf("message %q", b.Error.Message)
				}
				return
			}
			if w.Code != tc.status {
				t.Errorf("continue = %d %s", w.Code, w.Body)
			}
		})
	}
}

func TestCreateSession(t *testing.T) {
	type started struct {
		opts client.StartWorkflowOptions
		in   workflows.SessionInput
	}
	var got []started
	var startErr error
	f := newFake(t)
	describing(t, f, workflows.StatusIdle, "")
	f.DescribeWorkflowExecutionFn = func(_ context.Context, workflowID, _ string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
		return nil, serviceerror.NewNotFound("workflow not found")
	}
	f.ExecuteWorkflowFn = func(_ context.Context, opts client.StartWorkflowOptions, workflow any, args ...any) (client.WorkflowRun, error) {
		if workflow != workflows.SessionWorkflowName || len(args) != 1 {
			t.Errorf("ExecuteWorkflow(%v, %v)", workflow, args)
		}
		got = append(got, started{opts, args[0].(workflows.SessionInput)})
		return nil, startErr
	}
	h := server(f)

	w := do(h, http.MethodPost, "/v1/sessions", `{"title":"Trip planning","config":{"topK":7,"windowStrategy":"sliding_window","systemPrompt":"Be brief."}}`, "X-Tenant-ID", "acme")
	if w.Code != http.StatusCreated {
		t.Fatalf("status = %d, want 201; body %s", w.Code, w.Body)
	}
	var resp struct {
		SessionID string                  `json:"sessionId"`
		Config    workflows.SessionConfig `json:"config"`
	}
	decode(t, w, &resp)
	want := workflows.DefaultSessionConfig()
	want.TopK, want.WindowStrategy, want.SystemPrompt = 7, "sliding_window", "Be brief."
	if !regexp.MustCompile(`^s-[0-9a-f]{24}$`).MatchString(resp.SessionID) {
		t.Errorf("generated session id %q", resp.SessionID)
	}
	if resp.Config != want {
		t.Errorf("config = %+v, want the defaults merged with the request: %+v", resp.Config, want)
	}
	if len(got) != 1 {
		t.Fatalf("%d starts, want 1", len(got))
	}
	s := got[0]
	if s.opts.ID != "session/acme/"+resp.SessionID || s.opts.TaskQueue != workflows.TaskQueue {
		t.Errorf("start options = %+v", s.opts)
	}
	if s.opts.WorkflowIDConflictPolicy != enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL || !s.opts.WorkflowExecutionErrorWhenAlreadyStarted {
		t.Errorf("conflict policy = %v, error when started %v: want FAIL and an error (creating twice is a conflict)",
			s.opts.WorkflowIDConflictPolicy, s.opts.WorkflowExecutionErrorWhenAlreadyStarted)
	}
	if s.opts.Memo["title"] != "Trip planning" || !strings.Contains(s.opts.StaticSummary, "Trip planning") {
		t.Errorf("memo %v, summary %q", s.opts.Memo, s.opts.StaticSummary)
	}
	if v, _ := s.opts.TypedSearchAttributes.GetKeyword(workflows.SAttrTenant); v != "acme" {
		t.Errorf("CtxTenant = %q", v)
	}
	var cfg workflows.SessionConfig
	if err := json.Unmarshal(s.in.Config, &cfg); err != nil || cfg != want {
		t.Errorf("session input config = %s (%v), want %+v", s.in.Config, err, want)
	}
	if s.in.Tenant != "acme" || s.in.SessionID != resp.SessionID || s.in.Title != "Trip planning" || !reflect.DeepEqual(s.in.Limits, workflows.DefaultLimits()) {
		t.Errorf("session input = %+v", s.in)
	}

	// A chosen id; no body at all.
	if w := do(h, http.MethodPost, "/v1/sessions", `{"sessionId":"mine"}`); w.Code != http.StatusCreated || !strings.Contains(w.Body.String(), `"sessionId":"mine"`) {
		t.Errorf("chosen id: %d %s", w.Code, w.Body)
	}
	if got[1].opts.ID != "session/default/mine" {
		t.Errorf("workflow id = %q", got[1].opts.ID)
	}
	if w := do(h, http.MethodPost, "/v1/sessions", ""); w.Code != http.StatusCreated {
		t.Errorf("empty body: %d %s", w.Code, w.Body)
	}

	startErr = serviceerror.NewWorkflowExecutionAlreadyStarted("already started", "", "run-1")
	wantError(t, do(h, http.MethodPost, "/v1/sessions", `{"sessionId":"mine"}`), http.StatusConflict, "conflict")
	startErr = nil

	// A session whose run ended idle exists: 409, nothing started; a
	// deleted one may be created again.
	for status, code := range map[string]int{workflows.StatusIdle: http.StatusConflict, workflows.StatusDeleted: http.StatusCreated} {
		describing(t, f, status)
		n := len(got)
		if w := do(h, http.MethodPost, "/v1/sessions", `{"sessionId":"old"}`); w.Code != code {
			t.Errorf("create over a %s session: %d %s, want %d", status, w.Code, w.Body, code)
		}
		if started := len(got) - n; (code == http.StatusConflict) != (started == 0) {
			t.Errorf("create over a %s session started %d workflows", status, started)
		}
	}

	n := len(got)
	for _, tc := range []struct{ name, body, want string }{
		{"unknown config key", `{"config":{"temperature":1}}`, "temperature"},
		{"config out of range", `{"config":{"topK":101}}`, "topK"},
		{"config of the wrong type", `{"config":{"maxRounds":"ten"}}`, "maxRounds"},
		{"config not an object", `{"config":[1]}`, "config"},
		{"bad session id", `{"sessionId":"a/b"}`, "sessionId"},
		{"title too long", `{"title":"` + strings.Repeat("t", 201) + `"}`, "title"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := wantError(t, do(h, http.MethodPost, "/v1/sessions", tc.body), http.StatusBadRequest, "invalid_argument")
			if !strings.Contains(b.Error.Message, tc.want) {
				t.Errorf("message %q does not mention %q", b.Error.Message, tc.want)
			}
		})
	}
	wantError(t, do(h, http.MethodPost, "/v1/sessions", `{}`, "X-Tenant-ID", "../x"), http.StatusBadRequest, "invalid_argument")
	if len(got) != n {
		t.Errorf("a bad request started %d sessions", len(got)-n)
	}
}

func TestListSessions(t *testing.T) {
	updated := time.Date(2025, 5, 6, 7, 8, 9, 0, time.UTC)
	row := func(wid, status string, turns int64, title string) *workflowpb.WorkflowExecutionInfo {
		return &workflowpb.WorkflowExecutionInfo{
			Execution: &commonpb.WorkflowExecution{WorkflowId: wid, RunId: "r"},
			SearchAttributes: &commonpb.SearchAttributes{IndexedFields: map[string]*commonpb.Payload{
				"CtxStatus":    encode(t, status).p,
				"CtxTurns":     encode(t, turns).p,
				"CtxUpdatedAt": encode(t, updated).p,
				"CtxTenant":    encode(t, "acme").p,
			}},
			Memo: &commonpb.Memo{Fields: map[string]*commonpb.Payload{"title": encode(t, title).p}},
		}
	}
	var reqs []*workflowservice.ListWorkflowExecutionsRequest
	f := newFake(t)
	f.ListWorkflowFn = func(_ context.Context, req *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error) {
		reqs = append(reqs, req)
		return &workflowservice.ListWorkflowExecutionsResponse{
			Executions: []*workflowpb.WorkflowExecutionInfo{
				row("session/acme/s1", workflows.StatusPaused, 12, "Trip"),
				row("session/acme/s1", workflows.StatusIdle, 5, "Trip (older run)"),
				row("not-a-session", workflows.StatusIdle, 1, "x"),
				{Execution: &commonpb.WorkflowExecution{WorkflowId: "session/acme/bare"}},
			},
			NextPageToken: []byte("page-2"),
		}, nil
	}
	h := server(f)
	// A page token comes from a listing: take one from a first page.
	first := do(h, http.MethodGet, "/v1/sessions?status=paused&limit=20", "", "X-Tenant-ID", "acme")
	var page struct {
		NextPageToken string `json:"nextPageToken"`
	}
	decode(t, first, &page)
	reqs = nil
	w := do(h, http.MethodGet, "/v1/sessions?status=paused&limit=20&pageToken="+page.NextPageToken, "", "X-Tenant-ID", "acme")
	if w.Code != http.StatusOK {
		t.Fatalf("status = %d; body %s", w.Code, w.Body)
	}
	if len(reqs) != 1 {
		t.Fatalf("%d list calls", len(reqs))
	}
	wantQuery := "WorkflowType = 'SessionWorkflow' AND CtxTenant = 'acme' AND ExecutionStatus != 'ContinuedAsNew' AND CtxStatus != 'deleted' AND CtxStatus = 'paused'"
	if reqs[0].GetQuery() != wantQuery {
		t.Errorf("query = %q, want %q", reqs[0].GetQuery(), wantQuery)
	}
	if reqs[0].GetPageSize() != 20 || string(reqs[0].GetNextPageToken()) != "page-2" {
		t.Errorf("page size %d, token %q", reqs[0].GetPageSize(), reqs[0].GetNextPageToken())
	}
	var resp struct {
		Sessions []struct {
			SessionID string    `json:"sessionId"`
			Title     string    `json:"title"`
			Status    string    `json:"status"`
			Turns     int64     `json:"turns"`
			UpdatedAt time.Time `json:"updatedAt"`
		} `json:"sessions"`
		NextPageToken string `json:"nextPageToken"`
	}
	decode(t, w, &resp)
	if len(resp.Sessions) != 2 {
		t.Fatalf("sessions = %+v, want s1 (newest run only) and bare", resp.Sessions)
	}
	s := resp.Sessions[0]
	if s.SessionID != "s1" || s.Title != "Trip" || s.Status != workflows.StatusPaused || s.Turns != 12 || !s.UpdatedAt.Equal(updated) {
		t.Errorf("row = %+v", s)
	}
	if b := resp.Sessions[1]; b.SessionID != "bare" || b.Status != "" || b.Turns != 0 {
		t.Errorf("row without attributes = %+v", b)
	}
	if resp.NextPageToken != page.NextPageToken {
		t.Errorf("nextPageToken = %q, want %q", resp.NextPageToken, page.NextPageToken)
	}

	// Defaults: tenant "default", no status filter, 50 per page.
	do(h, http.MethodGet, "/v1/sessions", "")
	if q := reqs[1].GetQuery(); q != "WorkflowType = 'SessionWorkflow' AND CtxTenant = 'default' AND ExecutionStatus != 'ContinuedAsNew' AND CtxStatus != 'deleted'" || reqs[1].GetPageSize() != 50 {
		t.Errorf("default query %q, page size %d", q, reqs[1].GetPageSize())
	}

	// A garbled token, a token of another listing, a raw Temporal token, a
	// token made as they once were, without a secret.
	raw := base64.RawURLEncoding.EncodeToString([]byte("page-2"))
	unkeyed := sha256.Sum256([]byte(reqs[0].GetQuery() + "\x00page-2"))
	forged := base64.RawURLEncoding.EncodeToString(append(unkeyed[:8], "page-2"...))
	for _, q := range []string{"status=deleted", "status=idle'%20OR%20'1'='1", "limit=0", "limit=1001", "limit=ten", "pageToken=%21%21",
		"pageToken=" + raw, "status=idle&pageToken=" + page.NextPageToken, "status=paused&limit=20&pageToken=" + forged} {
		t.Run(q, func(t *testing.T) {
			wantError(t, do(h, http.MethodGet, "/v1/sessions?"+q, ""), http.StatusBadRequest, "invalid_argument")
		})
	}
	wantError(t, do(h, http.MethodGet, "/v1/sessions", "", "X-Tenant-ID", "x' OR '1'='1"), http.StatusBadRequest, "invalid_argument")
	if len(reqs) != 2 {
		t.Errorf("bad list requests reached Temporal: %d calls", len(reqs))
	}

	f.ListWorkflowFn = func(context.Context, *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error) {
		return nil, serviceerror.NewUnavailable("visibility down")
	}
	wantError(t, do(h, http.MethodGet, "/v1/sessions", ""), http.StatusServiceUnavailable, "unavailable")
}

// TestAPIKeys: with keys, a request needs one; its tenant is the key's.
func TestAPIKeys(t *testing.T) {
	sum := sha256.Sum256([]byte("cfk_acme"))
	f := newFake(t)
	var gotID string
	f.QueryWorkflowFn = func(_ context.Context, workflowID, _, _ string, _ ...any) (converter.EncodedValue, error) {
		gotID = workflowID
		return encode(t, workflows.SessionState{SessionID: "s1", Status: workflows.StatusIdle}), nil
	}
	f.CheckHealthFn = func(context.Context, *client.CheckHealthRequest) (*client.CheckHealthResponse, error) {
		return &client.CheckHealthResponse{}, nil
	}
	opts := options()
	opts.Keys = map[string]string{hex.EncodeToString(sum[:]): "acme"}
	h := api.New(f, opts).Handler()

	for _, tc := range []struct {
		name    string
		header  []string
		status  int
		errCode string
	}{
		{"no key", nil, http.StatusUnauthorized, "unauthenticated"},
		{"unknown key", []string{"Authorization", "Bearer cfk_other"}, http.StatusUnauthorized, "unauthenticated"},
		{"not a bearer", []string{"Authorization", "Basic cfk_acme"}, http.StatusUnauthorized, "unauthenticated"},
		{"another tenant named", []string{"Authorization", "Bearer cfk_acme", "X-Tenant-ID", "beta"}, http.StatusBadRequest, "invalid_argument"},
		{"bearer", []string{"Authorization", "Bearer cfk_acme"}, http.StatusOK, ""},
		{"X-API-Key", []string{"X-API-Key", "cfk_acme", "X-Tenant-ID", "acme"}, http.StatusOK, ""},
	} {
		gotID = ""
		w := do(h, http.MethodGet, "/v1/sessions/s1", "", tc.header...)
		if tc.errCode != "" {
			wantError(t, w, tc.status, tc.errCode)
			if gotID != "" {
				t.Errorf("%s: reached Temporal", tc.name)
			}
			continue
		}
		if w.Code != tc.status || gotID != "session/acme/s1" {
			t.Errorf("%s: %d, workflow %q", tc.name, w.Code, gotID)
		}
	}
	if w := do(h, http.MethodGet, "/healthz", ""); w.Code != http.StatusOK {
		t.Errorf("/healthz without a key = %d", w.Code)
	}
}

// TestBackpressure: with MaxInFlight 2 and two turns waiting on Temporal,
// a third request is answered 429 overloaded with Retry-After at once and
// costs Temporal nothing; once the two end, requests are served again.
func TestBackpressure(t *testing.T) {
	f := newFake(t)
	release := make(chan struct{})
	entered := make(chan struct{}, 2)
	var calls atomic.Int64
	// Called from concurrent requests: no recordUpdate, which appends.
	f.UpdateWithStartWorkflowFn = func(_ context.Context, opts client.UpdateWithStartWorkflowOptions) (client.WorkflowUpdateHandle, error) {
		if calls.Add(1) <= 2 {
			entered <- struct{}{}
			<-release
		}
		req := opts.UpdateOptions.Args[0].(workflows.TurnRequest)
		return handle{id: opts.UpdateOptions.UpdateID, val: encode(t, workflows.TurnResult{TurnID: req.TurnID, Status: workflows.TurnCompleted, Answer: "ok"})}, nil
	}
	opts := options()
	opts.MaxInFlight = 2
	h := api.New(f, opts).Handler()
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() {
			if w := do(h, http.MethodPost, "/v1/sessions/s1/turns?wait=true", fmt.Sprintf(`{"question":"hi","turnId":"t-%d"}`, i)); w.Code != http.StatusOK {
				t.Errorf("turn %d: %d %s", i, w.Code, w.Body)
			}
		})
	}
	<-entered
	<-entered
	w := do(h, http.MethodGet, "/v1/sessions/s1", "")
	wantError(t, w, http.StatusTooManyRequests, "overloaded")
	if got := w.Header().Get("Retry-After"); got != "1" {
		t.Errorf("Retry-After = %q, want 1", got)
	}
	if w := do(h, http.MethodGet, "/healthz", ""); w.Code != http.StatusOK {
		t.Errorf("/healthz under load: %d (only /v1 and /api are bounded)", w.Code)
	}
	// The seeds' routes share the bound: they start the same workflows.
	if w := do(h, http.MethodGet, "/api/context-management?sessionId=s1", ""); w.Code != http.StatusTooManyRequests {
		t.Errorf("/api/context-management under load: %d %s, want 429", w.Code, w.Body)
	}
	close(release)
	wg.Wait()
	if w := do(h, http.MethodPost, "/v1/sessions/s1/turns?wait=true", `{"question":"hi","turnId":"t-3"}`); w.Code != http.StatusOK {
		t.Errorf("after the load: %d %s", w.Code, w.Body)
	}
	if n := calls.Load(); n != 3 {
		t.Errorf("%d update-with-start calls, want 3 (the refused request must not reach Temporal)", n)
	}
}

// servedContext is a model served with a context of n tokens.
type servedContext int

func (n servedContext) ContextLength(context.Context, string) (int, error) { return int(n), nil }

// A session whose window and answer cannot fit the context its model is
// served with is refused when it is created, with what to change; one
// that fits is started.
func TestCreateSessionChecksTheModelsContext(t *testing.T) {
	f := newFake(t)
	f.DescribeWorkflowExecutionFn = func(context.Context, string, string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
		return nil, serviceerror.NewNotFound("workflow not found")
	}
	started := 0
	f.ExecuteWorkflowFn = func(context.Context, client.StartWorkflowOptions, any, ...any) (client.WorkflowRun, error) {
		started++
		return nil, nil
	}
	opts := options()
	opts.Models = servedContext(4096)
	h := api.New(f, opts).Handler()
	w := do(h, http.MethodPost, "/v1/sessions", `{"sessionId":"big","config":{"maxTokens":3000}}`)
	wantError(t, w, http.StatusBadRequest, "invalid_argument")
	if !strings.Contains(w.Body.String(), "5000 tokens, over the 4096-token context") || !strings.Contains(w.Body.String(), "CTXFLOW_OLLAMA_NUM_CTX") {
		t.Errorf("refusal %s", w.Body)
	}
	if w := do(h, http.MethodPost, "/v1/sessions", `{"sessionId":"fits","config":{"maxTokens":2000}}`); w.Code != http.StatusCreated || started != 1 {
		t.Errorf("a window that fits: %d %s, %d starts", w.Code, w.Body, started)
	}
}

// A turn sent while the session's last workflow task failed (a worker was
// killed mid-task) is sent again, under the same update id, until a worker
// takes the task again; what never recovers within the wait is a 503.
func TestTurnWaitsForAFailedWorkflowTask(t *testing.T) {
	notReady := serviceerror.NewWorkflowNotReady("Unable to perform workflow execution update due to Workflow Task in failed state.")
	f := newFake(t)
	calls := 0
	got := recordUpdate(t, f, func(opts client.UpdateWithStartWorkflowOptions) (client.WorkflowUpdateHandle, error) {
		if opts.UpdateOptions.UpdateID == "" {
			t.Error("a turn update without an id cannot be sent again")
		}
		if calls++; calls <= 2 {
			return nil, notReady
		}
		res := workflows.TurnResult{TurnID: "t-1", Status: workflows.TurnCompleted, Answer: "ok"}
		return handle{id: opts.UpdateOptions.UpdateID, val: encode(t, res)}, nil
	})
	w := do(server(f), http.MethodPost, "/v1/sessions/s1/turns?wait=true", `{"question":"hi","turnId":"t-1"}`)
	if w.Code != http.StatusOK || len(*got) != 3 {
		t.Fatalf("status %d after %d updates, want 200 after 3; body %s", w.Code, len(*got), w.Body)
	}
	if (*got)[0].UpdateOptions.UpdateID != (*got)[2].UpdateOptions.UpdateID {
		t.Errorf("update ids %q then %q: the same turn must be the same update", (*got)[0].UpdateOptions.UpdateID, (*got)[2].UpdateOptions.UpdateID)
	}

	f = newFake(t)
	recordUpdate(t, f, func(client.UpdateWithStartWorkflowOptions) (client.WorkflowUpdateHandle, error) { return nil, notReady })
	opts := options()
	opts.TurnWaitTimeout = 300 * time.Millisecond
	wantError(t, do(api.New(f, opts).Handler(), http.MethodPost, "/v1/sessions/s1/turns?wait=true", `{"question":"hi","turnId":"t-2"}`), http.StatusServiceUnavailable, "unavailable")
	f.QueryWorkflowFn = func(context.Context, string, string, string, ...any) (converter.EncodedValue, error) {
		return nil, notReady
	}
	wantError(t, do(server(f), http.MethodGet, "/v1/sessions/s1", ""), http.StatusServiceUnavailable, "unavailable")
}
