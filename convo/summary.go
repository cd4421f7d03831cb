package convo

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
)

// SummaryPromptVersion changes whenever the summary prompt changes, so that
// cached summaries made with another prompt are not reused.
const SummaryPromptVersion = "summary-v1"

// SummaryConfig controls summary compression (seed 002, docs/architecture.md §8).
type SummaryConfig struct {
	// ThresholdMessages triggers a summary when the unfolded history (the
	// branch after the system prompt and the current summary) has more than
	// this many messages; 0 disables the message trigger.
	ThresholdMessages int `json:"summaryThresholdMessages"`
	// ThresholdTokens triggers a summary when the unfolded history has more
	// than this many tokens; 0 disables the token trigger.
	ThresholdTokens int `json:"summaryThresholdTokens"`
	// MaxTokens is the summary's token budget (prompted, then enforced).
	MaxTokens int `json:"summaryMaxTokens"`
	// MaxFoldTokens bounds the messages folded by one summariser call; longer
	// backlogs are folded in several incremental steps.
	MaxFoldTokens int `json:"summaryMaxFoldTokens"`
	// FallbackMessages is N of the fallback truncation used when the
	// summariser fails.
	FallbackMessages int `json:"fallbackMessages"`
	// Model names the summariser model. convo does not interpret it; it is
	// part of the config hash, so another model does not reuse the summary.
	Model string `json:"model,omitempty"`
}

// DefaultSummaryConfig returns the defaults: fold when the unfolded history
// exceeds 20 messages (about 10 rounds) or 3000 tokens, summaries of at most
// 500 tokens, at most 8000 tokens folded per call, fallback to the last 10
// messages.
func DefaultSummaryConfig() SummaryConfig {
	return SummaryConfig{ThresholdMessages: 20, ThresholdTokens: 3000, MaxTokens: 500, MaxFoldTokens: 8000, FallbackMessages: 10}
}

// Validate reports the first out-of-range field, wrapping [ErrInvalidConfig].
func (c SummaryConfig) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), ErrInvalidConfig)
	}
	switch {
	case c.ThresholdMessages < 0 || c.ThresholdMessages > 100_000:
		return bad("summaryThresholdMessages %d out of range 0..100000", c.ThresholdMessages)
	case c.ThresholdTokens < 0 || c.ThresholdTokens > MaxMaxTokens:
		return bad("summaryThresholdTokens %d out of range 0..%d", c.ThresholdTokens, MaxMaxTokens)
	case c.ThresholdMessages == 0 && c.ThresholdTokens == 0:
		return bad("summaryThresholdMessages and summaryThresholdTokens are both 0")
	case c.MaxTokens < 16 || c.MaxTokens > 100_000:
		return bad("summaryMaxTokens %d out of range 16..100000", c.MaxTokens)
	case c.MaxFoldTokens < 256 || c.MaxFoldTokens > MaxMaxTokens:
		return bad("summaryMaxFoldTokens %d out of range 256..%d", c.MaxFoldTokens, MaxMaxTokens)
	case c.FallbackMessages < 1 || c.FallbackMessages > 10_000:
		return bad("fallbackMessages %d out of range 1..10000", c.FallbackMessages)
	}
	return nil
}

// Hash identifies what shapes a summary's text: the prompt version, the
// token budget and the model. Thresholds only decide when to fold, so they
// are left out and do not invalidate cached summaries.
func (c SummaryConfig) Hash() string {
	d := sha256.New()
	writeField(d, SummaryPromptVersion)
	writeField(d, strconv.Itoa(c.MaxTokens))
	writeField(d, c.Model)
	return hex.EncodeToString(d.Sum(nil))
}

// ShouldSummarize reports whether an unfolded history of the given size is
// over the threshold: more than ThresholdMessages messages or more than
// ThresholdTokens tokens (a zero threshold never triggers).
func ShouldSummarize(messages, tokens int, c SummaryConfig) bool {
	return (c.ThresholdMessages > 0 && messages > c.ThresholdMessages) ||
		(c.ThresholdTokens > 0 && tokens > c.ThresholdTokens)
}

// SummaryCacheKey is the cache key of the summary of a branch prefix: the
// prefix's path hash (up to the last folded message), the folded count and
// the config hash.
func SummaryCacheKey(pathHash string, folded int, configHash string) string {
	d := sha256.New()
	writeField(d, pathHash)
	writeField(d, strconv.Itoa(folded))
	writeField(d, configHash)
	return hex.EncodeToString(d.Sum(nil))
}

// SummaryState is a running summary: a branch's messages up to Through,
// folded into Text. It is small, so a workflow can carry it across
// continue-as-new; the zero value means "no summary".
type SummaryState struct {
	// Text is the summary.
	Text string `json:"text,omitempty"`
	// Tokens is what the summary message costs in the model view.
	Tokens int `json:"tokens,omitempty"`
	// Through is the id of the last folded message.
	Through string `json:"through,omitempty"`
	// Folded is the branch position after Through: positions [0, Folded),
	// except a kept system prompt, are covered by Text.
	Folded int `json:"folded,omitempty"`
	// PathHash is the path hash of the branch up to Through.
	PathHash string `json:"pathHash,omitempty"`
	// Key is SummaryCacheKey(PathHash, Folded, config hash).
	Key string `json:"key,omitempty"`
}

// IsZero reports whether s holds no summary.
func (s SummaryState) IsZero() bool { return s.Folded == 0 }

// appliesTo reports whether s summarises a prefix of the branch in src.
func (s SummaryState) appliesTo(src source) bool {
	return s.Folded >= 1 && s.Folded <= src.length() &&
		src.at(s.Folded-1).ID == s.Through && src.hashAt(s.Folded-1) == s.PathHash
}

// summaryPrefix introduces the summary in the model view.
const summaryPrefix = "Summary of the earlier conversation:\n"

// SummaryMessage is the system message that carries a summary into the
// model view (its Tokens unset).
func SummaryMessage(text string) Message {
	return Message{ID: "summary", Role: RoleSystem, Content: summaryPrefix + text}
}

// summaryReserve is what PlanSummary sets aside for the future summary: its
// budget plus the framing of the summary message.
func summaryReserve(c SummaryConfig) int {
	return c.MaxTokens + MessageOverheadTokens + 16
}

// SummaryPlan says what to fold next. Fold empty means nothing to do.
type SummaryPlan struct {
	// Triggered reports that the unfolded history is over the threshold.
	Triggered bool `json:"triggered"`
	// Prev is the summary being extended (zero for the first one).
	Prev SummaryState `json:"prev"`
	// Fold are the messages to fold into Prev, oldest first: the oldest
	// unfolded messages, never splitting a tool call from its result, older
	// than the window that will be kept beside the summary.
	Fold []Message `json:"fold,omitempty"`
	// Through, Folded, PathHash and Key describe the summary this plan
	// produces (see [SummaryState]).
	Through  string `json:"through,omitempty"`
	Folded   int    `json:"folded,omitempty"`
	PathHash string `json:"pathHash,omitempty"`
	Key      string `json:"key,omitempty"`
	// More reports that MaxFoldTokens cut this step short: plan again once
	// this summary is applied.
	More bool `json:"more,omitempty"`
	// Skipped are the oldest unfolded messages this fold leaves out: a
	// backlog longer than MaxBacklogFolds steps (an imported history, a
	// long outage of the summariser) is folded from its newest part, the
	// part nearest the window, and the summary says how many it passed
	// over. They count as folded.
	Skipped int `json:"skipped,omitempty"`
}

// MaxBacklogFolds bounds the fold steps a backlog takes: beyond that many
// times MaxFoldTokens, its oldest messages are skipped (SummaryPlan.Skipped)
// rather than summarised in hundreds of model calls that each delay the
// next turn.
const MaxBacklogFolds = 4

// PlanSummary decides when and what to fold for a branch (oldest first,
// Tokens set), given the current summary (zero for none; ignored when it
// does not belong to this branch). The kept window is computed with the
// "last" token strategy and room reserved for the summary.
func PlanSummary(branch []Message, w WindowConfig, c SummaryConfig, prev SummaryState) (SummaryPlan, error) {
	if err := validateBoth(w, c); err != nil {
		return SummaryPlan{}, err
	}
	src, err := newSliceSource(branch)
	if err != nil {
		return SummaryPlan{}, fmt.Errorf("plan summary: %w", err)
	}
	return planSummary(src, w, c, prev)
}

// PlanSummary is [PlanSummary] for the branch ending at leafID, in
// O(window + fold) instead of O(branch).
func (t *Tree) PlanSummary(leafID string, w WindowConfig, c SummaryConfig, prev SummaryState) (SummaryPlan, error) {
	if err := validateBoth(w, c); err != nil {
		return SummaryPlan{}, err
	}
	src, err := t.source(leafID)
	if err != nil {
		return SummaryPlan{}, fmt.Errorf("plan summary: %w", err)
	}
	return planSummary(src, w, c, prev)
}

func validateBoth(w WindowConfig, c SummaryConfig) error {
	if err := w.Validate(); err != nil {
		return err
	}
	return c.Validate()
}

func planSummary(src source, w WindowConfig, c SummaryConfig, prev SummaryState) (SummaryPlan, error) {
	n := src.length()
	lo := 0
	if n > 0 && w.IncludeSystem && src.at(0).Role == RoleSystem {
		lo = 1
	}
	if !prev.appliesTo(src) {
		prev = SummaryState{}
	}
	floor := max(lo, prev.Folded)
	plan := SummaryPlan{Prev: prev}
	plan.Triggered = n > floor && ShouldSummarize(n-floor, src.totalTokens()-src.tokensBefore(floor), c)
	if !plan.Triggered {
		return plan, nil
	}
	w.TokenStrategy = TokenStrategyLast
	wc, err := cut(src, w, floor, summaryReserve(c))
	if err != nil {
		return SummaryPlan{}, fmt.Errorf("plan summary: %w", err)
	}
	from := skipBacklog(src, floor, wc.a2, MaxBacklogFolds*c.MaxFoldTokens)
	end := foldEnd(src, from, wc.a2, c.MaxFoldTokens)
	if end <= from {
		return plan, nil
	}
	plan.Skipped = from - floor
	plan.Fold = src.appendRange(nil, from, end)
	plan.Through = src.at(end - 1).ID
	plan.Folded = end
	plan.PathHash = src.hashAt(end - 1)
	plan.Key = SummaryCacheKey(plan.PathHash, end, c.Hash())
	plan.More = end < wc.a2
	return plan, nil
}

// skipBacklog returns where folding starts between floor and limit: floor,
// unless the messages in [floor, limit) hold more than budget tokens; then
// the first position from which the messages up to limit fit in budget,
// moved back to the start of the tool unit it falls in.
func skipBacklog(src source, floor, limit, budget int) int {
	total := src.tokensBefore(limit)
	if total-src.tokensBefore(floor) <= budget {
		return floor
	}
	from := limit
	for from > floor && total-src.tokensBefore(from-1) <= budget {
		from--
	}
	for from > floor && src.openAfter(from-1) != 0 { // never inside a tool unit
		from--
	}
	return from
}

// foldEnd returns the end of the next fold step from floor towards limit:
// whole tool units while they fit in maxTokens, but at least one unit.
func foldEnd(src source, floor, limit, maxTokens int) int {
	end, tokens := floor, 0
	for p := floor; p < limit; p++ {
		tokens += src.at(p).Tokens
		if tokens > maxTokens && end > floor {
			break
		}
		if src.openAfter(p) == 0 {
			end = p + 1
		}
	}
	return end
}

// Prompt is SummaryPrompt(p.Prev.Text, p.Fold, c), the running summary
// noting the messages the fold skipped, if any.
func (p SummaryPlan) Prompt(c SummaryConfig) []ModelMessage {
	prev := p.Prev.Text
	if p.Skipped > 0 {
		prev = strings.TrimSpace(fmt.Sprintf("%s\n(%d earlier messages were not summarised.)", prev, p.Skipped))
	}
	return SummaryPrompt(prev, p.Fold, c)
}

// SummaryPrompt builds the summariser's prompt: fold prev (the running
// summary, "" for none) and the messages to fold into an updated summary of
// at most c.MaxTokens tokens, keeping user intents and needs, named entities
// and ids, decisions and conclusions, preferences and open questions.
func SummaryPrompt(prev string, fold []Message, c SummaryConfig) []ModelMessage {
	budget := c.MaxTokens
	if budget <= 0 {
		budget = DefaultSummaryConfig().MaxTokens
	}
	system := fmt.Sprintf(`You maintain the running summary of a conversation between a user and an assistant.
Update the existing summary with the new messages, so that the summary alone lets the assistant continue the conversation.
Keep:
- the user's intents and needs;
- named entities exactly as written: people, products, order numbers, ids, file, table and tool names, figures;
- decisions made and conclusions reached, including tool results that matter;
- the user's preferences;
- open questions and unfinished tasks.
Drop greetings, small talk and repetition. Write plain text in the language of the conversation, at most %d tokens.
Answer with the updated summary only.`, budget)
	var b strings.Builder
	b.WriteString("Existing summary:\n")
	if strings.TrimSpace(prev) == "" {
		b.WriteString("(none)\n")
	} else {
		b.WriteString(strings.TrimSpace(prev))
		b.WriteString("\n")
	}
	b.WriteString("\nNew messages:\n")
	names := make(map[string]string)
	for i := range fold {
		m := &fold[i]
		switch m.Role {
		case RoleSummary:
			continue
		case RoleToolCall:
			names[m.ToolCall.ID] = m.ToolCall.Name
			fmt.Fprintf(&b, "[tool call] %s(%s)", m.ToolCall.Name, string(m.ToolCall.Args))
			if m.Content != "" {
				fmt.Fprintf(&b, " %s", m.Content)
			}
		case RoleToolResult:
			fmt.Fprintf(&b, "[tool result %s] %s", names[m.ToolCallID], CompressObservation(m.Content, 2000))
		default:
			fmt.Fprintf(&b, "[%s] %s", m.Role, m.Content)
		}
		b.WriteString("\n")
	}
	return []ModelMessage{{Role: "system", Content: system}, {Role: "user", Content: b.String()}}
}

// NewSummaryState turns the summariser's answer for plan p into the new
// running summary. The text is trimmed and, if longer than c.MaxTokens,
// cut to fit; Tokens is the summary message's cost counted with tok.
func NewSummaryState(tok Tokenizer, p SummaryPlan, text string, c SummaryConfig) SummaryState {
	tok = orEstimate(tok)
	text = fitTokens(tok, strings.TrimSpace(text), c.MaxTokens)
	return SummaryState{
		Text:     text,
		Tokens:   MessageTokens(tok, SummaryMessage(text)),
		Through:  p.Through,
		Folded:   p.Folded,
		PathHash: p.PathHash,
		Key:      p.Key,
	}
}

// fitTokens returns the longest rune prefix of s with at most budget tokens.
func fitTokens(tok Tokenizer, s string, budget int) string {
	if budget <= 0 || tok.Count(s) <= budget {
		return s
	}
	r := []rune(s)
	lo, hi := 0, len(r)-1 // r[:lo] fits; the answer is at most hi
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if tok.Count(string(r[:mid])) <= budget {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return string(r[:lo])
}
