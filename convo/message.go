package convo

import (
	"encoding/json"
	"time"
)

// Role is who wrote a message.
type Role string

// The roles of a conversation message.
const (
	RoleSystem     Role = "system"
	RoleUser       Role = "user"
	RoleAssistant  Role = "assistant"
	RoleToolCall   Role = "tool_call"
	RoleToolResult Role = "tool_result"
	// RoleSummary marks a compaction record: its Content is a running summary
	// of the branch up to Meta[MetaSummaryThrough]. It is part of the
	// transcript but costs nothing in the model view (the summary reaches the
	// model through [Context], not as a message).
	RoleSummary Role = "summary"
)

// MetaStatus is the Meta key of a message's status; StatusCancelled marks
// the partial answer of a cancelled turn: shown in the transcript, never in
// the model view unless the user message right below it continues it
// (MetaContinues names it: "continue" asked of a stopped answer).
const (
	MetaStatus      = "status"
	StatusCancelled = "cancelled"
	MetaContinues   = "continues"
)

// Valid reports whether r is one of the roles above.
func (r Role) Valid() bool {
	switch r {
	case RoleSystem, RoleUser, RoleAssistant, RoleToolCall, RoleToolResult, RoleSummary:
		return true
	}
	return false
}

// ToolCall is the call an assistant asked for.
type ToolCall struct {
	ID   string          `json:"id"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args,omitempty"`
}

// Message is one node of a conversation tree.
type Message struct {
	ID       string `json:"id"`
	ParentID string `json:"parentId,omitempty"`
	Role     Role   `json:"role"`
	Content  string `json:"content"`
	// ToolCall is set when Role is RoleToolCall.
	ToolCall *ToolCall `json:"toolCall,omitempty"`
	// ToolCallID links a RoleToolResult message to its call.
	ToolCallID string `json:"toolCallId,omitempty"`
	// Tokens is the message's cost in the model view, chat-format overhead
	// included. It is computed once, when the message is appended.
	Tokens    int               `json:"tokens,omitempty"`
	CreatedAt time.Time         `json:"createdAt"`
	Meta      map[string]string `json:"meta,omitempty"`
}

// ModelMessage is a message as a chat model sees it (the model view).
type ModelMessage struct {
	// Role is one of "system", "user", "assistant", "tool".
	Role      string     `json:"role"`
	Content   string     `json:"content"`
	ToolCalls []ToolCall `json:"toolCalls,omitempty"`
	// ToolCallID and ToolName are set on "tool" messages.
	ToolCallID string `json:"toolCallId,omitempty"`
	ToolName   string `json:"toolName,omitempty"`
}

// Tokenizer counts tokens. Implementations must be safe for concurrent use.
type Tokenizer interface {
	// Count returns the number of tokens text encodes to.
	Count(text string) int
}
