package convo

import (
	"encoding/json"
	"fmt"
)

// Validate checks the field rules every stored message obeys:
//   - ID is non-empty and Role is known;
//   - a RoleToolCall message has a ToolCall with an ID and a Name, and Args
//     that are empty or valid JSON; no other role carries a ToolCall;
//   - a RoleToolResult message has a ToolCallID; no other role carries one;
//   - Tokens is not negative.
//
// Errors wrap [ErrInvalidMessage]. Pairing of calls and results is a branch
// property, checked by [Tree.Append], [Trim] and [ToModelMessages].
func (m Message) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("message %q: %s: %w", m.ID, fmt.Sprintf(format, args...), ErrInvalidMessage)
	}
	if m.ID == "" {
		return bad("empty id")
	}
	if !m.Role.Valid() {
		return bad("unknown role %q", m.Role)
	}
	if m.Tokens < 0 {
		return bad("negative tokens %d", m.Tokens)
	}
	if m.Role == RoleToolCall {
		switch {
		case m.ToolCall == nil:
			return bad("tool_call without toolCall")
		case m.ToolCall.ID == "":
			return bad("tool_call with empty call id")
		case m.ToolCall.Name == "":
			return bad("tool_call with empty tool name")
		case len(m.ToolCall.Args) > 0 && !json.Valid(m.ToolCall.Args):
			return bad("tool_call args are not valid JSON")
		}
	} else if m.ToolCall != nil {
		return bad("toolCall set on a %s message", m.Role)
	}
	if m.Role == RoleToolResult {
		if m.ToolCallID == "" {
			return bad("tool_result without toolCallId")
		}
	} else if m.ToolCallID != "" {
		return bad("toolCallId set on a %s message", m.Role)
	}
	return nil
}
