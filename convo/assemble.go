package convo

import "fmt"

// Context is what the model sees of a branch: the system prompt, the running
// summary and the kept window. The full transcript (for display) is the
// branch itself, [Tree.Branch]; both views come from the same tree.
type Context struct {
	// Trimmed holds the system prompt and window (the summary is not among
	// Messages). TokensAfter includes the summary message; TrimmedCount
	// counts folded messages too.
	Trimmed
	// Summary is the running summary shown to the model, "" for none.
	Summary string `json:"summary,omitempty"`
	// SummaryTokens is the summary message's cost.
	SummaryTokens int `json:"summaryTokens,omitempty"`
	// Folded is the number of branch positions the summary covers.
	Folded int `json:"folded,omitempty"`
	// SummaryIgnored reports a summary state that belongs to another branch
	// (or is stale) and was not used.
	SummaryIgnored bool `json:"summaryIgnored,omitempty"`
	// SummaryDropped reports a summary left out because the system prompt and
	// newest round alone fill MaxTokens.
	SummaryDropped bool `json:"summaryDropped,omitempty"`
	// Degraded reports a fallback truncation (the summariser failed).
	Degraded bool `json:"degraded,omitempty"`
}

// ModelMessages renders the context for the model through view v: the system
// prompt, then the summary as a system message, then the window.
func (c Context) ModelMessages(v View) ([]ModelMessage, error) {
	msgs := c.Messages
	if c.Summary != "" {
		at := 0
		if len(msgs) > 0 && msgs[0].Role == RoleSystem {
			at = 1
		}
		withSummary := make([]Message, 0, len(msgs)+1)
		withSummary = append(withSummary, msgs[:at]...)
		withSummary = append(withSummary, SummaryMessage(c.Summary))
		msgs = append(withSummary, msgs[at:]...)
	}
	out, err := v.ModelMessages(msgs)
	if err != nil {
		return nil, fmt.Errorf("context model messages: %w", err)
	}
	return out, nil
}

// Assemble builds the model view of a branch (oldest first, Tokens set)
// with summary s (zero for none): the system prompt, s, and the window of
// messages after s.Folded. The window is cut with s's tokens reserved, so
// with a token strategy summary + kept messages ≤ MaxTokens; when the system
// prompt and newest round leave no room, the summary is dropped
// (SummaryDropped). A summary of another branch is ignored (SummaryIgnored).
func Assemble(branch []Message, w WindowConfig, s SummaryState) (Context, error) {
	if err := w.Validate(); err != nil {
		return Context{}, err
	}
	src, err := newSliceSource(branch)
	if err != nil {
		return Context{}, fmt.Errorf("assemble: %w", err)
	}
	return assemble(src, w, s)
}

// Assemble is [Assemble] for the branch ending at leafID, in O(window).
func (t *Tree) Assemble(leafID string, w WindowConfig, s SummaryState) (Context, error) {
	if err := w.Validate(); err != nil {
		return Context{}, err
	}
	src, err := t.source(leafID)
	if err != nil {
		return Context{}, fmt.Errorf("assemble: %w", err)
	}
	return assemble(src, w, s)
}

func assemble(src source, w WindowConfig, s SummaryState) (Context, error) {
	var c Context
	floor, reserve := 0, 0
	use := !s.IsZero() && s.appliesTo(src)
	if use {
		floor, reserve = s.Folded, s.Tokens
	} else if !s.IsZero() {
		c.SummaryIgnored = true
	}
	tr, err := trim(src, w, floor, reserve)
	if err != nil {
		return Context{}, fmt.Errorf("assemble: %w", err)
	}
	if use && tr.OverBudget {
		if tr, err = trim(src, w, floor, 0); err != nil {
			return Context{}, fmt.Errorf("assemble: %w", err)
		}
		use, c.SummaryDropped = false, true
	}
	c.Trimmed = tr
	if use {
		c.Summary, c.SummaryTokens, c.Folded = s.Text, s.Tokens, s.Folded
		sum := s.Tokens
		for i := range tr.Messages {
			sum += tr.Messages[i].Tokens
		}
		c.TokensAfter = promptOf(sum, len(tr.Messages)+1)
	}
	return c, nil
}

// AssembleFallback builds a degraded model view without a summary: the
// system prompt and at most the last n messages (fewer when the n-th would
// split a tool call from its result), then cut by w like any window.
func AssembleFallback(branch []Message, w WindowConfig, n int) (Context, error) {
	if err := w.Validate(); err != nil {
		return Context{}, err
	}
	src, err := newSliceSource(branch)
	if err != nil {
		return Context{}, fmt.Errorf("assemble fallback: %w", err)
	}
	return assembleFallback(src, w, n)
}

// AssembleFallback is [AssembleFallback] for the branch ending at leafID, in
// O(n).
func (t *Tree) AssembleFallback(leafID string, w WindowConfig, n int) (Context, error) {
	if err := w.Validate(); err != nil {
		return Context{}, err
	}
	src, err := t.source(leafID)
	if err != nil {
		return Context{}, fmt.Errorf("assemble fallback: %w", err)
	}
	return assembleFallback(src, w, n)
}

func assembleFallback(src source, w WindowConfig, n int) (Context, error) {
	total := src.length()
	floor := max(total-max(n, 0), 0)
	for floor < total && !validCut(src, floor) {
		floor++
	}
	tr, err := trim(src, w, floor, 0)
	if err != nil {
		return Context{}, fmt.Errorf("assemble fallback: %w", err)
	}
	return Context{Trimmed: tr, Degraded: true}, nil
}
