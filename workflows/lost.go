package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/ctxflow/ctxflow/activities"
)

// A turn's local activities (store the question, call a fast model, store
// the answer) run inside its workflow task, and a task can be lost after
// they ran: a speculative task of an update is dropped without a trace
// when it fails, a timed-out one is failed. The turns then come again, the
// updates in whatever order the server re-delivers them — on a loaded
// machine, often another. The transcript holds the lost task's work; the
// session's state does not. A turn that ran next would hang its question
// below the state's stale leaf, beside the lost task's turns: a fork whose
// answered side branch no later model view sees, and turns answered but
// never counted.
//
// The same happens when a lost task's execution runs on for a while beside
// its successor, both storing turns (the first only until it tries to
// complete its task). So the question of a turn is stored only below a
// leaf (LoadContextInput.Linear, atomic in the store), and so is a summary
// record (SummarizeInput.Linear). Where the session's leaf has grown, the
// session adopts what grew there, in order: an answered turn is complete
// (counted, its answer the new leaf, its waiting caller answered), a
// summary record is the running summary, an unanswered turn runs next.
// Only then does the turn at hand go on, below the last of them.

// lostOutcome is what adopting a lost task's turns leaves to the turn at
// hand.
type lostOutcome int

const (
	lostRunNow   lostOutcome = iota // it runs now, below the adopted turns
	lostAnswered                    // it was among them, answered: res holds it
	lostRunLater                    // an unanswered lost turn runs first: both are queued again
)

// maxAdoptRounds bounds how often one turn adopts what grew below the
// leaf before it gives up (each round is a lost task's work).
const maxAdoptRounds = 8

// checkLost reports whether this run checks for a lost task's turns.
// Runs recorded before the check replay without it.
func (s *session) checkLost(ctx workflow.Context) bool {
	return workflow.GetVersion(ctx, "adopt-lost-turns", workflow.DefaultVersion, 1) >= 1
}

// adoptLost takes the lost turns into the session's state, in the order
// they were stored, and records them; messages is the transcript's length.
func (s *session) adoptLost(ctx workflow.Context, req TurnRequest, lost []activities.LostTurn, messages int, res *TurnResult) lostOutcome {
	s.logger.Warn("adopting the turns of a lost workflow task", "turn", req.TurnID, "lost", len(lost))
	s.st.Messages = messages
	out := lostRunNow
	for _, l := range lost {
		if l.Summary != nil { // a summary whose result the session never got
			sum := *l.Summary
			s.st.Summary, s.st.ActiveLeaf = &sum, sum.ID
			continue
		}
		if l.AnswerID == "" { // stored, not answered: it runs before anything else
			if l.TurnID != req.TurnID {
				next := []TurnRequest{s.takePending(l)}
				if out != lostAnswered { // the turn at hand follows it
					next, out = append(next, req), lostRunLater
				}
				s.st.Pending = append(next, s.st.Pending...)
			}
			break
		}
		now := workflow.Now(ctx)
		r := TurnResult{
			TurnID: l.TurnID, Question: l.Question, ReceivedAt: l.ReceivedAt, UserMessageID: l.UserMessageID,
			Steps: []Step{{Name: "adopt", Status: "ok", Start: now, Details: map[string]any{
				"reason": "answered in a workflow task that was lost; taken from the transcript"}}},
		}
		s.complete(&r, l.AnswerID, l.Answer)
		r.ActiveLeaf, r.CompletedAt, r.SessionInfo = s.st.ActiveLeaf, now, s.st.Info()
		if l.TurnID == req.TurnID {
			r.Steps = append(res.Steps, r.Steps...)
			*res = r
			out = lostAnswered
		} else {
			s.takePending(l)
		}
		s.record(r)
	}
	return out
}

// takePending removes a lost turn from the queue and returns its request;
// one not queued (its caller gone before the server delivered it again)
// is made from the transcript, so that its question is answered all the
// same.
func (s *session) takePending(l activities.LostTurn) TurnRequest {
	for i, p := range s.st.Pending {
		if p.TurnID == l.TurnID {
			s.st.Pending = append(s.st.Pending[:i:i], s.st.Pending[i+1:]...)
			return p
		}
	}
	if seen, _ := s.st.Ledger.Seen(l.TurnID, l.Question); !seen {
		s.st.Ledger.Add(l.TurnID, l.Question)
	}
	return TurnRequest{TurnID: l.TurnID, Question: l.Question, ReceivedAt: l.ReceivedAt}
}
