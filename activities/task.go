package activities

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ctxflow/ctxflow/convo"
	"github.com/ctxflow/ctxflow/lexical"
)

// Agent holds the ports of the agent task activities: a task's steps are
// messages in its own transcript (bodies there, ids in workflow history),
// its model view is assembled by the context engine (recent steps verbatim,
// older ones folded into a running summary), the planner decides each step
// and the tools run as activities of their own.
type Agent struct {
	Transcript TranscriptStore
	Tools      []Tool
	// Remote are tools from outside (MCP servers; nil: none), listed once
	// a task by ListTools.
	Remote  ToolSource
	Planner Planner
	// Model writes a paused task's progress summary; nil (or a failure)
	// gives the summary built from the steps.
	Model     ChatModel
	Tokenizer convo.Tokenizer
	// ObservationMaxChars caps each tool result in the model view
	// (MESSAGE_COMPRESS_MAX_LENGTH; 0: convo's default).
	ObservationMaxChars int
	// ResultMaxBytes caps a tool result before it is stored
	// (CTXFLOW_TOOL_RESULT_MAX_BYTES; 0: DefaultToolResultMaxBytes).
	ResultMaxBytes int
}

// DefaultToolResultMaxBytes caps a tool result's JSON in the transcript.
const DefaultToolResultMaxBytes = 64 << 10

// capResult cuts a tool result's JSON over max bytes (at a character's
// start) and says so in what is stored, which the model sees too: a JSON
// object with what was cut and the result's first bytes as text.
func capResult(result string, max int) string {
	if max <= 0 {
		max = DefaultToolResultMaxBytes
	}
	if len(result) <= max {
		return result
	}
	partial := convo.RunePrefix(result, max)
	b, _ := json.Marshal(struct {
		Cut     string `json:"cut"`
		Partial string `json:"partial"`
	}{
		Cut:     fmt.Sprintf("the result was %d bytes, over the %d-byte limit of a tool result (CTXFLOW_TOOL_RESULT_MAX_BYTES): only its first %d bytes follow, as text", len(result), max, len(partial)),
		Partial: partial,
	})
	return string(b)
}

// FactsReporter is a tool result that adds to the known facts.
type FactsReporter interface {
	Facts() KnownFacts
}

// TaskKey is the transcript of a session's task: its own tree, beside the
// session's.
func TaskKey(session SessionKey, taskID string) SessionKey {
	return SessionKey{Tenant: session.Tenant, SessionID: session.SessionID + ":task:" + taskID}
}

// Message ids of a task's transcript: deterministic, so that a retried
// activity finds what its first attempt stored.
const goalID = "goal"

func stepID(n int, part string) string { return fmt.Sprintf("s%d.%s", n, part) }

// ToolCatalog lists the tools and how to schedule them.
func (a *Agent) ToolCatalog(ctx context.Context) ([]ToolInfo, error) {
	out := make([]ToolInfo, len(a.Tools))
	for i, t := range a.Tools {
		out[i] = t.Policy().Info(t.Spec().Name)
	}
	return out, nil
}

// StartTaskInput names a task and its goal.
type StartTaskInput struct {
	Task SessionKey `json:"task"`
	Goal string     `json:"goal"`
}

// StartTask stores the goal as the task transcript's root and returns its
// id (the first leaf).
func (a *Agent) StartTask(ctx context.Context, in StartTaskInput) (string, error) {
	m := convo.Message{ID: goalID, Role: convo.RoleUser, Content: in.Goal, CreatedAt: time.Now().UTC()}
	m.Tokens = convo.MessageTokens(a.Tokenizer, m)
	if _, _, err := a.Transcript.Append(ctx, in.Task, m); err != nil {
		return "", fmt.Errorf("start task %s: %w", in.Task, err)
	}
	return goalID, nil
}

// ThinkInput asks for a task's next step.
type ThinkInput struct {
	Task SessionKey `json:"task"`
	Goal string     `json:"goal"`
	// Step is the number of the step to decide; Leaf the transcript's last
	// message before it.
	Step int    `json:"step"`
	Leaf string `json:"leaf"`
	// SummaryID names the running summary of older steps ("" for none).
	SummaryID string             `json:"summaryId,omitempty"`
	Window    convo.WindowConfig `json:"window"`
	// FactsID names the task's facts record ("" for none; see SaveFacts).
	FactsID string `json:"factsId,omitempty"`
	// ToolsID names the task's record of remote tools, offered besides
	// the worker's own ("" for none; see ListTools).
	ToolsID string `json:"toolsId,omitempty"`
	// Steps are the last few steps, compact (the view has them verbatim).
	Steps   []StepRecord `json:"steps,omitempty"`
	Model   string       `json:"model"`
	Options ModelOptions `json:"options"`
}

// CallRef names a tool call stored in a task's transcript.
type CallRef struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Args are the call's arguments, clipped, for the step's trace.
	Args string `json:"args,omitempty"`
}

// ThinkResult is a step's decision, by reference: the calls, the answer or
// the parse error are in the transcript.
type ThinkResult struct {
	Calls []CallRef `json:"calls,omitempty"`
	// Answer ends the task (it is also in the transcript).
	Answer string `json:"answer,omitempty"`
	// ParseError says why the model's reply could not be read; the error
	// observation is in the transcript for the next step.
	ParseError string `json:"parseError,omitempty"`
	// Thought is the planner's reason for the calls, clipped (the
	// approval gate shows it).
	Thought string `json:"thought,omitempty"`
	// Leaf is the transcript's last message after the step.
	Leaf             string `json:"leaf"`
	Engine           string `json:"engine,omitempty"`
	PromptTokens     int    `json:"promptTokens,omitempty"`
	CompletionTokens int    `json:"completionTokens,omitempty"`
}

// Think decides the task's next step with the planner and stores it in the
// task's transcript: the tool calls, the answer, or the model's unreadable
// reply and a json_parse_error observation (seed 001 §1). A retry finds
// the step its first attempt stored and returns it, so a step is decided
// once.
func (a *Agent) Think(ctx context.Context, in ThinkInput) (ThinkResult, error) {
	defer keepAlive(ctx)()
	if res, ok, err := a.storedStep(ctx, in); err != nil || ok {
		return res, err
	}
	facts, err := a.facts(ctx, in.Task, in.FactsID)
	if err != nil {
		return ThinkResult{}, err
	}
	view, err := a.view(ctx, in, facts)
	if err != nil {
		return ThinkResult{}, err
	}
	remote, err := a.remoteSpecs(ctx, in.Task, in.ToolsID)
	if err != nil {
		return ThinkResult{}, err
	}
	specs := make([]ToolSpec, 0, len(a.Tools)+len(remote))
	for _, t := range a.Tools {
		specs = append(specs, t.Spec())
	}
	specs = append(specs, remote...)
	step, err := a.Planner.Next(ctx, PlanRequest{
		Model: in.Model, Goal: in.Goal, Facts: facts, View: view, Tools: specs,
		Step: in.Step, Steps: in.Steps, Options: in.Options,
	})
	if err != nil {
		return ThinkResult{}, modelFailure(fmt.Sprintf("step %d of task %s", in.Step, in.Task), err)
	}
	res := ThinkResult{Leaf: in.Leaf, Engine: step.Engine, PromptTokens: step.PromptTokens, CompletionTokens: step.CompletionTokens}
	now := time.Now().UTC()
	add := func(m convo.Message) error {
		m.ParentID, m.CreatedAt = res.Leaf, now
		m.Tokens = convo.MessageTokens(a.Tokenizer, m)
		if _, _, err := a.Transcript.Append(ctx, in.Task, m); err != nil {
			return fmt.Errorf("store step %d of task %s: %w", in.Step, in.Task, err)
		}
		res.Leaf = m.ID
		return nil
	}
	switch {
	case step.ParseError != "":
		if err := add(convo.Message{ID: stepID(in.Step, "raw"), Role: convo.RoleAssistant, Content: cmp.Or(step.Raw, "(empty reply)")}); err != nil {
			return res, err
		}
		obs := convo.ParseErrorObservation(step.Raw, planFormat, errors.New(step.ParseError), 2000)
		if err := add(convo.Message{ID: stepID(in.Step, "error"), Role: convo.RoleUser, Content: obs}); err != nil {
			return res, err
		}
		res.ParseError = convo.Clip(step.ParseError, 300)
	case len(step.Calls) == 0:
		answer := strings.TrimSpace(step.Answer)
		if answer == "" {
			answer = "(the planner gave neither a tool call nor an answer)"
		}
		if err := add(convo.Message{ID: stepID(in.Step, "answer"), Role: convo.RoleAssistant, Content: answer}); err != nil {
			return res, err
		}
		res.Answer = answer
	default:
		if t := strings.TrimSpace(step.Thought); t != "" {
			if err := add(convo.Message{ID: stepID(in.Step, "think"), Role: convo.RoleAssistant, Content: t}); err != nil {
				return res, err
			}
			res.Thought = convo.Clip(t, 500)
		}
		for i, c := range step.Calls {
			id := stepID(in.Step, fmt.Sprintf("c%d", i+1))
			args := c.Args
			if len(args) == 0 {
				args = json.RawMessage("{}")
			}
			call := &convo.ToolCall{ID: id, Name: c.Name, Args: args}
			if err := add(convo.Message{ID: id, Role: convo.RoleToolCall, ToolCall: call}); err != nil {
				return res, err
			}
			res.Calls = append(res.Calls, CallRef{ID: id, Name: c.Name, Args: convo.Clip(string(args), 200)})
		}
	}
	return res, nil
}

// storedStep returns the step an earlier attempt of Think stored.
func (a *Agent) storedStep(ctx context.Context, in ThinkInput) (ThinkResult, bool, error) {
	get := func(part string) (convo.Message, bool, error) {
		return a.Transcript.Get(ctx, in.Task, stepID(in.Step, part))
	}
	if m, ok, err := get("answer"); err != nil || ok {
		return ThinkResult{Answer: m.Content, Leaf: m.ID}, ok, err
	}
	if m, ok, err := get("error"); err != nil || ok {
		return ThinkResult{ParseError: "the reply could not be read as a step (see the step's observation)", Leaf: m.ID}, ok, err
	}
	res := ThinkResult{}
	if m, ok, err := get("think"); err != nil {
		return res, false, err
	} else if ok {
		res.Thought = convo.Clip(m.Content, 500)
	}
	for i := 1; ; i++ {
		m, ok, err := get(fmt.Sprintf("c%d", i))
		if err != nil {
			return res, false, err
		}
		if !ok || m.ToolCall == nil {
			break
		}
		res.Calls = append(res.Calls, CallRef{ID: m.ID, Name: m.ToolCall.Name, Args: convo.Clip(string(m.ToolCall.Args), 200)})
		res.Leaf = m.ID
	}
	return res, len(res.Calls) > 0, nil
}

// planFormat is the JSON a planner in JSON mode answers with, and the
// format example of every json_parse_error observation: a model that takes
// tools and wrote a broken call in its text may answer with it too, as
// its text's calls are read in this shape among others.
const planFormat = `{"thought": "...", "tool": "<tool name>", "args": {...}}  or  {"thought": "...", "answer": "<final answer>"}`

// view is the task's model view: the system prompt (instructions, goal,
// tools, known facts), the running summary of older steps and the recent
// steps, tool results compressed.
func (a *Agent) view(ctx context.Context, in ThinkInput, facts KnownFacts) ([]convo.ModelMessage, error) {
	sum, err := a.summaryOf(ctx, in.Task, in.SummaryID)
	if err != nil {
		return nil, err
	}
	c, err := a.Transcript.Assemble(ctx, in.Task, in.Leaf, in.Window, sum, 0)
	if err != nil {
		return nil, Permanent(CodeInvalidArgument, fmt.Sprintf("assemble task %s", in.Task), err)
	}
	msgs, err := convo.View{ObservationMaxChars: a.ObservationMaxChars}.ModelMessages(c.Messages)
	if err != nil {
		return nil, Permanent(CodeInvalidArgument, fmt.Sprintf("model view of task %s", in.Task), err)
	}
	head := []convo.ModelMessage{{Role: string(convo.RoleSystem), Content: TaskPrompt(in.Goal, facts)}}
	if c.Summary != "" {
		head = append(head, convo.ModelMessage{Role: string(convo.RoleSystem), Content: convo.SummaryMessage(c.Summary).Content})
	}
	return append(head, msgs...), nil
}

func (a *Agent) summaryOf(ctx context.Context, k SessionKey, id string) (convo.SummaryState, error) {
	return (&Session{Transcript: a.Transcript}).summary(ctx, k, id)
}

// TaskPrompt is the system prompt of every step of a task.
func TaskPrompt(goal string, facts KnownFacts) string {
	var b strings.Builder
	b.WriteString("You are a careful data analyst working step by step (think, act, observe). Use the tools to explore the database " +
		"and answer the goal. Call one tool at a time; when you know the answer, give it with the SQL that found it. " +
		"A tool error is an observation: read it and try something else.\n\nGoal: ")
	b.WriteString(goal)
	b.WriteString("\n")
	if p := facts.Prompt(); p != "" {
		b.WriteString("\n")
		b.WriteString(p)
	}
	return b.String()
}

// CallToolInput runs one stored tool call.
type CallToolInput struct {
	Task   SessionKey `json:"task"`
	CallID string     `json:"callId"`
	// Summary asks whether the task's running summary is due after the call.
	Window        convo.WindowConfig  `json:"window"`
	SummaryConfig convo.SummaryConfig `json:"summaryConfig"`
	SummaryID     string              `json:"summaryId,omitempty"`
	// ToolsID names the task's record of remote tools ("" for none).
	ToolsID string `json:"toolsId,omitempty"`
	// ParentID is where the result hangs: the task's leaf, the step's last
	// call or the result before it, so that the calls of one step and
	// their results stay one branch ("": below its call, as before).
	ParentID string `json:"parentId,omitempty"`
	// Args, when set, replace the call's arguments (a person edited them
	// at the approval gate).
	Args json.RawMessage `json:"args,omitempty"`
}

// CallToolResult is a tool call's outcome, compact: the result itself is
// the tool_result message ResultID of the transcript.
type CallToolResult struct {
	ResultID string `json:"resultId"`
	Tool     string `json:"tool"`
	OK       bool   `json:"ok"`
	// Observation is the start of the result (or the error) for the trace.
	Observation string     `json:"observation"`
	Facts       KnownFacts `json:"facts"`
	// SummaryDue reports that older steps should be folded now.
	SummaryDue bool `json:"summaryDue,omitempty"`
}

// CallTool runs the tool call stored as CallID and stores its result. An
// unknown tool, arguments that do not fit, or the tool's refusal become an
// error observation (OK false) for the model, never a failure of the task
// (seed 002 properties 5–7); a failure of the tool's infrastructure is
// returned, for the workflow to retry as the tool's policy allows. A call
// whose result is already stored is not run again.
func (a *Agent) CallTool(ctx context.Context, in CallToolInput) (CallToolResult, error) {
	defer keepAlive(ctx)()
	call, ok, err := a.Transcript.Get(ctx, in.Task, in.CallID)
	switch {
	case err != nil:
		return CallToolResult{}, fmt.Errorf("read call %s of %s: %w", in.CallID, in.Task, err)
	case !ok || call.ToolCall == nil:
		return CallToolResult{}, Permanent(CodeNotFound, fmt.Sprintf("task %s has no tool call %s", in.Task, in.CallID), nil)
	}
	res := CallToolResult{ResultID: in.CallID + ".r", Tool: call.ToolCall.Name}
	if len(in.Args) > 0 {
		edited := *call.ToolCall
		edited.Args = in.Args
		call.ToolCall = &edited
	}
	if stored, ok, err := a.Transcript.Get(ctx, in.Task, res.ResultID); err != nil {
		return res, fmt.Errorf("read result %s of %s: %w", res.ResultID, in.Task, err)
	} else if ok {
		res.OK = !strings.HasPrefix(stored.Content, `{"error"`)
		res.Observation = convo.Clip(stored.Content, 160)
		return a.due(ctx, in, res)
	}
	remote, err := a.remoteSpecs(ctx, in.Task, in.ToolsID)
	if err != nil {
		return res, err
	}
	content, facts, ok, err := a.run(WithTenant(ctx, in.Task.Tenant), call.ToolCall, remote)
	if err != nil {
		return res, fmt.Errorf("tool %s (call %s of %s): %w", call.ToolCall.Name, in.CallID, in.Task, err)
	}
	if err := a.storeResult(ctx, in.Task, in.CallID, in.ParentID, content); err != nil {
		return res, err
	}
	res.OK, res.Observation, res.Facts = ok, convo.Clip(content, 160), facts
	return a.due(ctx, in, res)
}

// run runs a call of a worker's tool or of one of remote, the task's
// recorded remote tools: its result (JSON, or a remote tool's text) and
// facts, or an error observation; err only for an infrastructure failure.
func (a *Agent) run(ctx context.Context, c *convo.ToolCall, remote []ToolSpec) (content string, facts KnownFacts, ok bool, err error) {
	observe := func(e error) (string, KnownFacts, bool, error) {
		content, facts := toolObservation(c.Name, e)
		return content, facts, false, nil
	}
	for _, t := range a.Tools {
		if t.Spec().Name != c.Name {
			continue
		}
		out, err := t.Call(ctx, c.Args)
		switch {
		case errors.Is(err, ErrToolArgs), errors.Is(err, ErrToolFailed):
			return observe(err)
		case err != nil:
			return "", KnownFacts{}, false, err
		}
		b, err := json.Marshal(out)
		if err != nil {
			return observe(fmt.Errorf("%w: result is not JSON: %v", ErrToolFailed, err))
		}
		if fr, isFR := out.(FactsReporter); isFR {
			facts = fr.Facts()
		}
		return capResult(string(b), a.ResultMaxBytes), facts, true, nil
	}
	if a.Remote != nil && slices.ContainsFunc(remote, func(s ToolSpec) bool { return s.Name == c.Name }) {
		return a.callRemote(ctx, c)
	}
	return observe(fmt.Errorf("unknown tool %q: the tools are %s", c.Name, toolNames(a.Tools, remote)))
}

// toolObservation is the error observation of a call of tool: the JSON
// the model reads, and the error for the known facts.
func toolObservation(tool string, e error) (string, KnownFacts) {
	b, _ := json.Marshal(map[string]string{"error": e.Error()})
	return string(b), KnownFacts{ErrorHistory: []string{tool + ": " + e.Error()}}
}

// storeResult stores a call's result below parent (its call when "").
func (a *Agent) storeResult(ctx context.Context, task SessionKey, callID, parent, content string) error {
	m := convo.Message{ID: callID + ".r", ParentID: cmp.Or(parent, callID), Role: convo.RoleToolResult, ToolCallID: callID, Content: content, CreatedAt: time.Now().UTC()}
	m.Tokens = convo.MessageTokens(a.Tokenizer, m)
	if _, _, err := a.Transcript.Append(ctx, task, m); err != nil {
		return fmt.Errorf("store result of %s in %s: %w", callID, task, err)
	}
	return nil
}

// due reports whether the task's running summary should fold older steps.
func (a *Agent) due(ctx context.Context, in CallToolInput, res CallToolResult) (CallToolResult, error) {
	if in.SummaryConfig == (convo.SummaryConfig{}) {
		return res, nil
	}
	sum, err := a.summaryOf(ctx, in.Task, in.SummaryID)
	if err != nil {
		return res, err
	}
	plan, err := a.Transcript.PlanSummary(ctx, in.Task, res.ResultID, FoldWindow(in.Window, in.SummaryConfig), in.SummaryConfig, sum)
	if err != nil {
		return res, fmt.Errorf("plan summary of %s: %w", in.Task, err)
	}
	res.SummaryDue = plan.Triggered && len(plan.Fold) > 0
	return res, nil
}

// RecordToolErrorInput stores the error of a tool call whose activity
// failed after its retries.
type RecordToolErrorInput struct {
	Task   SessionKey `json:"task"`
	CallID string     `json:"callId"`
	Error  string     `json:"error"`
	// Observation, when set, is the result's error text as is (a call
	// rejected at the approval gate) instead of a failure after retries.
	Observation string `json:"observation,omitempty"`
	// ParentID: as CallToolInput's.
	ParentID string `json:"parentId,omitempty"`
}

// RecordToolError stores a failed call's error as its result, so that the
// model sees it (and the transcript keeps every call answered).
func (a *Agent) RecordToolError(ctx context.Context, in RecordToolErrorInput) error {
	if _, ok, err := a.Transcript.Get(ctx, in.Task, in.CallID+".r"); err != nil || ok {
		return err
	}
	msg := "the tool failed after its retries: " + in.Error
	if in.Observation != "" {
		msg = in.Observation
	}
	b, _ := json.Marshal(map[string]string{"error": msg})
	return a.storeResult(ctx, in.Task, in.CallID, in.ParentID, string(b))
}

// factsKey names the side transcript of a task's facts records.
func factsKey(task SessionKey) SessionKey {
	return SessionKey{Tenant: task.Tenant, SessionID: task.SessionID + ":facts"}
}

// SaveFactsInput is a task's known facts, to store as record ID (below
// ParentID, the record before it).
type SaveFactsInput struct {
	Task     SessionKey `json:"task"`
	ID       string     `json:"id"`
	ParentID string     `json:"parentId,omitempty"`
	Facts    KnownFacts `json:"facts"`
}

// SaveFacts stores a task's known facts as a record its later steps name
// by id. It runs as a local activity, whose input Temporal does not
// record: the facts, which can reach tens of kilobytes, stay out of the
// task's history instead of riding in every step's input. Idempotent.
func (a *Agent) SaveFacts(ctx context.Context, in SaveFactsInput) error {
	b, err := json.Marshal(in.Facts)
	if err != nil {
		return Permanent(CodeInvalidArgument, "encode facts", err)
	}
	m := convo.Message{ID: in.ID, ParentID: in.ParentID, Role: convo.RoleSystem, Content: string(b), CreatedAt: time.Now().UTC()}
	if _, _, err := a.Transcript.Append(ctx, factsKey(in.Task), m); err != nil {
		return fmt.Errorf("store facts %s of %s: %w", in.ID, in.Task, err)
	}
	return nil
}

// facts reads the facts record id of a task (none for "").
func (a *Agent) facts(ctx context.Context, task SessionKey, id string) (KnownFacts, error) {
	var f KnownFacts
	if id == "" {
		return f, nil
	}
	m, ok, err := a.Transcript.Get(ctx, factsKey(task), id)
	switch {
	case err != nil:
		return f, fmt.Errorf("read facts %s of %s: %w", id, task, err)
	case !ok:
		return f, Permanent(CodeNotFound, fmt.Sprintf("task %s has no facts record %s", task, id), nil)
	}
	if err := json.Unmarshal([]byte(m.Content), &f); err != nil {
		return f, Permanent(CodeInvalidArgument, fmt.Sprintf("facts %s of %s", id, task), err)
	}
	return f, nil
}

// AppendInput adds a message to a task's transcript.
type AppendInput struct {
	Task     SessionKey `json:"task"`
	ID       string     `json:"id"`
	ParentID string     `json:"parentId"`
	Role     convo.Role `json:"role"`
	Content  string     `json:"content"`
}

// AppendTaskMessage stores a message in a task's transcript (the continue
// request), idempotently.
func (a *Agent) AppendTaskMessage(ctx context.Context, in AppendInput) error {
	m := convo.Message{ID: in.ID, ParentID: in.ParentID, Role: in.Role, Content: in.Content, CreatedAt: time.Now().UTC()}
	m.Tokens = convo.MessageTokens(a.Tokenizer, m)
	if _, _, err := a.Transcript.Append(ctx, in.Task, m); err != nil {
		return fmt.Errorf("append %s to %s: %w", in.ID, in.Task, err)
	}
	return nil
}

// ProgressInput asks for a paused task's progress summary.
type ProgressInput struct {
	Task    SessionKey `json:"task"`
	Goal    string     `json:"goal"`
	Step    int        `json:"step"`
	Leaf    string     `json:"leaf"`
	FactsID string     `json:"factsId,omitempty"`
	// Steps are the steps since the last pause (the earlier ones are in
	// the earlier summaries).
	Steps []StepRecord `json:"steps,omitempty"`
	Model string       `json:"model"`
}

// ProgressResult is the summary, stored in the transcript as MessageID.
type ProgressResult struct {
	MessageID string `json:"messageId"`
	Summary   string `json:"summary"`
	Engine    string `json:"engine,omitempty"`
}

// progressPrompt asks for seed 001 §2's progress summary.
const progressPrompt = `The task below stopped at its step limit. Write a short progress summary for the user, in the language of the goal, with these parts:
Goal: the original question.
Done: the steps taken so far.
Found: the facts found (tables, columns, numbers).
Problems: errors met, if any.
Remaining: what is left to answer the goal.
End by asking whether to continue.`

// Progress writes the progress summary of a task paused at its step limit
// (a model call; without a model, or when it fails, the summary is built
// from the steps) and stores it in the transcript. The tools used are
// counted over the whole task (its transcript), not only since the last
// pause.
func (a *Agent) Progress(ctx context.Context, in ProgressInput) (ProgressResult, error) {
	defer keepAlive(ctx)()
	id := stepID(in.Step, "pause")
	if m, ok, err := a.Transcript.Get(ctx, in.Task, id); err != nil || ok {
		return ProgressResult{MessageID: id, Summary: m.Content}, err
	}
	facts, err := a.facts(ctx, in.Task, in.FactsID)
	if err != nil {
		return ProgressResult{}, err
	}
	branch, err := a.Transcript.Branch(ctx, in.Task, in.Leaf)
	if err != nil {
		return ProgressResult{}, fmt.Errorf("progress of %s: read its steps: %w", in.Task, err)
	}
	uses := ToolUses(branch)
	res := ProgressResult{MessageID: id, Summary: StepsSummary(in.Goal, facts, in.Step, uses, in.Steps), Engine: "steps"}
	if a.Model != nil {
		if summary, ok := a.modelProgress(ctx, in, facts, uses); ok {
			res.Summary, res.Engine = summary, "model"
		}
	}
	m := convo.Message{ID: id, ParentID: in.Leaf, Role: convo.RoleAssistant, Content: res.Summary, CreatedAt: time.Now().UTC()}
	m.Tokens = convo.MessageTokens(a.Tokenizer, m)
	if _, _, err := a.Transcript.Append(ctx, in.Task, m); err != nil {
		return res, fmt.Errorf("store progress of %s: %w", in.Task, err)
	}
	return res, nil
}

// modelProgress asks the model for the progress summary; false when it
// failed or answered nothing (the summary built from the steps stands).
func (a *Agent) modelProgress(ctx context.Context, in ProgressInput, facts KnownFacts, uses []ToolUse) (string, bool) {
	var b strings.Builder
	fmt.Fprintf(&b, "Goal: %s\n\nSteps taken: %d; tool calls so far: %s.\n\nLatest steps:\n", in.Goal, in.Step, formatToolUses(uses, ", "))
	for _, s := range in.Steps {
		fmt.Fprintf(&b, "%d. %s %s → %s\n", s.N, s.Tool, s.Args, s.Observation)
	}
	if p := facts.Prompt(); p != "" {
		b.WriteString("\n" + p)
	}
	resp, err := a.Model.Chat(ctx, ChatRequest{Model: in.Model, Options: ModelOptions{NumPredict: 600}, Messages: []convo.ModelMessage{
		{Role: string(convo.RoleSystem), Content: progressPrompt}, {Role: string(convo.RoleUser), Content: b.String()},
	}}, nil)
	if err != nil {
		logger(ctx).Info("progress summary by the model failed: built from the steps", "task", in.Task.String(), "error", err)
		return "", false
	}
	summary := strings.TrimSpace(resp.Content)
	return summary, summary != ""
}

// ToolUse is how many times a task called one tool.
type ToolUse struct {
	Tool  string `json:"tool"`
	Calls int    `json:"calls"`
}

// ToolUses counts the tool calls among msgs (a task's transcript), by
// tool, in the order of their first use.
func ToolUses(msgs []convo.Message) []ToolUse {
	var out []ToolUse
	at := map[string]int{}
	for _, m := range msgs {
		if m.Role != convo.RoleToolCall || m.ToolCall == nil {
			continue
		}
		i, ok := at[m.ToolCall.Name]
		if !ok {
			i = len(out)
			at[m.ToolCall.Name] = i
			out = append(out, ToolUse{Tool: m.ToolCall.Name})
		}
		out[i].Calls++
	}
	return out
}

// formatToolUses writes uses as "list_tables ×1, run_sql ×14" (sep
// between them), "none" for none.
func formatToolUses(uses []ToolUse, sep string) string {
	if len(uses) == 0 {
		return "none"
	}
	parts := make([]string, len(uses))
	for i, u := range uses {
		parts[i] = fmt.Sprintf("%s ×%d", u.Tool, u.Calls)
	}
	return strings.Join(parts, sep)
}

// summaryText is the wording of a progress summary built without a model,
// in one language.
type summaryText struct {
	goal, steps, step, tools, found, tables, described, queries, nothing, problems, problem, remaining string
	// sep separates the findings and the problems, list the items of a
	// list; end ends a part.
	sep, list, end string
}

// summaryTexts are the wordings in English and in Chinese (the goal's
// language), by whether it is Chinese.
var summaryTexts = map[bool]summaryText{
	false: {goal: "Goal: %s", steps: "Done: %d steps", step: "Done: %d step", tools: " (%s)", found: "Found: ",
		tables: "%d tables (%s)", described: "described: %s", queries: "latest queries: %s", nothing: "nothing yet",
		problems: "Problems: ", problem: "%d: %s", remaining: "Remaining: the steps left to answer the goal. Continue? (say \"continue\")",
		sep: "; ", list: ", ", end: "."},
	true: {goal: "目标：%s", steps: "已完成：%d 步", step: "已完成：%d 步", tools: "（%s）", found: "发现：",
		tables: "%d 张表（%s）", described: "已查看结构：%s", queries: "最近的查询：%s", nothing: "暂无",
		problems: "问题：", problem: "第 %d 步：%s", remaining: "剩余：回答目标所需的其余步骤。要继续吗？（请说「继续」）",
		sep: "；", list: "、", end: "。"},
}

// StepsSummary is a progress summary built from the facts and the steps
// alone, in the goal's language: the goal, the steps taken (step, the
// last one's number) and the tools they called (uses, over the whole
// task), what was found (tables, described tables, the latest query
// results), the problems of the recent steps, what remains.
func StepsSummary(goal string, facts KnownFacts, step int, uses []ToolUse, recent []StepRecord) string {
	w := summaryTexts[lexical.IsChinese(goal)]
	var b strings.Builder
	fmt.Fprintf(&b, w.goal+"\n", goal)
	done := w.steps
	if step == 1 {
		done = w.step
	}
	fmt.Fprintf(&b, done, step)
	if len(uses) > 0 {
		fmt.Fprintf(&b, w.tools, formatToolUses(uses, w.list))
	}
	b.WriteString(w.end + "\n" + w.found + strings.Join(findings(w, facts), w.sep) + w.end)
	var problems []string
	for _, s := range recent {
		if !s.OK {
			problems = append(problems, fmt.Sprintf(w.problem, s.N, convo.Clip(s.Observation, 120)))
		}
	}
	if len(problems) > 0 {
		b.WriteString("\n" + w.problems + strings.Join(problems, w.sep) + w.end)
	}
	b.WriteString("\n" + w.remaining)
	return b.String()
}

// findings are what the facts hold, in w's words.
func findings(w summaryText, facts KnownFacts) []string {
	var found []string
	if len(facts.Tables) > 0 {
		found = append(found, fmt.Sprintf(w.tables, len(facts.Tables), strings.Join(facts.Tables, w.list)))
	}
	if len(facts.Schemas) > 0 {
		names := make([]string, len(facts.Schemas))
		for i, s := range facts.Schemas {
			names[i] = s.Table
		}
		found = append(found, fmt.Sprintf(w.described, strings.Join(names, w.list)))
	}
	if q := facts.SQLHistory; len(q) > 0 {
		found = append(found, fmt.Sprintf(w.queries, strings.Join(q[max(0, len(q)-3):], w.sep)))
	}
	if len(found) == 0 {
		found = append(found, w.nothing)
	}
	return found
}
