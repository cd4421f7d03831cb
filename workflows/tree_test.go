package workflows_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/activities/tiktoken"
	"github.com/ctxflow/ctxflow/convo"
	"github.com/ctxflow/ctxflow/workflows"
)

func (h *harness) parentOf(t *testing.T, id string) string {
	t.Helper()
	m, ok, err := h.store.Get(context.Background(), h.key, id)
	if err != nil || !ok {
		t.Fatalf("message %s: %v %v", id, ok, err)
	}
	return m.ParentID
}

// TestBranchAndEdit: a branch turn moves the active leaf and the next turn
// appends there; an edit asks beside the user message it replaces, and
// the old branch stays; an unknown message or an edit of an answer is
// refused without degrading the session.
func TestBranchAndEdit(t *testing.T) {
	h := newHarness(t)
	for i, q := range []string{"first", "second", "third"} {
		h.update(time.Duration(i+1)*time.Second, workflows.TurnRequest{TurnID: "t" + string(rune('0'+i)), Question: q})
	}
	branch := h.update(5*time.Second, workflows.TurnRequest{TurnID: "b1", Question: "branch", Kind: workflows.KindBranch, Target: "t0.a"})
	after := h.update(6*time.Second, workflows.TurnRequest{TurnID: "t3", Question: "fourth, beside second"})
	edit := h.update(7*time.Second, workflows.TurnRequest{TurnID: "t4", Question: "second, edited", EditOf: "t1.u"})
	unknown := h.update(8*time.Second, workflows.TurnRequest{TurnID: "b2", Question: "branch", Kind: workflows.KindBranch, Target: "nope"})
	editAnswer := h.update(9*time.Second, workflows.TurnRequest{TurnID: "t5", Question: "x", EditOf: "t0.a"})
	h.env.ExecuteWorkflow(workflows.SessionWorkflowName, h.input(workflows.Limits{IdleTTL: time.Hour}))

	if branch.result.Status != workflows.TurnCompleted || branch.result.ActiveLeaf != "t0.a" {
		t.Fatalf("branch = %+v", branch.result)
	}
	if after.result.Status != workflows.TurnCompleted || h.parentOf(t, "t3.u") != "t0.a" {
		t.Errorf("turn after the branch: %+v, parent %q", after.result, h.parentOf(t, "t3.u"))
	}
	if edit.result.Status != workflows.TurnCompleted || h.parentOf(t, "t4.u") != "t0.a" || edit.result.ActiveLeaf != "t4.a" {
		t.Errorf("edit: %+v, parent %q", edit.result, h.parentOf(t, "t4.u"))
	}
	if h.parentOf(t, "t2.u") != "t1.a" { // the old branch stays
		t.Errorf("t2.u moved")
	}
	for name, o := range map[string]*outcome{"unknown target": unknown, "edit of an answer": editAnswer} {
		if o.result.Status != workflows.TurnRejected || o.result.ErrorCode == "" {
			t.Errorf("%s: %+v", name, o.result)
		}
	}
	if unknown.result.ErrorCode != activities.CodeNotFound || editAnswer.result.ErrorCode != activities.CodeInvalidArgument {
		t.Errorf("codes: %q, %q", unknown.result.ErrorCode, editAnswer.result.ErrorCode)
	}
	st := h.state(t)
	if st.Health != workflows.HealthOK || st.Turns != 5 || st.ActiveLeaf != "t4.a" {
		t.Errorf("state: health %s, turns %d, leaf %s", st.Health, st.Turns, st.ActiveLeaf)
	}
	// The model saw the edited branch: first, its answer, the edit.
	last := h.model.calls[len(h.model.calls)-1].Messages
	var seen []string
	for _, m := range last {
		seen = append(seen, m.Content)
	}
	if got := strings.Join(seen, "|"); !strings.HasSuffix(got, "first|answer 1 to: first|second, edited") {
		t.Errorf("model view of the edit: %s", got)
	}
}

// seedSource writes a finished two-turn session into the store.
func seedSource(t *testing.T, h *harness, src activities.SessionKey) []convo.Message {
	t.Helper()
	msgs := []convo.Message{
		{ID: "t0.u", Role: convo.RoleUser, Content: "first", Meta: map[string]string{"turnId": "t0"}},
		{ID: "t0.a", ParentID: "t0.u", Role: convo.RoleAssistant, Content: "one"},
		{ID: "t1.u", ParentID: "t0.a", Role: convo.RoleUser, Content: "second", Meta: map[string]string{"turnId": "t1"}},
		{ID: "t1.a", ParentID: "t1.u", Role: convo.RoleAssistant, Content: "two"},
	}
	for _, m := range msgs {
		if _, _, err := h.store.Append(context.Background(), src, m); err != nil {
			t.Fatal(err)
		}
	}
	return msgs
}

// TestForkSeedsANewSession: a fork copies the branch up to the message, its
// turns count and are in the ledger (a reused id with another question is
// refused), and the next turn appends below the fork point.
func TestForkSeedsANewSession(t *testing.T) {
	h := newHarness(t)
	src := activities.SessionKey{Tenant: "t1", SessionID: "src"}
	seedSource(t, h, src)
	fork := h.update(time.Second, workflows.TurnRequest{TurnID: "f", Question: "fork", Kind: workflows.KindImport,
		Import: &workflows.TranscriptImport{From: &src, Through: "t0.a"}})
	again := h.update(2*time.Second, workflows.TurnRequest{TurnID: "f2", Question: "fork", Kind: workflows.KindImport,
		Import: &workflows.TranscriptImport{From: &src, Through: "t1.a"}})
	reused := h.update(3*time.Second, workflows.TurnRequest{TurnID: "t0", Question: "not first"})
	next := h.update(4*time.Second, workflows.TurnRequest{TurnID: "t2", Question: "after the fork"})
	h.env.ExecuteWorkflow(workflows.SessionWorkflowName, h.input(workflows.Limits{IdleTTL: time.Hour}))

	if fork.result.Status != workflows.TurnCompleted || fork.result.ActiveLeaf != "t0.a" {
		t.Fatalf("fork = %+v", fork.result)
	}
	if again.rejected == nil || !strings.Contains(again.rejected.Error(), "already exists") {
		t.Errorf("a second seed = %+v", again)
	}
	if reused.rejected == nil {
		t.Errorf("a forked turn id reused for another question = %+v, want it refused", reused.result)
	}
	if next.result.Status != workflows.TurnCompleted || h.parentOf(t, "t2.u") != "t0.a" {
		t.Errorf("next turn: %+v", next.result)
	}
	if _, ok, _ := h.store.Get(context.Background(), h.key, "t1.u"); ok {
		t.Error("the fork copied past its message")
	}
	if st := h.state(t); st.Turns != 2 || st.Messages != 4 {
		t.Errorf("state: turns %d, messages %d", st.Turns, st.Messages)
	}
	// Forking at a message the source lacks is refused: not found.
	h2 := newHarness(t)
	bad := h2.update(time.Second, workflows.TurnRequest{TurnID: "f", Question: "fork", Kind: workflows.KindImport,
		Import: &workflows.TranscriptImport{From: &src, Through: "nope"}})
	h2.env.ExecuteWorkflow(workflows.SessionWorkflowName, h2.input(workflows.Limits{IdleTTL: time.Hour}))
	if bad.result.Status != workflows.TurnRejected || bad.result.ErrorCode != activities.CodeNotFound {
		t.Errorf("fork at an unknown message = %+v", bad.result)
	}
}

// TestImportSeedsANewSession: an uploaded JSONL transcript becomes the
// session, its last message the active leaf; a file that changed after it
// was accepted is refused.
func TestImportSeedsANewSession(t *testing.T) {
	h := newHarness(t)
	var buf bytes.Buffer
	src := seedSource(t, h, activities.SessionKey{Tenant: "t1", SessionID: "src"})
	src[0].Tokens, src[1].Tokens = 1_000_000_000_000, 0 // a file's counts are not trusted
	if err := convo.EncodeJSONL(&buf, src); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "session.jsonl")
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(buf.Bytes())
	imp := h.update(time.Second, workflows.TurnRequest{TurnID: "i", Question: "import", Kind: workflows.KindImport,
		Import: &workflows.TranscriptImport{Path: path, SHA256: hex.EncodeToString(sum[:])}})
	next := h.update(2*time.Second, workflows.TurnRequest{TurnID: "t2", Question: "third"})
	h.env.ExecuteWorkflow(workflows.SessionWorkflowName, h.input(workflows.Limits{IdleTTL: time.Hour}))
	if imp.result.Status != workflows.TurnCompleted || imp.result.ActiveLeaf != "t1.a" || h.parentOf(t, "t2.u") != "t1.a" || next.result.Status != workflows.TurnCompleted {
		t.Fatalf("import %+v, next %+v", imp.result, next.result)
	}
	last := h.model.calls[len(h.model.calls)-1].Messages
	if len(last) < 5 || last[len(last)-5].Content != "first" {
		t.Errorf("the next turn's view lacks the imported turns: %+v", last)
	}
	tok, err := tiktoken.New("cl100k_base")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range src[:2] {
		got, _, err := h.store.Get(context.Background(), h.key, m.ID)
		if want := convo.MessageTokens(tok, got); err != nil || got.Tokens != want {
			t.Errorf("imported %s counts %d tokens, want ctxflow's count %d (%v)", m.ID, got.Tokens, want, err)
		}
	}

	h2 := newHarness(t)
	changed := h2.update(time.Second, workflows.TurnRequest{TurnID: "i", Question: "import", Kind: workflows.KindImport,
		Import: &workflows.TranscriptImport{Path: path, SHA256: strings.Repeat("0", 64)}})
	h2.env.ExecuteWorkflow(workflows.SessionWorkflowName, h2.input(workflows.Limits{IdleTTL: time.Hour}))
	if changed.result.Status != workflows.TurnRejected || changed.result.ErrorCode != activities.CodeDocumentChanged || h2.transcriptLen(t) != 0 {
		t.Errorf("import of a changed file = %+v", changed.result)
	}
}

// TestSummaryIsBranchAware: after a compression, a turn on the branch
// uses the summary; after a branch move to a message the summary does not
// cover as a prefix, the next turn's view has no summary, and the model
// sees no folded message of the other branch.
func TestSummaryIsBranchAware(t *testing.T) {
	h := newHarness(t)
	for i := range 3 {
		h.update(time.Duration(i+1)*time.Second, workflows.TurnRequest{TurnID: "t" + string(rune('0'+i)), Question: "question " + string(rune('0'+i))})
	}
	h.env.RegisterDelayedCallback(func() { h.env.SignalWorkflow(workflows.SignalCompress, nil) }, 10*time.Second)
	onBranch := h.update(20*time.Second, workflows.TurnRequest{TurnID: "t3", Question: "on the branch"})
	h.update(30*time.Second, workflows.TurnRequest{TurnID: "b", Question: "branch", Kind: workflows.KindBranch, Target: "t0.u"})
	elsewhere := h.update(40*time.Second, workflows.TurnRequest{TurnID: "t4", Question: "beside t0's answer"})
	h.env.ExecuteWorkflow(workflows.SessionWorkflowName, h.input(workflows.Limits{IdleTTL: time.Hour}))

	used := func(r workflows.TurnResult) any { return r.Steps[0].Details["summaryUsed"] }
	if onBranch.result.Status != workflows.TurnCompleted || used(onBranch.result) != true {
		t.Fatalf("turn on the summarised branch: %+v", onBranch.result.Steps)
	}
	if elsewhere.result.Status != workflows.TurnCompleted || used(elsewhere.result) != false {
		t.Fatalf("turn on another branch used a summary: %+v", elsewhere.result.Steps)
	}
	last := h.model.calls[len(h.model.calls)-1].Messages
	var seen []string
	for _, m := range last {
		seen = append(seen, m.Content)
	}
	if got := strings.Join(seen, "|"); strings.Contains(got, "summary") || strings.Contains(got, "question 1") || !strings.HasSuffix(got, "question 0|beside t0's answer") {
		t.Errorf("model view on the other branch: %s", got)
	}
}

// TestImportWithAnInnerLeafBranchesThere: an import may name a leaf that
// has children in the file; the next question branches off there instead
// of taking the children over as a lost task's turns.
func TestImportWithAnInnerLeafBranchesThere(t *testing.T) {
	h := newHarness(t)
	var buf bytes.Buffer
	if err := convo.EncodeJSONL(&buf, seedSource(t, h, activities.SessionKey{Tenant: "t1", SessionID: "src"})); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "session.jsonl")
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(buf.Bytes())
	h.update(time.Second, workflows.TurnRequest{TurnID: "i", Question: "import", Kind: workflows.KindImport,
		Import: &workflows.TranscriptImport{Path: path, SHA256: hex.EncodeToString(sum[:]), Leaf: "t0.a"}})
	next := h.update(2*time.Second, workflows.TurnRequest{TurnID: "t2", Question: "instead of the second"})
	after := h.update(3*time.Second, workflows.TurnRequest{TurnID: "t3", Question: "then"})
	h.env.ExecuteWorkflow(workflows.SessionWorkflowName, h.input(workflows.Limits{IdleTTL: time.Hour}))
	if next.result.Status != workflows.TurnCompleted || h.parentOf(t, "t2.u") != "t0.a" || h.parentOf(t, "t3.u") != "t2.a" {
		t.Fatalf("after the import: %+v; t2.u below %q, t3.u below %q", next.result, h.parentOf(t, "t2.u"), h.parentOf(t, "t3.u"))
	}
	if st := h.state(t); st.Turns != after.result.SessionInfo.Turns || st.ActiveLeaf != "t3.a" {
		t.Errorf("state: %d turns, leaf %q", st.Turns, st.ActiveLeaf)
	}
}
