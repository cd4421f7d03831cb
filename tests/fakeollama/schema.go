package fakeollama

import (
	"encoding/json"
	"math"
)

// SchemaReply is the reply used when Options.Reply is nil and the request has
// a format: a deterministic JSON value that follows it. For "json" (JSON
// mode) it is {"answer": DefaultReply(req)}. For a JSON schema every value
// takes the first of its enum (or its const); strings are DefaultReply(req),
// numbers and integers 1 (moved into [minimum, maximum]), booleans true,
// arrays hold one item, and objects have all their properties. anyOf and
// oneOf use their first branch; $ref is not followed (a string is used).
func SchemaReply(req ChatRequestLite) string {
	text := DefaultReply(req)
	var schema any
	if err := json.Unmarshal(req.Format, &schema); err != nil {
		return text
	}
	var v any
	if s, ok := schema.(string); ok {
		if s != "json" {
			return text
		}
		v = map[string]any{"answer": text}
	} else {
		v = fill(schema, text, 0)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return text
	}
	return string(b)
}

// fill returns a value that follows schema, text standing for any string.
func fill(schema any, text string, depth int) any {
	s, ok := schema.(map[string]any)
	if !ok || depth > 16 {
		return text
	}
	if enum, ok := s["enum"].([]any); ok && len(enum) > 0 {
		return enum[0]
	}
	if c, ok := s["const"]; ok {
		return c
	}
	for _, key := range []string{"anyOf", "oneOf"} {
		if branches, ok := s[key].([]any); ok && len(branches) > 0 {
			return fill(branches[0], text, depth+1)
		}
	}
	typ := s["type"]
	if types, ok := typ.([]any); ok { // ["string", "null"]: the first that is not null
		typ = nil
		for _, t := range types {
			if t != "null" {
				typ = t
				break
			}
		}
	}
	if typ == nil {
		if _, ok := s["properties"]; ok {
			typ = "object"
		}
	}
	switch typ {
	case "object":
		out := map[string]any{}
		props, _ := s["properties"].(map[string]any)
		for name, p := range props {
			out[name] = fill(p, text, depth+1)
		}
		return out
	case "array":
		return []any{fill(s["items"], text, depth+1)}
	case "integer":
		return math.Round(bounded(s, 1))
	case "number":
		return bounded(s, 1)
	case "boolean":
		return true
	case "null":
		return nil
	}
	return text
}

// bounded moves v into the schema's [minimum, maximum].
func bounded(s map[string]any, v float64) float64 {
	if hi, ok := s["maximum"].(float64); ok && v > hi {
		v = hi
	}
	if lo, ok := s["minimum"].(float64); ok && v < lo {
		v = lo
	}
	return v
}
