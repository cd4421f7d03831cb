package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/convo"
)

// Conversation trees (seed 004): a branch turn moves the active leaf, an
// edit asks a question again beside an earlier one, an import turn fills a
// new session with another's branch (fork) or an imported transcript. They
// run in the turn queue, so they are ordered with the turns around them
// and idempotent by turn id like them.

// locate finds a message of the session (a not_found failure if none).
func (s *session) locate(ctx workflow.Context, res *TurnResult, step, id string) (activities.MessageRef, error) {
	var ref activities.MessageRef
	err := s.step(ctx, res, step, func() (map[string]any, error) {
		err := workflow.ExecuteLocalActivity(s.localCtx(ctx, "find message "+id), sa.Locate, s.key, id).Get(ctx, &ref)
		return map[string]any{"messageId": id, "from": s.st.ActiveLeaf}, err
	})
	return ref, err
}

// branchTo is a branch turn: the next turn appends below req.Target.
func (s *session) branchTo(ctx workflow.Context, req TurnRequest, res *TurnResult) {
	if _, err := s.locate(ctx, res, "branch", req.Target); err != nil {
		s.refuse(res, "branch", err)
		return
	}
	s.st.ActiveLeaf, s.st.LeafMoved = req.Target, true
	res.Status = TurnCompleted
}

// editParent is the parent of an edited question: that of the user
// message it replaces.
func (s *session) editParent(ctx workflow.Context, req TurnRequest, res *TurnResult) (string, error) {
	ref, err := s.locate(ctx, res, "edit", req.EditOf)
	if err != nil {
		return "", err
	}
	if ref.Role != convo.RoleUser {
		return "", activities.Permanent(activities.CodeInvalidArgument, fmt.Sprintf("message %s is a %s message: only a user message can be edited", req.EditOf, ref.Role), nil)
	}
	return ref.ParentID, nil
}

// importTranscript is an import turn (KindImport): the new session gets
// the messages, the active leaf and the turn ids (in its ledger) of the
// fork or the import.
func (s *session) importTranscript(ctx workflow.Context, req TurnRequest, res *TurnResult) {
	if s.st.ActiveLeaf != "" || s.st.Messages > 0 { // a seed that came as a signal
		res.Status, res.ErrorCode = TurnRejected, activities.CodeConflict
		res.Error = "session " + s.key.String() + " already has messages: fork or import into a new session id"
		return
	}
	sd := req.Import
	var out activities.SeedResult
	summary := "import a transcript"
	if sd.From != nil {
		summary = fmt.Sprintf("fork %s at %s", sd.From, sd.Through)
	}
	err := s.step(ctx, res, "seed", func() (map[string]any, error) {
		err := workflow.ExecuteActivity(s.activityCtx(ctx, summary, 5*time.Minute, 5), sa.Seed, activities.SeedInput{
			Session: s.key, From: sd.From, Through: sd.Through, Path: sd.Path, SHA256: sd.SHA256, Leaf: sd.Leaf,
		}).Get(ctx, &out)
		return map[string]any{"leaf": out.Leaf, "messages": out.Messages, "turns": len(out.Turns)}, err
	})
	if err != nil {
		s.refuse(res, "seed", err)
		return
	}
	for _, t := range out.Turns {
		s.st.Ledger.addHashed(t.TurnID, t.QuestionHash)
	}
	s.st.ActiveLeaf, s.st.Messages, s.st.Turns = out.Leaf, out.Messages, out.Answered
	// An import may name a leaf with children of its own: the next
	// question branches off there, as after a move.
	s.st.LeafMoved = true
	res.Status = TurnCompleted
}

// fresh reports a session with nothing in it yet: the only kind a seed
// turn may fill.
func (s *session) fresh() bool {
	return s.st.ActiveLeaf == "" && s.st.Turns == 0 && s.st.Messages == 0 && len(s.st.Pending) == 0 && s.current == nil
}
