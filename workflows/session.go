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
	SAttrUpdatedAt  = temporal.NewSearchAttributeKeyTime("CtxUpdatedAt")
)

// Error types of rejected updates, mapped to HTTP statuses by the API.
const (
	ErrTypeInvalidTurn = "InvalidTurn"
	ErrTypeConflict    = "Conflict"
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
	st           SessionState
	limits       Limits
	key          activities.SessionKey
	current      *TurnResult // the turn being processed
	closing      *CloseRequest
	compress     bool
	summaryDue   bool // the last turn left the history over the summary threshold
	turnsThisRun int
	logger       log.Logger

	turnCh, continueCh, compressCh, closeCh workflow.ReceiveChannel
}

func newSession(ctx workflow.Context, in SessionInput) (*session, error) {
	s := &session{
		limits: in.Limits.withDefaults(),
		key:    activities.SessionKey{Tenant: in.Tenant, SessionID: in.SessionID},
		logger: log.With(workflow.GetLogger(ctx), "tenant", in.Tenant, "session", in.SessionID),
	}
	if err := s.limits.Validate(); err != nil {
		return nil, temporal.NewNonRetryableApplicationError("invalid limits", "BadInput", err)
	}
	if in.State != nil {
		s.st = *in.State
		s.st.Runs++
		return s, nil
	}
	cfg, err := DefaultSessionConfig().Merge(in.Config)
	if err != nil {
		return nil, temporal.NewNonRetryableApplicationError("invalid session config", "BadInput", err)
	}
	now := workflow.Now(ctx)
	s.st = SessionState{
		Tenant: in.Tenant, SessionID: in.SessionID, Title: in.Title, Config: cfg,
		Status: StatusIdle, Health: HealthOK, CreatedAt: now, UpdatedAt: now,
	}
	return s, nil
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
	for _, req := range queued {
		if _, known := s.lookup(req.TurnID); !known {
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

	if err := workflow.SetQueryHandler(ctx, QueryState, func() (SessionState, error) {
		return s.st, nil
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
		return TurnResult{}, fmt.Errorf("turn %q not found in session %s", turnID, s.key)
	}); err != nil {
		return fmt.Errorf("set turn query: %w", err)
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateTurn, s.onTurnUpdate, workflow.UpdateHandlerOptions{
		Validator: func(ctx workflow.Context, req TurnRequest) error {
			if s.closing != nil {
				return temporal.NewNonRetryableApplicationError("session "+s.key.String()+" is closing", ErrTypeConflict, nil)
			}
			if err := ValidateTurn(req, s.st.Config); err != nil {
				return temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeInvalidTurn, nil)
			}
			return nil
		},
	}); err != nil {
		return fmt.Errorf("set turn update: %w", err)
	}
	if err := workflow.SetUpdateHandler(ctx, UpdateContinue, func(ctx workflow.Context) error {
		return temporal.NewNonRetryableApplicationError("session "+s.key.String()+" has no paused task to continue", ErrTypeConflict, nil)
	}); err != nil {
		return fmt.Errorf("set continue update: %w", err)
	}

	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			var req TurnRequest
			s.turnCh.Receive(ctx, &req)
			s.enqueue(ctx, req)
		}
	})
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			s.continueCh.Receive(ctx, nil)
			s.logger.Info("continue signal ignored: no paused task")
		}
	})
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			s.compressCh.Receive(ctx, nil)
			s.compress = true
		}
	})
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			var req CloseRequest
			s.closeCh.Receive(ctx, &req)
			s.closing = &req
		}
	})

	workflow.SetCurrentDetails(ctx, s.details())
	return s.publish(ctx)
}

// run is the session's main loop: continue-as-new when due (once no caller
// waits), else the next turn, then compression, then close, then idle expiry.
func (s *session) run(ctx workflow.Context) error {
	for {
		ok, err := workflow.AwaitWithTimeout(ctx, s.limits.IdleTTL, func() bool {
			return len(s.st.Pending) > 0 || s.compress || s.closing != nil || s.continueAsNewDue(ctx)
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
		case s.compress:
			s.compress = false
			var trace TurnResult
			s.summarize(ctx, true, &trace)
			s.logger.Info("compressed on request", "steps", trace.Steps)
			if err := s.publish(ctx); err != nil {
				s.logger.Warn("publish status", "error", err)
			}
		case s.closing != nil:
			if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
				return err
			}
			if s.drainSignals(ctx) {
				continue
			}
			return s.finishClosed(ctx)
		case !ok:
			if s.drainSignals(ctx) {
				continue
			}
			return s.finishIdle(ctx)
		}
	}
}

func (s *session) continueAsNewDue(ctx workflow.Context) bool {
	return s.turnsThisRun >= s.limits.ContinueAsNewEvery || workflow.GetInfo(ctx).GetContinueAsNewSuggested()
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
		s.enqueue(ctx, req)
		got = true
	}
	for s.compressCh.ReceiveAsync(nil) {
		s.compress = true
	}
	for s.continueCh.ReceiveAsync(nil) {
	}
	var cr CloseRequest
	for s.closeCh.ReceiveAsync(&cr) {
		s.closing = &cr
	}
	return got || s.compress
}

func (s *session) finishIdle(ctx workflow.Context) error {
	s.logger.Info("session idle, ending run", "ttl", s.limits.IdleTTL)
	if err := s.saveSnapshot(ctx); err != nil {
		return err
	}
	return nil
}

func (s *session) finishClosed(ctx workflow.Context) error {
	s.st.Status = StatusClosed
	s.st.UpdatedAt = workflow.Now(ctx)
	if s.closing.Delete {
		if err := workflow.ExecuteActivity(s.activityCtx(ctx, "delete transcript", time.Minute, 5), sa.DeleteSession, s.key).Get(ctx, nil); err != nil {
			return fmt.Errorf("delete session %s: %w", s.key, err)
		}
	} else if err := s.saveSnapshot(ctx); err != nil {
		return err
	}
	s.logger.Info("session closed", "deleted", s.closing.Delete)
	return s.publish(ctx)
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

// enqueue queues a turn unless its id is already known (idempotency).
func (s *session) enqueue(ctx workflow.Context, req TurnRequest) {
	if _, known := s.lookup(req.TurnID); known {
		return
	}
	req.ReceivedAt = workflow.Now(ctx)
	s.st.Pending = append(s.st.Pending, req)
}

// onTurnUpdate queues a turn and waits for its result.
func (s *session) onTurnUpdate(ctx workflow.Context, req TurnRequest) (TurnResult, error) {
	s.enqueue(ctx, req)
	var res TurnResult
	err := workflow.Await(ctx, func() bool {
		r, ok := s.lookup(req.TurnID)
		res = r
		return ok && r.Done()
	})
	return res, err
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
	s.current = &TurnResult{TurnID: req.TurnID, Status: TurnRunning, Question: req.Question, ReceivedAt: req.ReceivedAt}
	s.st.Status = StatusRunning
	if err := s.publish(ctx); err != nil {
		s.logger.Warn("publish status", "error", err)
	}

	s.runTurn(ctx, req, s.current)

	res := *s.current
	res.CompletedAt = workflow.Now(ctx)
	res.SessionInfo = s.st.Info()
	s.current = nil
	s.st.Recent = append(s.st.Recent, res)
	if n := len(s.st.Recent) - s.limits.RecentTurns; n > 0 {
		s.st.Recent = append([]TurnResult(nil), s.st.Recent[n:]...)
	}
	s.turnsThisRun++
	if s.summaryDue { // after the answer is out: the caller does not wait for it
		s.summaryDue = false
		s.summarize(ctx, false, &s.st.Recent[len(s.st.Recent)-1])
	}
	s.st.Status = StatusIdle
	s.st.UpdatedAt = res.CompletedAt
	if err := s.publish(ctx); err != nil {
		s.logger.Warn("publish status", "error", err)
	}
}

// publish updates the search attributes and the UI details.
func (s *session) publish(ctx workflow.Context) error {
	workflow.SetCurrentDetails(ctx, s.details())
	updates := []temporal.SearchAttributeUpdate{
		SAttrTenant.ValueSet(s.key.Tenant),
		SAttrStatus.ValueSet(s.st.Status),
		SAttrTurns.ValueSet(int64(s.st.Turns)),
		SAttrUpdatedAt.ValueSet(workflow.Now(ctx)),
	}
	if s.st.LastIntent != "" {
		updates = append(updates, SAttrLastIntent.ValueSet(s.st.LastIntent))
	}
	if err := workflow.UpsertTypedSearchAttributes(ctx, updates...); err != nil {
		return fmt.Errorf("upsert search attributes of %s: %w", s.key, err)
	}
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
	return workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: 10 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: 200 * time.Millisecond, BackoffCoefficient: 2, MaximumInterval: 5 * time.Second,
			MaximumAttempts: 10, NonRetryableErrorTypes: []string{activities.ErrTypeBadInput},
		},
		Summary: summary,
	})
}

// activityCtx is the context of a regular activity. Activities that run
// longer than a heartbeat timeout (model calls) heartbeat, so that a worker
// crash is noticed after Limits.HeartbeatTimeout.
func (s *session) activityCtx(ctx workflow.Context, summary string, timeout time.Duration, attempts int) workflow.Context {
	return activityCtx(ctx, s.limits, summary, timeout, attempts)
}

// activityCtx is the context of a regular activity under limits.
func activityCtx(ctx workflow.Context, limits Limits, summary string, timeout time.Duration, attempts int) workflow.Context {
	var heartbeat time.Duration
	if timeout > limits.HeartbeatTimeout {
		heartbeat = limits.HeartbeatTimeout
	}
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: timeout,
		HeartbeatTimeout:    heartbeat,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: 500 * time.Millisecond, BackoffCoefficient: 2, MaximumInterval: 10 * time.Second,
			MaximumAttempts:        int32(attempts),
			NonRetryableErrorTypes: []string{activities.ErrTypeBadInput, activities.ErrTypeModelPermanent, activities.ErrTypeDimension},
		},
		Summary: summary,
	})
}

// SearchAttributes are the custom search attributes sessions use; the dev
// server and the worker register them at start-up.
func SearchAttributes() map[string]enumspb.IndexedValueType {
	return map[string]enumspb.IndexedValueType{
		SAttrTenant.GetName():     enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		SAttrStatus.GetName():     enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		SAttrTurns.GetName():      enumspb.INDEXED_VALUE_TYPE_INT,
		SAttrLastIntent.GetName(): enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		SAttrUpdatedAt.GetName():  enumspb.INDEXED_VALUE_TYPE_DATETIME,
	}
}
