package workflows

import (
	"cmp"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/convo"
)

// Steering and stop (issue 25, item 3): a question sent while a task runs
// may steer it, a continue may carry guidance, and a running turn may be
// cancelled.
const (
	// BusyEnqueue queues a question sent while a task runs (the default);
	// BusySteer gives it to the task as guidance at its next step;
	// BusyReject refuses it (409).
	BusyEnqueue = "enqueue"
	BusySteer   = "steer"
	BusyReject  = "reject"
	// TypeSteer is the type of a turn whose question went to a running
	// task as guidance.
	TypeSteer = "steer"
	// SignalSteer gives a task guidance ([Guidance]) for its next step.
	SignalSteer = "steer"
	// UpdateCancelTurn stops a queued or running turn of a session (its
	// argument is the turn id) and completes with the turn's result.
	UpdateCancelTurn = "cancel-turn"
	// steerChange gates steering and guided continues; cancelChange the
	// cancel of a running turn.
	steerChange  = "steer"
	cancelChange = "turn-cancel"
)

// Guidance is what a person tells a running task: it is appended to the
// task's transcript before its next step, so the next prompt holds it.
type Guidance struct {
	// TurnID is the turn that carried it.
	TurnID string `json:"turnId"`
	Text   string `json:"text"`
	// Step is the step it came before (set by the task).
	Step int `json:"step,omitempty"`
}

func validateBusy(b string) error {
	switch b {
	case "", BusyEnqueue, BusySteer, BusyReject:
		return nil
	}
	return fmt.Errorf("busy %q: want %q, %q or %q", convo.Clip(b, 20), BusyEnqueue, BusySteer, BusyReject)
}

// continueWith matches a continue that carries guidance: "继续，只看2024年",
// "continue: only 2024 orders".
var continueWith = regexp.MustCompile(`(?is)^\s*(?:请?继续|接着|continue|go on|keep going|carry on|resume)\s*[,，:：;；.。!！\-—]+\s*(\S.*)$`)

// continueBare matches a continue that carries nothing else: "继续",
// "continue", "go on.".
var continueBare = regexp.MustCompile(`(?is)^\s*(?:请?继续(?:说|写)?|接着(?:说|写)?|continue|go on|keep going|carry on|resume)\s*[.。!！]*\s*$`)

// continueCancelledChange: a bare continue right after a cancelled answer
// continues that answer (the model view shows it).
const continueCancelledChange = "continue-cancelled"

// stoppedAnswer is the cancelled answer a question continues: the answer
// at parent, when a recent turn was cancelled there, the question is a bare
// continue and no task is paused (whose continue it would be); "" else.
func (s *session) stoppedAnswer(ctx workflow.Context, req TurnRequest, parent string) string {
	if parent == "" || req.Kind != "" || !continueBare.MatchString(req.Question) || s.continuable() {
		return ""
	}
	for i := len(s.st.Recent) - 1; i >= 0; i-- {
		if r := s.st.Recent[i]; r.AssistantMessageID == parent {
			if r.Status != TurnCancelled || workflow.GetVersion(ctx, continueCancelledChange, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
				return ""
			}
			return parent
		}
	}
	return ""
}

// continueGuidance is the guidance of a continue that carries some.
func continueGuidance(q string) (string, bool) {
	m := continueWith.FindStringSubmatch(q)
	if m == nil {
		return "", false
	}
	return strings.TrimSpace(m[1]), true
}

// busyMode is what a question does while a task runs.
func (s *session) busyMode(req TurnRequest) string {
	return cmp.Or(req.Busy, s.st.Config.Busy, BusyEnqueue)
}

// taskRunning reports a task of the session that runs (or waits for an
// approval, after which it runs again).
func (s *session) taskRunning() bool {
	return s.st.Task != nil && (s.st.Task.Status == TaskRunning || s.st.Task.Status == TaskAwaiting)
}

// refuseBusy refuses a new question with busy=reject while the session
// works on another turn or a task runs.
func (s *session) refuseBusy(req TurnRequest) error {
	if req.Kind != "" || s.busyMode(req) != BusyReject {
		return nil
	}
	if seen, _ := s.st.Ledger.Seen(req.TurnID, req.Question); seen {
		return nil
	}
	switch {
	case s.current != nil:
		return activities.Permanent(activities.CodeConflict, fmt.Sprintf("session %s is busy with turn %s (busy=reject): send it later, or with busy steer or enqueue", s.key, s.current.TurnID), nil)
	case len(s.st.Pending) > 0 || s.taskRunning():
		return activities.Permanent(activities.CodeConflict, fmt.Sprintf("session %s is busy (busy=reject): send it later, or with busy steer or enqueue", s.key), nil)
	}
	return nil
}

// steer gives a question to the session's running task as guidance, in
// place of queueing it (busy=steer); it reports false when the question is
// queued as usual (no task runs, a repeat, the task ended meanwhile).
func (s *session) steer(ctx workflow.Context, req TurnRequest) (TurnResult, bool) {
	if req.Kind != "" || s.busyMode(req) != BusySteer || !s.taskRunning() || s.closing != nil {
		return TurnResult{}, false
	}
	if seen, _ := s.st.Ledger.Seen(req.TurnID, req.Question); seen {
		return TurnResult{}, false
	}
	if workflow.GetVersion(ctx, steerChange, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return TurnResult{}, false
	}
	t := *s.st.Task
	now := workflow.Now(ctx)
	s.st.Ledger.Add(req.TurnID, req.Question) // a repeat while the signal is on its way is one turn
	err := workflow.SignalExternalWorkflow(ctx, t.WorkflowID, "", SignalSteer, Guidance{TurnID: req.TurnID, Text: req.Question}).Get(ctx, nil)
	if err != nil { // the task ended: the question is an ordinary turn
		s.logger.Info("steering a task that ended: the question is queued", "task", t.TaskID, "turn", req.TurnID, "error", err)
		req.ReceivedAt = now
		s.st.Pending = append(s.st.Pending, req)
		return TurnResult{}, false
	}
	res := TurnResult{TurnID: req.TurnID, Status: TurnCompleted, Question: req.Question, Type: TypeSteer,
		Answer:     fmt.Sprintf("Guidance given to task %s: it reads it before its next step.", t.TaskID),
		ReceivedAt: now, CompletedAt: workflow.Now(ctx), SessionInfo: s.st.Info(),
		Steps: []Step{{Name: "steer", Status: "ok", Start: now, Details: map[string]any{"taskId": t.TaskID}}},
	}
	s.record(res)
	return res, true
}

// validateCancel refuses to cancel an unknown turn (404) or one that is
// done (409).
func (s *session) validateCancel(ctx workflow.Context, turnID string) error {
	r, ok := s.lookup(turnID)
	if !ok {
		return activities.Permanent(activities.CodeNotFound, fmt.Sprintf("turn %q not found in session %s", turnID, s.key), nil)
	}
	if r.Done() {
		return activities.Permanent(activities.CodeConflict, fmt.Sprintf("turn %s of session %s is %s: only a queued or running turn can be cancelled", turnID, s.key, r.Status), nil)
	}
	return nil
}

// onCancelTurn stops a turn: a queued one is dropped, a running one has
// its model call (or its task) cancelled and ends with what was written.
// It completes with the turn's result.
func (s *session) onCancelTurn(ctx workflow.Context, turnID string) (TurnResult, error) {
	workflow.GetVersion(ctx, cancelChange, workflow.DefaultVersion, 1)
	if i := slices.IndexFunc(s.st.Pending, func(p TurnRequest) bool { return p.TurnID == turnID }); i >= 0 {
		p := s.st.Pending[i]
		s.st.Pending = slices.Delete(s.st.Pending, i, i+1)
		now := workflow.Now(ctx)
		res := TurnResult{TurnID: turnID, Status: TurnCancelled, Question: p.Question, ReceivedAt: p.ReceivedAt, CompletedAt: now,
			Error: "cancelled while queued", SessionInfo: s.st.Info()}
		s.record(res)
		return res, nil
	}
	if s.current != nil && s.current.TurnID == turnID && s.cancelled != turnID {
		s.cancelled = turnID
		if s.stop != nil {
			s.stop(ctx)
		}
	}
	var res TurnResult
	err := workflow.Await(ctx, func() bool {
		r, _ := s.lookup(turnID)
		res = r
		return r.Done()
	})
	return res, err
}

// stoppable runs fn with a context that a cancel of the turn cancels.
func (s *session) stoppable(ctx workflow.Context, fn func(ctx workflow.Context) error) error {
	cctx, cancel := workflow.WithCancel(ctx)
	s.stop = func(workflow.Context) { cancel() }
	defer func() { s.stop = nil }()
	return fn(cctx)
}

// stopped reports a cancel of the turn being processed.
func (s *session) stopped(res *TurnResult) bool {
	return s.cancelled != "" && s.cancelled == res.TurnID
}

// partialAnswer is what a cancelled model call had written (the details
// of its cancellation).
func partialAnswer(err error) string {
	var ce *temporal.CanceledError
	var partial string
	if errors.As(err, &ce) && ce.HasDetails() && ce.Details(&partial) == nil {
		return strings.TrimSpace(partial)
	}
	return ""
}

// cancelTurn ends a cancelled turn: what the model wrote is kept as a
// cancelled message (the model does not see it afterwards), and the
// session goes on.
func (s *session) cancelTurn(ctx workflow.Context, req TurnRequest, cfg SessionConfig, lc activities.LoadContextResult, partial string, res *TurnResult) {
	res.Status, res.Answer, res.Error = TurnCancelled, partial, "cancelled"
	res.Steps = append(res.Steps, Step{Name: "cancelled", Status: "ok", Start: workflow.Now(ctx), Details: map[string]any{"partialChars": len(partial)}})
	s.st.Turns++
	if partial == "" {
		return
	}
	var saved activities.SaveAnswerResult
	err := workflow.ExecuteLocalActivity(s.localCtx(ctx, "save the cancelled answer"), sa.SaveAnswer, activities.SaveAnswerInput{
		Session: s.key, TurnID: req.TurnID, ParentID: lc.UserMessageID, Answer: partial, Model: cfg.LLMModel,
		CreatedAt: workflow.Now(ctx), Cancelled: true,
	}).Get(ctx, &saved)
	if err != nil {
		s.logger.Warn("cancelled answer not saved", "turn", req.TurnID, "error", err)
		return
	}
	res.AssistantMessageID = saved.MessageID
	s.st.ActiveLeaf, s.st.Messages = saved.MessageID, saved.Messages
}

// stopTaskOnCancel makes a cancel of the turn cancel the task it waits
// for (the task stops before its next step and the turn answers).
func (s *session) stopTaskOnCancel(workflowID string) {
	s.stop = func(ctx workflow.Context) {
		if err := workflow.SignalExternalWorkflow(ctx, workflowID, "", SignalCancel, nil).Get(ctx, nil); err != nil {
			s.logger.Info("cancel of a task that ended", "task", workflowID, "error", err)
		}
	}
}

// guide appends the guidance received since the last step to the task's
// transcript, so that the next step's prompt holds it.
func (t *task) guide(ctx workflow.Context) error {
	if len(t.guidance) == 0 {
		return nil
	}
	workflow.GetVersion(ctx, steerChange, workflow.DefaultVersion, 1)
	for len(t.guidance) > 0 {
		g := t.guidance[0]
		id := fmt.Sprintf("s%d.guide.%s", t.st.Step, g.TurnID)
		err := workflow.ExecuteLocalActivity(t.localCtx(ctx, "guidance"), agent.AppendTaskMessage, activities.AppendInput{
			Task: t.key, ID: id, ParentID: t.st.Leaf, Role: convo.RoleUser, Content: "Guidance from the user: " + g.Text,
		}).Get(ctx, nil)
		if err != nil {
			return err
		}
		t.guidance = t.guidance[1:]
		t.st.Leaf = id
		g.Step, g.Text = t.st.Step+1, convo.Clip(g.Text, 200)
		t.st.Guidance = append(t.st.Guidance, g)
	}
	return nil
}
