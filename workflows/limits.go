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
	// regular activity. 0 (and sessions started before it existed): never.
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

// DefaultLimits returns the defaults documented in the README.
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

// Validate reports a knob that is out of range.
func (l Limits) Validate() error {
	switch {
	case l.ContinueAsNewEvery < 1 || l.ContinueAsNewEvery > 10_000:
		return fmt.Errorf("continue-as-new interval %d out of range [1, 10000]", l.ContinueAsNewEvery)
	case l.IdleTTL < time.Second:
		return fmt.Errorf("idle TTL %s is under 1s", l.IdleTTL)
	case l.LLMTimeout < time.Second:
		return fmt.Errorf("LLM timeout %s is under 1s", l.LLMTimeout)
	case l.HeartbeatTimeout < time.Second:
		return fmt.Errorf("heartbeat timeout %s is under 1s", l.HeartbeatTimeout)
	case l.RecentTurns < 1 || l.RecentTurns > 1000:
		return fmt.Errorf("recent turns %d out of range [1, 1000]", l.RecentTurns)
	case l.LLMMaxTokens < 1 || l.LLMMaxTokens > 1_000_000:
		return fmt.Errorf("LLM max tokens %d out of range [1, 1000000]", l.LLMMaxTokens)
	case l.TaskRecentMessages < 0 || l.TaskRecentMessages > 1000:
		return fmt.Errorf("task recent messages %d out of range [1, 1000]", l.TaskRecentMessages)
	case l.FastModel < 0 || l.FastModel > 10*time.Second:
		return fmt.Errorf("fast model bound %s out of range [0, 10s]", l.FastModel)
	case l.MaxQuestionBytes != 0 && (l.MaxQuestionBytes < 1024 || l.MaxQuestionBytes > 1<<20):
		return fmt.Errorf("max question bytes %d out of range [1024, 1048576]", l.MaxQuestionBytes)
	}
	return ValidateApproveTools(l.ApproveTools)
}
