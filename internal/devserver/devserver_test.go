package devserver

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// ctxflowAttrs are the search attributes ctxflow registers (DESIGN §2).
var ctxflowAttrs = map[string]enumspb.IndexedValueType{
	"CtxTenant":     enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	"CtxStatus":     enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	"CtxTurns":      enumspb.INDEXED_VALUE_TYPE_INT,
	"CtxLastIntent": enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	"CtxUpdatedAt":  enumspb.INDEXED_VALUE_TYPE_DATETIME,
}

const taskQueue = "devserver-test"

func greetWorkflow(ctx workflow.Context, name string) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 10 * time.Second})
	var out string
	err := workflow.ExecuteActivity(ctx, greetActivity, name).Get(ctx, &out)
	return out, err
}

func greetActivity(_ context.Context, name string) (string, error) { return "hello " + name, nil }

// echoWorkflow answers one "echo" update, then completes.
func echoWorkflow(ctx workflow.Context) (string, error) {
	var last string
	if err := workflow.SetUpdateHandler(ctx, "echo", func(_ workflow.Context, s string) (string, error) {
		last = s
		return "echo " + s, nil
	}); err != nil {
		return "", err
	}
	if err := workflow.Await(ctx, func() bool { return last != "" }); err != nil {
		return "", err
	}
	return last, nil
}

// slowWorkflow answers one "slow" update after 1.5 s, longer than the
// server's long-poll expiry, then completes.
func slowWorkflow(ctx workflow.Context) (string, error) {
	done := false
	if err := workflow.SetUpdateHandler(ctx, "slow", func(ctx workflow.Context) (string, error) {
		if err := workflow.Sleep(ctx, 1500*time.Millisecond); err != nil {
			return "", err
		}
		done = true
		return "slow done", nil
	}); err != nil {
		return "", err
	}
	if err := workflow.Await(ctx, func() bool { return done }); err != nil {
		return "", err
	}
	return "finished", nil
}

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

func start(t *testing.T, opts Options) *Server {
	t.Helper()
	begin := time.Now()
	s, err := Start(testContext(t), opts)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Logf("Start took %v (dataDir=%q)", time.Since(begin), opts.DataDir)
	t.Cleanup(func() { _ = s.Stop() })
	return s
}

func stop(t *testing.T, s *Server) {
	t.Helper()
	begin := time.Now()
	if err := s.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	t.Logf("Stop took %v", time.Since(begin))
	if err := s.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
}

func dial(t *testing.T, s *Server) client.Client {
	t.Helper()
	c, err := client.DialContext(testContext(t), client.Options{
		HostPort:  s.FrontendHostPort(),
		Namespace: s.Namespace(),
		Logger:    sdklog.NewStructuredLogger(quietLogger()),
	})
	if err != nil {
		t.Fatalf("dial %s: %v", s.FrontendHostPort(), err)
	}
	t.Cleanup(c.Close)
	return c
}

// runWorker starts a worker on c; the returned func stops it (also at the
// end of the test), and must run before c is closed.
func runWorker(t *testing.T, c client.Client) (stop func()) {
	t.Helper()
	w := worker.New(c, taskQueue, worker.Options{})
	w.RegisterWorkflow(greetWorkflow)
	w.RegisterWorkflow(echoWorkflow)
	w.RegisterWorkflow(slowWorkflow)
	w.RegisterActivity(greetActivity)
	if err := w.Start(); err != nil {
		t.Fatalf("start worker: %v", err)
	}
	stop = sync.OnceFunc(w.Stop)
	t.Cleanup(stop)
	return stop
}

func unusedPort(t *testing.T) int {
	t.Helper()
	port, err := freePort("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	return port
}

func checkSearchAttributes(t *testing.T, c client.Client, ns string, want map[string]enumspb.IndexedValueType) {
	t.Helper()
	resp, err := c.OperatorService().ListSearchAttributes(testContext(t),
		&operatorservice.ListSearchAttributesRequest{Namespace: ns})
	if err != nil {
		t.Fatalf("ListSearchAttributes: %v", err)
	}
	for name, typ := range want {
		if got := resp.GetCustomAttributes()[name]; got != typ {
			t.Errorf("search attribute %s: got %v, want %v", name, got, typ)
		}
	}
}

func checkRetention(t *testing.T, c client.Client, ns string, want time.Duration) {
	t.Helper()
	resp, err := c.WorkflowService().DescribeNamespace(testContext(t),
		&workflowservice.DescribeNamespaceRequest{Namespace: ns})
	if err != nil {
		t.Fatalf("DescribeNamespace: %v", err)
	}
	if got := resp.GetConfig().GetWorkflowExecutionRetentionTtl().AsDuration(); got != want {
		t.Errorf("retention: got %v, want %v", got, want)
	}
}

// TestPersistentServer is the main scenario: start on a fresh data dir with
// the UI, run workflows, stop, start again and find them.
func TestPersistentServer(t *testing.T) {
	dir := t.TempDir()
	opts := Options{DataDir: dir, SearchAttributes: ctxflowAttrs, UIPort: unusedPort(t), Logger: quietLogger()}
	s := start(t, opts)
	if s.Namespace() != DefaultNamespace {
		t.Errorf("namespace: got %q", s.Namespace())
	}
	for _, name := range []string{DatabaseFileName, VisibilityFileName} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("database file: %v", err)
		}
	}

	c := dial(t, s)
	checkSearchAttributes(t, c, s.Namespace(), ctxflowAttrs)
	checkRetention(t, c, s.Namespace(), DefaultRetention)
	stopWorker := runWorker(t, c)
	ctx := testContext(t)

	// A workflow carrying the ctxflow search attributes, run to completion.
	tenant := temporal.NewSearchAttributeKeyKeyword("CtxTenant")
	turns := temporal.NewSearchAttributeKeyInt64("CtxTurns")
	updated := temporal.NewSearchAttributeKeyTime("CtxUpdatedAt")
	begin := time.Now()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:        "greet-1",
		TaskQueue: taskQueue,
		TypedSearchAttributes: temporal.NewSearchAttributes(
			tenant.ValueSet("acme"), turns.ValueSet(1), updated.ValueSet(time.Now())),
	}, greetWorkflow, "ctxflow")
	if err != nil {
		t.Fatalf("ExecuteWorkflow: %v", err)
	}
	var out string
	if err := run.Get(ctx, &out); err != nil || out != "hello ctxflow" {
		t.Fatalf("workflow result: %q, %v", out, err)
	}
	t.Logf("first workflow with one activity took %v", time.Since(begin))
	begin = time.Now()
	const n = 10
	for i := range n {
		run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: fmt.Sprintf("greet-loop-%d", i), TaskQueue: taskQueue}, greetWorkflow, "x")
		if err == nil {
			err = run.Get(ctx, nil)
		}
		if err != nil {
			t.Fatalf("workflow %d: %v", i, err)
		}
	}
	each := time.Since(begin) / n
	t.Logf("workflow with one activity: %v each (mean of %d)", each, n)

	// Update-with-Start (ExecuteMultiOperation) and workflow Updates.
	startOp := c.NewWithStartWorkflowOperation(client.StartWorkflowOptions{
		ID: "echo-1", TaskQueue: taskQueue, WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
	}, echoWorkflow)
	handle, err := c.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
		StartWorkflowOperation: startOp,
		UpdateOptions: client.UpdateWorkflowOptions{
			UpdateName: "echo", Args: []any{"hi"}, WaitForStage: client.WorkflowUpdateStageCompleted,
		},
	})
	if err != nil {
		t.Fatalf("UpdateWithStartWorkflow: %v", err)
	}
	if err := handle.Get(ctx, &out); err != nil || out != "echo hi" {
		t.Fatalf("update result: %q, %v", out, err)
	}

	// Waits longer than the server's long-poll expiry (1 s) still complete.
	begin = time.Now()
	slowHandle, err := c.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
		StartWorkflowOperation: c.NewWithStartWorkflowOperation(client.StartWorkflowOptions{
			ID: "slow-1", TaskQueue: taskQueue, WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		}, slowWorkflow),
		UpdateOptions: client.UpdateWorkflowOptions{UpdateName: "slow", WaitForStage: client.WorkflowUpdateStageCompleted},
	})
	if err != nil {
		t.Fatalf("slow UpdateWithStartWorkflow: %v", err)
	}
	if err := slowHandle.Get(ctx, &out); err != nil || out != "slow done" {
		t.Fatalf("slow update result: %q, %v", out, err)
	}
	if err := c.GetWorkflow(ctx, "slow-1", "").Get(ctx, &out); err != nil || out != "finished" {
		t.Fatalf("slow workflow result: %q, %v", out, err)
	}
	// At least the update's timer; at most the timer, two long polls that
	// expire (1 s each: the update's and the result's) and the time a few
	// workflows take on this machine now (the update, its timer and the
	// workflow's end are tasks like theirs): a wait the server never ends
	// takes longer, however loaded the machine.
	d, most := time.Since(begin), 3500*time.Millisecond+10*each
	t.Logf("slow update and workflow: %v (at most %v)", d, most)
	if d < 1500*time.Millisecond || d > most {
		t.Errorf("slow update and workflow took %v, want 1.5 s to %v", d, most)
	}

	// The search attributes are visible to list queries.
	listed(t, c, `CtxTenant = "acme" AND CtxTurns = 1`, 1)

	// The Web UI serves its index page and proxies the API.
	for _, path := range []string{"/", "/api/v1/namespaces/" + s.Namespace()} {
		resp, err := http.Get(s.UIURL() + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: status %d: %.200s", path, resp.StatusCode, body)
		}
	}

	stopWorker()
	c.Close()
	stop(t, s)
	if resp, err := http.Get(s.UIURL() + "/"); err == nil {
		_ = resp.Body.Close()
		t.Errorf("UI still answers after Stop")
	}

	// Same data dir, new ports: the workflows are still there.
	opts.UIPort = 0
	s2 := start(t, opts)
	if s2.UIURL() != "" {
		t.Errorf("UIURL without UI: %q", s2.UIURL())
	}
	c2 := dial(t, s2)
	for _, id := range []string{"greet-1", "echo-1"} {
		desc, err := c2.DescribeWorkflowExecution(testContext(t), id, "")
		if err != nil {
			t.Fatalf("DescribeWorkflowExecution %s after restart: %v", id, err)
		}
		if st := desc.GetWorkflowExecutionInfo().GetStatus(); st != enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED {
			t.Errorf("%s status after restart: %v", id, st)
		}
	}
	checkSearchAttributes(t, c2, s2.Namespace(), ctxflowAttrs)
	listed(t, c2, `CtxTenant = "acme"`, 1)
	stop(t, s2)
	// The records are in their own file, none in the main database.
	if n := visibilityRows(t, filepath.Join(dir, VisibilityFileName), ""); n < 13 {
		t.Errorf("%s holds %d visibility records, want the 13 workflows'", VisibilityFileName, n)
	}
	if n := visibilityRows(t, filepath.Join(dir, DatabaseFileName), ""); n != 0 {
		t.Errorf("%s holds %d visibility records, want none", DatabaseFileName, n)
	}
}

// TestDataDirBeforeVisibilityFile: a data dir made before
// VisibilityFileName keeps its records in the main database, across
// restarts, and lists its old workflows and new ones.
func TestDataDirBeforeVisibilityFile(t *testing.T) {
	dir := t.TempDir()
	if _, err := openFileDB(filepath.Join(dir, DatabaseFileName)); err != nil { // as the earlier versions did
		t.Fatal(err)
	}
	ctx := testContext(t)
	for i := range 2 {
		s := start(t, Options{DataDir: dir, SearchAttributes: ctxflowAttrs, Logger: quietLogger()})
		c := dial(t, s)
		stopWorker := runWorker(t, c)
		run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
			ID: fmt.Sprintf("old-dir-%d", i), TaskQueue: taskQueue,
			TypedSearchAttributes: temporal.NewSearchAttributes(temporal.NewSearchAttributeKeyKeyword("CtxTenant").ValueSet("old")),
		}, greetWorkflow, "x")
		if err == nil {
			err = run.Get(ctx, nil)
		}
		if err != nil {
			t.Fatal(err)
		}
		listed(t, c, `CtxTenant = "old"`, i+1)
		stopWorker()
		c.Close()
		stop(t, s)
	}
	if _, err := os.Stat(filepath.Join(dir, VisibilityFileName)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s in a data dir made before it: %v", VisibilityFileName, err)
	}
	if n := visibilityRows(t, filepath.Join(dir, DatabaseFileName), "old-dir-"); n != 2 {
		t.Errorf("%s holds %d visibility records, want 2", DatabaseFileName, n)
	}
}

// listed waits until query lists n workflows.
func listed(t *testing.T, c client.Client, query string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := c.ListWorkflow(testContext(t), &workflowservice.ListWorkflowExecutionsRequest{Query: query})
		if err != nil {
			t.Fatalf("ListWorkflow: %v", err)
		}
		if len(resp.GetExecutions()) == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d workflows listed, want %d", query, len(resp.GetExecutions()), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// visibilityRows counts the visibility records of the workflows whose id
// starts with prefix in the SQLite file at path (of a stopped server).
func visibilityRows(t *testing.T, path, prefix string) int {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM executions_visibility WHERE workflow_id LIKE ? || '%'", prefix).Scan(&n); err != nil {
		t.Fatalf("count visibility records in %s: %v", path, err)
	}
	return n
}

// TestInMemoryServer runs a workflow on a server without a data dir.
func TestInMemoryServer(t *testing.T) {
	s := start(t, Options{Namespace: "mem-test", SearchAttributes: ctxflowAttrs, Logger: quietLogger()})
	if s.Namespace() != "mem-test" {
		t.Errorf("namespace: got %q", s.Namespace())
	}
	c := dial(t, s)
	checkSearchAttributes(t, c, s.Namespace(), ctxflowAttrs)
	stopWorker := runWorker(t, c)
	ctx := testContext(t)
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: taskQueue}, greetWorkflow, "mem")
	if err != nil {
		t.Fatalf("ExecuteWorkflow: %v", err)
	}
	var out string
	if err := run.Get(ctx, &out); err != nil || out != "hello mem" {
		t.Fatalf("workflow result: %q, %v", out, err)
	}
	stopWorker()
	c.Close()
	stop(t, s)
}

// TestNamespaceUpgrade restarts a data dir with more search attributes and
// another retention: the namespace is brought up to date before start.
func TestNamespaceUpgrade(t *testing.T) {
	dir := t.TempDir()
	s := start(t, Options{DataDir: dir, Logger: quietLogger(),
		SearchAttributes: map[string]enumspb.IndexedValueType{"CtxTenant": enumspb.INDEXED_VALUE_TYPE_KEYWORD}})
	stop(t, s)

	s = start(t, Options{DataDir: dir, Logger: quietLogger(), SearchAttributes: ctxflowAttrs, Retention: 48 * time.Hour})
	c := dial(t, s)
	checkSearchAttributes(t, c, s.Namespace(), ctxflowAttrs)
	checkRetention(t, c, s.Namespace(), 48*time.Hour)
	c.Close()
	stop(t, s)

	_, err := Start(testContext(t), Options{DataDir: dir, Logger: quietLogger(),
		SearchAttributes: map[string]enumspb.IndexedValueType{"CtxTurns": enumspb.INDEXED_VALUE_TYPE_KEYWORD}})
	if err == nil || !strings.Contains(err.Error(), "CtxTurns") {
		t.Fatalf("Start with a changed search attribute type: got %v, want an error naming CtxTurns", err)
	}
}

// TestTwoServers runs two in-memory servers side by side in one process, as
// parallel end-to-end tests would.
func TestTwoServers(t *testing.T) {
	servers := make([]*Server, 2)
	var wg sync.WaitGroup
	for i := range servers {
		wg.Go(func() {
			s, err := Start(testContext(t), Options{Logger: quietLogger()})
			if err != nil {
				t.Errorf("Start %d: %v", i, err)
				return
			}
			servers[i] = s
		})
	}
	wg.Wait()
	for _, s := range servers {
		if s != nil {
			t.Cleanup(func() { _ = s.Stop() })
		}
	}
	if t.Failed() {
		return
	}
	if servers[0].FrontendHostPort() == servers[1].FrontendHostPort() {
		t.Fatalf("both servers on %s", servers[0].FrontendHostPort())
	}
	for i, s := range servers {
		c := dial(t, s)
		stopWorker := runWorker(t, c)
		ctx := testContext(t)
		run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "same-id", TaskQueue: taskQueue}, greetWorkflow, fmt.Sprint(i))
		var out string
		if err == nil {
			err = run.Get(ctx, &out)
		}
		if err != nil || out != fmt.Sprintf("hello %d", i) {
			t.Fatalf("server %d: %q, %v", i, out, err)
		}
		stopWorker()
		c.Close()
	}
	for _, s := range servers {
		stop(t, s)
	}
}

// TestDataDirReplaced recreates a data dir under the process: Start must
// refuse it rather than write to the deleted database.
func TestDataDirReplaced(t *testing.T) {
	dir := t.TempDir()
	stop(t, start(t, Options{DataDir: dir, Logger: quietLogger()}))
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	s, err := Start(testContext(t), Options{DataDir: dir, Logger: quietLogger()})
	if err == nil {
		_ = s.Stop()
		t.Fatal("Start on a recreated data dir succeeded")
	}
	if !strings.Contains(err.Error(), "replaced") {
		t.Fatalf("Start on a recreated data dir: %v", err)
	}
}

func TestDataDirInUse(t *testing.T) {
	dir := t.TempDir()
	s := start(t, Options{DataDir: dir, Logger: quietLogger()})
	_, err := Start(testContext(t), Options{DataDir: dir, Logger: quietLogger()})
	if err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second Start on the same data dir: got %v, want an in-use error", err)
	}
	stop(t, s)
}

func TestInvalidOptions(t *testing.T) {
	for name, opts := range map[string]Options{
		"reserved search attribute": {SearchAttributes: map[string]enumspb.IndexedValueType{"WorkflowId": enumspb.INDEXED_VALUE_TYPE_KEYWORD}},
		"unspecified type":          {SearchAttributes: map[string]enumspb.IndexedValueType{"X": enumspb.INDEXED_VALUE_TYPE_UNSPECIFIED}},
		"bad IP":                    {FrontendIP: "localhost:1"},
		"negative retention":        {Retention: -time.Hour},
	} {
		if s, err := Start(testContext(t), opts); err == nil {
			_ = s.Stop()
			t.Errorf("%s: Start succeeded", name)
		}
	}
}

func TestUIPortBusy(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	port := ln.Addr().(*net.TCPAddr).Port
	if s, err := Start(testContext(t), Options{UIPort: port, Logger: quietLogger()}); err == nil {
		_ = s.Stop()
		t.Fatal("Start on a busy UI port succeeded")
	}
}

// TestSurvivesKill starts the server in a child process, starts a workflow
// there, kills the child with SIGKILL and finds the workflow after a restart.
func TestSurvivesKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestKillHelper$")
	cmd.Env = append(os.Environ(), "DEVSERVER_KILL_HELPER_DIR="+dir)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()

	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	select {
	case line, ok := <-lines:
		if !ok || line != "started" {
			t.Fatalf("child: got %q (ok=%v), want \"started\"", line, ok)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("child did not start a workflow in time")
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	s := start(t, Options{DataDir: dir, Logger: quietLogger()})
	c := dial(t, s)
	desc, err := c.DescribeWorkflowExecution(testContext(t), "killed-1", "")
	if err != nil {
		t.Fatalf("DescribeWorkflowExecution after SIGKILL: %v", err)
	}
	if st := desc.GetWorkflowExecutionInfo().GetStatus(); st != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		t.Errorf("status after SIGKILL: %v", st)
	}
	// The workflow finishes once a worker is there again.
	stopWorker := runWorker(t, c)
	if _, err := c.UpdateWorkflow(testContext(t), client.UpdateWorkflowOptions{
		WorkflowID: "killed-1", UpdateName: "echo", Args: []any{"after kill"}, WaitForStage: client.WorkflowUpdateStageCompleted,
	}); err != nil {
		t.Fatalf("update after SIGKILL: %v", err)
	}
	var out string
	if err := c.GetWorkflow(testContext(t), "killed-1", "").Get(testContext(t), &out); err != nil || out != "after kill" {
		t.Fatalf("result after SIGKILL: %q, %v", out, err)
	}
	stopWorker()
	c.Close()
	stop(t, s)
}

// TestKillHelper is the child process of TestSurvivesKill.
func TestKillHelper(t *testing.T) {
	dir := os.Getenv("DEVSERVER_KILL_HELPER_DIR")
	if dir == "" {
		t.Skip("helper process for TestSurvivesKill")
	}
	s := start(t, Options{DataDir: dir, Logger: quietLogger()})
	c := dial(t, s)
	// No worker: the workflow stays running, waiting for its first task.
	if _, err := c.ExecuteWorkflow(testContext(t), client.StartWorkflowOptions{ID: "killed-1", TaskQueue: taskQueue}, echoWorkflow); err != nil {
		t.Fatalf("ExecuteWorkflow: %v", err)
	}
	fmt.Println("started")
	time.Sleep(time.Minute) // killed by the parent
	t.Fatal(errors.New("not killed"))
}

// TestOneShardDatabaseKeepsItsShards: a data dir created with one history
// shard (as before HistoryShards) starts with one shard again, its
// workflows intact, and serves new ones.
func TestOneShardDatabaseKeepsItsShards(t *testing.T) {
	dir := t.TempDir()
	s := start(t, Options{DataDir: dir, HistoryShards: 1, Logger: quietLogger()})
	c := dial(t, s)
	stop := runWorker(t, c)
	ctx := testContext(t)
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "old", TaskQueue: taskQueue}, greetWorkflow, "one shard")
	if err == nil {
		err = run.Get(ctx, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	stop()
	c.Close()
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if n, err := historyShards(ctx, &dbConfig{sql: fileSQLConfig(filepath.Join(dir, DatabaseFileName))}); err != nil || n != 1 {
		t.Fatalf("recorded shards = %d, %v; want 1", n, err)
	}

	s = start(t, Options{DataDir: dir, Logger: quietLogger()}) // the default would be HistoryShards
	c = dial(t, s)
	defer runWorker(t, c)()
	var out string
	if err := c.GetWorkflow(ctx, "old", "").Get(ctx, &out); err != nil || out != "hello one shard" {
		t.Fatalf("the old workflow after the restart: %q, %v", out, err)
	}
	run, err = c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "new", TaskQueue: taskQueue}, greetWorkflow, "again")
	if err == nil {
		err = run.Get(ctx, &out)
	}
	if err != nil || out != "hello again" {
		t.Fatalf("a new workflow: %q, %v", out, err)
	}
}
