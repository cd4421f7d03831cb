package convo

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// ErrNoJSON is returned when a model's answer holds no JSON value.
var ErrNoJSON = errors.New("no JSON object in the answer")

// ExtractJSON finds the JSON object (or array) in a model's answer, for
// models without native structured output (seed 001 §1): the answer itself,
// a ```json fenced block, or the first balanced {...} / [...] in chatty
// text. Small repairs are tried on the candidate: trailing commas before a
// closing bracket and a missing closing bracket at the end of a cut-off
// answer. The result is compact, valid JSON.
func ExtractJSON(answer string) (json.RawMessage, error) {
	var candidates []string
	s := strings.TrimSpace(answer)
	candidates = append(candidates, s)
	for rest := s; ; {
		i := strings.Index(rest, "```")
		if i < 0 {
			break
		}
		body := rest[i+3:]
		if nl := strings.IndexByte(body, '\n'); nl >= 0 && !strings.ContainsAny(body[:nl], "{[") {
			body = body[nl+1:] // drop the info string (json, JSON, ...)
		}
		end := strings.Index(body, "```")
		if end < 0 {
			candidates = append(candidates, body)
			break
		}
		candidates = append(candidates, body[:end])
		rest = body[end+3:]
	}
	if i := strings.IndexAny(s, "{["); i >= 0 {
		candidates = append(candidates, balanced(s[i:]))
	}
	for _, c := range candidates {
		if v, ok := compactJSON(c); ok {
			return v, nil
		}
	}
	for _, c := range candidates {
		if v, ok := compactJSON(repair(c)); ok {
			return v, nil
		}
	}
	return nil, ErrNoJSON
}

// balanced returns the prefix of s (which starts with { or [) up to its
// matching closing bracket, or all of s if it never closes.
func balanced(s string) string {
	depth, inString, escaped := 0, false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case c == '"':
			inString = !inString
		case inString:
		case c == '{' || c == '[':
			depth++
		case c == '}' || c == ']':
			depth--
			if depth == 0 {
				return s[:i+1]
			}
		}
	}
	return s
}

// repair removes trailing commas and closes what a cut-off answer left open.
func repair(s string) string {
	s = strings.TrimSpace(s)
	var out []byte
	var stack []byte
	inString, escaped := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case c == '"':
			inString = !inString
		case inString:
		case c == '{':
			stack = append(stack, '}')
		case c == '[':
			stack = append(stack, ']')
		case c == '}' || c == ']':
			out = bytes.TrimRight(out, " \t\r\n")
			out = bytes.TrimSuffix(out, []byte(","))
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
		}
		out = append(out, c)
	}
	if inString {
		out = append(out, '"')
	}
	out = bytes.TrimRight(out, " \t\r\n")
	out = bytes.TrimSuffix(out, []byte(","))
	for i := len(stack) - 1; i >= 0; i-- {
		out = append(out, stack[i])
	}
	return string(out)
}

func compactJSON(s string) (json.RawMessage, bool) {
	s = strings.TrimSpace(s)
	if s == "" || (s[0] != '{' && s[0] != '[') {
		return nil, false
	}
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(s)); err != nil {
		return nil, false
	}
	return b.Bytes(), true
}

// ParseErrorObservation is the observation a step returns when a model's
// answer could not be parsed: typed json_parse_error, carrying the raw
// answer (cut to maxRaw characters) and the expected format, so that the
// next model call sees what went wrong and corrects itself.
func ParseErrorObservation(raw, expected string, err error, maxRaw int) string {
	if maxRaw > 0 && len(raw) > maxRaw {
		raw = CompressObservation(raw, maxRaw)
	}
	b, _ := json.Marshal(struct {
		Type     string `json:"type"`
		Error    string `json:"error"`
		Raw      string `json:"raw"`
		Expected string `json:"expected"`
		Hint     string `json:"hint"`
	}{"json_parse_error", fmt.Sprint(err), raw, expected, "Answer with one JSON value in the expected format and nothing else."})
	return string(b)
}
