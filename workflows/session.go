package workflows

import (
	"encoding/json"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/ctxflow/ctxflow/activities"
)

// Search attributes of a session (registered by `ctxflow dev` and the worker).
var (
	SAttrTenant     = temporal.NewSearchAttributeKeyKeyword("CtxTenant")
	SAttrStatus     = temporal.NewSearchAttributeKeyKeyword("CtxStatus")
	SAttrTurns      = temporal.NewSearchAttributeKeyInt64("CtxTurns")
	SAttrLastIntent = temporal.NewSearchAttributeKeyKeyword("CtxLastIntent")
	SAttrTopic      = temporal.NewSearchAttributeKeyKeyword("CtxTopic")
	SAttrUpdatedAt  = temporal.NewSearchAttributeKeyTime("CtxUpdatedAt")
)

// CloseRequest is the payload of the close signal.
type CloseRequest struct {
	// Delete removes the transcript and snapshot too (DELETE /v1/sessions/{id}).
	Delete bool `json:"delete"`
}

// TurnSteps is one turn's trace, as the steps query returns it.
type TurnSteps struct {
	TurnID string `json:"turnId"`
	Status string `json:"status"`
	Steps  []Step `json:"steps"`
}

var sa *activities.Session // method references only: workflows never call ports directly

// SessionWorkflow is one conversation. Turns arrive as signals or updates,
// run one at a time in arrival order, and never get dropped; the session
// continues as new every Limits.ContinueAsNewEvery turns (or when the server
// suggests it) and ends cleanly after Limits.IdleTTL without turns.
func SessionWorkflow(ctx workflow.Context, in SessionInput) error {
	s, err := newSession(ctx, in)
	if err != nil {
		return err
	}
	// Handlers first: an update that came with the start is delivered in
	// the first workflow task, before anything may block.
	if err := s.setup(ctx); err != nil {
		return err
	}
	if in.State == nil {
		if err := s.revive(ctx); err != nil {
			return err
		}
	}
	return s.run(ctx)
}

type session struct {
	st          SessionState
	limits      Limits
	key         activities.SessionKey
	current     *TurnResult // the turn being processed
	currentKind string      // its kind
	quiet       bool        // the turn being processed has not published "running" (oneTaskTurn)
	// Status writes of quiet turns in a burst (see publishLater).
	coalesce     bool            // since the change "coalesce-status"
	published    time.Time       // when the status was last published
	unpublished  bool            // a quiet turn's status waits for flush
	flush        workflow.Future // the timer that publishes it, nil for none
	closing      *CloseRequest
	closed       bool          // the close request is done (the transcript deleted)
	afterClose   []TurnRequest // turns that came after the close request
	turnUpdates  int           // turn updates whose callers wait
	compress     bool
	summaryDue   bool // the last turn left the history over the summary threshold
	turnsThisRun int
	logger       log.Logger
	traces       map[string]any // turn id → the span its update came with (see TraceContextKey)

	turnCh, continueCh, compressCh, closeCh, taskCh workflow.ReceiveChannel
	// events are task events not yet consumed by the turn waiting for them.
	events []TaskEvent
	// cancelled is the turn a cancel stopped; stop, while set, stops the
	// step the running turn is in (its model call, its task).
	cancelled string
	stop      func(workflow.Context)
}

func newSession(ctx workflow.Context, in SessionInput) (*session, error) {
	s := &session{
		limits: in.Limits.withDefaults(),
		key:    activities.SessionKey{Tenant: in.Tenant, SessionID: in.SessionID},
		logger: log.With(workflow.GetLogger(ctx), "tenant", in.Tenant, "session", in.SessionID),
	}
	if err := s.limits.Validate(); err != nil {
		return nil, activities.Permanent(activities.CodeInvalidArgument, "invalid limits", err)
	}
	if in.State != nil {
		s.st = *in.State
		s.st.Runs++
		s.seedLedger()
		return s, nil
	}
	cfg, err := DefaultSessionConfig().Merge(in.Config)
	if err != nil {
		return nil, activities.Permanent(activities.CodeInvalidArgument, "invalid session config", err)
	}
	now := workflow.Now(ctx)
	s.st = SessionState{
		Tenant: in.Tenant, SessionID: in.SessionID, Title: in.Title, Config: cfg,
		Status: StatusIdle, Health: HealthOK, CreatedAt: now, UpdatedAt: now,
	}
	for _, req := range in.Queued {
		s.enqueue(ctx, req)
	}
	return s, nil
}

// seedLedger records the turns of a state carried from before the ledger
// existed, so that they stay idempotent.
func (s *session) seedLedger() {
	for _, r := range s.st.Recent {
		s.st.Ledger.Add(r.TurnID, r.Question)
	}
	for _, p := range s.st.Pending {
		s.st.Ledger.Add(p.TurnID, p.Question)
	}
}

// revive replaces a fresh session's state with the snapshot its last run
// left (a session that ended idle), keeping turns queued meanwhile.
func (s *session) revive(ctx workflow.Context) error {
	revived, err := s.loadSnapshot(ctx)
	if err != nil || revived == nil {
		return err
	}
	queued := s.st.Pending
	s.st = *revived
	s.st.Runs++
	s.st.Status = StatusIdle
	s.seedLedger()
	for _, req := range queued {
		if seen, _ := s.st.Ledger.Seen(req.TurnID, req.Question); !seen {
			s.st.Ledger.Add(req.TurnID, req.Question)
			s.st.Pending = append(s.st.Pending, req)
		}
	}
	s.logger.Info("session revived from snapshot", "turns", s.st.Turns, "queued", len(queued))
	return nil
}

func (s *session) loadSnapshot(ctx workflow.Context) (*SessionState, error) {
	var snap activities.Snapshot
	err := workflow.ExecuteLocalActivity(s.localCtx(ctx, "load snapshot"), sa.LoadSnapshot, s.key).Get(ctx, &snap)
	if err != nil {
		return nil, fmt.Errorf("revive session %s: %w", s.key, err)
	}
	if !snap.Found {
		return nil, nil
	}
	var st SessionState
	if err := json.Unmarshal(snap.State, &st); err != nil {
		s.logger.Warn("ignoring unreadable snapshot", "error", err)
		return nil, nil
	}
	return &st, nil
}

func (s *session) setup(ctx workflow.Context) error {
	s.turnCh = workflow.GetSignalChannel(ctx, SignalTurn)
	s.continueCh = workflow.GetSignalChannel(ctx, SignalContinue)
	s.compressCh = workflow.GetSignalChannel(ctx, SignalCompress)
	s.closeCh = workflow.GetSignalChannel(ctx, SignalClose)
	s.taskCh = workflow.GetSignalChannel(ctx, SignalTaskEvent)

	if err := workflow.SetQueryHandler(ctx, QueryState, func() (SessionState, error) {
		st := s.st
		st.Ledger = TurnLedger{}
		return st, nil
	}); err != nil {
		return fmt.Errorf("set state query: %w", err)
	}
	if err := workflow.SetQueryHandler(ctx, QuerySteps, s.steps); err != nil {
		return fmt.Errorf("set steps query: %w", err)
	}
	if err := workflow.SetQueryHandler(ctx, QueryTurn, func(turnID string) (TurnResult, error) {
		if r, ok := s.lookup(turnID); ok {
			return r, nil
		}
		if seen, _ := s.st.Ledger.Seen(turnID, ""); seen {
			return TurnResult{}, fmt.Errorf("turn %q of session %s is older than the last %d turn results the session keeps: its question and answer are the messages %s and %s of the transcript",
				turnID, s.key, s.limits.RecentTurns, activities.UserMessageID(turnID), activities.AssistantMessageID(turnID))
		}
		return TurnResult{}, fmt.Errorf("turn %q not found in session %s", turnID, s.key)
	}); err != nil {
		return fmt.Errorf("set turn query: %w", err)
	}
	validate := workflow.UpdateHandlerOptions{Validator: s.validateTurn}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateTurn, s.onTurnUpdate, validate); err != nil {
		return fmt.Errorf("set turn update: %w", err)
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateSubmit, s.onSubmit, validate); err != nil {
		return fmt.Errorf("set submit update: %w", err)
	}
	if err := workflow.SetUpdateHandler(ctx, UpdateClose, s.onClose); err != nil {
		return fmt.Errorf("set close update: %w", err)
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateCancelTurn, s.onCancelTurn, workflow.UpdateHandlerOptions{Validator: s.validateCancel}); err != nil {
		return fmt.Errorf("set cancel-turn update: %w", err)
	}

	if workflow.GetVersion(ctx, "one-receiver", workflow.DefaultVersion, 1) >= 1 {
		workflow.Go(ctx, s.receive)
	} else { // runs recorded before it had a coroutine a channel
		s.receiveEach(ctx)
	}

	workflow.SetCurrentDetails(ctx, s.details())
	return s.publish(ctx)
}

// signal is a signal channel of the session and what takes one signal from
// it: Receive on the channel with the context of the coroutine that takes
// it, then the signal's effect on the session.
type signal struct {
	ch   workflow.ReceiveChannel
	take func(ctx workflow.Context, c workflow.ReceiveChannel)
}

// signals are the session's signal channels in the order runs before
// "one-receiver" started their coroutines.
func (s *session) signals() []signal {
	return []signal{
		{s.turnCh, func(ctx workflow.Context, c workflow.ReceiveChannel) {
			var req TurnRequest
			c.Receive(ctx, &req)
			s.enqueue(ctx, req)
		}},
		{s.continueCh, func(ctx workflow.Context, c workflow.ReceiveChannel) {
			var id string
			c.Receive(ctx, &id)
			s.continueSignal(ctx, id)
		}},
		{s.taskCh, func(ctx workflow.Context, c workflow.ReceiveChannel) {
			var ev TaskEvent
			c.Receive(ctx, &ev)
			s.taskEvent(ev)
		}},
		{s.compressCh, func(ctx workflow.Context, c workflow.ReceiveChannel) {
			c.Receive(ctx, nil)
			s.compress = true
		}},
		{s.closeCh, func(ctx workflow.Context, c workflow.ReceiveChannel) {
			var req CloseRequest
			c.Receive(ctx, &req)
			s.requestClose(req)
		}},
	}
}

// receive takes the session's signals as they come, in one coroutine. The
// workflow's dispatcher wakes every coroutine each time it runs (several
// times a workflow task: once for the task and once for each local
// activity's result), and each that is still blocked yields again (the
// SDK walks the coroutine's stack each time): one coroutine for the five
// channels instead of one each cut that work by half to two thirds a chat
// turn (docs/benchmarks.md).
func (s *session) receive(ctx workflow.Context) {
	sel := workflow.NewSelector(ctx)
	for _, sig := range s.signals() {
		sel.AddReceive(sig.ch, func(c workflow.ReceiveChannel, _ bool) { sig.take(ctx, c) })
	}
	for {
		sel.Select(ctx)
	}
}

// receiveEach is receive as runs before "one-receiver" did it: a coroutine
// a channel.
func (s *session) receiveEach(ctx workflow.Context) {
	for _, sig := range s.signals() {
		workflow.Go(ctx, func(ctx workflow.Context) {
			for {
				sig.take(ctx, sig.ch)
			}
		})
	}
}

// run is the session's main loop: continue-as-new when due (once no caller
// waits), else the next turn, then compression, then close, then idle expiry.
// A run ends only in the workflow task that finds nothing left to do: a turn
// that arrives while it saves its snapshot keeps it going.
func (s *session) run(ctx workflow.Context) error {
	idle := newIdleTimer(ctx, s.limits.IdleTTL)
	s.coalesce = workflow.GetVersion(ctx, "coalesce-status", workflow.DefaultVersion, 1) >= 1
	canContinue := func() bool { return s.continueAsNewDue(ctx) && workflow.AllHandlersFinished(ctx) }
	if idle.each { // these runs went round the loop, a timer each time, until the handlers finished
		canContinue = func() bool { return s.continueAsNewDue(ctx) }
	}
	for {
		ok, err := idle.await(func() bool {
			return len(s.st.Pending) > 0 || s.compress || s.closing != nil || canContinue() || s.flushDue()
		})
		if err != nil {
			return err
		}
		switch {
		case s.continueAsNewDue(ctx) && workflow.AllHandlersFinished(ctx):
			// Queued signal turns travel with the state; update turns have
			// waiting callers, so they are finished first.
			s.drainSignals(ctx)
			s.logger.Info("continuing as new", "turns", s.st.Turns, "run", s.st.Runs, "pending", len(s.st.Pending))
			st := s.st
			return workflow.NewContinueAsNewError(ctx, SessionWorkflow, SessionInput{
				Tenant: s.key.Tenant, SessionID: s.key.SessionID, State: &st, Limits: s.limits,
			})
		case len(s.st.Pending) > 0:
			s.processNext(ctx)
		case s.flushDue():
			s.publishDeferred(ctx)
		case s.compress:
			s.compress = false
			var trace TurnResult
			s.summarize(ctx, true, &trace)
			s.logger.Info("compressed on request", "steps", trace.Steps)
			if err := s.publish(ctx); err != nil {
				s.logger.Warn("publish status", "error", err)
			}
		case s.closing != nil:
			return s.close(ctx)
		case !ok:
			if s.drainSignals(ctx) {
				continue
			}
			if err := s.saveSnapshot(ctx); err != nil {
				return err
			}
			if s.busy(ctx) {
				s.logger.Info("work arrived while the idle session saved its snapshot: going on")
				continue
			}
			s.logger.Info("session idle, run ended", "ttl", s.limits.IdleTTL)
			return nil
		}
	}
}

// idleTimer waits for work, or for IdleTTL without any, with one timer a
// TTL instead of one a wait: the SDK's AwaitWithTimeout leaves its timer
// pending when the condition comes true, so each turn added a timer event
// and, a TTL later, a workflow task to fire it. Runs recorded before this
// wait as they did.
type idleTimer struct {
	ctx   workflow.Context
	ttl   time.Duration
	each  bool            // a timer a wait (runs before "idle-timer")
	timer workflow.Future // the pending timer, nil for none
}

func newIdleTimer(ctx workflow.Context, ttl time.Duration) *idleTimer {
	each := workflow.GetVersion(ctx, "idle-timer", workflow.DefaultVersion, 1) == workflow.DefaultVersion
	return &idleTimer{ctx: ctx, ttl: ttl, each: each}
}

// await returns true once ready() holds, false after a TTL without it.
func (t *idleTimer) await(ready func() bool) (bool, error) {
	if t.each {
		return workflow.AwaitWithTimeout(t.ctx, t.ttl, ready)
	}
	deadline := workflow.Now(t.ctx).Add(t.ttl)
	yielded := false
	for {
		if t.timer == nil {
			t.timer = workflow.NewTimerWithOptions(t.ctx, deadline.Sub(workflow.Now(t.ctx)), workflow.TimerOptions{Summary: "idle expiry"})
		}
		// The other coroutines run first, as in AwaitWithTimeout: an update
		// handler whose turn is done returns before the loop goes on.
		if err := workflow.Await(t.ctx, func() bool {
			if !yielded {
				yielded = true
				return false
			}
			return ready() || t.timer.IsReady()
		}); err != nil {
			return false, err
		}
		if ready() {
			return true, nil
		}
		// The timer fired: the TTL is over, or it was set in an earlier
		// wait and is rearmed for the rest of this one.
		err := t.timer.Get(t.ctx, nil)
		t.timer = nil
		if err != nil {
			return false, err
		}
		if !workflow.Now(t.ctx).Before(deadline) {
			return false, nil
		}
	}
}

func (s *session) continueAsNewDue(ctx workflow.Context) bool {
	return s.turnsThisRun >= s.limits.ContinueAsNewEvery || workflow.GetInfo(ctx).GetContinueAsNewSuggested()
}

// busy reports work that arrived while the run was about to end: signals
// not yet received (moved into the state), queued turns, a compression, a
// close, or a caller waiting in an update handler.
func (s *session) busy(ctx workflow.Context) bool {
	return s.drainSignals(ctx) || len(s.st.Pending) > 0 || s.compress || s.closing != nil || !workflow.AllHandlersFinished(ctx)
}

// drainSignals moves signals not yet received into the session's state, so
// that nothing is lost when the run ends. It reports whether any turn came in.
func (s *session) drainSignals(ctx workflow.Context) bool {
	got := false
	for {
		var req TurnRequest
		if !s.turnCh.ReceiveAsync(&req) {
			break
		}
		got = s.enqueue(ctx, req) || got
	}
	for s.compressCh.ReceiveAsync(nil) {
		s.compress = true
	}
	var id string
	for s.continueCh.ReceiveAsync(&id) {
		s.continueSignal(ctx, id)
	}
	var ev TaskEvent
	for s.taskCh.ReceiveAsync(&ev) {
		s.taskEvent(ev)
	}
	var cr CloseRequest
	for s.closeCh.ReceiveAsync(&cr) {
		s.requestClose(cr)
	}
	return got || s.compress
}

// requestClose records a close request; the first one decides.
func (s *session) requestClose(req CloseRequest) {
	if s.closing == nil {
		s.closing = &req
	}
}

// onClose is the close update: it returns once the session is closed (its
// transcript deleted when asked), so that DELETE answers when it is done.
func (s *session) onClose(ctx workflow.Context, req CloseRequest) error {
	s.requestClose(req)
	return workflow.Await(ctx, func() bool { return s.closed })
}

// close ends the session once the turns accepted before the close request
// are answered (they run first) and no turn caller waits: it deletes the
// transcript (or saves a snapshot), then ends the run. Turns that came after
// the request start the session afresh, in a new run, instead of being
// dropped.
func (s *session) close(ctx workflow.Context) error {
	if err := workflow.Await(ctx, func() bool { return s.turnUpdates == 0 }); err != nil {
		return err
	}
	if s.closing.Delete {
		if err := workflow.ExecuteActivity(s.activityCtx(ctx, "delete transcript", time.Minute, 5), sa.DeleteSession, s.key).Get(ctx, nil); err != nil {
			return fmt.Errorf("delete session %s: %w", s.key, err)
		}
		s.st.Status = StatusDeleted
	} else {
		if err := s.saveSnapshot(ctx); err != nil {
			return err
		}
		s.st.Status = StatusClosed
	}
	s.st.UpdatedAt = workflow.Now(ctx)
	s.closed = true
	if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
		return err
	}
	s.drainSignals(ctx)
	s.logger.Info("session closed", "deleted", s.closing.Delete, "turns after the close", len(s.afterClose))
	if err := s.publish(ctx); err != nil {
		s.logger.Warn("publish status", "error", err)
	}
	if len(s.afterClose) == 0 {
		return nil
	}
	cfg, err := json.Marshal(s.st.Config)
	if err != nil {
		return fmt.Errorf("encode config of %s: %w", s.key, err)
	}
	return workflow.NewContinueAsNewError(ctx, SessionWorkflow, SessionInput{
		Tenant: s.key.Tenant, SessionID: s.key.SessionID, Title: s.st.Title, Config: cfg, Limits: s.limits, Queued: s.afterClose,
	})
}

func (s *session) saveSnapshot(ctx workflow.Context) error {
	raw, err := json.Marshal(s.st)
	if err != nil {
		return fmt.Errorf("encode snapshot of %s: %w", s.key, err)
	}
	err = workflow.ExecuteActivity(s.activityCtx(ctx, "save snapshot", time.Minute, 5), sa.SaveSnapshot, s.key, json.RawMessage(raw)).Get(ctx, nil)
	if err != nil {
		return fmt.Errorf("save snapshot of %s: %w", s.key, err)
	}
	return nil
}

// validateTurn is the validator of the turn and submit updates: a turn is
// refused before it reaches history when it is malformed, when the session
// is closing, or when its id was used for another question.
func (s *session) validateTurn(ctx workflow.Context, req TurnRequest) error {
	if s.closing != nil {
		return activities.Permanent(activities.CodeConflict, "session "+s.key.String()+" is being closed: send the turn again once it is (it then starts a new session)", nil)
	}
	if err := ValidateTurn(req, s.st.Config, s.limits); err != nil {
		return activities.Permanent(activities.CodeInvalidArgument, err.Error(), nil)
	}
	if err := s.refuseBusy(req); err != nil {
		return err
	}
	if seen, _ := s.st.Ledger.Seen(req.TurnID, req.Question); req.Kind == KindImport && !seen && !s.fresh() {
		return activities.Permanent(activities.CodeConflict, "session "+s.key.String()+" already exists: fork or import into a new session id", nil)
	}
	if req.Kind == KindContinue {
		switch seen, _ := s.st.Ledger.Seen(req.TurnID, req.Question); {
		case seen: // a repeat: answered as the first was
		case !s.continuable():
			return activities.Permanent(activities.CodeConflict, "session "+s.key.String()+" has no paused task to continue", nil)
		case s.continueQueued():
			// One pause, one continue: the first resumes the task, the
			// others would each resume it again after its next pause.
			return activities.Permanent(activities.CodeConflict, "session "+s.key.String()+": a continue of its paused task is already queued", nil)
		}
	}
	if seen, same := s.st.Ledger.Seen(req.TurnID, req.Question); seen && !same {
		return activities.Permanent(activities.CodeConflict, fmt.Sprintf("turn id %q was already used in session %s for another question: use a new turn id", req.TurnID, s.key), nil)
	}
	return nil
}

// enqueue queues a turn unless its id was seen (idempotency: a repeat runs
// nothing). It reports whether the turn is new. A signal turn whose id was
// used for another question is dropped with a warning (an update turn is
// refused by its validator).
func (s *session) enqueue(ctx workflow.Context, req TurnRequest) bool {
	if seen, same := s.st.Ledger.Seen(req.TurnID, req.Question); seen {
		if !same {
			s.logger.Warn("turn id reused for another question: ignored", "turn", req.TurnID)
		}
		return false
	}
	req.ReceivedAt = workflow.Now(ctx)
	if s.closing != nil {
		// The session is being closed: the turn starts its next life.
		for _, a := range s.afterClose {
			if a.TurnID == req.TurnID {
				return false
			}
		}
		s.afterClose = append(s.afterClose, req)
		return true
	}
	s.st.Ledger.Add(req.TurnID, req.Question)
	s.st.Pending = append(s.st.Pending, req)
	if span := ctx.Value(TraceContextKey{}); span != nil {
		if s.traces == nil {
			s.traces = map[string]any{}
		}
		s.traces[req.TurnID] = span
	}
	return true
}

// onTurnUpdate queues a turn and waits for its result.
func (s *session) onTurnUpdate(ctx workflow.Context, req TurnRequest) (TurnResult, error) {
	s.turnUpdates++
	defer func() { s.turnUpdates-- }()
	if res, ok := s.steer(ctx, req); ok {
		return res, nil
	}
	s.enqueue(ctx, req)
	if _, ok := s.lookup(req.TurnID); !ok {
		return s.archivedTurn(ctx, req.TurnID)
	}
	var res TurnResult
	err := workflow.Await(ctx, func() bool {
		r, _ := s.lookup(req.TurnID)
		res = r
		return r.Done()
	})
	return res, err
}

// onSubmit queues a turn and returns at once with where it stands (the
// API's asynchronous turns: validated like an update, answered like a
// signal).
func (s *session) onSubmit(ctx workflow.Context, req TurnRequest) (TurnResult, error) {
	if res, ok := s.steer(ctx, req); ok {
		return res, nil
	}
	s.enqueue(ctx, req)
	if r, ok := s.lookup(req.TurnID); ok {
		return r, nil
	}
	return s.archivedTurn(ctx, req.TurnID)
}

// archivedTurn is the result of a repeated turn older than the results the
// session keeps, read back from the transcript.
func (s *session) archivedTurn(ctx workflow.Context, turnID string) (TurnResult, error) {
	var t activities.StoredTurn
	err := workflow.ExecuteLocalActivity(s.localCtx(ctx, "read turn "+turnID), sa.LoadTurn, s.key, turnID).Get(ctx, &t)
	if err != nil {
		return TurnResult{}, fmt.Errorf("read turn %s of %s: %w", turnID, s.key, err)
	}
	res := TurnResult{TurnID: turnID, Status: TurnFailed, Question: t.Question, UserMessageID: t.UserMessageID,
		AssistantMessageID: t.AssistantMessageID, Answer: t.Answer, SessionInfo: s.st.Info(), Error: "the turn has no answer in the transcript"}
	if t.AssistantMessageID != "" {
		res.Status, res.Error = TurnCompleted, ""
	}
	return res, nil
}

// lookup finds a turn by id among the running, queued and recent turns.
func (s *session) lookup(turnID string) (TurnResult, bool) {
	if s.current != nil && s.current.TurnID == turnID {
		return *s.current, true
	}
	for _, p := range s.st.Pending {
		if p.TurnID == turnID {
			return TurnResult{TurnID: turnID, Status: TurnQueued, Question: p.Question, ReceivedAt: p.ReceivedAt}, true
		}
	}
	for i := len(s.st.Recent) - 1; i >= 0; i-- {
		if s.st.Recent[i].TurnID == turnID {
			return s.st.Recent[i], true
		}
	}
	return TurnResult{}, false
}

func (s *session) steps() ([]TurnSteps, error) {
	out := make([]TurnSteps, 0, len(s.st.Recent)+1)
	for _, r := range s.st.Recent {
		out = append(out, TurnSteps{TurnID: r.TurnID, Status: r.Status, Steps: r.Steps})
	}
	if s.current != nil {
		out = append(out, TurnSteps{TurnID: s.current.TurnID, Status: s.current.Status, Steps: s.current.Steps})
	}
	return out, nil
}

// processNext runs the oldest queued turn to a final result.
func (s *session) processNext(ctx workflow.Context) {
	req := s.st.Pending[0]
	s.st.Pending = s.st.Pending[1:]
	span, traced := s.traces[req.TurnID]
	if traced { // the turn joins its caller's trace
		ctx = workflow.WithValue(ctx, TraceContextKey{}, span)
		delete(s.traces, req.TurnID)
	}
	s.current = &TurnResult{TurnID: req.TurnID, Status: TurnRunning, Question: req.Question, ReceivedAt: req.ReceivedAt}
	s.currentKind = req.Kind
	s.st.Status = StatusRunning
	if s.quiet = s.oneTaskTurn(ctx, req); !s.quiet {
		if err := s.publish(ctx); err != nil {
			s.logger.Warn("publish status", "error", err)
		}
	}

	outcome := s.runTurn(ctx, req, s.current)
	completed := workflow.Now(ctx)
	if outcome == lostRunNow {
		s.current.ActiveLeaf = s.st.ActiveLeaf
		res := *s.current
		res.CompletedAt = completed
		recordTurn(ctx, &res)
		res.SessionInfo = s.st.Info()
		s.record(res)
	} else if outcome == lostRunLater && traced { // queued again behind a lost task's turn
		s.traces[req.TurnID] = span
	} // (lostAnswered: recorded with the lost task's turns, see adoptLost)
	s.current, s.cancelled = nil, ""
	if s.summaryDue { // after the answer is out: the caller does not wait for it
		s.summaryDue = false
		s.summarize(ctx, false, &s.st.Recent[len(s.st.Recent)-1])
	}
	s.st.Status = StatusIdle
	s.st.UpdatedAt = completed
	if s.quiet && s.publishLater(ctx) {
		return
	}
	if err := s.publish(ctx); err != nil {
		s.logger.Warn("publish status", "error", err)
	}
}

// statusEvery is how often a session in a burst of quiet turns publishes
// its status (see publishLater).
const statusEvery = time.Second

// publishLater defers the status of a quiet turn (a fast model's: the
// published status never left "idle", only the turn count, the time, the
// intent and the topic changed) when the last was published less than
// statusEvery ago, and reports whether it did. In a burst of fast turns a
// session then writes its search attributes about once a second instead
// of once a turn: each write is a visibility task, which took a seventh of
// the CPU of a turn on the embedded server (docs/benchmarks.md). A timer
// publishes what is left when the burst ends; a turn that arrives later
// than that publishes at once, as before. Runs started before the change
// "coalesce-status" publish every turn.
func (s *session) publishLater(ctx workflow.Context) bool {
	now := workflow.Now(ctx)
	if !s.coalesce || now.Sub(s.published) >= statusEvery {
		return false
	}
	s.unpublished = true
	if s.flush == nil {
		s.flush = workflow.NewTimerWithOptions(ctx, s.published.Add(statusEvery).Sub(now), workflow.TimerOptions{Summary: "publish status"})
	}
	return true
}

// flushDue reports a deferred status whose timer fired.
func (s *session) flushDue() bool { return s.flush != nil && s.flush.IsReady() }

// publishDeferred publishes the status a quiet turn deferred, once its
// timer fired (nothing when a later publish wrote it already).
func (s *session) publishDeferred(ctx workflow.Context) {
	if err := s.flush.Get(ctx, nil); err != nil {
		s.logger.Warn("status timer", "error", err)
	}
	s.flush = nil
	if !s.unpublished {
		return
	}
	if err := s.publish(ctx); err != nil {
		s.logger.Warn("publish status", "error", err)
	}
}

// record keeps a turn's result among the recent ones.
func (s *session) record(res TurnResult) {
	s.st.Recent = append(s.st.Recent, res)
	if n := len(s.st.Recent) - s.limits.RecentTurns; n > 0 {
		s.st.Recent = append([]TurnResult(nil), s.st.Recent[n:]...)
	}
	s.turnsThisRun++
}

// oneTaskTurn reports a chat or qa turn of a fast model (Limits.FastModel):
// a chat turn ends in the workflow task that starts it, so the "running"
// status it would publish first is never seen — an event and a visibility
// write a turn for nothing. A turn that leaves the workflow task after all
// (the qa route's child workflow, a turn on a slower model) publishes it
// then (leavingTask), as does one whose fast call fails and is made again
// as an activity (session.modelCall).
func (s *session) oneTaskTurn(ctx workflow.Context, req TurnRequest) bool {
	if req.Kind != "" || !s.fastModelKnown(s.st.Config.LLMModel) {
		return false
	}
	// Runs recorded before this published "running" for every turn.
	return workflow.GetVersion(ctx, "quiet-fast-turns", workflow.DefaultVersion, 1) >= 1
}

// leavingTask publishes the "running" status a quiet turn skipped, before
// a step that waits beyond the workflow task.
func (s *session) leavingTask(ctx workflow.Context) {
	if !s.quiet {
		return
	}
	s.quiet = false
	if err := s.publish(ctx); err != nil {
		s.logger.Warn("publish status", "error", err)
	}
}

// publish updates the search attributes and the UI details.
func (s *session) publish(ctx workflow.Context) error {
	workflow.SetCurrentDetails(ctx, s.details())
	status := s.st.Status
	if status == StatusIdle && s.st.Task != nil && s.st.Task.Status == TaskPaused {
		status = StatusPaused
	}
	if status == StatusIdle && s.st.Task != nil && s.st.Task.Status == TaskAwaiting {
		status = TaskAwaiting
	}
	updates := []temporal.SearchAttributeUpdate{
		SAttrTenant.ValueSet(s.key.Tenant),
		SAttrStatus.ValueSet(status),
		SAttrTurns.ValueSet(int64(s.st.Turns)),
		SAttrUpdatedAt.ValueSet(workflow.Now(ctx)),
	}
	if s.st.LastIntent != "" {
		updates = append(updates, SAttrLastIntent.ValueSet(s.st.LastIntent))
	}
	if s.st.Topic != "" {
		updates = append(updates, SAttrTopic.ValueSet(s.st.Topic))
	}
	if err := workflow.UpsertTypedSearchAttributes(ctx, updates...); err != nil {
		return fmt.Errorf("upsert search attributes of %s: %w", s.key, err)
	}
	s.published, s.unpublished = workflow.Now(ctx), false
	return nil
}

func (s *session) details() string {
	d := fmt.Sprintf("**Session** `%s` (tenant `%s`)\n\n- status: %s, health: %s\n- turns: %d, messages: %d, pending: %d\n- window: %s, %d rounds, %d tokens (last view %d → %d tokens)\n- model: %s",
		s.key.SessionID, s.key.Tenant, s.st.Status, s.st.Health, s.st.Turns, s.st.Messages, len(s.st.Pending),
		s.st.Config.WindowStrategy, s.st.Config.MaxRounds, s.st.Config.MaxTokens, s.st.TokensBefore, s.st.TokensAfter,
		s.st.Config.LLMModel)
	if s.st.DegradedReason != "" {
		d += "\n- degraded: " + s.st.DegradedReason
	}
	return d
}

// localCtx is the context of a cheap step that runs as a local activity.
func (s *session) localCtx(ctx workflow.Context, summary string) workflow.Context {
	return localCtx(ctx, summary)
}

// activityCtx is the context of a regular activity of the session.
func (s *session) activityCtx(ctx workflow.Context, summary string, timeout time.Duration, attempts int) workflow.Context {
	return activityCtx(ctx, s.limits, summary, timeout, attempts)
}

// continueQueued reports a continue turn running or waiting in the queue.
func (s *session) continueQueued() bool {
	if s.current != nil && s.currentKind == KindContinue {
		return true
	}
	for _, p := range s.st.Pending {
		if p.Kind == KindContinue {
			return true
		}
	}
	return false
}

// continuable reports a paused task a continue can resume.
func (s *session) continuable() bool {
	return s.st.Task != nil && s.st.Task.Status == TaskPaused
}

// continueSignal queues a continue turn for the continue signal (turn id
// as sent, or one derived from the signal's arrival).
func (s *session) continueSignal(ctx workflow.Context, id string) {
	if !s.continuable() {
		s.logger.Info("continue signal ignored: no paused task")
		return
	}
	if id == "" {
		id = fmt.Sprintf("continue-%d", workflow.Now(ctx).UnixNano())
	}
	s.enqueue(ctx, TurnRequest{TurnID: id, Question: "continue", Kind: KindContinue})
}

// taskEvent records an event of one of the session's tasks: the turn that
// waits for it takes it; the state follows it in any case (a task
// canceled while paused).
func (s *session) taskEvent(ev TaskEvent) {
	s.events = append(s.events, ev)
	if s.st.Task != nil && s.st.Task.TaskID == ev.TaskID {
		s.st.Task.Status, s.st.Task.Step, s.st.Task.Pauses = ev.State.Status, ev.State.Step, ev.State.Pauses
		s.st.Task.Pending = ev.State.Pending
	}
	s.st.Facts.Merge(ev.State.Facts)
}

// SearchAttributes are the custom search attributes sessions use; the dev
// server and the worker register them at start-up.
func SearchAttributes() map[string]enumspb.IndexedValueType {
	return map[string]enumspb.IndexedValueType{
		SAttrTenant.GetName():     enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		SAttrStatus.GetName():     enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		SAttrTurns.GetName():      enumspb.INDEXED_VALUE_TYPE_INT,
		SAttrLastIntent.GetName(): enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		SAttrTopic.GetName():      enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		SAttrUpdatedAt.GetName():  enumspb.INDEXED_VALUE_TYPE_DATETIME,
	}
}
