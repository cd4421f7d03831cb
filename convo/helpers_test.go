package convo

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/ctxflow/ctxflow/internal/proptest"
)

// TestMain makes every rapid property run at least 200 cases: unless
// -rapid.checks or RAPID_CHECKS says otherwise, it sets -rapid.checks=200
// (rapid's own default is 100). The Makefile passes -rapid.checks=200 too.
func TestMain(m *testing.M) { proptest.Main(m) }

// wordTok is the fake tokenizer of the convo tests: one token per
// whitespace-separated word.
type wordTok struct{}

func (wordTok) Count(s string) int { return len(strings.Fields(s)) }

// spec builds a chain from a compact description such as
// "s10 u20 a20 c5 r40 u20": role letter (s system, u user, a assistant,
// c tool_call, r tool_result, x summary record) and Tokens. Ids are the
// letter and the position ("s0", "u1", ...); call ids are "call-<id>"; a
// result answers the oldest unanswered call.
func spec(tb testing.TB, s string) []Message {
	tb.Helper()
	var msgs []Message
	var open []string
	for i, f := range strings.Fields(s) {
		tokens, err := strconv.Atoi(f[1:])
		if err != nil {
			tb.Fatalf("spec %q: %v", f, err)
		}
		id := fmt.Sprintf("%c%d", f[0], i)
		m := Message{ID: id, Tokens: tokens, Content: "text of " + id}
		if i > 0 {
			m.ParentID = msgs[i-1].ID
		}
		switch f[0] {
		case 's':
			m.Role = RoleSystem
		case 'u':
			m.Role = RoleUser
		case 'a':
			m.Role = RoleAssistant
		case 'x':
			m.Role = RoleSummary
		case 'c':
			m.Role = RoleToolCall
			m.ToolCall = &ToolCall{ID: "call-" + id, Name: "search", Args: json.RawMessage(`{"q":"x"}`)}
			open = append(open, m.ToolCall.ID)
		case 'r':
			m.Role = RoleToolResult
			if len(open) == 0 {
				tb.Fatalf("spec %q: result without open call", s)
			}
			m.ToolCallID, open = open[0], open[1:]
		default:
			tb.Fatalf("spec %q: unknown role letter", f)
		}
		msgs = append(msgs, m)
	}
	return msgs
}

func ids(msgs []Message) []string {
	out := make([]string, len(msgs))
	for i := range msgs {
		out[i] = msgs[i].ID
	}
	return out
}

func treeOf(tb testing.TB, msgs []Message) *Tree {
	tb.Helper()
	t := NewTree()
	for _, m := range msgs {
		if err := t.Append(m); err != nil {
			tb.Fatalf("append %s: %v", m.ID, err)
		}
	}
	return t
}
