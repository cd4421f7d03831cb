package tests

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/converter"
	_ "modernc.org/sqlite"

	"github.com/ctxflow/ctxflow/convo"
	"github.com/ctxflow/ctxflow/workflows"
)

// taskReply is the answer of POST .../tasks?wait=true and of a turn that
// runs a task.
type taskReply = workflows.TurnResult

func (s apiClient) task(ctx context.Context, session string, body map[string]any) (taskReply, error) {
	var res taskReply
	_, err := s.do(ctx, http.MethodPost, "/v1/sessions/"+session+"/tasks?wait=true", body, &res)
	return res, err
}

func (s apiClient) taskState(ctx context.Context, session, taskID string) (workflows.TaskState, error) {
	var out struct {
		Task workflows.TaskState `json:"task"`
	}
	_, err := s.do(ctx, http.MethodGet, "/v1/sessions/"+session+"/tasks/"+taskID, nil, &out)
	return out.Task, err
}

// shopCounts reads the demo shop's row count of every table, as the
// answer must state them.
func shopCounts(t *testing.T, path string) map[string]int {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.QueryContext(t.Context(), `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'`)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		names = append(names, n)
	}
	_ = rows.Close()
	counts := map[string]int{}
	for _, n := range names {
		var c int
		if err := db.QueryRowContext(t.Context(), fmt.Sprintf(`SELECT count(*) FROM "%s"`, n)).Scan(&c); err != nil {
			t.Fatal(err)
		}
		counts[n] = c
	}
	return counts
}

// lockShop takes the demo database's exclusive lock: every read of the
// agent's tools blocks (busy) until unlock.
func lockShop(t *testing.T, path string) (unlock func()) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(t.Context(), "BEGIN EXCLUSIVE"); err != nil {
		t.Fatalf("lock the shop: %v", err)
	}
	return func() {
		_, _ = conn.ExecContext(context.Background(), "ROLLBACK")
		_ = conn.Close()
		_ = db.Close()
	}
}

// awaitToolActivity waits until the task runs a tool activity.
func (s *stack) awaitToolActivity(t *testing.T, ctx context.Context, workflowID string) {
	t.Helper()
	for {
		desc, err := s.client.DescribeWorkflowExecution(ctx, workflowID, "")
		if err == nil {
			for _, a := range desc.GetPendingActivities() {
				if a.GetActivityType().GetName() == "CallTool" && a.GetState() == enumspb.PENDING_ACTIVITY_STATE_STARTED {
					return
				}
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no tool activity in %s: %v\n%s", workflowID, err, s.workerLogs())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// searchStatus reads a workflow's CtxStatus search attribute.
func (s *stack) searchStatus(t *testing.T, ctx context.Context, workflowID string) string {
	t.Helper()
	desc, err := s.client.DescribeWorkflowExecution(ctx, workflowID, "")
	if err != nil {
		t.Fatal(err)
	}
	p := desc.GetWorkflowExecutionInfo().GetSearchAttributes().GetIndexedFields()["CtxStatus"]
	var status string
	if p != nil {
		_ = converter.GetDefaultDataConverter().FromPayload(p, &status)
	}
	return status
}

// checkSteps asserts the task's steps are 1…n, once each, and that no
// table was counted twice (a repeated step would count one again).
func checkSteps(t *testing.T, st workflows.TaskState) {
	t.Helper()
	if len(st.Steps) != st.Step {
		t.Fatalf("%d step records for %d steps", len(st.Steps), st.Step)
	}
	seen := map[string]int{}
	for i, r := range st.Steps {
		if r.N != i+1 {
			t.Fatalf("step record %d is step %d: %+v", i, r.N, st.Steps)
		}
		if r.Tool != "" {
			if n, dup := seen[r.Tool+r.Args]; dup {
				t.Fatalf("step %d repeats step %d: %s %s", r.N, n, r.Tool, r.Args)
			}
			seen[r.Tool+r.Args] = r.N
		}
	}
}

// checkTaskTranscript asserts the task's transcript has each message once,
// each below a message before it, and one result per tool call.
func checkTaskTranscript(t *testing.T, path string, toolSteps int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	msgs, err := convo.DecodeJSONL(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	ids := map[string]bool{}
	calls, results := 0, 0
	for i, m := range msgs {
		if ids[m.ID] {
			t.Fatalf("%s: message %s twice", path, m.ID)
		}
		if i > 0 && !ids[m.ParentID] {
			t.Fatalf("%s: message %s below %q, which is not before it", path, m.ID, m.ParentID)
		}
		ids[m.ID] = true
		if m.ToolCall != nil {
			calls++
		}
		if m.Role == convo.RoleToolResult {
			results++
			if !ids[m.ToolCallID] {
				t.Fatalf("%s: result %s of an unknown call", path, m.ID)
			}
		}
	}
	if calls != toolSteps || results != toolSteps {
		t.Fatalf("%s: %d calls, %d results; want %d of each", path, calls, results, toolSteps)
	}
}

// TestAgentTaskPausesAndSurvivesRestarts runs the README's agent task on
// the demo shop with the offline planner: counting the rows of every table
// takes 16 steps, so it pauses at 12 with a progress summary. The worker is
// killed while it is paused, and again while a tool activity runs; after
// each restart the task goes on, and `continue` finishes it with every
// table's right count, no step lost or repeated.
func TestAgentTaskPausesAndSurvivesRestarts(t *testing.T) {
	s := startStack(t, stackOptions{extraEnv: []string{"CTXFLOW_MODEL_PROVIDER=offline"}})
	s.startWorker()
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	shop := filepath.Join(s.dataDir, "demo", "shop.db")
	const goal = "How many rows does each table of the shop have?"

	res, err := s.task(ctx, "shop", map[string]any{"goal": goal, "taskId": "rows"})
	if err != nil {
		t.Fatalf("start task: %v\n%s", err, s.workerLogs())
	}
	if res.Type != workflows.TypePause || res.Task == nil || res.Task.Step != 12 || res.Task.Status != workflows.TaskPaused {
		t.Fatalf("first answer: type %q, task %+v", res.Type, res.Task)
	}
	if !strings.Contains(res.Answer, goal) || len(res.Task.Steps) == 0 {
		t.Errorf("the pause answers with a progress summary of the goal and the steps: %q", res.Answer)
	}
	wid := workflows.TaskWorkflowID(workflows.DefaultTenant, "shop", "rows")
	if st := s.searchStatus(t, ctx, wid); st != workflows.TaskPaused {
		t.Errorf("task CtxStatus = %q, want paused", st)
	}
	if st := s.searchStatus(t, ctx, workflows.SessionWorkflowID(workflows.DefaultTenant, "shop")); st != workflows.StatusPaused {
		t.Errorf("session CtxStatus = %q, want paused", st)
	}

	// Killed while paused: the pause is durable.
	s.killWorker()
	s.startWorker()

	// Killed while a tool runs: the shop is locked (once the new worker has
	// opened it and answers), so the first tool call after continue blocks;
	// the worker dies in it, the lock is released, and the next worker runs
	// the call again.
	if res, _, err := s.turn(ctx, "ping", "p1", "hello"); err != nil || res.Status != workflows.TurnCompleted {
		t.Fatalf("worker not back: %v %+v\n%s", err, res, s.workerLogs())
	}
	unlock := lockShop(t, shop)
	var queued map[string]any
	if _, err := s.do(ctx, http.MethodPost, "/v1/sessions/shop/continue", map[string]string{"turnId": "go-on"}, &queued); err != nil {
		unlock()
		t.Fatalf("continue: %v", err)
	}
	s.awaitToolActivity(t, ctx, wid)
	s.killWorker()
	unlock()
	time.Sleep(300 * time.Millisecond)
	s.startWorker()

	res, err = s.awaitTurn(ctx, "shop", "go-on")
	if err != nil || res.Type != workflows.TypeFinish || res.Task == nil || res.Task.Status != workflows.TaskFinished {
		t.Fatalf("continue: %v %+v\n%s", err, res, s.workerLogs())
	}
	counts := shopCounts(t, shop)
	if len(counts) < 12 {
		t.Fatalf("the demo shop has %d tables", len(counts))
	}
	total := 0
	for table, n := range counts {
		total += n
		if !strings.Contains(res.Answer, fmt.Sprintf("%s %d", table, n)) {
			t.Errorf("the answer misses %s %d: %s", table, n, res.Answer)
		}
	}
	if !strings.Contains(res.Answer, fmt.Sprintf("%d tables, %d rows", len(counts), total)) {
		t.Errorf("answer %q, want %d tables, %d rows", res.Answer, len(counts), total)
	}
	st, err := s.taskState(ctx, "shop", "rows")
	if err != nil {
		t.Fatal(err)
	}
	if want := len(counts) + 2; st.Step != want || st.Pauses != 1 { // list_tables, one count a table, the answer
		t.Errorf("task ended at step %d after %d pauses, want step %d after 1", st.Step, st.Pauses, want)
	}
	checkSteps(t, st)

	// A second task in the session knows the tables already.
	res, err = s.task(ctx, "shop", map[string]any{"goal": "How many customers live in 'Berlin'?", "taskId": "berlin"})
	if err != nil || res.Type != workflows.TypeFinish {
		t.Fatalf("second task: %v %+v", err, res)
	}
	for _, r := range res.Task.Steps {
		if r.Tool == "list_tables" {
			t.Errorf("the second task listed the tables again: %+v", res.Task.Steps)
		}
	}
	berlin := customersIn(t, shop, "Berlin")
	if !strings.Contains(res.Answer, fmt.Sprint(berlin)) {
		t.Errorf("answer %q, want %d customers", res.Answer, berlin)
	}
	// A new session does not.
	res, err = s.task(ctx, "fresh", map[string]any{"goal": "How many customers live in 'Berlin'?"})
	if err != nil || res.Type != workflows.TypeFinish || len(res.Task.Steps) == 0 || res.Task.Steps[0].Tool != "list_tables" {
		t.Fatalf("task of a new session: %v %+v", err, res.Task)
	}

	s.killWorker() // release the transcripts
	checkTaskTranscript(t, filepath.Join(s.dataDir, "transcripts", workflows.DefaultTenant, "shop:task:rows.jsonl"), len(counts)+1)
}

func customersIn(t *testing.T, path, city string) int {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRowContext(t.Context(), `SELECT count(*) FROM customers WHERE city = ?`, city).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestAgentTaskInChinese: a task paused in a Chinese session, a normal
// question while it is paused (answered; the task stays paused), "继续"
// resumes it; a canceled task cannot be continued.
func TestAgentTaskInChinese(t *testing.T) {
	s := startStack(t, stackOptions{extraEnv: []string{"CTXFLOW_MODEL_PROVIDER=offline"}})
	s.startWorker()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()

	res, err := s.task(ctx, "zh", map[string]any{"goal": "商店的每张表各有多少行？", "taskId": "hang"})
	if err != nil || res.Type != workflows.TypePause || res.Task.Step != 12 {
		t.Fatalf("task: %v %+v\n%s", err, res, s.workerLogs())
	}
	res, _, err = s.turn(ctx, "zh", "q1", "你好，Temporal 是什么？")
	if err != nil || res.Status != workflows.TurnCompleted || res.Type != "" || res.Answer == "" {
		t.Fatalf("a question while paused: %v %+v", err, res)
	}
	if st, err := s.taskState(ctx, "zh", "hang"); err != nil || st.Status != workflows.TaskPaused {
		t.Fatalf("after a normal question the task is %q (%v), want paused", st.Status, err)
	}
	res, _, err = s.turn(ctx, "zh", "q2", "继续")
	if err != nil || res.Type != workflows.TypeFinish || !strings.Contains(res.Answer, "张表") {
		t.Fatalf("继续: %v %+v", err, res)
	}

	// Cancel a paused task: 204; it is canceled; continue is refused.
	if res, err = s.task(ctx, "zh", map[string]any{"goal": "How many orders are there?", "taskId": "stop", "config": map[string]int{"maxSteps": 1}}); err != nil || res.Type != workflows.TypePause {
		t.Fatalf("second task: %v %+v", err, res)
	}
	if code, err := s.do(ctx, http.MethodDelete, "/v1/sessions/zh/tasks/stop", nil, nil); code != http.StatusNoContent {
		t.Fatalf("DELETE task = %d %v", code, err)
	}
	if st, err := s.taskState(ctx, "zh", "stop"); err != nil || st.Status != workflows.TaskCanceled {
		t.Fatalf("canceled task is %q (%v)", st.Status, err)
	}
	code, err := s.do(ctx, http.MethodPost, "/v1/sessions/zh/continue?wait=true", nil, nil)
	if code != http.StatusConflict {
		t.Fatalf("continue after cancel = %d %v, want 409", code, err)
	}
	if code, _ := s.do(ctx, http.MethodDelete, "/v1/sessions/zh/tasks/stop", nil, nil); code != http.StatusConflict {
		t.Errorf("DELETE of an ended task = %d, want 409", code)
	}
	if code, _ := s.do(ctx, http.MethodGet, "/v1/sessions/zh/tasks/nope", nil, nil); code != http.StatusNotFound {
		t.Errorf("GET of an unknown task = %d, want 404", code)
	}
}
