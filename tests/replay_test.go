package tests

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/ctxflow/ctxflow/workflows"
)

// TestReplayRecordedHistories replays every history in testdata against the
// current workflow code: a change that would break running sessions fails.
func TestReplayRecordedHistories(t *testing.T) {
	files, err := filepath.Glob("testdata/*.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no recorded histories in testdata (record them with CTXFLOW_RECORD_HISTORY=1 go test -run TestRecordHistory ./tests/)")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			r := worker.NewWorkflowReplayer()
			r.RegisterWorkflowWithOptions(workflows.SessionWorkflow, workflow.RegisterOptions{Name: workflows.SessionWorkflowName})
			r.RegisterWorkflowWithOptions(workflows.CorrectiveRAGWorkflow, workflow.RegisterOptions{Name: workflows.CorrectiveRAGWorkflowName})
			r.RegisterWorkflowWithOptions(workflows.TaskWorkflow, workflow.RegisterOptions{Name: workflows.TaskWorkflowName})
			r.RegisterWorkflowWithOptions(workflows.IngestWorkflow, workflow.RegisterOptions{Name: workflows.IngestWorkflowName})
			r.RegisterWorkflowWithOptions(workflows.DeleteDocumentWorkflow, workflow.RegisterOptions{Name: workflows.DeleteDocumentWorkflowName})
			if err := r.ReplayWorkflowHistoryFromJSONFile(nil, f); err != nil {
				t.Fatalf("replay %s: %v", f, err)
			}
		})
	}
}

// recordingStack starts a stack and its worker for a test that records
// histories, which runs only with CTXFLOW_RECORD_HISTORY=1: recorded
// histories are what running sessions look like, so they change only on
// purpose. The context ends after two minutes.
func recordingStack(t *testing.T, opts stackOptions) (*stack, context.Context) {
	t.Helper()
	if os.Getenv("CTXFLOW_RECORD_HISTORY") != "1" {
		t.Skip("set CTXFLOW_RECORD_HISTORY=1 to re-record tests/testdata")
	}
	s := startStack(t, opts)
	s.startWorker()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	return s, ctx
}

// TestRecordHistory records the histories replayed above. It runs only when
// CTXFLOW_RECORD_HISTORY=1: recorded histories are what running sessions
// look like, so they change only on purpose. (session_run1.json and
// session_run2.json were recorded before "one-receiver", with a coroutine a
// signal channel.)
func TestRecordHistory(t *testing.T) {
	s, ctx := recordingStack(t, stackOptions{limits: workflows.Limits{ContinueAsNewEvery: 4, IdleTTL: 3 * time.Second}})

	// Run 1: three update turns, a repeated id, a turn the model refuses
	// (permanent error), compress; then continue-as-new.
	for i := range 3 {
		if _, _, err := s.turn(ctx, "rec", fmt.Sprintf("t%d", i), fmt.Sprintf("question %d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := s.turn(ctx, "rec", "t1", "question 1"); err != nil {
		t.Fatal(err)
	}
	s.model.FailNext(2, http.StatusNotFound) // its answer in the workflow task, then as an activity
	if code, err := s.do(ctx, http.MethodPost, "/v1/sessions/rec/turns?wait=true", map[string]string{"turnId": "t3", "question": "fails"}, nil); code != http.StatusBadRequest {
		t.Fatalf("failing turn: %d %v", code, err)
	}
	if _, err := s.do(ctx, http.MethodPost, "/v1/sessions/rec/compress", nil, nil); err != nil {
		t.Fatal(err)
	}
	// Run 2: a signal turn and an update turn, then the idle TTL ends it.
	if _, err := s.do(ctx, http.MethodPost, "/v1/sessions/rec/turns", map[string]string{"turnId": "t4", "question": "signalled"}, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.turn(ctx, "rec", "t5", "question 5"); err != nil {
		t.Fatal(err)
	}
	wid := workflows.SessionWorkflowID(workflows.DefaultTenant, "rec")
	time.Sleep(5 * time.Second) // past the idle TTL

	resp, err := s.client.ListWorkflow(ctx, listByID(wid))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetExecutions()) < 2 {
		t.Fatalf("want at least 2 runs, got %d", len(resp.GetExecutions()))
	}
	for i, ex := range resp.GetExecutions() {
		if ex.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			t.Fatalf("run %s still running", ex.GetExecution().GetRunId())
		}
		writeHistory(t, ctx, s, wid, ex.GetExecution().GetRunId(), fmt.Sprintf("testdata/session_one_receiver_run%d.json", len(resp.GetExecutions())-i))
	}
}

// TestRecordFastModelHistory records a session whose instant model is
// called in the workflow task (Limits.FastModel) after its first answer,
// with one call that fails there and is made again as an activity; its
// turns after the first publish no "running" status, and its idle expiry
// takes one timer a TTL. (In session_fast_model_v1.json, recorded before
// "quiet-fast-turns", they publish it; in _v2, recorded before
// "idle-timer", each wait starts a timer of its own; _v3 was recorded
// before "adopt-lost-turns", whose questions need not hang below a leaf;
// _v4 before "coalesce-status", where every quiet turn publishes its
// status.)
// Same switch as TestRecordHistory.
func TestRecordFastModelHistory(t *testing.T) {
	s, ctx := recordingStack(t, stackOptions{limits: workflows.Limits{IdleTTL: 3 * time.Second}})
	for i := range 4 {
		if i == 2 {
			s.model.FailNext(1, http.StatusServiceUnavailable)
		}
		res, _, err := s.turn(ctx, "fast", fmt.Sprintf("t%d", i), fmt.Sprintf("question %d", i))
		if err != nil || res.Status != workflows.TurnCompleted {
			t.Fatalf("turn %d: %v %+v", i, err, res)
		}
	}
	wid := workflows.SessionWorkflowID(workflows.DefaultTenant, "fast")
	time.Sleep(5 * time.Second) // past the idle TTL
	writeHistory(t, ctx, s, wid, "", "testdata/session_fast_model.json")
}

// TestRecordSummaryHistory records a session of a fast model with a
// two-round window, whose running summary is made as an activity the first
// time and in the workflow task of the turn that made it due after that,
// each timed by its own call ("summary-own-time";
// session_summary_in_task.json was recorded before it, timed by its step).
// Same switch as TestRecordHistory.
func TestRecordSummaryHistory(t *testing.T) {
	s, ctx := recordingStack(t, stackOptions{limits: workflows.Limits{IdleTTL: 3 * time.Second}})
	if code, err := s.do(ctx, http.MethodPost, "/v1/sessions", map[string]any{"sessionId": "sum", "config": map[string]any{"maxRounds": 2}}, nil); code != http.StatusCreated {
		t.Fatalf("create: %d %v", code, err)
	}
	for i := range 7 {
		if res, _, err := s.turn(ctx, "sum", fmt.Sprintf("t%d", i), fmt.Sprintf("question %d", i)); err != nil || res.Status != workflows.TurnCompleted {
			t.Fatalf("turn %d: %v %+v", i, err, res)
		}
	}
	var st workflows.SessionState
	if _, err := s.do(ctx, http.MethodGet, "/v1/sessions/sum", nil, &st); err != nil {
		t.Fatal(err)
	}
	inTask := 0
	for _, r := range st.Recent {
		for _, step := range r.Steps {
			if step.Name == "summarize" && step.Details["inWorkflowTask"] == true {
				inTask++
			}
		}
	}
	if inTask == 0 {
		t.Fatalf("no summary made in the workflow task: %+v", st.Recent)
	}
	time.Sleep(5 * time.Second) // past the idle TTL
	writeHistory(t, ctx, s, workflows.SessionWorkflowID(workflows.DefaultTenant, "sum"), "", "testdata/session_summary_own_time.json")
}

// TestRecordQAHistory records a session on the qa route (a turn through the
// corrective child workflow, a follow-up rewritten first, small talk) and
// the child's own history: the follow-up's child retrieves in its workflow
// task (the first retrieval was fast), and the session stays quiet over it
// ("quiet-fast-qa"); the child asks for no version (FilterBinds). (qa_session.json and
// qa_corrective_child.json were recorded before "qa-own-generate", when the
// child answered; qa_session_own_generate.json and qa_corrective_choose.json
// before "fast-retrieve"; qa_session_fast_retrieve.json and
// qa_corrective_fast_retrieve.json before "quiet-fast-qa", "one-receiver"
// and FilterBinds.) Same switch as TestRecordHistory.
func TestRecordQAHistory(t *testing.T) {
	s, ctx := recordingStack(t, stackOptions{extraEnv: []string{"CTXFLOW_MODEL_PROVIDER=offline"}, limits: workflows.Limits{IdleTTL: 3 * time.Second}})
	s.ingestREADME(t)
	for i, q := range []string{"What is ctxflow?", "How do I run it?", "thanks!"} {
		if _, _, err := s.turn(ctx, "qa", fmt.Sprintf("q%d", i), q); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(5 * time.Second) // past the idle TTL
	wid := workflows.SessionWorkflowID(workflows.DefaultTenant, "qa")
	writeHistory(t, ctx, s, wid, "", "testdata/qa_session_quiet.json")
	writeHistory(t, ctx, s, workflows.QAWorkflowID(workflows.DefaultTenant, "qa", "q1"), "", "testdata/qa_corrective_told.json")
}

// TestRecordTaskHistory records a session whose agent task pauses after 2
// steps and is resumed by "继续", and the task's own history. Same switch
// as TestRecordHistory.
func TestRecordTaskHistory(t *testing.T) {
	s, ctx := recordingStack(t, stackOptions{extraEnv: []string{"CTXFLOW_MODEL_PROVIDER=offline"}, limits: workflows.Limits{IdleTTL: 3 * time.Second}})
	res, err := s.task(ctx, "agent", map[string]any{"goal": "How many customers are there?", "taskId": "k", "config": map[string]int{"maxSteps": 2}})
	if err != nil || res.Type != workflows.TypePause {
		t.Fatalf("task: %v %+v", err, res)
	}
	if res, _, err = s.turn(ctx, "agent", "go", "继续"); err != nil || res.Type != workflows.TypeFinish {
		t.Fatalf("继续: %v %+v", err, res)
	}
	time.Sleep(5 * time.Second) // past the idle TTL
	wid := workflows.SessionWorkflowID(workflows.DefaultTenant, "agent")
	writeHistory(t, ctx, s, wid, "", "testdata/task_session.json")
	writeHistory(t, ctx, s, workflows.TaskWorkflowID(workflows.DefaultTenant, "agent", "k"), "", "testdata/task_workflow.json")
}

// TestRecordDocumentHistories records a document's ingestion (in
// batches) and its deletion. Same switch as TestRecordHistory.
func TestRecordDocumentHistories(t *testing.T) {
	s, ctx := recordingStack(t, stackOptions{extraEnv: []string{"CTXFLOW_MODEL_PROVIDER=offline"}})
	path := filepath.Join(s.dataDir, "corpus.jsonl")
	if err := os.WriteFile(path, syntheticPassages(6), 0o600); err != nil {
		t.Fatal(err)
	}
	wid := workflows.IngestWorkflowID("corpus")
	run, err := s.client.ExecuteWorkflow(ctx, workflows.DocumentStartOptions("corpus", "Ingest corpus", ""), workflows.IngestWorkflowName,
		workflows.IngestInput{DocumentID: "corpus", Path: path, BatchSize: 8, Source: "corpus.jsonl"})
	if err != nil {
		t.Fatal(err)
	}
	if err := run.Get(ctx, nil); err != nil {
		t.Fatal(err)
	}
	writeHistory(t, ctx, s, wid, run.GetRunID(), "testdata/ingest.json")
	del, err := s.client.ExecuteWorkflow(ctx, workflows.DocumentStartOptions("corpus", "Delete corpus", ""), workflows.DeleteDocumentWorkflowName,
		workflows.DeleteDocumentInput{DocumentID: "corpus"})
	if err != nil {
		t.Fatal(err)
	}
	if err := del.Get(ctx, nil); err != nil {
		t.Fatal(err)
	}
	writeHistory(t, ctx, s, wid, del.GetRunID(), "testdata/delete_document.json")
}

func writeHistory(t *testing.T, ctx context.Context, s *stack, wid, runID, path string) {
	t.Helper()
	h, err := fetchHistory(ctx, s.client, wid, runID)
	if err != nil {
		t.Fatal(err)
	}
	b, err := protojson.MarshalOptions{Indent: "  "}.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("recorded %s: %d events, %d bytes", path, len(h.Events), len(b))
}

func listByID(wid string) *workflowservice.ListWorkflowExecutionsRequest {
	return &workflowservice.ListWorkflowExecutionsRequest{Query: fmt.Sprintf("WorkflowId = '%s'", wid)}
}
