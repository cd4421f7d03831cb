// Package tests holds ctxflow's end-to-end tests: they start a real
// (embedded) Temporal server, run the worker as a separate `ctxflow worker`
// process that can be killed with SIGKILL, drive sessions over HTTP, and
// check that nothing is lost or doubled. They also replay recorded histories.
package tests

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/ctxflow/ctxflow/api"
	"github.com/ctxflow/ctxflow/internal/config"
	"github.com/ctxflow/ctxflow/internal/cpuhog"
	"github.com/ctxflow/ctxflow/internal/devserver"
	"github.com/ctxflow/ctxflow/internal/pgtest"
	"github.com/ctxflow/ctxflow/tests/fakeollama"
	"github.com/ctxflow/ctxflow/worker"
	"github.com/ctxflow/ctxflow/workflows"
)

// binary is the ctxflow binary built once for the whole test run.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "ctxflow-e2e-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "ctxflow")
	_, self, _, _ := runtime.Caller(0)
	cmd := exec.Command("go", "build", "-o", binary, "./cmd/ctxflow")
	cmd.Dir = filepath.Dir(filepath.Dir(self))
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build ctxflow:", err)
		os.Exit(1)
	}
	code := m.Run()
	pgtest.Stop()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// stack is an embedded Temporal server, a fake Ollama, the API in process
// and a `ctxflow worker` child process.
type stack struct {
	t       testing.TB
	dataDir string
	server  *devserver.Server
	client  client.Client
	model   *fakeollama.Fake
	api     *httptest.Server
	apiClient
	worker  *exec.Cmd
	exited  chan struct{} // closed when the worker process has exited
	workerN int
	env     []string
}

type stackOptions struct {
	modelDelay time.Duration
	limits     workflows.Limits
	extraEnv   []string
	// keys are the API's keys (SHA-256 hex → tenant); nil: none.
	keys map[string]string
	// maxInFlight is the API's MaxInFlight (0: its default).
	maxInFlight int
	// models is the API's Models (nil: sessions are not checked against
	// the model's context).
	models api.ModelContext
}

func startStack(t testing.TB, o stackOptions) *stack {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	srv, err := devserver.Start(ctx, devserver.Options{
		DataDir: filepath.Join(dir, "temporal"), SearchAttributes: workflows.SearchAttributes(), Logger: quietLogger(),
	})
	if err != nil {
		t.Fatalf("start temporal: %v", err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	c, err := client.DialContext(ctx, client.Options{
		HostPort: srv.FrontendHostPort(), Namespace: srv.Namespace(), Logger: sdklog.NewStructuredLogger(quietLogger()),
		// as `ctxflow dev` and `ctxflow api` on loopback (CTXFLOW_TEMPORAL_COMPRESSION=auto)
		ConnectionOptions: client.ConnectionOptions{GrpcCompression: &client.GrpcCompressionNone{}},
	})
	if err != nil {
		t.Fatalf("dial temporal: %v", err)
	}
	t.Cleanup(c.Close)

	fake := fakeollama.New(fakeollama.Options{Delay: o.modelDelay})
	fs := httptest.NewServer(fake)
	t.Cleanup(fs.Close)

	defaults := workflows.DefaultSessionConfig()
	if o.limits.HeartbeatTimeout == 0 { // notice a killed worker quickly
		o.limits.HeartbeatTimeout = 2 * time.Second
	}
	if o.limits.FastModel == 0 { // as configured by default
		o.limits.FastModel = workflows.DefaultLimits().FastModel
	}
	apiSrv := httptest.NewServer(api.New(c, api.Options{
		Defaults: defaults, Limits: o.limits, UploadDir: filepath.Join(dir, "uploads"), Keys: o.keys, MaxInFlight: o.maxInFlight, Models: o.models, Logger: quietLogger(),
	}).Handler())
	t.Cleanup(apiSrv.Close)

	s := &stack{
		t: t, dataDir: dir, server: srv, client: c, model: fake, api: apiSrv, apiClient: apiClient{base: apiSrv.URL},
		env: append([]string{
			"TEMPORAL_ADDRESS=" + srv.FrontendHostPort(),
			"TEMPORAL_NAMESPACE=" + srv.Namespace(),
			"OLLAMA_HOST=" + fs.URL,
			"CTXFLOW_DATA_DIR=" + dir,
			"CTXFLOW_LOG_LEVEL=" + cmp.Or(os.Getenv("CTXFLOW_E2E_WORKER_LOG_LEVEL"), "warn"),
			"CTXFLOW_TRANSCRIPT_FSYNC=false",
		}, o.extraEnv...),
	}
	t.Cleanup(s.killWorker)
	return s
}

// inProcessPorts builds a worker's ports in this process, from the
// stack's environment and the extra settings (NAME=value), for a worker
// that runs in the test's process; they close when the test ends.
func (s *stack) inProcessPorts(tb testing.TB, extra ...string) *worker.Ports {
	tb.Helper()
	return buildPorts(tb, append(slices.Clone(s.env), extra...)...)
}

// buildPorts builds a worker's ports in this process from the settings
// (NAME=value) over the environment; they close when the test ends.
func buildPorts(tb testing.TB, env ...string) *worker.Ports {
	tb.Helper()
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		tb.Setenv(k, v)
	}
	cfg, err := config.Load()
	if err != nil {
		tb.Fatal(err)
	}
	ports, err := worker.BuildPorts(tb.Context(), cfg, quietLogger())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = ports.Close() })
	return ports
}

// startWorker starts a `ctxflow worker` child process.
func (s *stack) startWorker() {
	s.t.Helper()
	s.workerN++
	logf, err := os.Create(filepath.Join(s.dataDir, fmt.Sprintf("worker-%d.log", s.workerN)))
	if err != nil {
		s.t.Fatal(err)
	}
	cmd := exec.Command(binary, "worker")
	cmd.Env = append(os.Environ(), s.env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("start worker: %v", err)
	}
	s.worker = cmd
	exited := make(chan struct{})
	s.exited = exited
	go func() { _ = cmd.Wait(); _ = logf.Close(); close(exited) }()
}

// killWorker kills the worker process with SIGKILL (no graceful shutdown)
// and returns once it has exited, so that what it held (the vector store,
// the transcripts) is free however long a loaded machine takes to reap it.
func (s *stack) killWorker() {
	if s.worker == nil || s.worker.Process == nil {
		return
	}
	_ = s.worker.Process.Signal(syscall.SIGKILL)
	s.worker = nil
	select {
	case <-s.exited:
	case <-time.After(time.Minute):
		s.t.Errorf("the worker did not exit within a minute of SIGKILL")
	}
}

// stopWorker stops the worker as a deploy does (SIGTERM: it tells the
// server it is gone, finishing what it runs) and returns once it exited.
func (s *stack) stopWorker() {
	if s.worker == nil || s.worker.Process == nil {
		return
	}
	pid := s.worker.Process.Pid
	_ = s.worker.Process.Signal(syscall.SIGTERM)
	s.worker = nil
	for deadline := time.Now().Add(time.Minute); syscall.Kill(pid, 0) == nil; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			s.t.Fatalf("worker %d did not stop within a minute of SIGTERM", pid)
		}
	}
}

// waitWorkerReady waits until the newest worker polls for workflow tasks
// (its identity is "pid@host@").
func (s *stack) waitWorkerReady() {
	s.t.Helper()
	prefix := fmt.Sprintf("%d@", s.worker.Process.Pid)
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		d, err := s.client.DescribeTaskQueue(s.t.Context(), workflows.TaskQueue, enumspb.TASK_QUEUE_TYPE_WORKFLOW)
		if err == nil && slices.ContainsFunc(d.GetPollers(), func(p *taskqueuepb.PollerInfo) bool { return strings.HasPrefix(p.GetIdentity(), prefix) }) {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("worker did not poll within a minute (%v)\n%s", err, s.workerLogs())
		}
	}
}

// workerLogs returns what the worker processes printed, for failure reports.
func (s *stack) workerLogs() string {
	var b strings.Builder
	for i := 1; i <= s.workerN; i++ {
		data, _ := os.ReadFile(filepath.Join(s.dataDir, fmt.Sprintf("worker-%d.log", i)))
		fmt.Fprintf(&b, "--- worker %d ---\n%s", i, tail(string(data), 3000))
	}
	return b.String()
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

var httpClient = &http.Client{Timeout: 3 * time.Minute}

// apiClient talks to a ctxflow API at base, with an API key if set.
// apiClient calls the API; with tenant set, as that tenant (X-Tenant-ID,
// the way of a server without API keys).
type apiClient struct{ base, key, tenant string }

// do sends a JSON request to the API and decodes the JSON answer into out.
func (s apiClient) do(ctx context.Context, method, path string, body, out any) (int, error) {
	return s.doHeader(ctx, method, path, body, out, nil)
}

// doHeader is do, also storing the answer's header in hdr (if not nil).
func (s apiClient) doHeader(ctx context.Context, method, path string, body, out any, hdr *http.Header) (int, error) {
	var rd io.Reader
	if raw, ok := body.([]byte); ok { // sent as it is (JSONL)
		rd = bytes.NewReader(raw)
	} else if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.base+path, rd)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	if s.key != "" {
		req.Header.Set("Authorization", "Bearer "+s.key)
	}
	if s.tenant != "" {
		req.Header.Set("X-Tenant-ID", s.tenant)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if hdr != nil {
		*hdr = resp.Header
	}
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			return resp.StatusCode, fmt.Errorf("decode %s: %w", data, err)
		}
	}
	if resp.StatusCode >= 300 {
		return resp.StatusCode, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, data)
	}
	return resp.StatusCode, nil
}

// turn posts a turn with ?wait=true, retrying with the same turn id on
// transport errors and 5xx answers with a growing pause, as a careful
// client would.
// It returns why it retried.
func (s apiClient) turn(ctx context.Context, session, turnID, question string) (workflows.TurnResult, []string, error) {
	var res workflows.TurnResult
	var retries []string
	pause := 200 * time.Millisecond
	for {
		res = workflows.TurnResult{}
		code, err := s.do(ctx, http.MethodPost, "/v1/sessions/"+session+"/turns?wait=true",
			map[string]string{"turnId": turnID, "question": question}, &res)
		if err == nil {
			return res, retries, nil
		}
		if (code != 0 && code < 500) || ctx.Err() != nil || len(retries) >= 20 {
			return res, retries, err
		}
		retries = append(retries, retryReason(code, err))
		if os.Getenv("CTXFLOW_E2E_WORKER_LOG_LEVEL") != "" {
			fmt.Fprintf(os.Stderr, "%s retry %s/%s: %v\n", time.Now().Format("15:04:05.000"), session, turnID, err)
		}
		time.Sleep(pause)
		pause = min(2*pause, 2*time.Second)
	}
}

// safeCounter counts retries, and why, across goroutines.
type safeCounter struct {
	mu  sync.Mutex
	n   int
	why map[string]int
}

func (c *safeCounter) add(reasons []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.why == nil {
		c.why = map[string]int{}
	}
	c.n += len(reasons)
	for _, r := range reasons {
		c.why[r]++
	}
}

func (c *safeCounter) reasons() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.why)
}

// retryReason shortens an error for the retry tally: the HTTP status and the
// error code, or the transport error.
func retryReason(code int, err error) string {
	if code == 0 {
		return "transport: " + err.Error()
	}
	msg := err.Error()
	if i := strings.Index(msg, `"message":"`); i >= 0 {
		msg = msg[i+11:]
		if j := strings.IndexAny(msg, ":\""); j >= 0 {
			msg = msg[:j]
		}
	}
	return fmt.Sprintf("%d %s", code, msg)
}

// ingestREADME ingests a snapshot of the project's README
// (testdata/README.md, README.md at 439a569) with `ctxflow ingest` and
// returns its source name, README.md. A snapshot: the README grows with
// every feature, and what the offline retrieval ranks first for a question
// moved with it. Refresh it on purpose, checking the answers.
func (s *stack) ingestREADME(t testing.TB) string {
	t.Helper()
	readme, err := filepath.Abs("testdata/README.md")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), binary, "ingest", readme)
	cmd.Env = append(os.Environ(), s.env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ingest: %v\n%s", err, out)
	}
	return filepath.Base(readme)
}

// startHog loads every core with busy loops for the rest of the test (see
// internal/cpuhog): four a core, so that the test's processes get a fifth
// of the machine, unless CTXFLOW_CPU_HOG says otherwise (0: none). The
// tests that call it must hold on a machine that other work keeps busy.
func startHog(t testing.TB) {
	t.Helper()
	n := 4 * runtime.NumCPU()
	if os.Getenv(cpuhog.EnvVar) != "" {
		var err error
		if n, err = cpuhog.FromEnv(); err != nil {
			t.Fatal(err)
		}
	}
	runHog(t, n)
}

// hogIfAsked is startHog when CTXFLOW_CPU_HOG asks for one (`make
// reliability` does), else nothing.
func hogIfAsked(t testing.TB) {
	t.Helper()
	n, err := cpuhog.FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	runHog(t, n)
}

func runHog(t testing.TB, n int) {
	t.Helper()
	if n == 0 {
		return
	}
	h, err := cpuhog.Start(n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Stop)
	t.Logf("%d busy loops beside the test", h.Loops())
}

// dumpHistory writes every run of a workflow's history to the test log's
// directory as JSON and logs a line per event of the newest, for failures
// that need the history to be understood.
func dumpHistory(t testing.TB, c client.Client, wid string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, err := c.ListWorkflow(ctx, listByID(wid))
	if err != nil {
		t.Logf("dump history of %s: %v", wid, err)
		return
	}
	for i, ex := range resp.GetExecutions() {
		h, err := fetchHistory(ctx, c, wid, ex.GetExecution().GetRunId())
		if err != nil {
			t.Logf("dump history of %s: %v", wid, err)
			return
		}
		b, _ := protojson.MarshalOptions{Indent: "  "}.Marshal(h)
		path := filepath.Join(os.TempDir(), fmt.Sprintf("history-%s-%d.json", strings.ReplaceAll(wid, "/", "_"), i))
		_ = os.WriteFile(path, b, 0o644)
		t.Logf("history of run %s (%d events): %s", ex.GetExecution().GetRunId(), len(h.Events), path)
	}
}

// fetchHistory reads one run's whole history.
func fetchHistory(ctx context.Context, c client.Client, wid, runID string) (*historypb.History, error) {
	it := c.GetWorkflowHistory(ctx, wid, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	h := &historypb.History{}
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return nil, err
		}
		h.Events = append(h.Events, ev)
	}
	return h, nil
}
