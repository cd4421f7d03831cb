package activities_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/convo"
)

// toolModel is a fake ChatModel: a request offering tools gets toolsErr
// (when set) or native; any other request gets the next of jsonReplies.
// It records the requests.
type toolModel struct {
	native      activities.ChatResponse
	toolsErr    error
	jsonReplies []string
	jsonErr     error
	reqs        []activities.ChatRequest
}

func (m *toolModel) Chat(_ context.Context, req activities.ChatRequest, _ func(string)) (activities.ChatResponse, error) {
	m.reqs = append(m.reqs, req)
	if len(req.Tools) > 0 {
		if m.toolsErr != nil {
			return activities.ChatResponse{}, m.toolsErr
		}
		return m.native, nil
	}
	if m.jsonErr != nil {
		return activities.ChatResponse{}, m.jsonErr
	}
	reply := m.jsonReplies[0]
	m.jsonReplies = m.jsonReplies[1:]
	return activities.ChatResponse{Content: reply, PromptTokens: 120, CompletionTokens: 30}, nil
}

// noTools is what Ollama answers for a model without tool support.
var noTools = &activities.ModelError{StatusCode: 400, Retryable: false,
	Message: `ollama: registry.ollama.ai/library/gemma2:2b does not support tools`}

func planRequest() activities.PlanRequest {
	temp := 0.0
	return activities.PlanRequest{
		Model: "qwen2.5:0.5b",
		Goal:  "How many orders?",
		View: []convo.ModelMessage{
			{Role: "system", Content: activities.TaskPrompt("How many orders?", activities.KnownFacts{})},
			{Role: "user", Content: "How many orders?"},
		},
		Tools: []activities.ToolSpec{
			{Name: "list_tables", Description: "List the tables.", Parameters: json.RawMessage(`{"type":"object"}`)},
			{Name: "run_sql", Description: "Run one query.", Parameters: json.RawMessage(`{"type":"object","properties":{"sql":{"type":"string"}},"required":["sql"]}`)},
		},
		Step:    1,
		Options: activities.ModelOptions{Temperature: &temp, NumPredict: 256},
	}
}

func TestModelPlannerNativeTools(t *testing.T) {
	call := convo.ToolCall{ID: "c1", Name: "run_sql", Args: json.RawMessage(`{"sql":"SELECT count(*) FROM orders"}`)}
	tests := []struct {
		name string
		resp activities.ChatResponse
		want activities.PlanStep
	}{
		{"a tool call, with its reasoning",
			activities.ChatResponse{Content: "  Count them.\n", ToolCalls: []convo.ToolCall{call}, PromptTokens: 900, CompletionTokens: 12},
			activities.PlanStep{Thought: "Count them.", Calls: []convo.ToolCall{call}, Engine: "ollama", PromptTokens: 900, CompletionTokens: 12}},
		{"text without a call is the answer",
			activities.ChatResponse{Content: "There are 2000 orders.\n", PromptTokens: 1000, CompletionTokens: 8},
			activities.PlanStep{Thought: "There are 2000 orders.", Answer: "There are 2000 orders.", Engine: "ollama", PromptTokens: 1000, CompletionTokens: 8}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := &toolModel{native: tc.resp}
			req := planRequest()
			got, err := activities.ModelPlanner{Model: m, Engine: "ollama"}.Next(t.Context(), req)
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Next = %+v, %v; want %+v", got, err, tc.want)
			}
			if len(m.reqs) != 1 {
				t.Fatalf("%d model calls, want 1", len(m.reqs))
			}
			r := m.reqs[0]
			if r.Model != req.Model || !reflect.DeepEqual(r.Messages, req.View) || !reflect.DeepEqual(r.Tools, req.Tools) ||
				r.Format != nil || r.Options.NumPredict != 256 || r.Options.Temperature == nil {
				t.Errorf("request = %+v", r)
			}
		})
	}
}

func TestModelPlannerModelErrors(t *testing.T) {
	transient := &activities.ModelError{Retryable: true, Message: "ollama: connection refused"}
	tests := []struct {
		name  string
		model *toolModel
		mode  bool
		want  error
		calls int
	}{
		{"a transient failure is returned, not a fallback", &toolModel{toolsErr: transient}, false, transient, 1},
		{"another permanent failure is returned", &toolModel{toolsErr: &activities.ModelError{Message: `model "nope" not found`}}, false, nil, 1},
		// Only a permanent refusal means the model takes no tools.
		{"a transient error naming tools is not a refusal", &toolModel{toolsErr: &activities.ModelError{Retryable: true, Message: "x does not support tools"}}, false, nil, 1},
		{"JSON mode fails after the fallback", &toolModel{toolsErr: noTools, jsonErr: transient}, false, transient, 2},
		{"JSON mode fails", &toolModel{jsonErr: transient}, true, transient, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := activities.ModelPlanner{Model: tc.model, JSONMode: tc.mode}.Next(t.Context(), planRequest())
			var me *activities.ModelError
			if err == nil || !errors.As(err, &me) || (tc.want != nil && !errors.Is(err, tc.want)) {
				t.Fatalf("Next = %+v, %v; want the model's error", got, err)
			}
			if !reflect.DeepEqual(got, activities.PlanStep{}) {
				t.Errorf("a failed step carries %+v", got)
			}
			if len(tc.model.reqs) != tc.calls {
				t.Errorf("%d model calls, want %d", len(tc.model.reqs), tc.calls)
			}
		})
	}
}

func TestModelPlannerJSONMode(t *testing.T) {
	tests := []struct {
		name     string
		reply    string
		want     activities.PlanStep
		parseErr string // a part of the parse error; "" for none
	}{
		{name: "a tool call",
			reply: `{"thought": "Count them.", "tool": "run_sql", "args": {"sql": "SELECT count(*) FROM orders"}}`,
			want:  activities.PlanStep{Thought: "Count them.", Calls: []convo.ToolCall{{Name: "run_sql", Args: json.RawMessage(`{"sql":"SELECT count(*) FROM orders"}`)}}}},
		{name: "a call in a chatty fenced reply",
			reply: "Sure.\n```json\n{\"thought\": \"First the tables.\", \"tool\": \"list_tables\", \"args\": {},}\n```",
			want:  activities.PlanStep{Thought: "First the tables.", Calls: []convo.ToolCall{{Name: "list_tables", Args: json.RawMessage(`{}`)}}}},
		{name: "a tool without arguments",
			reply: `{"tool": "list_tables"}`,
			want:  activities.PlanStep{Calls: []convo.ToolCall{{Name: "list_tables"}}}},
		{name: "the answer",
			reply: `{"thought": "The count came back.", "answer": "There are 2000 orders."}`,
			want:  activities.PlanStep{Thought: "The count came back.", Answer: "There are 2000 orders."}},
		{name: "a tool wins over an answer",
			reply: `{"tool": "list_tables", "args": {}, "answer": "maybe 3"}`,
			want:  activities.PlanStep{Calls: []convo.ToolCall{{Name: "list_tables", Args: json.RawMessage(`{}`)}}}},
		{name: "prose, not JSON", reply: "I will count the orders now.", parseErr: convo.ErrNoJSON.Error()},
		{name: "empty", reply: "", parseErr: convo.ErrNoJSON.Error()},
		{name: "neither tool nor answer", reply: `{"thought": "hmm", "answer": "  "}`, parseErr: `neither "tool" nor "answer" is set`},
		{name: "an unknown field", reply: `{"action": "run_sql", "sql": "SELECT 1"}`, parseErr: `unknown field "action"`},
		{name: "a mistyped field", reply: `{"tool": ["run_sql"]}`, parseErr: "cannot unmarshal"},
		{name: "an array", reply: `[{"tool": "list_tables"}]`, parseErr: "cannot unmarshal array"},
	}
	for _, tc := range tests {
		for _, fallback := range []bool{false, true} {
			name := tc.name + "/JSONMode"
			if fallback {
				name = tc.name + "/after the model refused tools"
			}
			t.Run(name, func(t *testing.T) {
				m := &toolModel{jsonReplies: []string{tc.reply}}
				p := activities.ModelPlanner{Model: m, Engine: "ollama", JSONMode: !fallback}
				if fallback {
					m.toolsErr = noTools
				}
				req := planRequest()
				got, err := p.Next(t.Context(), req)
				if err != nil {
					t.Fatalf("Next: %v", err)
				}
				want := tc.want
				want.Raw, want.Engine, want.PromptTokens, want.CompletionTokens = tc.reply, "ollama", 120, 30
				if tc.parseErr != "" {
					if !strings.Contains(got.ParseError, tc.parseErr) {
						t.Errorf("ParseError = %q, want it to say %q", got.ParseError, tc.parseErr)
					}
					want.ParseError = got.ParseError
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("Next =\n%+v\nwant\n%+v", got, want)
				}

				calls := 1
				if fallback {
					calls = 2
				}
				if len(m.reqs) != calls {
					t.Fatalf("%d model calls, want %d", len(m.reqs), calls)
				}
				// The JSON-mode request: no tools, format json, the tools
				// described in a system message before the task's view.
				r := m.reqs[calls-1]
				if r.Tools != nil || string(r.Format) != "json" || r.Model != req.Model || r.Options.NumPredict != 256 {
					t.Errorf("JSON-mode request = %+v", r)
				}
				if len(r.Messages) != len(req.View)+1 || !reflect.DeepEqual(r.Messages[1:], req.View) || r.Messages[0].Role != "system" {
					t.Fatalf("JSON-mode messages = %+v", r.Messages)
				}
				sys := r.Messages[0].Content
				for _, s := range []string{
					"Answer with one JSON object only", `"tool": "<tool name>"`, `"answer": "<final answer>"`,
					"- list_tables: List the tables. Arguments (JSON schema): {\"type\":\"object\"}",
					`- run_sql: Run one query. Arguments (JSON schema): {"type":"object","properties":{"sql":{"type":"string"}},"required":["sql"]}`,
				} {
					if !strings.Contains(sys, s) {
						t.Errorf("the JSON-mode prompt does not say %q:\n%s", s, sys)
					}
				}
			})
		}
	}
}
