package workflows_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/ctxflow/ctxflow/workflows"
)

// slowActivity makes the named activity take d of workflow time (and do
// nothing), so that a test can send work while it runs.
func (h *harness) slowActivity(name string, d time.Duration) {
	h.env.OnActivity(name, mock.Anything, mock.Anything, mock.Anything).After(d).Return(nil)
}

// closeUpdate sends the close update (DELETE /v1/sessions/{id}) at delay.
func (h *harness) closeUpdate(delay time.Duration) *outcome {
	o := &outcome{}
	h.env.RegisterDelayedCallback(func() {
		h.env.UpdateWorkflow(workflows.UpdateClose, "close", &testsuite.TestUpdateCallback{
			OnAccept:   func() {},
			OnReject:   func(err error) { o.rejected, o.done = err, true },
			OnComplete: func(_ any, err error) { o.done, o.err = true, err },
		}, workflows.CloseRequest{Delete: true})
	}, delay)
	return o
}

// A turn that arrives while an idle run saves its snapshot is answered by
// that run: the run ends only when nothing is left to do.
func TestTurnArrivingWhileIdleRunEndsIsAnswered(t *testing.T) {
	h := newHarness(t)
	h.slowActivity("SaveSnapshot", 10*time.Second)
	h.update(time.Second, workflows.TurnRequest{TurnID: "t-1", Question: "first"})
	// The TTL expires at about 61 s; the snapshot takes until about 71 s.
	h.signal(66*time.Second, workflows.TurnRequest{TurnID: "t-2", Question: "during the snapshot"})
	late := h.update(67*time.Second, workflows.TurnRequest{TurnID: "t-3", Question: "also during it"})
	h.env.ExecuteWorkflow(workflows.SessionWorkflowName, h.input(workflows.Limits{IdleTTL: time.Minute}))

	if err := h.env.GetWorkflowError(); err != nil {
		t.Fatalf("workflow error: %v", err)
	}
	if got := strings.Join(h.model.questions(), ","); got != "first,during the snapshot,also during it" {
		t.Fatalf("model saw %q: a turn that arrived while the run ended was dropped", got)
	}
	if late.result.Status != workflows.TurnCompleted {
		t.Errorf("update during the snapshot = %+v", late.result)
	}
	if st := h.state(t); st.Turns != 3 || len(st.Pending) != 0 {
		t.Errorf("state turns=%d pending=%d", st.Turns, len(st.Pending))
	}
}

// DELETE waits for the deletion; turns accepted before it are answered
// first, and a turn that arrives while the transcript is deleted starts
// the session afresh instead of being dropped.
func TestDeleteAnswersEarlierTurnsAndRestartsForLaterOnes(t *testing.T) {
	h := newHarness(t)
	h.slowActivity("DeleteSession", 10*time.Second)
	before := h.update(time.Second, workflows.TurnRequest{TurnID: "t-1", Question: "before the delete"})
	closed := h.closeUpdate(time.Second + time.Millisecond)
	h.signal(5*time.Second, workflows.TurnRequest{TurnID: "t-2", Question: "after the delete"})
	refused := h.update(6*time.Second, workflows.TurnRequest{TurnID: "t-3", Question: "update after the delete"})
	h.env.ExecuteWorkflow(workflows.SessionWorkflowName, h.input(workflows.Limits{IdleTTL: time.Hour}))

	if before.result.Status != workflows.TurnCompleted {
		t.Errorf("turn before the delete = %+v", before.result)
	}
	if !closed.done || closed.err != nil || closed.rejected != nil {
		t.Errorf("close update = %+v", closed)
	}
	if refused.rejected == nil || !strings.Contains(refused.rejected.Error(), "being closed") {
		t.Errorf("an update turn during the close = %+v, want it refused", refused)
	}
	var can *workflow.ContinueAsNewError
	if !errors.As(h.env.GetWorkflowError(), &can) {
		t.Fatalf("workflow error = %v, want a continue-as-new that starts afresh", h.env.GetWorkflowError())
	}
	var next workflows.SessionInput
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
		t.Fatal(err)
	}
	if next.State != nil || len(next.Queued) != 1 || next.Queued[0].TurnID != "t-2" {
		t.Fatalf("next run = state %v, queued %+v; want a fresh session with t-2 queued", next.State, next.Queued)
	}
	if got := h.model.questions(); len(got) != 1 {
		t.Errorf("model saw %q: the turn after the delete ran in the deleted session", got)
	}
}

// A deleted session whose delete saw no later turn ends, marked deleted.
func TestDeleteEndsTheRunAsDeleted(t *testing.T) {
	h := newHarness(t)
	h.update(time.Second, workflows.TurnRequest{TurnID: "t-1", Question: "q"})
	closed := h.closeUpdate(2 * time.Second)
	h.env.ExecuteWorkflow(workflows.SessionWorkflowName, h.input(workflows.Limits{IdleTTL: time.Hour}))
	if err := h.env.GetWorkflowError(); err != nil || !closed.done || closed.err != nil {
		t.Fatalf("workflow error %v, close %+v", err, closed)
	}
	if st := h.state(t); st.Status != workflows.StatusDeleted {
		t.Errorf("status = %s, want deleted", st.Status)
	}
	if n := h.transcriptLen(t); n != 0 {
		t.Errorf("transcript has %d messages after the delete", n)
	}
}

// Turn ids stay idempotent for the session's life, beyond the results it
// keeps and across continue-as-new; a reused id with another question is
// refused.
func TestTurnIDsStayIdempotentForTheSessionsLife(t *testing.T) {
	h := newHarness(t)
	limits := workflows.Limits{IdleTTL: time.Hour, RecentTurns: 3}
	for i := range 6 {
		h.update(time.Duration(i+1)*time.Second, workflows.TurnRequest{TurnID: fmt.Sprintf("t%d", i), Question: fmt.Sprintf("q%d", i)})
	}
	again := h.update(20*time.Second, workflows.TurnRequest{TurnID: "t1", Question: "q1"})
	other := h.update(21*time.Second, workflows.TurnRequest{TurnID: "t1", Question: "another question"})
	h.signal(22*time.Second, workflows.TurnRequest{TurnID: "t2", Question: "another question by signal"})
	next := h.update(30*time.Second, workflows.TurnRequest{TurnID: "t6", Question: "q6"})
	h.env.ExecuteWorkflow(workflows.SessionWorkflowName, h.input(limits))

	if again.result.Status != workflows.TurnCompleted || again.result.Answer != "answer 2 to: q1" {
		t.Errorf("repeat of an old turn = %+v, want its first answer", again.result)
	}
	if other.rejected == nil || !strings.Contains(other.rejected.Error(), "already used") {
		t.Errorf("reused id with another question = %+v, want it refused", other)
	}
	if got := len(h.model.calls); got != 7 {
		t.Errorf("model called %d times, want 7 (no repeat ran again)", got)
	}
	st := h.state(t)
	if st.Turns != 7 || st.ActiveLeaf != "t6.a" {
		t.Errorf("turns=%d leaf=%s: a repeat moved the conversation", st.Turns, st.ActiveLeaf)
	}
	if next.result.SessionInfo.Messages != 14 {
		t.Errorf("messages = %d, want 14", next.result.SessionInfo.Messages)
	}
	if !st.Ledger.IsZero() {
		t.Error("the state query carries the ledger")
	}
	if _, err := h.env.QueryWorkflow(workflows.QueryTurn, "t0"); err == nil || !strings.Contains(err.Error(), "older than the last 3") {
		t.Errorf("query of an old turn: %v", err)
	}
}

func TestLedgerTravelsAcrossContinueAsNew(t *testing.T) {
	h := newHarness(t)
	h.update(time.Second, workflows.TurnRequest{TurnID: "t0", Question: "q0"})
	h.update(2*time.Second, workflows.TurnRequest{TurnID: "t1", Question: "q1"})
	h.env.ExecuteWorkflow(workflows.SessionWorkflowName, h.input(workflows.Limits{IdleTTL: time.Hour, ContinueAsNewEvery: 2}))
	var can *workflow.ContinueAsNewError
	if !errors.As(h.env.GetWorkflowError(), &can) {
		t.Fatalf("workflow error = %v", h.env.GetWorkflowError())
	}
	var next workflows.SessionInput
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"t0", "t1"} {
		if seen, same := next.State.Ledger.Seen(id, "q"+id[1:]); !seen || !same {
			t.Errorf("ledger carried across continue-as-new lacks %s", id)
		}
	}

	// The next run refuses t0 with another question and repeats it as is.
	h2 := newHarnessWith(t, h.store)
	reused := h2.update(time.Second, workflows.TurnRequest{TurnID: "t0", Question: "changed"})
	h2.env.ExecuteWorkflow(workflows.SessionWorkflowName, next)
	if reused.rejected == nil {
		t.Errorf("reused id after continue-as-new = %+v, want refused", reused)
	}
	if len(h2.model.calls) != 0 {
		t.Errorf("model called %d times", len(h2.model.calls))
	}
}

func TestSubmitValidatesAgainstTheSessionConfig(t *testing.T) {
	h := newHarness(t)
	o := &outcome{}
	h.env.RegisterDelayedCallback(func() {
		h.env.UpdateWorkflow(workflows.UpdateSubmit, "s", &testsuite.TestUpdateCallback{
			OnAccept: func() {}, OnReject: func(err error) { o.rejected, o.done = err, true },
			OnComplete: func(v any, err error) { o.done, o.err = true, err },
		}, workflows.TurnRequest{TurnID: "t1", Question: "q", Config: []byte(`{"maxRounds": 0}`)})
	}, time.Second)
	queued := &outcome{}
	h.env.RegisterDelayedCallback(func() {
		h.env.UpdateWorkflow(workflows.UpdateSubmit, "s2", &testsuite.TestUpdateCallback{
			OnAccept: func() {}, OnReject: func(err error) { queued.rejected, queued.done = err, true },
			OnComplete: func(v any, err error) {
				queued.done, queued.err = true, err
				queued.result, _ = v.(workflows.TurnResult)
			},
		}, workflows.TurnRequest{TurnID: "t2", Question: "q"})
	}, 2*time.Second)
	h.env.ExecuteWorkflow(workflows.SessionWorkflowName, h.input(workflows.Limits{IdleTTL: time.Hour}))
	if o.rejected == nil || !strings.Contains(o.rejected.Error(), "maxRounds") {
		t.Errorf("submit with a bad config = %+v, want refused", o)
	}
	if queued.result.Status != workflows.TurnQueued || queued.result.TurnID != "t2" {
		t.Errorf("submit = %+v, want queued at once", queued.result)
	}
	if len(h.model.calls) != 1 {
		t.Errorf("model called %d times", len(h.model.calls))
	}
}

func TestLedger(t *testing.T) {
	var l workflows.TurnLedger
	for i := range 1000 {
		l.Add(fmt.Sprintf("turn-%d", i), fmt.Sprintf("question %d", i))
	}
	l.Add("turn-5", "another") // the first question stays
	b, err := l.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 1000*12*4/3+8 {
		t.Errorf("1000 turns take %d bytes", len(b))
	}
	var back workflows.TurnLedger
	if err := back.UnmarshalJSON(b); err != nil {
		t.Fatal(err)
	}
	for i := range 1000 {
		seen, same := back.Seen(fmt.Sprintf("turn-%d", i), fmt.Sprintf("question %d", i))
		if !seen || !same {
			t.Fatalf("turn-%d: seen=%v same=%v", i, seen, same)
		}
	}
	if seen, same := back.Seen("turn-5", "another"); !seen || same {
		t.Errorf("turn-5 with another question: seen=%v same=%v", seen, same)
	}
	if seen, _ := back.Seen("turn-1000", ""); seen {
		t.Error("an unknown turn is seen")
	}
	if err := back.UnmarshalJSON([]byte(`"AAAA"`)); err == nil {
		t.Error("a truncated ledger decodes")
	}
}

// An idle session ends IdleTTL after its last turn, with one timer for each
// TTL it lives through, not one a turn: a timer left pending by each turn
// would add its event and, a TTL later, a workflow task to fire it.
func TestIdleExpiryTakesATimerATTL(t *testing.T) {
	h := newHarness(t)
	timers := 0
	h.env.SetOnTimerScheduledListener(func(string, time.Duration) { timers++ })
	start := h.env.Now()
	var outs []*outcome
	for i, at := range []time.Duration{time.Second, 20 * time.Minute, 40 * time.Minute, 59 * time.Minute, 90 * time.Minute} {
		outs = append(outs, h.update(at, workflows.TurnRequest{TurnID: fmt.Sprintf("t-%d", i), Question: fmt.Sprintf("q%d", i)}))
	}
	h.env.ExecuteWorkflow(workflows.SessionWorkflowName, h.input(workflows.Limits{IdleTTL: time.Hour}))

	if err := h.env.GetWorkflowError(); err != nil {
		t.Fatalf("workflow error: %v", err)
	}
	for i, o := range outs {
		if o.result.Status != workflows.TurnCompleted {
			t.Errorf("turn %d = %+v", i, o.result)
		}
	}
	// Timers: at the start (fires at 1 h, last turn at 59 min), rearmed for
	// 1 h 59 min (last turn at 90 min), rearmed for 2 h 30 min: expiry.
	if timers != 3 {
		t.Errorf("%d timers for 5 turns over 2.5 h of a 1 h TTL, want 3", timers)
	}
	if ended := h.env.Now().Sub(start); ended < 150*time.Minute || ended > 151*time.Minute {
		t.Errorf("the session ended %s after it started, want 1 h after the last turn (2 h 30 min)", ended)
	}
}
