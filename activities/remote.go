package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ctxflow/ctxflow/convo"
)

// ToolSource is tools from outside the worker: the tools of MCP servers
// (activities/mcp). A task lists them once, when it starts, in an activity
// whose result its history records ([Agent.ListTools]); every step of the
// task offers the model that list, so replay never asks a server and a
// server that changes its tools meanwhile changes no running task.
type ToolSource interface {
	// List returns the tools the source offers tenant now. A server that
	// cannot be listed (down, refusing) is left out and named in
	// unavailable with the reason; err is for a source that cannot list
	// at all.
	List(ctx context.Context, tenant string) (tools []RemoteTool, unavailable []string, err error)
	// Call runs the tool name with the model's JSON arguments and returns
	// its result as text for the model. It wraps ErrToolFailed for an
	// answer that is the model's to read: the tool's error result, a tool
	// the server no longer has, arguments it refused. Any other error is
	// the server failing (down, unreachable, timing out): retried as the
	// tool's policy allows, then an observation.
	Call(ctx context.Context, tenant, name string, args json.RawMessage) (string, error)
}

// RemoteTool is a tool of a [ToolSource]: what the model is offered and
// how the workflow schedules it.
type RemoteTool struct {
	Spec   ToolSpec   `json:"spec"`
	Policy ToolPolicy `json:"policy"`
}

// ListToolsInput names the task whose tools to list.
type ListToolsInput struct {
	Task SessionKey `json:"task"`
}

// ToolList is the tools a task may call, listed when it started: the
// worker's own and its tool source's.
type ToolList struct {
	// Tools is how to schedule each tool, the worker's first.
	Tools []ToolInfo `json:"tools"`
	// RecordID names the record of the source's tools in the task's side
	// transcript ("" for none): their specs, which every step offers the
	// model, and that CallTool allows.
	RecordID string `json:"recordId,omitempty"`
	// Unavailable names the servers that could not be listed, and why.
	Unavailable []string `json:"unavailable,omitempty"`
}

// toolRecord is the stored list of a task's remote tools.
type toolRecord struct {
	Tools       []RemoteTool `json:"tools"`
	Unavailable []string     `json:"unavailable,omitempty"`
}

// toolsRecordID is the id of a task's tool record: one a task, so that a
// retried listing finds what its first attempt stored.
const toolsRecordID = "tools"

// toolsKey names the side transcript of a task's tool record.
func toolsKey(task SessionKey) SessionKey {
	return SessionKey{Tenant: task.Tenant, SessionID: task.SessionID + ":tools"}
}

// ListTools lists the tools a task may call: the worker's own, and those
// its tool source (the MCP servers) offers the task's tenant now, whose
// specs it stores as the task's tool record. A server that cannot be
// listed is left out and named in the result, never a failure of the task.
// A retry returns what the first attempt stored.
func (a *Agent) ListTools(ctx context.Context, in ListToolsInput) (ToolList, error) {
	defer keepAlive(ctx)()
	out := ToolList{Tools: make([]ToolInfo, 0, len(a.Tools))}
	own := make(map[string]bool, len(a.Tools))
	for _, t := range a.Tools {
		out.Tools = append(out.Tools, t.Policy().Info(t.Spec().Name))
		own[t.Spec().Name] = true
	}
	if a.Remote == nil {
		return out, nil
	}
	rec, ok, err := a.toolRecord(ctx, in.Task, toolsRecordID)
	if err != nil {
		return out, err
	}
	if !ok {
		tools, unavailable, err := a.Remote.List(ctx, in.Task.Tenant)
		if err != nil {
			return out, fmt.Errorf("list the tools of task %s: %w", in.Task, err)
		}
		rec = toolRecord{Unavailable: unavailable}
		for _, t := range tools {
			if own[t.Spec.Name] || slices.ContainsFunc(rec.Tools, func(r RemoteTool) bool { return r.Spec.Name == t.Spec.Name }) {
				logger(ctx).Info("a remote tool has the name of another: left out", "tool", t.Spec.Name)
				continue
			}
			rec.Tools = append(rec.Tools, t)
		}
		for _, u := range unavailable {
			logger(ctx).Info("tool server unavailable: its tools are left out of the task", "task", in.Task.String(), "reason", u)
		}
		b, err := json.Marshal(rec)
		if err != nil {
			return out, Permanent(CodeInvalidArgument, "encode the tool list", err)
		}
		m := convo.Message{ID: toolsRecordID, Role: convo.RoleSystem, Content: string(b), CreatedAt: time.Now().UTC()}
		if _, _, err := a.Transcript.Append(ctx, toolsKey(in.Task), m); err != nil {
			return out, fmt.Errorf("store the tool list of %s: %w", in.Task, err)
		}
	}
	for _, t := range rec.Tools {
		out.Tools = append(out.Tools, t.Policy.Info(t.Spec.Name))
	}
	out.RecordID, out.Unavailable = toolsRecordID, rec.Unavailable
	return out, nil
}

// toolRecord reads a task's tool record id; ok is false when there is none.
func (a *Agent) toolRecord(ctx context.Context, task SessionKey, id string) (toolRecord, bool, error) {
	var rec toolRecord
	m, ok, err := a.Transcript.Get(ctx, toolsKey(task), id)
	if err != nil || !ok {
		if err != nil {
			err = fmt.Errorf("read the tool list %s of %s: %w", id, task, err)
		}
		return rec, false, err
	}
	if err := json.Unmarshal([]byte(m.Content), &rec); err != nil {
		return rec, false, Permanent(CodeInvalidArgument, fmt.Sprintf("tool list %s of %s", id, task), err)
	}
	return rec, true, nil
}

// remoteSpecs are the specs of a task's recorded remote tools (none for
// id "", a task that listed no remote tools).
func (a *Agent) remoteSpecs(ctx context.Context, task SessionKey, id string) ([]ToolSpec, error) {
	if id == "" {
		return nil, nil
	}
	rec, ok, err := a.toolRecord(ctx, task, id)
	switch {
	case err != nil:
		return nil, err
	case !ok:
		return nil, Permanent(CodeNotFound, fmt.Sprintf("task %s has no tool list %s", task, id), nil)
	}
	specs := make([]ToolSpec, len(rec.Tools))
	for i, t := range rec.Tools {
		specs[i] = t.Spec
	}
	return specs, nil
}

// callRemote runs a call of a recorded remote tool: its text, capped, or
// an error observation; err only for the server failing.
func (a *Agent) callRemote(ctx context.Context, c *convo.ToolCall) (content string, facts KnownFacts, ok bool, err error) {
	text, err := a.Remote.Call(ctx, TenantFrom(ctx), c.Name, c.Args)
	switch {
	case errors.Is(err, ErrToolFailed):
		content, facts = toolObservation(c.Name, err)
		return content, facts, false, nil
	case err != nil:
		return "", KnownFacts{}, false, err
	}
	return capResult(text, a.ResultMaxBytes), KnownFacts{}, true, nil
}

// toolNames lists the names of the tools a task may call, for an unknown
// tool's observation.
func toolNames(tools []Tool, remote []ToolSpec) string {
	names := make([]string, 0, len(tools)+len(remote))
	for _, t := range tools {
		names = append(names, t.Spec().Name)
	}
	for _, s := range remote {
		names = append(names, s.Name)
	}
	return strings.Join(names, ", ")
}
