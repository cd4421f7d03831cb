package convo

import (
	"fmt"
)

// Window strategies (seed 000, option windowStrategy).
const (
	// StrategySlidingWindow keeps the last MaxRounds rounds. A round is a
	// user message and everything after it up to the next user message.
	StrategySlidingWindow = "sliding_window"
	// StrategyTokenLimit keeps what fits in MaxTokens, newest ("last") or
	// oldest ("first") first.
	StrategyTokenLimit = "token_limit"
	// StrategyHybrid applies both limits; the tighter one wins.
	StrategyHybrid = "hybrid"
)

// Token strategies (LangChain trimMessages' strategy option).
const (
	// TokenStrategyLast keeps the newest messages that fit.
	TokenStrategyLast = "last"
	// TokenStrategyFirst keeps the oldest messages that fit, plus the
	// newest round (the newest user message is always kept).
	TokenStrategyFirst = "first"
)

// StartOnHuman makes a window start on a user message (start_on: human).
const StartOnHuman = "human"

// Ranges accepted by [WindowConfig.Validate].
const (
	MinMaxRounds = 1
	MaxMaxRounds = 1000
	MinMaxTokens = 64
	MaxMaxTokens = 1_000_000
)

// WindowConfig chooses which part of a branch the model sees. The JSON names
// are the API's (docs/architecture.md §8).
type WindowConfig struct {
	// Strategy is StrategySlidingWindow, StrategyTokenLimit or StrategyHybrid.
	Strategy string `json:"windowStrategy"`
	// MaxRounds bounds the rounds kept (sliding_window, hybrid).
	MaxRounds int `json:"maxRounds"`
	// MaxTokens bounds the prompt tokens (token_limit, hybrid): system
	// prompt, summary, kept messages and reply priming, all included.
	MaxTokens int `json:"maxTokens"`
	// TokenStrategy is "last" (default when empty) or "first".
	TokenStrategy string `json:"tokenStrategy"`
	// StartOn is "human" (the window starts on a user message) or "".
	StartOn string `json:"startOn"`
	// IncludeSystem keeps the branch's leading system message (the system
	// prompt) outside the window, whatever the limits.
	IncludeSystem bool `json:"includeSystem"`
	// Reserve is what MaxTokens must also hold besides the branch: the
	// tokens of prompt parts the caller adds, such as a system prompt
	// that is not in the branch.
	Reserve int `json:"reserve,omitempty"`
}

// DefaultWindowConfig returns the seed defaults: hybrid, 10 rounds, 4000
// tokens, "last", start on human, system prompt kept.
func DefaultWindowConfig() WindowConfig {
	return WindowConfig{
		Strategy:      StrategyHybrid,
		MaxRounds:     10,
		MaxTokens:     4000,
		TokenStrategy: TokenStrategyLast,
		StartOn:       StartOnHuman,
		IncludeSystem: true,
	}
}

func (c WindowConfig) usesRounds() bool {
	return c.Strategy == StrategySlidingWindow || c.Strategy == StrategyHybrid
}

func (c WindowConfig) usesTokens() bool {
	return c.Strategy == StrategyTokenLimit || c.Strategy == StrategyHybrid
}

// Validate reports the first problem with c, wrapping [ErrInvalidConfig].
// A limit the strategy uses must be in range; an unused one must be 0 or in
// range.
func (c WindowConfig) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), ErrInvalidConfig)
	}
	switch c.Strategy {
	case StrategySlidingWindow, StrategyTokenLimit, StrategyHybrid:
	case "":
		return bad("windowStrategy is required (sliding_window, token_limit or hybrid)")
	default:
		return bad("unknown windowStrategy %q (want sliding_window, token_limit or hybrid)", c.Strategy)
	}
	if (c.usesRounds() || c.MaxRounds != 0) && (c.MaxRounds < MinMaxRounds || c.MaxRounds > MaxMaxRounds) {
		return bad("maxRounds %d out of range %d..%d", c.MaxRounds, MinMaxRounds, MaxMaxRounds)
	}
	if (c.usesTokens() || c.MaxTokens != 0) && (c.MaxTokens < MinMaxTokens || c.MaxTokens > MaxMaxTokens) {
		return bad("maxTokens %d out of range %d..%d", c.MaxTokens, MinMaxTokens, MaxMaxTokens)
	}
	if c.Reserve < 0 || c.Reserve > MaxMaxTokens {
		return bad("reserve %d out of range 0..%d", c.Reserve, MaxMaxTokens)
	}
	switch c.TokenStrategy {
	case "", TokenStrategyLast, TokenStrategyFirst:
	default:
		return bad("unknown tokenStrategy %q (want last or first)", c.TokenStrategy)
	}
	switch c.StartOn {
	case "", StartOnHuman:
	default:
		return bad("unknown startOn %q (want human or empty)", c.StartOn)
	}
	return nil
}

// Trimmed is a window cut from a branch.
type Trimmed struct {
	// Messages are the kept messages, oldest first: the system prompt (when
	// kept) and the window. They are the branch's own messages, unchanged.
	Messages []Message `json:"messages"`
	// TrimmedCount is how many branch messages were left out.
	TrimmedCount int `json:"trimmedCount"`
	// TokensBefore and TokensAfter are [PromptTokens] of the whole branch and
	// of Messages.
	TokensBefore int `json:"tokensBefore"`
	TokensAfter  int `json:"tokensAfter"`
	// OverBudget is set when the parts that are always kept (system prompt
	// and newest round) alone exceed MaxTokens, so TokensAfter > MaxTokens.
	OverBudget bool `json:"overBudget,omitempty"`
}

// Trim cuts the model's window from a branch (oldest first, Tokens set).
//
// Rules, in order of precedence:
//  1. With IncludeSystem, a leading system message is always kept.
//  2. The newest user message and everything after it are always kept.
//  3. A tool call and its result are never separated.
//  4. With StartOn "human", the window starts on a user message.
//  5. sliding_window keeps whole rounds, at most MaxRounds of them (history
//     before the first user message counts as part of the first round);
//     token_limit keeps what fits in MaxTokens; hybrid honours both.
//
// With TokenStrategy "last" (the default) the window is a suffix of the
// branch. With "first" it is the longest fitting prefix of the eligible
// history (for hybrid, of the last MaxRounds rounds) followed by the newest
// round.
//
// Trim checks the whole branch (field rules and tool pairing) and so costs
// O(len(branch)); [Tree.Window] gives the same result in O(window).
func Trim(branch []Message, cfg WindowConfig) (Trimmed, error) {
	if err := cfg.Validate(); err != nil {
		return Trimmed{}, err
	}
	src, err := newSliceSource(branch)
	if err != nil {
		return Trimmed{}, err
	}
	return trim(src, cfg, 0, 0)
}
