package workflows

import (
	"fmt"
	"time"
)

// Limits are service-level knobs of a session workflow, chosen by whoever
// starts it (from the environment) and carried across continue-as-new.
type Limits struct {
	// ContinueAsNewEvery bounds the turns of one workflow run.
	ContinueAsNewEvery int `json:"continueAsNewEvery"`
	// IdleTTL ends an idle session cleanly; its next turn revives it.
	IdleTTL time.Duration `json:"idleTtl"`
	// LLMTimeout is the start-to-close timeout of a model call.
	LLMTimeout time.Duration `json:"llmTimeout"`
	// HeartbeatTimeout bounds the silence of a running model activity: a
	// worker that dies mid-call is noticed after this, not after LLMTimeout.
	HeartbeatTimeout time.Duration `json:"heartbeatTimeout"`
	// RecentTurns is how many turn results the session keeps for queries.
	RecentTurns int `json:"recentTurns"`
	// LLMMaxTokens caps the tokens generated per model call.
	LLMMaxTokens int `json:"llmMaxTokens"`
	// TaskRecentMessages is how many unfolded messages a task's model view
	// holds before older steps are folded into its running summary
	// (MESSAGE_COMPRESS_RECENT_WINDOW).
	TaskRecentMessages int `json:"taskRecentMessages,omitempty"`
	// FastModel: a chat model whose answers in this session have taken
	// less than this on average is called as a local activity, inside the
	// turn's workflow task (one workflow task a turn instead of two, no
	// activity dispatch); a slower one, or one that fails there, as a
	// regular activity. Retrieval under it, and a running summary under a
	// tenth of it, run in their workflow tasks as well. 0 (and sessions
	// started before it existed): never.
	FastModel time.Duration `json:"fastModel,omitempty"`
	// MaxQuestionBytes bounds a turn's question and a task's goal
	// (CTXFLOW_MAX_QUESTION_BYTES; 0: DefaultMaxQuestionBytes).
	MaxQuestionBytes int `json:"maxQuestionBytes,omitempty"`
	// ApproveTools are the session's tenant's approveTools
	// (CTXFLOW_APPROVE_TOOLS), set by the API when it starts the session:
	// glob patterns of tool names whose calls wait for approval, added to
	// the session's own, which cannot remove them.
	ApproveTools []string `json:"approveTools,omitempty"`
}

// DefaultLimits returns the defaults: internal/config takes the defaults of
// its variables from here (docs/configuration.md shows them).
func DefaultLimits() Limits {
	return Limits{
		ContinueAsNewEvery: 100,
		IdleTTL:            24 * time.Hour,
		LLMTimeout:         60 * time.Second,
		HeartbeatTimeout:   10 * time.Second,
		RecentTurns:        32,
		LLMMaxTokens:       2000,
		TaskRecentMessages: 10,
		FastModel:          500 * time.Millisecond,
		MaxQuestionBytes:   DefaultMaxQuestionBytes,
	}
}

// withDefaults fills zero fields with their defaults.
func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.ContinueAsNewEvery <= 0 {
		l.ContinueAsNewEvery = d.ContinueAsNewEvery
	}
	if l.IdleTTL <= 0 {
		l.IdleTTL = d.IdleTTL
	}
	if l.LLMTimeout <= 0 {
		l.LLMTimeout = d.LLMTimeout
	}
	if l.HeartbeatTimeout <= 0 {
		l.HeartbeatTimeout = d.HeartbeatTimeout
	}
	if l.RecentTurns <= 0 {
		l.RecentTurns = d.RecentTurns
	}
	if l.LLMMaxTokens <= 0 {
		l.LLMMaxTokens = d.LLMMaxTokens
	}
	if l.TaskRecentMessages <= 0 {
		l.TaskRecentMessages = d.TaskRecentMessages
	}
	return l
}

// A Range is the values a knob of [Limits] may take: Min to Max, or Min and
// more when Max is 0. Durations are in nanoseconds.
type Range struct{ Min, Max int64 }

// Contains tells whether n is in r.
func (r Range) Contains(n int64) bool { return n >= r.Min && (r.Max == 0 || n <= r.Max) }

// The ranges [Limits.Validate] holds the knobs to; internal/config
// documents them beside the variables that set them.
var (
	ContinueAsNewRange      = Range{Min: 1, Max: 10_000}
	IdleTTLRange            = Range{Min: int64(time.Second)}
	LLMTimeoutRange         = Range{Min: int64(time.Second)}
	HeartbeatTimeoutRange   = Range{Min: int64(time.Second)}
	RecentTurnsRange        = Range{Min: 1, Max: 1000}
	LLMMaxTokensRange       = Range{Min: 1, Max: 1_000_000}
	TaskRecentMessagesRange = Range{Min: 0, Max: 1000}
	FastModelRange          = Range{Min: 0, Max: int64(10 * time.Second)}
	// MaxQuestionBytesRange holds a set bound; 0 is DefaultMaxQuestionBytes.
	MaxQuestionBytesRange = Range{Min: 1024, Max: 1 << 20}
)

// Validate reports a knob that is out of range.
func (l Limits) Validate() error {
	r := func(r Range, n int64) string { return fmt.Sprintf("%d out of range [%d, %d]", n, r.Min, r.Max) }
	under := func(r Range, d time.Duration) string { return fmt.Sprintf("%s is under %s", d, time.Duration(r.Min)) }
	switch {
	case !ContinueAsNewRange.Contains(int64(l.ContinueAsNewEvery)):
		return fmt.Errorf("continue-as-new interval %s", r(ContinueAsNewRange, int64(l.ContinueAsNewEvery)))
	case !IdleTTLRange.Contains(int64(l.IdleTTL)):
		return fmt.Errorf("idle TTL %s", under(IdleTTLRange, l.IdleTTL))
	case !LLMTimeoutRange.Contains(int64(l.LLMTimeout)):
		return fmt.Errorf("LLM timeout %s", under(LLMTimeoutRange, l.LLMTimeout))
	case !HeartbeatTimeoutRange.Contains(int64(l.HeartbeatTimeout)):
		return fmt.Errorf("heartbeat timeout %s", under(HeartbeatTimeoutRange, l.HeartbeatTimeout))
	case !RecentTurnsRange.Contains(int64(l.RecentTurns)):
		return fmt.Errorf("recent turns %s", r(RecentTurnsRange, int64(l.RecentTurns)))
	case !LLMMaxTokensRange.Contains(int64(l.LLMMaxTokens)):
		return fmt.Errorf("LLM max tokens %s", r(LLMMaxTokensRange, int64(l.LLMMaxTokens)))
	case !TaskRecentMessagesRange.Contains(int64(l.TaskRecentMessages)):
		// 0 is taken as the default (withDefaults), hence [1, …] in the message.
		return fmt.Errorf("task recent messages %d out of range [1, %d]", l.TaskRecentMessages, TaskRecentMessagesRange.Max)
	case !FastModelRange.Contains(int64(l.FastModel)):
		return fmt.Errorf("fast model bound %s out of range [0, %s]", l.FastModel, time.Duration(FastModelRange.Max))
	case l.MaxQuestionBytes != 0 && !MaxQuestionBytesRange.Contains(int64(l.MaxQuestionBytes)):
		return fmt.Errorf("max question bytes %s", r(MaxQuestionBytesRange, int64(l.MaxQuestionBytes)))
	}
	return ValidateApproveTools(l.ApproveTools)
}
