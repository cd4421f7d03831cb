package convo

import (
	"unicode/utf8"
)

// Chat-format overheads, following OpenAI's published accounting for chat
// models (cl100k_base and o200k_base): every message is framed as
// <|start|>{role}\n{content}<|end|>\n, and every reply is primed with
// <|start|>assistant<|message|>. Counting them makes a token budget a real
// budget for the whole prompt, not just for the message texts.
const (
	// MessageOverheadTokens frames each message (start, separator, end).
	MessageOverheadTokens = 3
	// ReplyPrimingTokens is paid once per prompt for the reply header.
	ReplyPrimingTokens = 3
	// ToolFieldOverheadTokens is added for each tool call or tool result, for
	// the name/id fields and their JSON punctuation.
	ToolFieldOverheadTokens = 1
)

// ModelRole is the role a message of role r has in the model view:
// "system", "user", "assistant" or "tool". RoleSummary records have no model
// role and give "".
func ModelRole(r Role) string {
	switch r {
	case RoleSystem:
		return "system"
	case RoleUser:
		return "user"
	case RoleAssistant, RoleToolCall:
		return "assistant"
	case RoleToolResult:
		return "tool"
	}
	return ""
}

// MessageTokens returns what m costs in the model view with the default
// [View]: its content tokens (a tool result's content compressed as the
// model sees it, see [CompressObservation]), the role, the tool call's id,
// name and arguments, and [MessageOverheadTokens]. A RoleSummary record costs
// 0. Compute it once, when a message is created, and store it in
// Message.Tokens.
//
// A nil tok falls back to [EstimateTokens].
func MessageTokens(tok Tokenizer, m Message) int {
	return View{}.Tokens(tok, m)
}

// PromptTokens is the model-view cost of msgs as a whole prompt: the sum of
// their stored Tokens plus [ReplyPrimingTokens], or 0 for no messages.
// Every TokensBefore/TokensAfter in this package is a PromptTokens value.
func PromptTokens(msgs []Message) int {
	if len(msgs) == 0 {
		return 0
	}
	n := ReplyPrimingTokens
	for i := range msgs {
		n += msgs[i].Tokens
	}
	return n
}

// EstimateTokens is a tokenizer-free upper-bound estimate used when no
// [Tokenizer] is given: one token per CJK (or other non-ASCII) rune, one per
// three ASCII bytes, rounded up.
func EstimateTokens(text string) int {
	ascii, other := 0, 0
	for i := 0; i < len(text); {
		if text[i] < utf8.RuneSelf {
			ascii++
			i++
			continue
		}
		_, size := utf8.DecodeRuneInString(text[i:])
		other++
		i += size
	}
	return (ascii+2)/3 + other
}

// estimator is the Tokenizer behind a nil tokenizer.
type estimator struct{}

// Count is EstimateTokens.
func (estimator) Count(text string) int { return EstimateTokens(text) }

func orEstimate(tok Tokenizer) Tokenizer {
	if tok == nil {
		return estimator{}
	}
	return tok
}

// RequestTokens is the cost of a chat request as it is sent, counted as
// [View.Tokens] counts a stored message: each message's role and content,
// its tool calls' ids, names and arguments, the framing of each, and the
// reply priming once. Unlike a window's own count it includes the system
// prompt, the summary and the documents of the request: it is what a model
// server's prompt count is compared with (calibration compares like with
// like).
func RequestTokens(tok Tokenizer, msgs []ModelMessage) int {
	if len(msgs) == 0 {
		return 0
	}
	tok = orEstimate(tok)
	n := ReplyPrimingTokens
	for _, m := range msgs {
		n += messageCost(tok, m.Role, m.Content, m.ToolCalls, m.ToolCallID != "", m.ToolCallID)
	}
	return n
}
