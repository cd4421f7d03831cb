package activities_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ctxflow/ctxflow/activities"
)

// point is a nested argument.
type point struct {
	X     int     `json:"x" desc:"across"`
	Y     float64 `json:"y,omitempty"`
	Label string  `json:"label"`
}

// everyKind has a field of every kind the schema knows.
type everyKind struct {
	Name     string            `json:"name" desc:"the name to look up"`
	Count    int               `json:"count"`
	Small    int8              `json:"small,omitempty"`
	Big      uint64            `json:"big,omitempty"`
	Ratio    float64           `json:"ratio,omitempty" desc:"a fraction"`
	Half     float32           `json:"half,omitempty"`
	On       bool              `json:"on,omitempty"`
	Tags     []string          `json:"tags,omitempty" desc:"labels"`
	Grid     [][]int           `json:"grid,omitempty"`
	Triple   [3]float64        `json:"triple,omitempty"`
	Where    point             `json:"where,omitempty"`
	Path     []point           `json:"path,omitempty"`
	Limit    *int              `json:"limit"`
	Offset   *int              `json:"offset,omitempty"`
	Extra    map[string]string `json:"extra,omitempty"`
	Untagged string
	Skipped  string `json:"-"`
	//lint:ignore U1000 unexported: must not be in the schema
	hidden string
}

func TestNewToolSchema(t *testing.T) {
	tool := activities.NewTool("look_up", "Look something up.", activities.ToolPolicy{ReadOnly: true},
		func(context.Context, everyKind) (any, error) { return nil, nil })
	spec := tool.Spec()
	if spec.Name != "look_up" || spec.Description != "Look something up." {
		t.Fatalf("spec = %s / %q", spec.Name, spec.Description)
	}
	if !tool.Policy().ReadOnly {
		t.Errorf("policy = %+v, want the one given", tool.Policy())
	}
	const want = `{
		"type": "object",
		"properties": {
			"name":   {"type": "string", "description": "the name to look up"},
			"count":  {"type": "integer"},
			"small":  {"type": "integer"},
			"big":    {"type": "integer"},
			"ratio":  {"type": "number", "description": "a fraction"},
			"half":   {"type": "number"},
			"on":     {"type": "boolean"},
			"tags":   {"type": "array", "description": "labels", "items": {"type": "string"}},
			"grid":   {"type": "array", "items": {"type": "array", "items": {"type": "integer"}}},
			"triple": {"type": "array", "items": {"type": "number"}},
			"where":  {"type": "object", "properties": {
				"x": {"type": "integer", "description": "across"},
				"y": {"type": "number"},
				"label": {"type": "string"}
			}, "required": ["x", "label"]},
			"path":   {"type": "array", "items": {"type": "object", "properties": {
				"x": {"type": "integer", "description": "across"},
				"y": {"type": "number"},
				"label": {"type": "string"}
			}, "required": ["x", "label"]}},
			"limit":  {"type": "integer"},
			"offset": {"type": "integer"},
			"extra":  {"type": "object"},
			"Untagged": {"type": "string"}
		},
		"required": ["name", "count", "limit", "Untagged"]
	}`
	var got, exp any
	if err := json.Unmarshal(spec.Parameters, &got); err != nil {
		t.Fatalf("parameters are not JSON: %v\n%s", err, spec.Parameters)
	}
	if err := json.Unmarshal([]byte(want), &exp); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, exp) {
		t.Errorf("schema =\n%s\nwant\n%s", spec.Parameters, want)
	}
}

func TestNewToolSchemaOfNoArguments(t *testing.T) {
	tool := activities.NewTool("ping", "", activities.ToolPolicy{}, func(context.Context, struct{}) (any, error) { return "pong", nil })
	if got := string(tool.Spec().Parameters); got != `{"type":"object"}` {
		t.Errorf("schema of struct{} = %s", got)
	}
	for _, raw := range []string{"", "  ", "null", "{}", " {} "} {
		out, err := tool.Call(t.Context(), json.RawMessage(raw))
		if err != nil || out != "pong" {
			t.Errorf("Call(%q) = %v, %v; want pong", raw, out, err)
		}
	}
}

func TestNewToolRefusesNonStructArguments(t *testing.T) {
	defer func() {
		r := recover()
		if r == nil || !strings.Contains(r.(string), "tool arguments must be a struct") {
			t.Errorf("recovered %v, want a panic about the argument type", r)
		}
	}()
	activities.NewTool("bad", "", activities.ToolPolicy{}, func(context.Context, string) (any, error) { return nil, nil })
}

type lookUpArgs struct {
	Table string  `json:"table"`
	Limit int     `json:"limit,omitempty"`
	Where *point  `json:"where,omitempty"`
	Score float64 `json:"score,omitempty"`
}

func TestToolCallValidatesArguments(t *testing.T) {
	errInfra := errors.New("database unreachable")
	tests := []struct {
		name    string
		raw     string
		want    lookUpArgs
		wantErr error
		errHas  []string
	}{
		{"required only", `{"table": "orders"}`, lookUpArgs{Table: "orders"}, nil, nil},
		{"all fields", `{"table": "orders", "limit": 7, "score": 0.5, "where": {"x": 1, "label": "a"}}`,
			lookUpArgs{Table: "orders", Limit: 7, Score: 0.5, Where: &point{X: 1, Label: "a"}}, nil, nil},
		{"an int given for a float", `{"table": "t", "score": 2}`, lookUpArgs{Table: "t", Score: 2}, nil, nil},
		{"missing required", `{"limit": 3}`, lookUpArgs{}, activities.ErrToolArgs, []string{"missing table", `"required":["table"]`}},
		{"empty object", `{}`, lookUpArgs{}, activities.ErrToolArgs, []string{"missing table"}},
		{"no arguments at all", ``, lookUpArgs{}, activities.ErrToolArgs, []string{"missing table"}},
		{"null", `null`, lookUpArgs{}, activities.ErrToolArgs, []string{"missing table"}},
		{"names are matched exactly", `{"TABLE": "orders"}`, lookUpArgs{}, activities.ErrToolArgs, []string{"missing table"}},
		{"unknown field", `{"table": "orders", "colour": "red"}`, lookUpArgs{}, activities.ErrToolArgs, []string{`unknown field "colour"`, "the schema is"}},
		{"unknown nested field", `{"table": "orders", "where": {"x": 1, "z": 2}}`, lookUpArgs{}, activities.ErrToolArgs, []string{`unknown field "z"`}},
		{"string for an int", `{"table": "orders", "limit": "5"}`, lookUpArgs{}, activities.ErrToolArgs, []string{"limit"}},
		{"fraction for an int", `{"table": "orders", "limit": 1.5}`, lookUpArgs{}, activities.ErrToolArgs, []string{"limit"}},
		{"number for a string", `{"table": 12}`, lookUpArgs{}, activities.ErrToolArgs, []string{"table"}},
		{"array, not an object", `["orders"]`, lookUpArgs{}, activities.ErrToolArgs, []string{"must be a JSON object"}},
		{"a bare string", `"orders"`, lookUpArgs{}, activities.ErrToolArgs, []string{"must be a JSON object"}},
		{"cut off", `{"table": "ord`, lookUpArgs{}, activities.ErrToolArgs, []string{"must be a JSON object"}},
		{"tool refuses", `{"table": "nowhere"}`, lookUpArgs{}, activities.ErrToolFailed, []string{`no table "nowhere"`}},
		{"infrastructure fails", `{"table": "down"}`, lookUpArgs{}, errInfra, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var seen []lookUpArgs
			tool := activities.NewTool("sample", "", activities.ToolPolicy{}, func(_ context.Context, a lookUpArgs) (any, error) {
				seen = append(seen, a)
				switch a.Table {
				case "nowhere":
					return nil, errors.Join(activities.ErrToolFailed, errors.New(`no table "nowhere"`))
				case "down":
					return nil, errInfra
				}
				return "rows of " + a.Table, nil
			})
			out, err := tool.Call(t.Context(), json.RawMessage(tc.raw))
			if tc.wantErr == nil {
				if err != nil || out != "rows of "+tc.want.Table {
					t.Fatalf("Call = %v, %v", out, err)
				}
				if len(seen) != 1 || !reflect.DeepEqual(seen[0], tc.want) {
					t.Fatalf("the function saw %+v, want %+v", seen, tc.want)
				}
				return
			}
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Call error = %v, want %v", err, tc.wantErr)
			}
			for _, s := range tc.errHas {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
			// Argument errors never reach the function; the tool's own
			// errors are not mistaken for argument errors.
			switch {
			case tc.wantErr == activities.ErrToolArgs && len(seen) != 0:
				t.Errorf("the function ran with invalid arguments: %+v", seen)
			case tc.wantErr != activities.ErrToolArgs && (len(seen) != 1 || errors.Is(err, activities.ErrToolArgs)):
				t.Errorf("function calls %d, error %v", len(seen), err)
			}
			if tc.wantErr == errInfra && errors.Is(err, activities.ErrToolFailed) {
				t.Errorf("an infrastructure error is reported as the tool's refusal: %v", err)
			}
		})
	}
}

func TestToolPolicyInfo(t *testing.T) {
	tests := []struct {
		name   string
		policy activities.ToolPolicy
		want   activities.ToolInfo
	}{
		{"zero: default timeout, run once", activities.ToolPolicy{}, activities.ToolInfo{Name: "x", Timeout: 30 * time.Second, Attempts: 1}},
		{"negative timeout: default", activities.ToolPolicy{Timeout: -time.Second}, activities.ToolInfo{Name: "x", Timeout: 30 * time.Second, Attempts: 1}},
		{"own timeout kept", activities.ToolPolicy{Timeout: 5 * time.Second}, activities.ToolInfo{Name: "x", Timeout: 5 * time.Second, Attempts: 1}},
		{"read-only: retried", activities.ToolPolicy{ReadOnly: true}, activities.ToolInfo{Name: "x", Timeout: 30 * time.Second, Attempts: 3}},
		{"idempotent: retried", activities.ToolPolicy{Idempotent: true, Timeout: time.Minute}, activities.ToolInfo{Name: "x", Timeout: time.Minute, Attempts: 3}},
		{"both: retried", activities.ToolPolicy{ReadOnly: true, Idempotent: true}, activities.ToolInfo{Name: "x", Timeout: 30 * time.Second, Attempts: 3}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.policy.Info("x"); got != tc.want {
				t.Errorf("Info = %+v, want %+v", got, tc.want)
			}
		})
	}
}
