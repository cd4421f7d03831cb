package activities

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"
)

// Errors a Tool's Call wraps; anything else is a failure of the tool's
// infrastructure (a database that does not answer), retried when the
// tool's policy allows.
var (
	// ErrToolArgs: the arguments do not fit the tool's schema.
	ErrToolArgs = errors.New("invalid arguments")
	// ErrToolFailed: the tool ran and refused the request (a statement the
	// database refused, an unknown table): the model's to fix.
	ErrToolFailed = errors.New("tool error")
)

// NewTool builds a Tool from a typed Go function. The JSON schema offered
// to the model comes from A, a struct: each exported field is a property
// named by its json tag, typed by its Go type, described by its desc tag,
// and required unless its json tag says omitempty. Call decodes the
// arguments strictly (unknown or mistyped fields, missing required ones:
// ErrToolArgs) before fn sees them.
func NewTool[A any](name, description string, policy ToolPolicy, fn func(ctx context.Context, args A) (any, error)) Tool {
	var zero A
	schema, required := schemaOf(reflect.TypeOf(zero))
	raw, err := json.Marshal(schema)
	if err != nil {
		panic(fmt.Sprintf("tool %s: schema: %v", name, err)) // a programming error in the tool's type
	}
	return &typedTool[A]{
		spec:   ToolSpec{Name: name, Description: description, Parameters: raw},
		policy: policy, required: required, fn: fn,
	}
}

type typedTool[A any] struct {
	spec     ToolSpec
	policy   ToolPolicy
	required []string
	fn       func(context.Context, A) (any, error)
}

func (t *typedTool[A]) Spec() ToolSpec     { return t.spec }
func (t *typedTool[A]) Policy() ToolPolicy { return t.policy }

func (t *typedTool[A]) Call(ctx context.Context, raw json.RawMessage) (any, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		raw = json.RawMessage("{}")
	}
	var present map[string]json.RawMessage
	if err := json.Unmarshal(raw, &present); err != nil {
		return nil, fmt.Errorf("%w: arguments must be a JSON object: %v", ErrToolArgs, err)
	}
	var missing []string
	for _, r := range t.required {
		if _, ok := present[r]; !ok {
			missing = append(missing, r)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%w: missing %s (the schema is %s)", ErrToolArgs, strings.Join(missing, ", "), t.spec.Parameters)
	}
	var args A
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&args); err != nil {
		return nil, fmt.Errorf("%w: %v (the schema is %s)", ErrToolArgs, err, t.spec.Parameters)
	}
	return t.fn(ctx, args)
}

// jsonSchema is the part of JSON Schema tools need.
type jsonSchema struct {
	Type        string                 `json:"type"`
	Description string                 `json:"description,omitempty"`
	Properties  map[string]*jsonSchema `json:"properties,omitempty"`
	Required    []string               `json:"required,omitempty"`
	Items       *jsonSchema            `json:"items,omitempty"`
}

// schemaOf is the object schema of a struct type and its required fields.
func schemaOf(t reflect.Type) (*jsonSchema, []string) {
	s := &jsonSchema{Type: "object", Properties: map[string]*jsonSchema{}}
	if t == nil || t.Kind() != reflect.Struct {
		panic(fmt.Sprintf("tool arguments must be a struct, not %v", t))
	}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		p := typeSchema(f.Type)
		p.Description = f.Tag.Get("desc")
		s.Properties[name] = p
		if !slices.Contains(strings.Split(opts, ","), "omitempty") {
			s.Required = append(s.Required, name)
		}
	}
	return s, s.Required
}

func typeSchema(t reflect.Type) *jsonSchema {
	switch t.Kind() {
	case reflect.String:
		return &jsonSchema{Type: "string"}
	case reflect.Bool:
		return &jsonSchema{Type: "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return &jsonSchema{Type: "integer"}
	case reflect.Float32, reflect.Float64:
		return &jsonSchema{Type: "number"}
	case reflect.Slice, reflect.Array:
		return &jsonSchema{Type: "array", Items: typeSchema(t.Elem())}
	case reflect.Struct:
		s, _ := schemaOf(t)
		return s
	case reflect.Pointer:
		return typeSchema(t.Elem())
	}
	return &jsonSchema{Type: "object"}
}

// ToolInfo is what a workflow needs to run a tool: its name and how to
// schedule it.
type ToolInfo struct {
	Name    string        `json:"name"`
	Timeout time.Duration `json:"timeout"`
	// Attempts is how many times the tool may be tried: read-only and
	// idempotent tools are retried, others run once.
	Attempts int `json:"attempts"`
	// RequiresApproval: the tool's calls wait for a person's decision.
	RequiresApproval bool `json:"requiresApproval,omitempty"`
}

// Info is the scheduling of a tool under p.
func (p ToolPolicy) Info(name string) ToolInfo {
	info := ToolInfo{Name: name, Timeout: p.Timeout, Attempts: 1, RequiresApproval: p.RequiresApproval}
	if info.Timeout <= 0 {
		info.Timeout = 30 * time.Second
	}
	if p.ReadOnly || p.Idempotent {
		info.Attempts = 3
	}
	return info
}
