package workflows_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"pgregory.net/rapid"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/activities/tiktoken"
	"github.com/ctxflow/ctxflow/activities/transcript"
	"github.com/ctxflow/ctxflow/convo"
	"github.com/ctxflow/ctxflow/workflows"
)

// fakeModel answers "answer N to: <last user message>" and records calls.
// Summary prompts are answered "summary N" (or fail with summaryErr) and
// recorded apart.
type fakeModel struct {
	mu         sync.Mutex
	calls      []activities.ChatRequest
	summaries  []activities.ChatRequest
	err        error
	summaryErr error
	// summaryNext are failures of the next summaries, one each.
	summaryNext []error
	// promptTokens, when set, is what the model reports as its prompt size.
	promptTokens int
	// promptRatio, when set, makes the model count promptRatio times what
	// tiktoken counts of each request (rounded up), as a model whose
	// tokenizer differs does.
	promptRatio float64
	// next are failures of the next calls, one each, before err.
	next []error
}

func isSummaryPrompt(req activities.ChatRequest) bool {
	return strings.Contains(req.Messages[0].Content, "running summary of a conversation")
}

func (m *fakeModel) Chat(_ context.Context, req activities.ChatRequest, _ func(string)) (activities.ChatResponse, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if isSummaryPrompt(req) {
		m.summaries = append(m.summaries, req)
		if len(m.summaryNext) > 0 {
			err := m.summaryNext[0]
			m.summaryNext = m.summaryNext[1:]
			return activities.ChatResponse{}, err
		}
		if m.summaryErr != nil {
			return activities.ChatResponse{}, m.summaryErr
		}
		return activities.ChatResponse{Content: fmt.Sprintf("summary %d", len(m.summaries))}, nil
	}
	m.calls = append(m.calls, req)
	if len(m.next) > 0 {
		err := m.next[0]
		m.next = m.next[1:]
		return activities.ChatResponse{}, err
	}
	if m.err != nil {
		return activities.ChatResponse{}, m.err
	}
	last := req.Messages[len(req.Messages)-1]
	served := m.promptTokens
	if m.promptRatio > 0 {
		served = int(math.Ceil(m.promptRatio * float64(convo.RequestTokens(cl100k, req.Messages))))
	}
	return activities.ChatResponse{Content: fmt.Sprintf("answer %d to: %s", len(m.calls), last.Content), Model: req.Model, PromptTokens: served}, nil
}

func (m *fakeModel) questions() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, c := range m.calls {
		out = append(out, c.Messages[len(c.Messages)-1].Content)
	}
	return out
}

// cl100k is the tokenizer the harness's activities count with.
var cl100k = func() convo.Tokenizer {
	tok, err := tiktoken.New("cl100k_base")
	if err != nil {
		panic(err)
	}
	return tok
}()

type harness struct {
	env   *testsuite.TestWorkflowEnvironment
	model *fakeModel
	store *transcript.FileStore
	key   activities.SessionKey
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	return newHarnessWith(t, newStore(t))
}

// newStore opens a transcript store in a temporary folder, closed when the
// test ends.
func newStore(t *testing.T) *transcript.FileStore {
	t.Helper()
	store, err := transcript.Open(transcript.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	return store
}

// newHarnessWith builds a harness on store; each extra function may change
// the session's ports and register more with the environment before start.
func newHarnessWith(t *testing.T, store *transcript.FileStore, extra ...func(*activities.Session, *testsuite.TestWorkflowEnvironment)) *harness {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.SetWorkerOptions(worker.Options{})
	model := &fakeModel{}
	env.RegisterWorkflowWithOptions(workflows.SessionWorkflow, workflow.RegisterOptions{Name: workflows.SessionWorkflowName})
	sess := &activities.Session{Transcript: store, Model: model, Tokenizer: cl100k, Engine: "fake"}
	for _, f := range extra {
		f(sess, env)
	}
	env.RegisterActivity(sess)
	return &harness{env: env, model: model, store: store, key: activities.SessionKey{Tenant: "t1", SessionID: "s1"}}
}

func (h *harness) input(limits workflows.Limits) workflows.SessionInput {
	return workflows.SessionInput{Tenant: h.key.Tenant, SessionID: h.key.SessionID, Limits: limits}
}

// update sends a turn update at the given delay and records its outcome.
type outcome struct {
	rejected error
	result   workflows.TurnResult
	err      error
	done     bool
}

func (h *harness) update(delay time.Duration, req workflows.TurnRequest) *outcome {
	o := &outcome{}
	h.env.RegisterDelayedCallback(func() {
		h.env.UpdateWorkflow(workflows.UpdateTurn, workflows.TurnUpdateID(workflows.UpdateTurn, req), &testsuite.TestUpdateCallback{
			OnAccept: func() {},
			OnReject: func(err error) { o.rejected, o.done = err, true },
			OnComplete: func(v any, err error) {
				o.done, o.err = true, err
				if r, ok := v.(workflows.TurnResult); ok {
					o.result = r
				}
			},
		}, req)
	}, delay)
	return o
}

func (h *harness) signal(delay time.Duration, req workflows.TurnRequest) {
	h.env.RegisterDelayedCallback(func() { h.env.SignalWorkflow(workflows.SignalTurn, req) }, delay)
}

func (h *harness) state(t *testing.T) workflows.SessionState {
	t.Helper()
	v, err := h.env.QueryWorkflow(workflows.QueryState)
	if err != nil {
		t.Fatal(err)
	}
	var st workflows.SessionState
	if err := v.Get(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

func (h *harness) transcriptLen(t *testing.T) int {
	t.Helper()
	n, err := h.store.Len(context.Background(), h.key)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestTurnUpdateAnswersAndSavesBothMessages(t *testing.T) {
	h := newHarness(t)
	o := h.update(time.Second, workflows.TurnRequest{TurnID: "t-1", Question: "What is ctxflow?"})
	h.env.ExecuteWorkflow(workflows.SessionWorkflowName, h.input(workflows.Limits{IdleTTL: time.Hour}))

	if !o.done || o.err != nil || o.rejected != nil {
		t.Fatalf("update outcome = %+v", o)
	}
	r := o.result
	if r.Status != workflows.TurnCompleted || r.Answer != "answer 1 to: What is ctxflow?" {
		t.Fatalf("result = %+v", r)
	}
	var names []string
	for _, s := range r.Steps {
		names = append(names, s.Name+":"+s.Status)
	}
	if got := strings.Join(names, ","); got != "load_context:ok,generate:ok,save:ok" {
		t.Errorf("steps = %s", got)
	}
	if r.SessionInfo.Turns != 1 || r.SessionInfo.Messages != 2 || r.SessionInfo.Health != workflows.HealthOK {
		t.Errorf("session info = %+v", r.SessionInfo)
	}
	if n := h.transcriptLen(t); n != 2 {
		t.Errorf("transcript has %d messages, want 2", n)
	}
	if !h.env.IsWorkflowCompleted() || h.env.GetWorkflowError() != nil {
		t.Errorf("workflow did not end cleanly after the idle TTL: %v", h.env.GetWorkflowError())
	}
}

func TestTurnValidatorRejectsBadInputBeforeHistory(t *testing.T) {
	tests := []struct {
		name, question, config, want string
	}{
		{"empty", "", "", "question is empty"},
		{"whitespace only", " \t\n ", "", "question is empty"},
		{"too long", strings.Repeat("a", 32<<10+1), "", "over the 32768-byte limit"},
		{"unknown option", "hi", `{"maxRoundz": 3}`, `unknown field "maxRoundz"`},
		{"wrong type", "hi", `{"maxRounds": "three"}`, "cannot unmarshal"},
		{"out of range", "hi", `{"maxRounds": 0}`, "out of range"},
		{"out of range float", "hi", `{"similarityThreshold": 1.5}`, "similarityThreshold 1.5 out of range"},
		{"bad strategy", "hi", `{"windowStrategy": "all"}`, "all"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			o := h.update(time.Second, workflows.TurnRequest{TurnID: "t-bad", Question: tc.question, Config: json.RawMessage(tc.config)})
			h.env.ExecuteWorkflow(workflows.SessionWorkflowName, h.input(workflows.Limits{IdleTTL: time.Hour}))
			if o.rejected == nil || !strings.Contains(o.rejected.Error(), tc.want) {
				t.Fatalf("rejection = %v, want it to mention %q", o.rejected, tc.want)
			}
			if len(h.model.calls) != 0 || h.transcriptLen(t) != 0 {
				t.Errorf("a rejected turn reached the model (%d calls) or the transcript", len(h.model.calls))
			}
		})
	}
	t.Run("bad turn id", func(t *testing.T) {
		h := newHarness(t)
		o := h.update(time.Second, workflows.TurnRequest{TurnID: "../etc", Question: "hi"})
		h.env.ExecuteWorkflow(workflows.SessionWorkflowName, h.input(workflows.Limits{IdleTTL: time.Hour}))
		if o.rejected == nil || !strings.Contains(o.rejected.Error(), "turnId") {
			t.Fatalf("rejection = %v", o.rejected)
		}
	})
}

func TestRepeatedTurnIDReturnsFirstResultAndAppendsNothing(t *testing.T) {
	h := newHarness(t)
	first := h.update(time.Second, workflows.TurnRequest{TurnID: "t-1", Question: "first"})
	h.signal(2*time.Second, workflows.TurnRequest{TurnID: "t-1", Question: "first"})
	again := h.update(3*time.Second, workflows.TurnRequest{TurnID: "t-1", Question: "first"})
	changed := h.update(4*time.Second, workflows.TurnRequest{TurnID: "t-1", Question: "first, again"})
	h.env.ExecuteWorkflow(workflows.SessionWorkflowName, h.input(workflows.Limits{IdleTTL: time.Hour}))

	if first.result.Answer == "" || first.result.Answer != again.result.Answer {
		t.Fatalf("answers differ: %q vs %q", first.result.Answer, again.result.Answer)
	}
	if changed.rejected == nil {
		t.Errorf("the id reused for another question = %+v, want it refused", changed)
	}
	if len(h.model.calls) != 1 {
		t.Errorf("model called %d times, want 1", len(h.model.calls))
	}
	if n := h.transcriptLen(t); n != 2 {
		t.Errorf("transcript has %d messages, want 2", n)
	}
	if st := h.state(t); st.Turns != 1 {
		t.Errorf("turns = %d, want 1", st.Turns)
	}
}

func TestTurnsRunOneAtATimeInArrivalOrder(t *testing.T) {
	h := newHarness(t)
	h.model.err = nil
	var outs []*outcome
	for i := range 6 {
		req := workflows.TurnRequest{TurnID: fmt.Sprintf("t-%d", i), Question: fmt.Sprintf("q%d", i)}
		if i%2 == 0 {
			h.signal(time.Second, req)
		} else {
			outs = append(outs, h.update(time.Second, req))
		}
	}
	h.env.ExecuteWorkflow(workflows.SessionWorkflowName, h.input(workflows.Limits{IdleTTL: time.Hour}))

	if got, want := strings.Join(h.model.questions(), ","), "q0,q1,q2,q3,q4,q5"; got != want {
		t.Fatalf("model saw %s, want %s", got, want)
	}
	for _, o := range outs {
		if o.result.Status != workflows.TurnCompleted {
			t.Errorf("update result = %+v", o.result)
		}
	}
	// Each turn sees the whole conversation before it: the window of turn 5
	// holds q0..q4 with their answers and q5.
	last := h.model.calls[5]
	if n := len(last.Messages); n != 1+11 {
		t.Errorf("turn 5 saw %d messages, want system + 11", n)
	}
	if st := h.state(t); st.Turns != 6 || st.Messages != 12 {
		t.Errorf("state turns=%d messages=%d", st.Turns, st.Messages)
	}
}

func TestModelFailureDegradesAndKeepsQuestion(t *testing.T) {
	h := newHarness(t)
	h.model.err = &activities.ModelError{StatusCode: 404, Message: `model "nope" not found`}
	o := h.update(time.Second, workflows.TurnRequest{TurnID: "t-1", Question: "hello?"})
	h.env.ExecuteWorkflow(workflows.SessionWorkflowName, h.input(workflows.Limits{IdleTTL: time.Hour}))

	r := o.result
	if r.Status != workflows.TurnFailed || !strings.Contains(r.Error, "not found") || r.Answer != "" {
		t.Fatalf("result = %+v", r)
	}
	if r.ErrorCode != activities.CodeModelPermanent {
		t.Errorf("error code = %q, want %q", r.ErrorCode, activities.CodeModelPermanent)
	}
	if len(h.model.calls) != 1 {
		t.Errorf("a permanent error was retried: %d calls", len(h.model.calls))
	}
	st := h.state(t)
	if st.Health != workflows.HealthDegraded || !strings.Contains(st.DegradedReason, "not found") {
		t.Errorf("state health=%s reason=%q", st.Health, st.DegradedReason)
	}
	if n := h.transcriptLen(t); n != 1 {
		t.Errorf("transcript has %d messages, want the question only", n)
	}
}

func TestTransientModelFailureIsRetried(t *testing.T) {
	h := newHarness(t)
	h.model.err = errors.New("connection refused")
	o := h.update(time.Second, workflows.TurnRequest{TurnID: "t-1", Question: "hello?"})
	h.env.ExecuteWorkflow(workflows.SessionWorkflowName, h.input(workflows.Limits{IdleTTL: time.Hour}))
	if o.result.Status != workflows.TurnFailed || o.result.ErrorCode != activities.CodeUnavailable {
		t.Fatalf("result = %+v, want failed and unavailable", o.result)
	}
	if got, want := len(h.model.calls), workflows.DefaultSessionConfig().MaxRetries+1; got != want {
		t.Errorf("model called %d times, want %d (1 + maxRetries)", got, want)
	}
}

func TestContinueAsNewCarriesWorkingState(t *testing.T) {
	h := newHarness(t)
	h.update(time.Second, workflows.TurnRequest{TurnID: "t-0", Question: "q0"})
	h.update(2*time.Second, workflows.TurnRequest{TurnID: "t-1", Question: "q1"})
	h.signal(2*time.Second, workflows.TurnRequest{TurnID: "t-2", Question: "q2"})
	h.env.ExecuteWorkflow(workflows.SessionWorkflowName, h.input(workflows.Limits{IdleTTL: time.Hour, ContinueAsNewEvery: 2}))

	var can *workflow.ContinueAsNewError
	if !errors.As(h.env.GetWorkflowError(), &can) {
		t.Fatalf("workflow error = %v, want continue-as-new", h.env.GetWorkflowError())
	}
	var next workflows.SessionInput
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
		t.Fatal(err)
	}
	st := next.State
	if st == nil || st.Turns != 2 || st.Messages != 4 || st.ActiveLeaf != "t-1.a" || len(st.Recent) != 2 {
		t.Fatalf("carried state = %+v", st)
	}
	// The third turn, a signal queued behind the second, is carried, not lost.
	if len(st.Pending) != 1 || st.Pending[0].TurnID != "t-2" {
		t.Errorf("pending carried = %+v", st.Pending)
	}
	if next.Limits.ContinueAsNewEvery != 2 || next.SessionID != "s1" {
		t.Errorf("limits/session not carried: %+v", next)
	}
}

func TestIdleTTLEndsRunAndNextRunRevivesFromSnapshot(t *testing.T) {
	h := newHarness(t)
	h.update(time.Second, workflows.TurnRequest{TurnID: "t-1", Question: "remember me"})
	h.env.ExecuteWorkflow(workflows.SessionWorkflowName, h.input(workflows.Limits{IdleTTL: time.Minute}))
	if !h.env.IsWorkflowCompleted() || h.env.GetWorkflowError() != nil {
		t.Fatalf("run did not end cleanly: %v", h.env.GetWorkflowError())
	}

	// A new run of the same session (what the next turn's update-with-start
	// does) picks the state up from the snapshot.
	h2 := newHarnessWith(t, h.store)
	o := h2.update(time.Second, workflows.TurnRequest{TurnID: "t-2", Question: "and now?"})
	h2.env.ExecuteWorkflow(workflows.SessionWorkflowName, h2.input(workflows.Limits{IdleTTL: time.Minute}))
	if o.result.Status != workflows.TurnCompleted || o.result.SessionInfo.Turns != 2 || o.result.SessionInfo.Messages != 4 {
		t.Fatalf("revived turn = %+v", o.result)
	}
	if n := len(h2.model.calls[0].Messages); n != 1+3 {
		t.Errorf("revived turn saw %d messages, want system + 3", n)
	}
}

// twoRounds is a session config whose window keeps 2 rounds (4 messages),
// so the third turn pushes the first round into the summary.
func (h *harness) inputTwoRounds() workflows.SessionInput {
	in := h.input(workflows.Limits{IdleTTL: time.Hour})
	in.Config = json.RawMessage(`{"maxRounds": 2}`)
	return in
}

func TestHistoryBeyondWindowIsFoldedIntoSummary(t *testing.T) {
	h := newHarness(t)
	for i := range 4 {
		h.update(time.Duration(i+1)*time.Second, workflows.TurnRequest{TurnID: fmt.Sprintf("t-%d", i), Question: fmt.Sprintf("q%d", i)})
	}
	h.env.ExecuteWorkflow(workflows.SessionWorkflowName, h.inputTwoRounds())

	// Turn 3 leaves 6 messages, over the 4-message window: the first round
	// (q0 and its answer) is folded, incrementally from no summary.
	if len(h.model.summaries) < 1 {
		t.Fatalf("summariser called %d times", len(h.model.summaries))
	}
	first := h.model.summaries[0].Messages[1].Content
	if !strings.Contains(first, "(none)") || !strings.Contains(first, "[user] q0") || strings.Contains(first, "[user] q2") {
		t.Errorf("first summary prompt folds the wrong messages:\n%s", first)
	}
	// Turn 4's view: system prompt, the summary, then the window.
	last := h.model.calls[3].Messages
	if last[1].Role != "system" || !strings.Contains(last[1].Content, "summary 1") {
		t.Fatalf("turn 4 view has no summary: %+v", last[:2])
	}
	var users []string
	for _, m := range last {
		if m.Role == "user" {
			users = append(users, m.Content)
		}
	}
	if got := strings.Join(users, ","); got != "q2,q3" {
		t.Errorf("turn 4 window users = %s, want q2,q3", got)
	}
	st := h.state(t)
	if st.Summary == nil || st.Summary.Folded == 0 || st.SummaryDegraded != "" {
		t.Errorf("state summary = %+v degraded=%q", st.Summary, st.SummaryDegraded)
	}
	// The trace of turn 3 shows the summarize step.
	var sawStep bool
	for _, r := range st.Recent {
		for _, s := range r.Steps {
			sawStep = sawStep || (s.Name == "summarize" && s.Status == "ok")
		}
	}
	if !sawStep {
		t.Error("no summarize step in the trace")
	}
}

// TestFastSummaryRunsInTheWorkflowTask: once the running summary has been
// fast (under a tenth of Limits.FastModel), it is made in the workflow task
// of the turn that made it due; one that fails there for a transient
// reason is made again as an activity. Without a fast-model bound it is
// always an activity.
func TestFastSummaryRunsInTheWorkflowTask(t *testing.T) {
	for _, tc := range []struct {
		name string
		fast time.Duration
		want string // each summarize step: t in the workflow task, a an activity
	}{
		{"fast", 500 * time.Millisecond, "a,t,a,t,t"},
		{"no bound", 0, "a,a,a,a,a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			for i := range 7 {
				h.update(time.Duration(i+1)*time.Second, workflows.TurnRequest{TurnID: fmt.Sprintf("t-%d", i), Question: fmt.Sprintf("q%d", i)})
			}
			// The third summary fails once in the workflow task.
			h.env.RegisterDelayedCallback(func() { h.model.summaryNext = []error{errors.New("connection reset")} }, 4500*time.Millisecond)
			in := h.inputTwoRounds()
			in.Limits.FastModel = tc.fast
			h.env.ExecuteWorkflow(workflows.SessionWorkflowName, in)

			st := h.state(t)
			var got []string
			for _, r := range st.Recent {
				for _, s := range r.Steps {
					if s.Name != "summarize" {
						continue
					}
					if s.Status != "ok" {
						t.Errorf("turn %s: summarize %s %v", r.TurnID, s.Status, s.Details)
					}
					got = append(got, map[bool]string{true: "t", false: "a"}[s.Details["inWorkflowTask"] == true])
				}
			}
			if strings.Join(got, ",") != tc.want {
				t.Errorf("summaries made %s, want %s", strings.Join(got, ","), tc.want)
			}
			if st.Summary == nil || st.SummaryDegraded != "" {
				t.Errorf("summary %+v, degraded %q", st.Summary, st.SummaryDegraded)
			}
			if last := h.model.calls[len(h.model.calls)-1].Messages; !strings.Contains(last[1].Content, "summary ") {
				t.Errorf("the last turn's view has no summary: %+v", last[:2])
			}
		})
	}
}

// TestSummaryIsTimedByItsOwnCall: a summary made as an activity is timed
// by the call itself, not by its step in the workflow, which also holds the
// server's round trips: here each summary reaches the workflow 200 ms
// (a loaded server) after it was asked for, while the call takes a few
// milliseconds, and the summaries after the first are made in the workflow
// task. Timed by their steps, all five were activities.
func TestSummaryIsTimedByItsOwnCall(t *testing.T) {
	h := newHarnessWith(t, newStore(t), func(sess *activities.Session, env *testsuite.TestWorkflowEnvironment) {
		env.OnActivity(sess.Summarize, mock.Anything, mock.Anything).After(200 * time.Millisecond).Return(sess.Summarize)
	})
	for i := range 7 {
		h.update(time.Duration(i+1)*time.Second, workflows.TurnRequest{TurnID: fmt.Sprintf("t-%d", i), Question: fmt.Sprintf("q%d", i)})
	}
	in := h.inputTwoRounds()
	in.Limits.FastModel = 500 * time.Millisecond
	h.env.ExecuteWorkflow(workflows.SessionWorkflowName, in)

	st := h.state(t)
	var got []string
	for _, r := range st.Recent {
		for _, s := range r.Steps {
			if s.Name == "summarize" {
				got = append(got, map[bool]string{true: "t", false: "a"}[s.Details["inWorkflowTask"] == true])
			}
		}
	}
	if strings.Join(got, ",") != "a,t,t,t,t" {
		t.Errorf("summaries made %s, want a,t,t,t,t (t in the workflow task, a an activity)", strings.Join(got, ","))
	}
	if st.SummaryMS <= 0 || st.SummaryMS >= 50 {
		t.Errorf("summary time %v ms, want the calls' own (under 50)", st.SummaryMS)
	}
}

func TestSummariserFailureFallsBackToTruncation(t *testing.T) {
	h := newHarness(t)
	h.model.summaryErr = &activities.ModelError{StatusCode: 400, Message: "bad request"}
	var outs []*outcome
	for i := range 4 {
		outs = append(outs, h.update(time.Duration(i+1)*time.Second, workflows.TurnRequest{TurnID: fmt.Sprintf("t-%d", i), Question: fmt.Sprintf("q%d", i)}))
	}
	h.env.ExecuteWorkflow(workflows.SessionWorkflowName, h.inputTwoRounds())

	st := h.state(t)
	if !strings.Contains(st.SummaryDegraded, "summary unavailable") || st.Health != workflows.HealthDegraded {
		t.Fatalf("state: summaryDegraded=%q health=%s", st.SummaryDegraded, st.Health)
	}
	// Turns still answer; the one after the failure uses fallback truncation.
	r := outs[3].result
	if r.Status != workflows.TurnCompleted || r.Steps[0].Status != "degraded" || r.Steps[0].Details["fallbackTruncation"] != true {
		t.Errorf("turn 4 = %s, load step %+v", r.Status, r.Steps[0])
	}
}

func TestCompressSignalFoldsAllButNewestRound(t *testing.T) {
	h := newHarness(t)
	for i := range 3 {
		h.update(time.Duration(i+1)*time.Second, workflows.TurnRequest{TurnID: fmt.Sprintf("t-%d", i), Question: fmt.Sprintf("q%d", i)})
	}
	h.env.RegisterDelayedCallback(func() { h.env.SignalWorkflow(workflows.SignalCompress, nil) }, 10*time.Second)
	// maxRounds 5: nothing is over the threshold, only the signal folds.
	h.env.ExecuteWorkflow(workflows.SessionWorkflowName, h.input(workflows.Limits{IdleTTL: time.Hour}))

	if len(h.model.summaries) != 1 {
		t.Fatalf("summariser called %d times, want 1", len(h.model.summaries))
	}
	prompt := h.model.summaries[0].Messages[1].Content
	if !strings.Contains(prompt, "[user] q1") || strings.Contains(prompt, "[user] q2") {
		t.Errorf("compress folded the wrong messages:\n%s", prompt)
	}
	if st := h.state(t); st.Summary == nil || st.Summary.Folded != 4 || st.ActiveLeaf != st.Summary.ID {
		t.Errorf("summary = %+v, active leaf %s", st.Summary, st.ActiveLeaf)
	}
}

// A model whose tokenizer counts 3× what tiktoken counts gets a window a
// third of the size in tiktoken tokens, so the budget holds in its tokens.
func TestTokenBudgetIsCalibratedToTheModel(t *testing.T) {
	h := newHarness(t)
	h.model.promptRatio = 3
	long := strings.Repeat("word ", 60)
	h.update(time.Second, workflows.TurnRequest{TurnID: "t-1", Question: "first " + long})
	second := h.update(2*time.Second, workflows.TurnRequest{TurnID: "t-2", Question: "second " + long})
	in := h.input(workflows.Limits{IdleTTL: time.Hour})
	in.Config = json.RawMessage(`{"windowStrategy": "token_limit", "maxTokens": 300}`)
	h.env.ExecuteWorkflow(workflows.SessionWorkflowName, in)

	if r := h.state(t).TokenRatio["qwen2.5:0.5b"]; r < 3 || r > 3.05 {
		t.Fatalf("ratio = %v, want 3", r)
	}
	// Uncalibrated, both rounds (~190 tokens) fit in 300; calibrated, the
	// budget is 100 and only the new question fits.
	load := second.result.Steps[0]
	if fmt.Sprint(load.Details["trimmedCount"]) != "2" {
		t.Errorf("turn 2 load step = %+v, want trimmedCount 2", load.Details)
	}
	if n := len(h.model.calls[1].Messages); n != 2 {
		t.Errorf("turn 2 saw %d messages, want system + question", n)
	}
}

// TestCalibrationComparesLikeWithLike is the property of issue 24: for
// any model whose tokenizer counts r times what tiktoken counts (0.25 ≤ r
// ≤ 8), once the session has seen it answer, every turn's window costs at
// most maxTokens in the model's tokens, and nothing is trimmed while the
// window fits. The turns are knowledge-base turns: the model's requests
// carry documents that the window does not hold. The ratio compares the
// model's count of a request with ctxflow's count of the same request; it
// compared the request with the window alone, and a model that counts as
// tiktoken does (r = 1) got a ratio of 3 and a third of its budget.
func TestCalibrationComparesLikeWithLike(t *testing.T) {
	doc := "GOOD " + strings.Repeat("The phone's battery lasts two days. ", 15)
	rapid.Check(t, func(rt *rapid.T) {
		r := float64(rapid.IntRange(1, 32).Draw(rt, "quarters")) / 4
		maxTokens := rapid.IntRange(600, 1200).Draw(rt, "maxTokens")
		h := newQAHarness(t, &fakeKB{count: 3, any: []string{doc, doc + " Also."}}, &scriptedRewrites{})
		h.model.promptRatio = r
		var turns []*outcome
		for i := range 5 {
			words := rapid.IntRange(1, int(float64(maxTokens)/r/8)).Draw(rt, fmt.Sprint("words", i))
			q := fmt.Sprintf("How long does battery %d last %s?", i, strings.Repeat("really ", words))
			turns = append(turns, h.update(time.Duration(i+1)*time.Second, workflows.TurnRequest{TurnID: fmt.Sprint("t-", i), Question: q}))
		}
		in := h.input(workflows.Limits{IdleTTL: time.Hour})
		in.Config = json.RawMessage(fmt.Sprintf(`{"windowStrategy": "token_limit", "maxTokens": %d}`, maxTokens))
		h.env.ExecuteWorkflow(workflows.SessionWorkflowName, in)

		if got := h.state(t).TokenRatio["qwen2.5:0.5b"]; got < r || got > r+0.05 {
			rt.Fatalf("ratio = %v, want %v", got, r)
		}
		for i, o := range turns {
			if o.result.Status != workflows.TurnCompleted || len(o.result.RetrievedDocs) == 0 {
				rt.Fatalf("turn %d = %+v", i, o.result)
			}
			if i == 0 {
				continue // not calibrated yet
			}
			d := o.result.Steps[0].Details
			before, after, trimmed := d["tokensBefore"].(int), d["tokensAfter"].(int), d["trimmedCount"].(int)
			if float64(after)*r > float64(maxTokens) {
				rt.Fatalf("turn %d: window of %d tokens is %.0f of the model's, over %d", i, after, float64(after)*r, maxTokens)
			}
			if float64(before+2)*r <= float64(maxTokens) && trimmed > 0 {
				rt.Fatalf("turn %d: %d messages trimmed though the window (%d tokens, %.0f of the model's) fits %d", i, trimmed, before, float64(before)*r, maxTokens)
			}
		}
	})
}

// TestLostWorkersDoNotSpendTheModelsAttempts: a model call cut short by a
// lost worker six times (heartbeat timeouts, more than 1 + maxRetries) is
// tried again, and the turn completes once a worker stays.
func TestLostWorkersDoNotSpendTheModelsAttempts(t *testing.T) {
	h := newHarness(t)
	lost := 0
	h.env.OnActivity("Generate", mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.GenerateInput) (activities.GenerateResult, error) {
		if in.Attempts != workflows.DefaultSessionConfig().MaxRetries+1 {
			t.Errorf("Generate's own attempts = %d", in.Attempts)
		}
		if lost < 6 {
			lost++
			return activities.GenerateResult{}, temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_HEARTBEAT, nil)
		}
		return activities.GenerateResult{Answer: "answer after the losses", Model: "fake"}, nil
	})
	o := h.update(time.Second, workflows.TurnRequest{TurnID: "t-1", Question: "hello?"})
	h.env.ExecuteWorkflow(workflows.SessionWorkflowName, h.input(workflows.Limits{IdleTTL: time.Hour}))
	if o.result.Status != workflows.TurnCompleted || o.result.Answer != "answer after the losses" || lost != 6 {
		t.Fatalf("result = %+v after %d lost attempts", o.result, lost)
	}
}

// TestFastModelRunsInTheWorkflowTask: once the model has answered fast,
// its calls run in the turn's workflow task; a call that fails there for a
// transient reason is made again as an activity, a permanent failure is
// not.
func TestFastModelRunsInTheWorkflowTask(t *testing.T) {
	h := newHarness(t)
	var turns []*outcome
	for i := range 5 {
		turns = append(turns, h.update(time.Duration(i+1)*time.Second, workflows.TurnRequest{TurnID: fmt.Sprintf("t-%d", i), Question: fmt.Sprintf("q%d", i)}))
	}
	h.env.RegisterDelayedCallback(func() { h.model.next = []error{errors.New("connection reset")} }, 2500*time.Millisecond)
	h.env.RegisterDelayedCallback(func() {
		h.model.next = []error{&activities.ModelError{StatusCode: 404, Message: `model "m" not found`}}
	}, 3500*time.Millisecond)
	statuses := h.statuses()
	h.env.ExecuteWorkflow(workflows.SessionWorkflowName, h.input(workflows.Limits{IdleTTL: time.Hour, FastModel: 500 * time.Millisecond}))

	// A turn that leaves the workflow task shows "running": the first (no
	// answer time yet) and the third (made again as an activity, which may
	// retry for a while); the others end in the task they start in.
	if got, want := strings.Join(*statuses, ","), "idle,running,idle,idle,running,idle,idle,idle"; got != want {
		t.Errorf("statuses published %s, want %s", got, want)
	}

	inTask := func(r workflows.TurnResult) any {
		for _, st := range r.Steps {
			if st.Name == "generate" {
				return st.Details["inWorkflowTask"]
			}
		}
		return nil
	}
	for i, tc := range []struct {
		status string
		inTask bool
	}{
		{workflows.TurnCompleted, false}, // no answer time yet
		{workflows.TurnCompleted, true},
		{workflows.TurnCompleted, false}, // "connection reset" in the task, answered as an activity
		{workflows.TurnFailed, true},     // 404 in the task: not called again
		{workflows.TurnCompleted, true},
	} {
		r := turns[i].result
		if r.Status != tc.status || inTask(r) != tc.inTask {
			t.Errorf("turn %d: status %s, in the workflow task %v; want %s, %v (%+v)", i, r.Status, inTask(r), tc.status, tc.inTask, r)
		}
	}
	if got := len(h.model.calls); got != 6 {
		t.Errorf("model called %d times, want 6 (one a turn, one more for the transient failure)", got)
	}
	if ms, ok := h.state(t).ModelMS[workflows.DefaultSessionConfig().LLMModel]; !ok || ms >= 500 {
		t.Errorf("answer time %v (%v), want a fast one", ms, ok)
	}
}

// statuses records the CtxStatus values the session publishes, in order.
func (h *harness) statuses() *[]string {
	var out []string
	h.env.OnUpsertTypedSearchAttributes(mock.Anything).Run(func(args mock.Arguments) {
		if v, ok := args.Get(0).(temporal.SearchAttributes).GetKeyword(workflows.SAttrStatus); ok {
			out = append(out, v)
		}
	}).Return(nil)
	return &out
}

// TestBurstOfFastTurnsPublishesOnceASecond: quiet turns less than a
// second after the last published status defer theirs; a timer publishes
// the last of them when the burst ends, and a turn that comes later
// publishes at once.
func TestBurstOfFastTurnsPublishesOnceASecond(t *testing.T) {
	h := newHarness(t)
	at := []time.Duration{time.Second, 2 * time.Second, 2100 * time.Millisecond, 2200 * time.Millisecond, 2300 * time.Millisecond, 5 * time.Second}
	var turns []*outcome
	for i, d := range at {
		turns = append(turns, h.update(d, workflows.TurnRequest{TurnID: fmt.Sprintf("t-%d", i), Question: fmt.Sprintf("q%d", i)}))
	}
	var published []string
	h.env.OnUpsertTypedSearchAttributes(mock.Anything).Run(func(args mock.Arguments) {
		sa := args.Get(0).(temporal.SearchAttributes)
		status, _ := sa.GetKeyword(workflows.SAttrStatus)
		n, _ := sa.GetInt64(workflows.SAttrTurns)
		published = append(published, fmt.Sprintf("%s %d", status, n))
	}).Return(nil)
	h.env.ExecuteWorkflow(workflows.SessionWorkflowName, h.input(workflows.Limits{IdleTTL: time.Hour, FastModel: 500 * time.Millisecond}))

	for i, o := range turns {
		if o.result.Status != workflows.TurnCompleted {
			t.Errorf("turn %d: %+v", i, o.result)
		}
	}
	// Start; t-0 runs (no answer time yet); t-1 a second later publishes;
	// t-2…t-4 wait for the timer (3 s), which publishes 5 turns; t-5 at 5 s
	// publishes at once.
	want := []string{"idle 0", "running 0", "idle 1", "idle 2", "idle 5", "idle 6"}
	if !slices.Equal(published, want) {
		t.Errorf("published %q, want %q", published, want)
	}
}

// TestTurnAnsweredInALostTaskGoesOn: a fast model's turn is one workflow
// task; a worker lost after it stored the answer, before the task
// completed, leaves the question and answer in the transcript, and the
// next worker makes the turn again. The turn is then complete and the next
// one follows its answer. An old repeat elsewhere in the tree moves nothing.
func TestTurnAnsweredInALostTaskGoesOn(t *testing.T) {
	h := newHarness(t)
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, m := range []convo.Message{
		{ID: "t-1.u", Role: convo.RoleUser, Content: "first", CreatedAt: at},
		{ID: "t-1.a", ParentID: "t-1.u", Role: convo.RoleAssistant, Content: "stored answer", CreatedAt: at},
		{ID: "old.u", Role: convo.RoleUser, Content: "old", CreatedAt: at},
		{ID: "old.a", ParentID: "old.u", Role: convo.RoleAssistant, Content: "old answer", CreatedAt: at},
	} {
		if _, _, err := h.store.Append(context.Background(), h.key, m); err != nil {
			t.Fatal(err)
		}
	}
	first := h.update(time.Second, workflows.TurnRequest{TurnID: "t-1", Question: "first"})
	second := h.update(2*time.Second, workflows.TurnRequest{TurnID: "t-2", Question: "second"})
	old := h.update(3*time.Second, workflows.TurnRequest{TurnID: "old", Question: "old"})
	h.env.ExecuteWorkflow(workflows.SessionWorkflowName, h.input(workflows.Limits{IdleTTL: time.Hour}))

	if r := first.result; r.Status != workflows.TurnCompleted || r.Answer != "stored answer" {
		t.Errorf("first turn = %+v", r)
	}
	if r := second.result; r.Status != workflows.TurnCompleted || r.Answer != "answer 1 to: second" {
		t.Errorf("second turn = %+v", r)
	}
	if m, ok, err := h.store.Get(context.Background(), h.key, "t-2.u"); err != nil || !ok || m.ParentID != "t-1.a" {
		t.Errorf("the second question hangs below %q (%v %v), want t-1.a", m.ParentID, ok, err)
	}
	if r := old.result; r.Status != workflows.TurnCompleted || r.Answer != "old answer" {
		t.Errorf("old repeat = %+v", r)
	}
	if st := h.state(t); st.Turns != 2 || st.ActiveLeaf != "t-2.a" {
		t.Errorf("state: %d turns, leaf %q; want 2 and t-2.a", st.Turns, st.ActiveLeaf)
	}
}

// TestTurnsOfALostTaskAreAdoptedInOrder: a workflow task ran three turns'
// local activities and was lost — l1 and l2 answered, l3 asked — and the
// turns come again in another order, with a new one among them (as the
// server re-delivers updates after a lost speculative task). Every turn is
// answered once and counted, the transcript stays one chain in the order
// the lost task stored it, and the model is asked only what was never
// answered.
func TestTurnsOfALostTaskAreAdoptedInOrder(t *testing.T) {
	for _, order := range [][]string{{"l2", "x", "l3", "l1"}, {"x", "l1", "l2", "l3"}, {"l3", "l1", "x", "l2"}, {"l1", "l2", "l3", "x"}} {
		t.Run(strings.Join(order, ","), func(t *testing.T) { lostTaskTurns(t, order) })
	}
}

func lostTaskTurns(t *testing.T, order []string) {
	h := newHarness(t)
	first := h.update(time.Second, workflows.TurnRequest{TurnID: "t0", Question: "first"})
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	h.env.RegisterDelayedCallback(func() { // the lost task's work, below t0's answer
		parent := "t0.a"
		for _, id := range []string{"l1", "l2", "l3"} {
			msgs := []convo.Message{{ID: id + ".u", ParentID: parent, Role: convo.RoleUser, Content: "lost " + id, CreatedAt: at, Meta: map[string]string{"turnId": id}}}
			if id != "l3" {
				msgs = append(msgs, convo.Message{ID: id + ".a", ParentID: id + ".u", Role: convo.RoleAssistant, Content: "stored answer to " + id, CreatedAt: at})
			}
			for _, m := range msgs {
				if _, _, err := h.store.Append(context.Background(), h.key, m); err != nil {
					t.Error(err)
				}
				parent = m.ID
			}
		}
	}, 2*time.Second)
	outs := map[string]*outcome{}
	for i, id := range order {
		q := "lost " + id
		if id == "x" {
			q = "new question"
		}
		outs[id] = h.update(3*time.Second+time.Duration(i)*time.Millisecond, workflows.TurnRequest{TurnID: id, Question: q})
	}
	h.env.ExecuteWorkflow(workflows.SessionWorkflowName, h.input(workflows.Limits{IdleTTL: time.Hour}))

	if first.result.Status != workflows.TurnCompleted {
		t.Fatalf("first turn: %+v", first.result)
	}
	want := map[string]string{
		"l1": "stored answer to l1", "l2": "stored answer to l2",
		"l3": "answer 2 to: lost l3", "x": "answer 3 to: new question",
	}
	for id, o := range outs {
		if o.err != nil || o.result.Status != workflows.TurnCompleted || o.result.Answer != want[id] {
			t.Errorf("turn %s: %v %s %q, want %q", id, o.err, o.result.Status, o.result.Answer, want[id])
		}
	}
	if q := h.model.questions(); !slices.Equal(q, []string{"first", "lost l3", "new question"}) {
		t.Errorf("the model was asked %q", q)
	}
	all, err := h.store.All(context.Background(), h.key)
	if err != nil {
		t.Fatal(err)
	}
	parent := ""
	for i, id := range []string{"t0.u", "t0.a", "l1.u", "l1.a", "l2.u", "l2.a", "l3.u", "l3.a", "x.u", "x.a"} {
		if i >= len(all) || all[i].ID != id || all[i].ParentID != parent {
			t.Fatalf("transcript %v: message %d is not %s below %q", ids(all), i, id, parent)
		}
		parent = id
	}
	st := h.state(t)
	if st.Turns != 5 || st.ActiveLeaf != "x.a" || st.Messages != 10 {
		t.Errorf("state: %d turns, leaf %q, %d messages; want 5, x.a, 10", st.Turns, st.ActiveLeaf, st.Messages)
	}
	var recent []string
	for _, r := range st.Recent {
		recent = append(recent, r.TurnID)
	}
	if !slices.Equal(recent, []string{"t0", "l1", "l2", "l3", "x"}) {
		t.Errorf("recent turns %v, want them in the transcript's order", recent)
	}
}

func ids(msgs []convo.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.ID
	}
	return out
}

// TestSummaryStoredByALostTaskIsAdopted: a summary record below the
// session's leaf that the session never heard of (its summarize ran, its
// result did not reach the session) becomes the running summary, and the
// next question hangs below it instead of beside it.
func TestSummaryStoredByALostTaskIsAdopted(t *testing.T) {
	var sess *activities.Session
	store := newStore(t)
	h := newHarnessWith(t, store, func(s *activities.Session, _ *testsuite.TestWorkflowEnvironment) { sess = s })
	in := h.inputTwoRounds()
	cfg, err := workflows.DefaultSessionConfig().Merge(in.Config)
	if err != nil {
		t.Fatal(err)
	}
	h.update(time.Second, workflows.TurnRequest{TurnID: "t-0", Question: "q0"})
	h.update(2*time.Second, workflows.TurnRequest{TurnID: "t-1", Question: "q1"})
	h.env.RegisterDelayedCallback(func() {
		_, err := sess.Summarize(context.Background(), activities.SummarizeInput{
			Session: h.key, LeafID: "t-1.a", Window: cfg.Window(), Config: cfg.Summary(), Force: true,
		})
		if err != nil {
			t.Error(err)
		}
	}, 2500*time.Millisecond)
	third := h.update(3*time.Second, workflows.TurnRequest{TurnID: "t-2", Question: "q2"})
	h.env.ExecuteWorkflow(workflows.SessionWorkflowName, in)

	if third.result.Status != workflows.TurnCompleted {
		t.Fatalf("third turn: %+v", third.result)
	}
	if m, ok, err := h.store.Get(context.Background(), h.key, "t-2.u"); err != nil || !ok || m.ParentID != "t-1.a.s" {
		t.Errorf("the third question hangs below %q (%v %v), want the summary record t-1.a.s", m.ParentID, ok, err)
	}
	if st := h.state(t); st.Summary == nil || st.Turns != 3 || st.ActiveLeaf == "" {
		t.Errorf("state: summary %+v, %d turns, leaf %q", st.Summary, st.Turns, st.ActiveLeaf)
	} else if b, err := h.store.Branch(context.Background(), h.key, st.ActiveLeaf); err != nil || !slices.ContainsFunc(b, func(m convo.Message) bool { return m.ID == "t-1.a.s" }) {
		t.Errorf("the active branch %v (%v) leaves out the adopted summary", ids(b), err)
	}
	if view := h.model.calls[2].Messages; len(view) < 2 || !strings.Contains(view[1].Content, "summary 1") {
		t.Errorf("the third turn's view has no summary: %+v", view)
	}
}
