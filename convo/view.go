package convo

import (
	"fmt"
	"strings"
)

// View says how stored messages are shown to the model. The zero value is
// the default view: tool results capped at [DefaultObservationMaxChars].
// The model view is a pure function of the messages and the View, so it is
// deterministic for the same inputs.
type View struct {
	// ObservationMaxChars caps each tool result's content (in characters)
	// through [CompressObservation]; 0 means [DefaultObservationMaxChars].
	ObservationMaxChars int `json:"observationMaxChars,omitempty"`
}

func (v View) observationMax() int {
	if v.ObservationMaxChars <= 0 {
		return DefaultObservationMaxChars
	}
	return v.ObservationMaxChars
}

// Content returns m's content as the model sees it: tool results are
// compressed, everything else is verbatim.
func (v View) Content(m Message) string {
	if m.Role == RoleToolResult {
		return CompressObservation(m.Content, v.observationMax())
	}
	return m.Content
}

// Tokens returns m's cost in this view; see [MessageTokens].
func (v View) Tokens(tok Tokenizer, m Message) int {
	if m.Role == RoleSummary {
		return 0
	}
	var calls []ToolCall
	if m.Role == RoleToolCall && m.ToolCall != nil {
		calls = []ToolCall{*m.ToolCall}
	}
	return messageCost(orEstimate(tok), ModelRole(m.Role), v.Content(m), calls, m.Role == RoleToolResult, m.ToolCallID)
}

// messageCost is one message's cost as the model sees it: its frame, role
// and content, each of its tool calls' id, name and arguments, and for a
// tool result the id of its call. [View.Tokens] (a stored message) and
// [RequestTokens] (a message as sent) both count with it, so that a
// calibration compares like with like.
func messageCost(tok Tokenizer, role, content string, calls []ToolCall, result bool, callID string) int {
	n := MessageOverheadTokens + tok.Count(role) + tok.Count(content)
	for _, c := range calls {
		n += ToolFieldOverheadTokens + tok.Count(c.ID) + tok.Count(c.Name) + tok.Count(string(c.Args))
	}
	if result {
		n += ToolFieldOverheadTokens + tok.Count(callID)
	}
	return n
}

// ToModelMessages converts a branch (oldest first) to the default model view;
// see [View.ModelMessages].
func ToModelMessages(msgs []Message) ([]ModelMessage, error) {
	return View{}.ModelMessages(msgs)
}

// ModelMessages converts a branch (oldest first) to chat messages:
//   - system, user and assistant messages map directly;
//   - a tool_call becomes an assistant message with ToolCalls; consecutive
//     tool calls (parallel calls) are merged into one assistant message;
//   - a tool_result becomes a "tool" message with ToolCallID and the
//     ToolName of its call, its content compressed by the View;
//   - RoleSummary records and cancelled answers (Meta[MetaStatus] is
//     StatusCancelled) are skipped, but for a cancelled answer that the
//     user message right after it continues (its Meta[MetaContinues] is
//     the answer's id): the model then sees what it wrote and goes on.
//
// Calls and results must pair up: a result without an earlier unanswered call
// with its id is [ErrOrphanResult]; a call left unanswered at the end, or
// followed by a non-tool message before its result, is [ErrUnansweredCall].
func (v View) ModelMessages(msgs []Message) ([]ModelMessage, error) {
	if err := checkPairing(msgs); err != nil {
		return nil, err
	}
	out := make([]ModelMessage, 0, len(msgs))
	names := make(map[string]string)
	prevCall := false
	for i := range msgs {
		m := &msgs[i]
		if m.Meta[MetaStatus] == StatusCancelled && !continued(msgs, i) {
			continue
		}
		switch m.Role {
		case RoleSummary:
			continue
		case RoleToolCall:
			names[m.ToolCall.ID] = m.ToolCall.Name
			tc := ToolCall{ID: m.ToolCall.ID, Name: m.ToolCall.Name, Args: m.ToolCall.Args}
			if prevCall {
				last := &out[len(out)-1]
				last.ToolCalls = append(last.ToolCalls, tc)
				if m.Content != "" {
					last.Content = joinNonEmpty(last.Content, m.Content)
				}
			} else {
				out = append(out, ModelMessage{Role: "assistant", Content: m.Content, ToolCalls: []ToolCall{tc}})
			}
			prevCall = true
			continue
		case RoleToolResult:
			out = append(out, ModelMessage{Role: "tool", Content: v.Content(*m), ToolCallID: m.ToolCallID, ToolName: names[m.ToolCallID]})
		default:
			out = append(out, ModelMessage{Role: ModelRole(m.Role), Content: m.Content})
		}
		prevCall = false
	}
	return out, nil
}

func joinNonEmpty(a, b string) string {
	if a == "" {
		return b
	}
	return a + "\n" + b
}

// checkPairing applies the tool pairing rules of [View.ModelMessages] to a
// whole slice.
func checkPairing(msgs []Message) error {
	var p pairing
	for i := range msgs {
		if err := p.step(&msgs[i]); err != nil {
			return fmt.Errorf("message %d: %w", i, err)
		}
	}
	return p.end()
}

// pairing tracks the unanswered tool calls while a branch is read oldest
// first. The number of open calls is small (one assistant turn's parallel
// calls), so a slice beats a map.
type pairing struct {
	open []string // ids of unanswered calls
	last string   // id of the last message, for errors
}

func (p *pairing) step(m *Message) error {
	if err := m.Validate(); err != nil {
		return err
	}
	switch m.Role {
	case RoleToolCall:
		for _, id := range p.open {
			if id == m.ToolCall.ID {
				return fmt.Errorf("message %q: call id %q is already open: %w", m.ID, id, ErrInvalidMessage)
			}
		}
		p.open = append(p.open, m.ToolCall.ID)
	case RoleToolResult:
		k := -1
		for j, id := range p.open {
			if id == m.ToolCallID {
				k = j
				break
			}
		}
		if k < 0 {
			return fmt.Errorf("message %q answers call %q: %w", m.ID, m.ToolCallID, ErrOrphanResult)
		}
		p.open = append(p.open[:k], p.open[k+1:]...)
	default:
		if len(p.open) > 0 {
			return fmt.Errorf("%s message %q follows unanswered call(s) %s: %w", m.Role, m.ID, strings.Join(p.open, ", "), ErrUnansweredCall)
		}
	}
	p.last = m.ID
	return nil
}

func (p *pairing) end() error {
	if len(p.open) > 0 {
		return fmt.Errorf("branch ends at %q with unanswered call(s) %s: %w", p.last, strings.Join(p.open, ", "), ErrUnansweredCall)
	}
	return nil
}

// continued reports whether the message after msgs[i] is a user message
// that continues it.
func continued(msgs []Message, i int) bool {
	return i+1 < len(msgs) && msgs[i+1].Role == RoleUser && msgs[i+1].Meta[MetaContinues] == msgs[i].ID
}
