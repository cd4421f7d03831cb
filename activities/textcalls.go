package activities

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/ctxflow/ctxflow/convo"
)

// Tool calls written as text (issue 24, item 4). A model that takes tools
// natively sometimes writes its call in the reply's text instead: small
// local models write {"name": ..., "arguments": ...}, fenced in ```json or
// not, Qwen models wrap it in <tool_call> tags, others use the JSON-mode
// format of seed 001 ({"tool", "args"}) or ReAct's {"action",
// "action_input"}. readText finds such calls; a reply that tries to be one
// and fails to parse is a parse error, which the task observes as in JSON
// mode (seed 001 §1); prose stays the final answer.

// textReply is what the text of a reply without native tool calls holds:
// tool calls, or an answer, or (Err) a failed attempt at a call.
type textReply struct {
	Calls   []convo.ToolCall
	Thought string
	Answer  string
	Err     error
}

// maxJSONStarts bounds the brackets of a reply tried as a JSON value's
// start: each try reads the rest of the reply.
const maxJSONStarts = 16

// readText classifies the text of a reply that made no native tool call,
// to a request offering tools: tool calls of these tools written in it
// (tagged, fenced, bare or amid prose), an answer given as JSON
// ({"answer": ...}), a broken attempt at a call (Err), or prose, the
// answer itself.
func readText(content string, tools []ToolSpec) textReply {
	s := strings.TrimSpace(content)
	known := make(map[string]bool, len(tools))
	for _, t := range tools {
		known[t.Name] = true
	}
	if i := strings.Index(s, toolCallTag); i >= 0 {
		r, err := readTagged(s[i:], known)
		if err != nil {
			return textReply{Err: err}
		}
		r.Thought = cmp.Or(r.Thought, lead(s[:i]))
		return r
	}
	var firstErr error
	skip := 0 // the end of the last JSON value read: brackets in it start no call
	for _, start := range jsonStarts(s) {
		if start < skip {
			continue
		}
		raw, n, err := jsonAt(s[start:])
		if err != nil {
			continue
		}
		r, err := decodeCalls(raw, known)
		if err == nil {
			r.Thought = cmp.Or(r.Thought, lead(s[:start]))
			return r
		}
		if firstErr == nil {
			firstErr = fmt.Errorf("the JSON at byte %d: %w", start, err)
		}
		skip = start + n
	}
	if triesCall(s, known) {
		if firstErr == nil {
			firstErr = convo.ErrNoJSON
		}
		return textReply{Err: firstErr}
	}
	return textReply{Thought: s, Answer: s}
}

// toolCallTag opens a call in the text of Qwen models (Hermes format).
const toolCallTag = "<tool_call>"

// readTagged reads the calls of <tool_call> tags (the last one may be cut
// off, unclosed); s starts with the first tag. Every tag must hold calls
// of known tools.
func readTagged(s string, known map[string]bool) (textReply, error) {
	var out textReply
	for n := 1; ; n++ {
		i := strings.Index(s, toolCallTag)
		if i < 0 {
			return out, nil
		}
		body := s[i+len(toolCallTag):]
		end := strings.Index(body, "</tool_call>")
		if end < 0 {
			end = len(body)
		}
		s = body[end:]
		raw, err := convo.ExtractJSON(body[:end])
		if err != nil {
			return out, fmt.Errorf("<tool_call> %d: %w", n, err)
		}
		r, err := decodeCalls(raw, known)
		if err == nil && len(r.Calls) == 0 {
			err = errors.New(`it holds an "answer", not a call`)
		}
		if err != nil {
			return out, fmt.Errorf("<tool_call> %d: %w", n, err)
		}
		out.Calls = append(out.Calls, r.Calls...)
		out.Thought = cmp.Or(out.Thought, r.Thought)
	}
}

// jsonStarts are the offsets of s's first brackets, where a JSON value
// may start.
func jsonStarts(s string) []int {
	var out []int
	for i := 0; i < len(s) && len(out) < maxJSONStarts; i++ {
		if s[i] == '{' || s[i] == '[' {
			out = append(out, i)
		}
	}
	return out
}

// jsonAt is the JSON value s starts with, and its length in s when s holds
// it verbatim; else the value [convo.ExtractJSON] finds in s, repaired,
// of unknown length (0).
func jsonAt(s string) (json.RawMessage, int, error) {
	dec := json.NewDecoder(strings.NewReader(s))
	var raw json.RawMessage
	if err := dec.Decode(&raw); err == nil {
		return raw, int(dec.InputOffset()), nil
	}
	raw, err := convo.ExtractJSON(s)
	return raw, 0, err
}

// lead is the prose before a call: the text before it, less the opening
// of the fence around it.
func lead(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndex(s, "```"); i >= 0 && !strings.ContainsAny(s[i+3:], " \t\n") {
		s = strings.TrimSpace(s[:i]) // ```json
	}
	return s
}

// callJSON is one tool call written as JSON, in the shapes models write:
// {"name", "arguments"} (Ollama's, Qwen's), {"name", "parameters"}
// (Llama's), {"tool", "args"} (JSON mode's, seed 001), {"action",
// "action_input"} (ReAct's) and {"type": "function", "function": {"name",
// "arguments"}} (OpenAI's, arguments maybe a JSON string); with a
// "thought", or with an "answer" instead of a call.
type callJSON struct {
	ID          string          `json:"id"`
	Type        string          `json:"type"`
	Function    *callJSON       `json:"function"`
	Name        string          `json:"name"`
	Tool        string          `json:"tool"`
	Action      string          `json:"action"`
	Arguments   json.RawMessage `json:"arguments"`
	Parameters  json.RawMessage `json:"parameters"`
	Args        json.RawMessage `json:"args"`
	ActionInput json.RawMessage `json:"action_input"`
	Thought     string          `json:"thought"`
	Answer      json.RawMessage `json:"answer"`
}

// decodeCalls reads a JSON value as tool calls of known tools (an object,
// or an array of them) or as an answer ({"answer": ...}, or ReAct's
// "Final Answer" action).
func decodeCalls(raw json.RawMessage, known map[string]bool) (textReply, error) {
	if len(raw) > 0 && raw[0] == '[' {
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			return textReply{}, fmt.Errorf("a list of tool calls: %w", err)
		}
		if len(items) == 0 {
			return textReply{}, errors.New("an empty list of tool calls")
		}
		var out textReply
		for i, item := range items {
			r, err := decodeCall(item, known)
			if err == nil && len(r.Calls) == 0 {
				err = errors.New(`it is an "answer", not a call`)
			}
			if err != nil {
				return textReply{}, fmt.Errorf("item %d of the list: %w", i+1, err)
			}
			out.Calls = append(out.Calls, r.Calls...)
			out.Thought = cmp.Or(out.Thought, r.Thought)
		}
		return out, nil
	}
	return decodeCall(raw, known)
}

// decodeCall reads one JSON object as a call or an answer; fields of no
// shape are refused, as JSON mode refuses them.
func decodeCall(raw json.RawMessage, known map[string]bool) (textReply, error) {
	var c callJSON
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return textReply{}, err
	}
	fn := c.Function
	if fn == nil {
		fn = &callJSON{}
	}
	names := compactStrings(c.Name, c.Tool, c.Action, fn.Name)
	args := slices.DeleteFunc([]json.RawMessage{c.Arguments, c.Parameters, c.Args, c.ActionInput, fn.Arguments, fn.Parameters}, isNull)
	thought := strings.TrimSpace(cmp.Or(c.Thought, fn.Thought))
	switch {
	case len(names) > 1:
		return textReply{}, fmt.Errorf("it names %d tools: %s", len(names), strings.Join(names, ", "))
	case len(args) > 1:
		return textReply{}, fmt.Errorf("it has %d fields of arguments", len(args))
	case len(names) == 0:
		if answer := answerText(c.Answer); answer != "" {
			return textReply{Thought: thought, Answer: answer}, nil
		}
		return textReply{}, errors.New(`it names no tool ("name", "tool" or "action") and gives no "answer"`)
	}
	name := names[0]
	var a json.RawMessage
	if len(args) == 1 {
		a = args[0]
	}
	if !known[name] && isFinalAnswer(name) {
		if answer := answerText(a); answer != "" {
			return textReply{Thought: thought, Answer: answer}, nil
		}
	}
	if !known[name] {
		return textReply{}, fmt.Errorf("unknown tool %q: the tools are %s", name, strings.Join(slices.Sorted(maps.Keys(known)), ", "))
	}
	a, err := objectArgs(name, a)
	if err != nil {
		return textReply{}, err
	}
	return textReply{Thought: thought, Calls: []convo.ToolCall{{Name: name, Args: a}}}, nil
}

// objectArgs are a call's arguments, compact: a JSON object, or a string
// holding one (OpenAI's encoding); none stays none.
func objectArgs(tool string, a json.RawMessage) (json.RawMessage, error) {
	if len(a) == 0 {
		return nil, nil
	}
	if a[0] == '"' {
		var s string
		if err := json.Unmarshal(a, &s); err != nil {
			return nil, fmt.Errorf("the arguments of %s: %w", tool, err)
		}
		a = json.RawMessage(strings.TrimSpace(s))
	}
	var b bytes.Buffer
	if len(a) == 0 || a[0] != '{' || json.Compact(&b, a) != nil {
		return nil, fmt.Errorf("the arguments of %s are not a JSON object: %s", tool, convo.Clip(string(a), 80))
	}
	return b.Bytes(), nil
}

// answerText is an "answer" field's text: a string as it is, another
// value as JSON.
func answerText(raw json.RawMessage) string {
	if isNull(raw) {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return strings.TrimSpace(s)
	}
	return string(raw)
}

// isFinalAnswer reports ReAct's final action ("Final Answer").
func isFinalAnswer(name string) bool {
	n := strings.NewReplacer(" ", "", "_", "", "-", "").Replace(strings.ToLower(name))
	return n == "finalanswer"
}

func isNull(raw json.RawMessage) bool {
	s := strings.TrimSpace(string(raw))
	return s == "" || s == "null"
}

// compactStrings are the distinct non-empty values of ss, in order.
func compactStrings(ss ...string) []string {
	var out []string
	for _, s := range ss {
		if s = strings.TrimSpace(s); s != "" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// toolKey matches a key naming a tool in JSON-ish text, quoted with " or
// ' (a Python dict): "name": "run_sql".
var toolKey = regexp.MustCompile(`["'](?:name|tool|action|function|tool_name)["']\s*:\s*["']([^"'\s]{1,100})["']`)

// toolAsKey matches a tool's name as an object's first key: {"run_sql": ...}.
var toolAsKey = regexp.MustCompile(`\{\s*["']([^"'\s]{1,100})["']\s*:`)

// triesCall reports a reply that tries to be a tool call: it starts with
// a JSON object (or a list of them) or a ```json fence, or it names a
// known tool in a JSON-ish object. Prose that only mentions braces does
// not.
func triesCall(s string, known map[string]bool) bool {
	switch {
	case startsWithObject(s):
		return true
	case strings.HasPrefix(s, "```"):
		info, body, _ := strings.Cut(s[3:], "\n")
		body = strings.TrimSpace(body)
		if strings.EqualFold(strings.TrimSpace(info), "json") || strings.HasPrefix(body, "{") || strings.HasPrefix(body, "[") {
			return true
		}
	}
	i := strings.IndexByte(s, '{')
	if i < 0 {
		return false
	}
	for _, re := range []*regexp.Regexp{toolKey, toolAsKey} {
		for _, m := range re.FindAllStringSubmatch(s[i:], -1) {
			if known[m[1]] {
				return true
			}
		}
	}
	return false
}

// startsWithObject reports text that starts with a JSON object, or with a
// list whose first item is one.
func startsWithObject(s string) bool {
	if rest, ok := strings.CutPrefix(s, "["); ok {
		s = strings.TrimSpace(rest)
	}
	return strings.HasPrefix(s, "{")
}
