package activities

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/ctxflow/ctxflow/convo"
)

// ModelPlanner plans a task's steps with a chat model: native tool calling
// (seed 002), or, for a model that does not take tools, JSON mode, whose
// reply is extracted and repaired ([convo.ExtractJSON]) and, when that
// fails, returned as a parse error for the next step to see (seed 001 §1).
// With native tools, calls a model writes in its reply's text are read
// too, and a reply that tries one and fails is the same parse error.
type ModelPlanner struct {
	Model ChatModel
	// Engine names the model's provider in the steps ("ollama").
	Engine string
	// JSONMode skips native tool calling (a model known not to take tools).
	JSONMode bool
}

var _ Planner = ModelPlanner{}

// Next implements [Planner]. Tools are offered under their wire names
// ([WireName]: "mcp:everything/echo" is "mcp__everything__echo"), and the
// calls the model makes are mapped back.
func (p ModelPlanner) Next(ctx context.Context, req PlanRequest) (PlanStep, error) {
	names := newWireNames(req.Tools)
	if names.identity() {
		return p.next(ctx, req, req.Tools)
	}
	wired := req
	wired.Tools, wired.View = names.specs(req.Tools), names.view(req.View)
	// A call written as text may name a tool either way.
	step, err := p.next(ctx, wired, append(names.specs(req.Tools), req.Tools...))
	if len(step.Calls) > 0 {
		step.Calls = names.calls(step.Calls, names.name)
	}
	return step, err
}

// next plans a step of req; known are the tool names a call written as
// text may use.
func (p ModelPlanner) next(ctx context.Context, req PlanRequest, known []ToolSpec) (PlanStep, error) {
	if !p.JSONMode {
		resp, err := p.Model.Chat(ctx, ChatRequest{Model: req.Model, Messages: req.View, Tools: req.Tools, Options: req.Options}, nil)
		if err == nil {
			return p.step(resp, nativeStep(ctx, resp, known)), nil
		}
		if !toolsUnsupported(err) {
			return PlanStep{}, err
		}
		logger(ctx).Info("the model takes no tools: planning in JSON mode", "model", req.Model)
	}
	view := append([]convo.ModelMessage{{Role: string(convo.RoleSystem), Content: jsonModePrompt(req.Tools)}}, req.View...)
	resp, err := p.Model.Chat(ctx, ChatRequest{Model: req.Model, Messages: view, Format: []byte("json"), Options: req.Options}, nil)
	if err != nil {
		return PlanStep{}, err
	}
	step := PlanStep{Raw: resp.Content}
	var out struct {
		Thought string          `json:"thought"`
		Tool    string          `json:"tool"`
		Args    json.RawMessage `json:"args"`
		Answer  string          `json:"answer"`
	}
	raw, perr := convo.ExtractJSON(resp.Content)
	if perr == nil {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		perr = dec.Decode(&out)
	}
	switch {
	case perr != nil:
		step.ParseError = perr.Error()
	case out.Tool == "" && strings.TrimSpace(out.Answer) == "":
		step.ParseError = `neither "tool" nor "answer" is set`
	case out.Tool != "":
		step.Thought = out.Thought
		step.Calls = []convo.ToolCall{{Name: out.Tool, Args: out.Args}}
	default:
		step.Thought, step.Answer = out.Thought, out.Answer
	}
	return p.step(resp, step), nil
}

func (p ModelPlanner) step(resp ChatResponse, s PlanStep) PlanStep {
	s.Engine, s.PromptTokens, s.CompletionTokens = p.Engine, resp.PromptTokens, resp.CompletionTokens
	return s
}

// nativeStep reads a reply to a request offering tools: its native calls;
// else the calls its text holds (a model writing them as JSON), or a
// parse error when its text tries a call and fails, which the task
// observes as a JSON-mode parse error; else its text, the final answer.
func nativeStep(ctx context.Context, resp ChatResponse, tools []ToolSpec) PlanStep {
	if len(resp.ToolCalls) > 0 {
		return PlanStep{Thought: strings.TrimSpace(resp.Content), Calls: resp.ToolCalls}
	}
	r := readText(resp.Content, tools)
	switch {
	case r.Err != nil:
		logger(ctx).Info("the model's reply tries a tool call as text and does not parse: a parse error for the next step", "error", r.Err)
		return PlanStep{Raw: resp.Content, ParseError: r.Err.Error()}
	case len(r.Calls) > 0:
		logger(ctx).Info("the model wrote its tool calls as text", "calls", len(r.Calls), "tool", r.Calls[0].Name)
	}
	return PlanStep{Thought: r.Thought, Calls: r.Calls, Answer: r.Answer}
}

// toolsUnsupported reports a model that refuses tools (Ollama: "... does
// not support tools").
func toolsUnsupported(err error) bool {
	return IsPermanent(err) && strings.Contains(strings.ToLower(err.Error()), "does not support tools")
}

func jsonModePrompt(tools []ToolSpec) string {
	var b strings.Builder
	b.WriteString("Answer with one JSON object only, one of:\n" + planFormat + "\nThe tools:\n")
	for _, t := range tools {
		fmt.Fprintf(&b, "- %s: %s Arguments (JSON schema): %s\n", t.Name, t.Description, t.Parameters)
	}
	return b.String()
}
