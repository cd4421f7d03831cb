package workflows

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/convo"
)

// DefaultMaxQuestionBytes is the largest question (or task goal) a turn
// may carry unless Limits.MaxQuestionBytes says otherwise.
const DefaultMaxQuestionBytes = 32 << 10

// Kinds of turn.
const (
	// KindTask starts an agent task whose goal is the turn's question.
	KindTask = "task"
	// KindContinue resumes the session's paused task.
	KindContinue = "continue"
	// KindBranch moves the session's active leaf to Target: the next turn
	// appends there (conversation trees).
	KindBranch = "branch"
	// KindImport fills a new session from Import: a fork of another session's
	// branch, or an imported transcript.
	KindImport = "seed"
)

// TranscriptImport is what an import turn fills a new session with: the branch of From
// up to Through (a fork), or the transcript uploaded to Path (an import,
// checked against SHA256; Leaf its active leaf, "" for its last message).
type TranscriptImport struct {
	From    *activities.SessionKey `json:"from,omitempty"`
	Through string                 `json:"through,omitempty"`
	Path    string                 `json:"path,omitempty"`
	SHA256  string                 `json:"sha256,omitempty"`
	Leaf    string                 `json:"leaf,omitempty"`
}

// TurnRequest is one user turn, as sent by the turn signal and update.
type TurnRequest struct {
	// TurnID is the idempotency key: a repeated id returns the first result
	// and appends nothing.
	TurnID   string `json:"turnId"`
	Question string `json:"question"`
	// Kind is "" (a question), KindTask or KindContinue.
	Kind string `json:"kind,omitempty"`
	// MaxSteps overrides the session's maxSteps for a task.
	MaxSteps int `json:"maxSteps,omitempty"`
	// EditOf asks the question in place of that user message: the new
	// message is its sibling, and the old branch stays.
	EditOf string `json:"editOf,omitempty"`
	// Target is the message a branch turn moves the active leaf to.
	Target string `json:"target,omitempty"`
	// Import is what an import turn (KindImport) fills the new session with.
	Import *TranscriptImport `json:"seed,omitempty"`
	// Config holds per-turn overrides ([TurnOptions]) as raw JSON so that
	// unknown keys can be rejected.
	Config json.RawMessage `json:"config,omitempty"`
	// Busy says what a question does while a task of the session runs:
	// BusyEnqueue (queue it, "" takes the session's busy option),
	// BusySteer (give it to the task as guidance) or BusyReject (refuse).
	Busy string `json:"busy,omitempty"`
	// Guidance is what a continue turn tells the task to do next.
	Guidance string `json:"guidance,omitempty"`
	// ReceivedAt is set by the workflow when the turn is queued.
	ReceivedAt time.Time `json:"receivedAt"`
}

// ValidateTurn checks a turn before it is queued: the update validator and
// the API both call it, so bad input never reaches workflow history.
func ValidateTurn(req TurnRequest, cfg SessionConfig, lim Limits) error {
	if err := ValidateID("turnId", req.TurnID); err != nil {
		return err
	}
	if err := ValidateQuestion("question", req.Question, lim.MaxQuestionBytes); err != nil {
		return err
	}
	switch req.Kind {
	case "", KindTask, KindContinue:
	case KindBranch:
		if err := ValidateID("fromMessageId", req.Target); err != nil {
			return err
		}
	case KindImport:
		if err := validateImport(req.Import); err != nil {
			return err
		}
	default:
		return fmt.Errorf("kind %q: want %q, %q, %q, %q or none", convo.Clip(req.Kind, 20), KindTask, KindContinue, KindBranch, KindImport)
	}
	if err := validateBusy(req.Busy); err != nil {
		return err
	}
	if req.Guidance != "" {
		if req.Kind != KindContinue {
			return fmt.Errorf("guidance goes with a continue turn only")
		}
		if err := ValidateQuestion("guidance", req.Guidance, lim.MaxQuestionBytes); err != nil {
			return err
		}
	}
	if req.EditOf != "" {
		if err := ValidateID("messageId", req.EditOf); err != nil {
			return err
		}
	}
	if req.MaxSteps < 0 || req.MaxSteps > 200 {
		return fmt.Errorf("maxSteps %d out of range [1, 200]", req.MaxSteps)
	}
	opts, err := ParseTurnOptions(req.Config)
	if err != nil {
		return err
	}
	_, err = opts.Apply(cfg)
	return err
}

func validateImport(sd *TranscriptImport) error {
	switch {
	case sd == nil:
		return fmt.Errorf("a seed turn needs a seed")
	case sd.From != nil && sd.Path == "":
		if err := ValidateID("sessionId", sd.From.SessionID); err != nil {
			return err
		}
		return ValidateID("fromMessageId", sd.Through)
	case sd.From == nil && sd.Path != "":
		if sd.Leaf != "" {
			return ValidateID("leaf", sd.Leaf)
		}
		return nil
	}
	return fmt.Errorf("a seed is a fork (from, through) or an import (path)")
}

// ValidateQuestion checks a question (named field in the error): valid
// UTF-8, not blank, at most max bytes (0: DefaultMaxQuestionBytes), and no
// control characters but tab and line breaks.
func ValidateQuestion(field, q string, max int) error {
	if max <= 0 {
		max = DefaultMaxQuestionBytes
	}
	switch {
	case !utf8.ValidString(q):
		return fmt.Errorf("%s is not valid UTF-8", field)
	case strings.TrimSpace(q) == "":
		return fmt.Errorf("%s is empty", field)
	case len(q) > max:
		return fmt.Errorf("%s is %d bytes, over the %d-byte limit (CTXFLOW_MAX_QUESTION_BYTES)", field, len(q), max)
	}
	if r, i, ok := ControlChar(q); ok {
		return fmt.Errorf("%s holds the control character %U at byte %d: only tab, CR and LF are allowed", field, r, i)
	}
	return nil
}

// ControlChar finds the first control character of s but tab and line
// breaks (NUL among them), and its byte offset.
func ControlChar(s string) (rune, int, bool) {
	i := strings.IndexFunc(s, func(r rune) bool { return unicode.IsControl(r) && r != '\t' && r != '\n' && r != '\r' })
	if i < 0 {
		return 0, 0, false
	}
	r, _ := utf8.DecodeRuneInString(s[i:])
	return r, i, true
}

// Turn statuses.
const (
	TurnQueued    = "queued"
	TurnRunning   = "running"
	TurnCompleted = "completed"
	TurnFailed    = "failed"
	TurnRejected  = "rejected"
	// TurnCancelled is a turn stopped by POST .../turns/{turnId}/cancel:
	// its answer is what the model had written (a cancelled message).
	TurnCancelled = "cancelled"
)

// Step is one step of a turn's pipeline, for the trace.
type Step struct {
	Name       string         `json:"name"`
	Status     string         `json:"status"` // ok, failed, skipped, degraded
	Start      time.Time      `json:"start"`
	DurationMS int64          `json:"durationMs"`
	Details    map[string]any `json:"details,omitempty"`
}

// TurnResult is what a turn produced.
type TurnResult struct {
	TurnID         string           `json:"turnId"`
	Status         string           `json:"status"`
	Question       string           `json:"question"`
	Answer         string           `json:"answer,omitempty"`
	RewrittenQuery string           `json:"rewrittenQuery,omitempty"`
	Topic          string           `json:"topic,omitempty"`
	Intent         *Intent          `json:"intent,omitempty"`
	RetrievedDocs  []activities.Doc `json:"retrievedDocs,omitempty"`
	Steps          []Step           `json:"steps,omitempty"`
	SessionInfo    SessionInfo      `json:"sessionInfo"`
	Engine         string           `json:"engine,omitempty"`
	Model          string           `json:"model,omitempty"`
	Error          string           `json:"error,omitempty"`
	// ErrorCode is the failure's code (activities' Code* constants).
	ErrorCode string `json:"errorCode,omitempty"`
	// Type is a task turn's outcome: pause, finish or error; Task its state
	// (the last steps; GET .../tasks/{taskId} has them all).
	Type string     `json:"type,omitempty"`
	Task *TaskState `json:"task,omitempty"`
	// Pending are the calls a task of type approval waits on.
	Pending []PendingCall `json:"pending,omitempty"`
	// MessageIDs are the transcript ids of the user and assistant messages.
	UserMessageID      string `json:"userMessageId,omitempty"`
	AssistantMessageID string `json:"assistantMessageId,omitempty"`
	// ActiveLeaf is the session's active leaf after the turn: where the
	// next turn appends.
	ActiveLeaf string `json:"activeLeaf,omitempty"`
	// RunningStep names the step a running turn is in ("" between steps
	// and once it is done): what a stream shows as started.
	RunningStep string    `json:"runningStep,omitempty"`
	ReceivedAt  time.Time `json:"receivedAt"`
	CompletedAt time.Time `json:"completedAt"`
}

// Done reports whether the turn reached a final status.
func (r TurnResult) Done() bool {
	return r.Status == TurnCompleted || r.Status == TurnFailed || r.Status == TurnRejected || r.Status == TurnCancelled
}

// SessionInfo is the part of the session state returned with every turn.
type SessionInfo struct {
	SessionID      string `json:"sessionId"`
	Turns          int    `json:"turns"`
	Messages       int    `json:"messages"`
	TokensBefore   int    `json:"tokensBefore"`
	TokensAfter    int    `json:"tokensAfter"`
	TrimmedCount   int    `json:"trimmedCount"`
	Health         string `json:"health"`
	DegradedReason string `json:"degradedReason,omitempty"`
}

// Session statuses (the CtxStatus search attribute).
const (
	StatusIdle    = "idle"
	StatusRunning = "running"
	StatusPaused  = "paused"
	StatusClosed  = "closed"
	// StatusDeleted is a closed session whose transcript was deleted: it is
	// no longer listed, and its id may start a new session.
	StatusDeleted = "deleted"
)

// Health of a session.
const (
	HealthOK       = "ok"
	HealthDegraded = "degraded"
)

// SessionInput starts (or continues) a session workflow.
type SessionInput struct {
	Tenant    string          `json:"tenant"`
	SessionID string          `json:"sessionId"`
	Title     string          `json:"title,omitempty"`
	Config    json.RawMessage `json:"config,omitempty"`
	// State is set on continue-as-new: the working state carried over.
	State *SessionState `json:"state,omitempty"`
	// Limits are the service-level knobs; zero fields take their defaults.
	Limits Limits `json:"limits"`
	// Queued are turns to run first: those that reached a session after it
	// was deleted start its next life with them.
	Queued []TurnRequest `json:"queued,omitempty"`
}

// SessionState is the working state of a session: what the state query
// returns and what continue-as-new carries. It holds references and small
// values only; message bodies live in the transcript store.
type SessionState struct {
	Tenant         string        `json:"tenant"`
	SessionID      string        `json:"sessionId"`
	Title          string        `json:"title,omitempty"`
	Config         SessionConfig `json:"config"`
	Status         string        `json:"status"`
	Health         string        `json:"health"`
	DegradedReason string        `json:"degradedReason,omitempty"`
	Turns          int           `json:"turns"`
	Messages       int           `json:"messages"`
	ActiveLeaf     string        `json:"activeLeaf,omitempty"`
	// LeafMoved says the active leaf was set to a message that may have
	// children (a branch turn, a fork or an import): the next question
	// branches off there on purpose instead of checking that the leaf did
	// not grow.
	LeafMoved    bool `json:"leafMoved,omitempty"`
	TokensBefore int  `json:"tokensBefore"`
	TokensAfter  int  `json:"tokensAfter"`
	// TrimmedCount is how many messages the last turn's window left out.
	TrimmedCount int `json:"trimmedCount"`
	// Summary names the running summary of the active branch's older part
	// (its text is in the transcript, as a summary record).
	Summary *activities.SummaryRef `json:"summary,omitempty"`
	// SummaryDegraded says why the summary could not be updated; while set,
	// the model view is a fallback truncation.
	SummaryDegraded string `json:"summaryDegraded,omitempty"`
	LastIntent      string `json:"lastIntent,omitempty"`
	// Intents are the session's last classified intents, oldest first
	// (the classifier sees the last IntentHistorySize); Topic is what the
	// conversation is about, as the rewriter last found it.
	Intents []IntentRecord `json:"intents,omitempty"`
	Topic   string         `json:"topic,omitempty"`
	// Task is the session's current (or last) agent task; Facts what its
	// tasks found, shown to every later task.
	Task  *TaskRef              `json:"task,omitempty"`
	Facts activities.KnownFacts `json:"facts,omitzero"`
	// TokenRatio calibrates tiktoken to each model's own tokenizer: a
	// running ratio of the prompt tokens the model reported to the tokens
	// tiktoken counted for the same view (model name → ratio).
	TokenRatio map[string]float64 `json:"tokenRatio,omitempty"`
	// ModelMS is each chat model's running average answer time in this
	// session, in milliseconds: below Limits.FastModel it is called in the
	// turn's workflow task.
	ModelMS map[string]float64 `json:"modelMs,omitempty"`
	// RetrieveMS is the running average time of the qa route's
	// retrievals, in milliseconds: below Limits.FastModel the corrective
	// child retrieves in its workflow task.
	RetrieveMS float64 `json:"retrieveMs,omitempty"`
	// SummaryMS is the running average time of the running summary's
	// steps, in milliseconds: below a tenth of Limits.FastModel the summary
	// is made in the turn's workflow task.
	SummaryMS float64       `json:"summaryMs,omitempty"`
	Pending   []TurnRequest `json:"pending,omitempty"`
	// Recent are the results of the last turns, newest last, for the turn
	// and steps queries and for idempotency (older repeats are caught by
	// the transcript store).
	Recent []TurnResult `json:"recent,omitempty"`
	// Ledger records every turn id the session ever accepted (idempotency
	// beyond Recent); the state query leaves it out.
	Ledger    TurnLedger `json:"ledger,omitzero"`
	Runs      int        `json:"runs"`
	CreatedAt time.Time  `json:"createdAt"`
	UpdatedAt time.Time  `json:"updatedAt"`
}

// TaskRef is a session's task as its state shows it.
type TaskRef struct {
	TaskID     string `json:"taskId"`
	WorkflowID string `json:"workflowId"`
	Status     string `json:"status"`
	Step       int    `json:"step"`
	// Summary is the progress summary while paused.
	Summary string `json:"summary,omitempty"`
	// Pauses counts the pauses so far.
	Pauses int `json:"pauses"`
	// Pending are the calls waiting for approval.
	Pending []PendingCall `json:"pending,omitempty"`
}

// Info returns the session info attached to a turn result.
func (s *SessionState) Info() SessionInfo {
	return SessionInfo{
		SessionID:      s.SessionID,
		Turns:          s.Turns,
		Messages:       s.Messages,
		TokensBefore:   s.TokensBefore,
		TokensAfter:    s.TokensAfter,
		TrimmedCount:   s.TrimmedCount,
		Health:         s.Health,
		DegradedReason: s.DegradedReason,
	}
}
