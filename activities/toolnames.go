package activities

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/ctxflow/ctxflow/convo"
)

// maxWireName is the longest function name OpenAI's API takes.
const maxWireName = 64

// WireName is the name a tool is offered to a model under. OpenAI's API
// takes function names of 1 to 64 characters in [A-Za-z0-9_-] (and chat
// templates of local models are safest with the same), while MCP tools are
// named "mcp:<server>/<tool>" and an MCP tool name may hold dots: ':' and
// '/' become "__", any other character outside the set '_', and a name
// still too long is cut and ends with 8 hex digits of its SHA-256.
// "mcp:everything/get-sum" is offered as "mcp__everything__get-sum"; a
// name already in the set is offered as it is. The planner maps the
// model's calls back ([wireNames]).
func WireName(name string) string {
	var b strings.Builder
	for _, r := range name {
		switch {
		case r == ':' || r == '/':
			b.WriteString("__")
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	w := b.String()
	if w == "" {
		w = "_"
	}
	if len(w) > maxWireName {
		w = w[:maxWireName-9] + "_" + hashSuffix(name)
	}
	return w
}

func hashSuffix(name string) string {
	sum := sha256.Sum256([]byte(name))
	return hex.EncodeToString(sum[:4])
}

// wireNames maps the tools offered in one request to their wire names and
// back. Two names that would meet on the wire ("a.b", "a_b") are told
// apart by the hash suffix of the later one.
type wireNames struct {
	out  map[string]string // name → wire name
	back map[string]string // wire name → name
}

func newWireNames(tools []ToolSpec) wireNames {
	n := wireNames{out: make(map[string]string, len(tools)), back: make(map[string]string, len(tools))}
	for _, t := range tools {
		if _, ok := n.out[t.Name]; ok {
			continue
		}
		w := WireName(t.Name)
		if _, taken := n.back[w]; taken {
			w = w[:min(len(w), maxWireName-9)] + "_" + hashSuffix(t.Name)
		}
		n.out[t.Name], n.back[w] = w, t.Name
	}
	return n
}

// wire is the wire name of a tool (a name not offered stays as it is).
func (n wireNames) wire(name string) string {
	if w, ok := n.out[name]; ok {
		return w
	}
	return name
}

// name is the tool a wire name stands for (a name that stands for none,
// such as a tool's own name the model wrote, stays as it is).
func (n wireNames) name(wire string) string {
	if name, ok := n.back[wire]; ok {
		return name
	}
	return wire
}

// identity reports that every name is its wire name (no remote tools).
func (n wireNames) identity() bool {
	for name, w := range n.out {
		if name != w {
			return false
		}
	}
	return true
}

// specs are the tools under their wire names.
func (n wireNames) specs(tools []ToolSpec) []ToolSpec {
	out := make([]ToolSpec, len(tools))
	for i, t := range tools {
		out[i] = t
		out[i].Name = n.wire(t.Name)
	}
	return out
}

// view is the model view with its tool calls and results under their
// wire names.
func (n wireNames) view(msgs []convo.ModelMessage) []convo.ModelMessage {
	out := make([]convo.ModelMessage, len(msgs))
	for i, m := range msgs {
		out[i] = m
		out[i].ToolName = n.wire(m.ToolName)
		if len(m.ToolCalls) > 0 {
			out[i].ToolCalls = n.calls(m.ToolCalls, n.wire)
		}
	}
	return out
}

// calls are calls with their names mapped by f.
func (n wireNames) calls(calls []convo.ToolCall, f func(string) string) []convo.ToolCall {
	out := make([]convo.ToolCall, len(calls))
	for i, c := range calls {
		out[i] = c
		out[i].Name = f(c.Name)
	}
	return out
}
