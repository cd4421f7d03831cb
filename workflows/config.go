package workflows

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ctxflow/ctxflow/convo"
)

// SessionConfig holds a session's options (docs/architecture.md §8). Service-wide
// defaults come from the environment; a session may override them when it is
// created and a turn may override the per-turn ones ([TurnOptions]).
type SessionConfig struct {
	LLMModel             string  `json:"llmModel"`
	EmbeddingModel       string  `json:"embeddingModel"`
	SystemPrompt         string  `json:"systemPrompt"`
	WindowStrategy       string  `json:"windowStrategy"`
	MaxRounds            int     `json:"maxRounds"`
	MaxTokens            int     `json:"maxTokens"`
	SummaryThreshold     int     `json:"summaryThreshold"`
	PreserveSystemPrompt bool    `json:"preserveSystemPrompt"`
	EnableQueryRewriting bool    `json:"enableQueryRewriting"`
	EnableSummarization  bool    `json:"enableSummarization"`
	TopK                 int     `json:"topK"`
	SimilarityThreshold  float64 `json:"similarityThreshold"`
	// SearchMode is how the knowledge base is searched: dense, keyword or
	// hybrid ("" is hybrid, for sessions created before the option).
	SearchMode         string  `json:"searchMode,omitempty"`
	MaxRetries         int     `json:"maxRetries"`
	MaxRewriteAttempts int     `json:"maxRewriteAttempts"`
	GradePassThreshold float64 `json:"gradePassThreshold"`
	MaxSteps           int     `json:"maxSteps"`
	// ApproveTools are glob patterns of tool names ("run_sql",
	// "mcp:filesystem/*") whose calls wait for a person's approval;
	// ApprovalTimeout (a Go duration, "" for none) rejects a call not
	// decided in time.
	ApproveTools    ToolPatterns `json:"approveTools,omitempty"`
	ApprovalTimeout string       `json:"approvalTimeout,omitempty"`
	// Busy is what a question does while a task of the session runs, when
	// the turn does not say: enqueue ("" too), steer or reject.
	Busy string `json:"busy,omitempty"`
}

// ToolPatterns are glob patterns of tool names, a JSON array of strings
// (held as one newline-separated string, so that a config stays
// comparable).
type ToolPatterns string

// NewToolPatterns returns the patterns as ToolPatterns.
func NewToolPatterns(patterns ...string) ToolPatterns {
	return ToolPatterns(strings.Join(patterns, "\n"))
}

// List returns the patterns.
func (p ToolPatterns) List() []string {
	if p == "" {
		return nil
	}
	return strings.Split(string(p), "\n")
}

// MarshalJSON writes the patterns as an array.
func (p ToolPatterns) MarshalJSON() ([]byte, error) {
	l := p.List()
	if l == nil {
		l = []string{}
	}
	return json.Marshal(l)
}

// UnmarshalJSON reads an array of patterns (null for none).
func (p *ToolPatterns) UnmarshalJSON(b []byte) error {
	var l []string
	if err := json.Unmarshal(b, &l); err != nil {
		return fmt.Errorf("approveTools: want an array of strings: %w", err)
	}
	for _, s := range l {
		if s == "" || strings.ContainsAny(s, "\n\r") {
			return fmt.Errorf("approveTools: pattern %q is empty or has a line break", convo.Clip(s, 40))
		}
	}
	*p = NewToolPatterns(l...)
	return nil
}

// ApprovalWait is the parsed ApprovalTimeout (0 for none).
func (c SessionConfig) ApprovalWait() time.Duration {
	d, _ := time.ParseDuration(c.ApprovalTimeout)
	return d
}

// DefaultSessionConfig returns the defaults of docs/architecture.md §8.
func DefaultSessionConfig() SessionConfig {
	return SessionConfig{
		LLMModel:             "qwen2.5:0.5b",
		EmbeddingModel:       "bge-m3:latest",
		SystemPrompt:         "You are a helpful assistant. Answer concisely, in the language of the question.",
		WindowStrategy:       "hybrid",
		MaxRounds:            10,
		MaxTokens:            4000,
		SummaryThreshold:     3000,
		PreserveSystemPrompt: true,
		EnableQueryRewriting: true,
		EnableSummarization:  true,
		TopK:                 5,
		SimilarityThreshold:  0.3,
		SearchMode:           "hybrid",
		MaxRetries:           3,
		MaxRewriteAttempts:   3,
		GradePassThreshold:   0.6,
		MaxSteps:             12,
	}
}

// Window returns the window-trimming options of the config.
func (c SessionConfig) Window() convo.WindowConfig {
	w := convo.DefaultWindowConfig()
	w.Strategy = c.WindowStrategy
	w.MaxRounds = c.MaxRounds
	w.MaxTokens = c.MaxTokens
	w.IncludeSystem = c.PreserveSystemPrompt
	return w
}

// Summary returns the summary-compression options of the config, or the
// zero config when summarisation is off. The message threshold is the
// window's size in messages, so whatever the window drops is folded into the
// summary: the model never loses a message between the two.
func (c SessionConfig) Summary() convo.SummaryConfig {
	if !c.EnableSummarization {
		return convo.SummaryConfig{}
	}
	sc := convo.DefaultSummaryConfig()
	sc.ThresholdMessages = 2 * c.MaxRounds
	sc.ThresholdTokens = c.SummaryThreshold
	sc.Model = c.LLMModel
	return sc
}

// Validate reports the first option that is out of range, with a reason.
func (c SessionConfig) Validate() error {
	var errs []error
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	check(validModelName(c.LLMModel), "llmModel %q is not a model name", c.LLMModel)
	check(validModelName(c.EmbeddingModel), "embeddingModel %q is not a model name", c.EmbeddingModel)
	check(len(c.SystemPrompt) <= 8<<10, "systemPrompt is %d bytes, over the 8 KiB limit", len(c.SystemPrompt))
	if err := c.Window().Validate(); err != nil {
		errs = append(errs, err)
	}
	check(c.SummaryThreshold >= 100 && c.SummaryThreshold <= 1_000_000, "summaryThreshold %d out of range [100, 1000000]", c.SummaryThreshold)
	check(c.TopK >= 1 && c.TopK <= 100, "topK %d out of range [1, 100]", c.TopK)
	check(c.SimilarityThreshold >= 0 && c.SimilarityThreshold <= 1, "similarityThreshold %g out of range [0, 1]", c.SimilarityThreshold)
	check(c.SearchMode == "" || c.SearchMode == "dense" || c.SearchMode == "keyword" || c.SearchMode == "hybrid",
		"searchMode %q is not dense, keyword or hybrid", c.SearchMode)
	check(c.MaxRetries >= 0 && c.MaxRetries <= 10, "maxRetries %d out of range [0, 10]", c.MaxRetries)
	check(c.MaxRewriteAttempts >= 0 && c.MaxRewriteAttempts <= 10, "maxRewriteAttempts %d out of range [0, 10]", c.MaxRewriteAttempts)
	check(c.GradePassThreshold >= 0 && c.GradePassThreshold <= 1, "gradePassThreshold %g out of range [0, 1]", c.GradePassThreshold)
	check(c.MaxSteps >= 1 && c.MaxSteps <= 200, "maxSteps %d out of range [1, 200]", c.MaxSteps)
	if err := ValidateApproveTools(c.ApproveTools.List()); err != nil {
		errs = append(errs, err)
	}
	if err := validateBusy(c.Busy); err != nil {
		errs = append(errs, err)
	}
	if c.ApprovalTimeout != "" {
		d, err := time.ParseDuration(c.ApprovalTimeout)
		check(err == nil && d >= time.Second && d <= 90*24*time.Hour, "approvalTimeout %q is not a duration in [1s, 2160h]", convo.Clip(c.ApprovalTimeout, 40))
	}
	return errors.Join(errs...)
}

func validModelName(s string) bool {
	return s != "" && len(s) <= 200 && !strings.ContainsAny(s, " \t\r\n")
}

// Merge returns c with the options set in raw (a JSON object of
// [SessionConfig] fields) applied. Unknown keys, wrong types and
// out-of-range values are errors.
func (c SessionConfig) Merge(raw json.RawMessage) (SessionConfig, error) {
	if set, err := decodeStrict(raw, &c); err != nil || !set {
		return c, err
	}
	if err := c.Validate(); err != nil {
		return c, fmt.Errorf("config: %w", err)
	}
	return c, nil
}

// TurnOptions are the options a single turn may override (docs/architecture.md §8,
// scope "turn"). Nil fields keep the session's value.
type TurnOptions struct {
	LLMModel             *string  `json:"llmModel,omitempty"`
	WindowStrategy       *string  `json:"windowStrategy,omitempty"`
	MaxRounds            *int     `json:"maxRounds,omitempty"`
	MaxTokens            *int     `json:"maxTokens,omitempty"`
	EnableQueryRewriting *bool    `json:"enableQueryRewriting,omitempty"`
	TopK                 *int     `json:"topK,omitempty"`
	SimilarityThreshold  *float64 `json:"similarityThreshold,omitempty"`
	SearchMode           *string  `json:"searchMode,omitempty"`
	MaxRewriteAttempts   *int     `json:"maxRewriteAttempts,omitempty"`
	GradePassThreshold   *float64 `json:"gradePassThreshold,omitempty"`
}

// ParseTurnOptions decodes a turn's "config" object strictly: unknown keys
// and wrong types are errors.
func ParseTurnOptions(raw json.RawMessage) (TurnOptions, error) {
	var o TurnOptions
	_, err := decodeStrict(raw, &o)
	return o, err
}

// decodeStrict decodes a JSON object of options into v: unknown keys and
// wrong types are errors. Empty or null raw leaves v alone (set = false).
func decodeStrict(raw json.RawMessage, v any) (set bool, err error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return false, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return false, fmt.Errorf("config: %w", err)
	}
	return true, nil
}

// Apply returns c with the turn's overrides, validated.
func (o TurnOptions) Apply(c SessionConfig) (SessionConfig, error) {
	set(&c.LLMModel, o.LLMModel)
	set(&c.WindowStrategy, o.WindowStrategy)
	set(&c.MaxRounds, o.MaxRounds)
	set(&c.MaxTokens, o.MaxTokens)
	set(&c.EnableQueryRewriting, o.EnableQueryRewriting)
	set(&c.TopK, o.TopK)
	set(&c.SimilarityThreshold, o.SimilarityThreshold)
	set(&c.SearchMode, o.SearchMode)
	set(&c.MaxRewriteAttempts, o.MaxRewriteAttempts)
	set(&c.GradePassThreshold, o.GradePassThreshold)
	if err := c.Validate(); err != nil {
		return c, fmt.Errorf("config: %w", err)
	}
	return c, nil
}

func set[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}
