package activities_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/activities/transcript"
	"github.com/ctxflow/ctxflow/convo"
)

// fakeSource is a ToolSource whose tools and answers the test sets.
type fakeSource struct {
	tools       []activities.RemoteTool
	unavailable []string
	lists       int
	calls       []string
	answer      func(name string, args json.RawMessage) (string, error)
}

func (f *fakeSource) List(_ context.Context, _ string) ([]activities.RemoteTool, []string, error) {
	f.lists++
	return f.tools, f.unavailable, nil
}

func (f *fakeSource) Call(_ context.Context, _, name string, args json.RawMessage) (string, error) {
	f.calls = append(f.calls, name)
	return f.answer(name, args)
}

func remoteTool(name string, p activities.ToolPolicy) activities.RemoteTool {
	return activities.RemoteTool{Spec: activities.ToolSpec{Name: name, Description: "a remote tool", Parameters: json.RawMessage(`{"type":"object"}`)}, Policy: p}
}

// TestRemoteTools: a task's remote tools are listed once and recorded; the
// steps offer the recorded list (not the source's current one), a call of
// a listed tool reaches the source and its text is the result, an error
// result is an observation, a server failure is returned for the
// workflow's retries, and a tool the record lacks is an unknown tool.
func TestRemoteTools(t *testing.T) {
	store, err := transcript.Open(transcript.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ctx := t.Context()
	key := activities.TaskKey(activities.SessionKey{Tenant: "t", SessionID: "s"}, "k")
	src := &fakeSource{
		tools: []activities.RemoteTool{
			remoteTool("mcp:ev/echo", activities.ToolPolicy{Timeout: time.Minute, ReadOnly: true}),
			remoteTool("mcp:ev/write", activities.ToolPolicy{Timeout: time.Minute}),
			remoteTool("run_sql", activities.ToolPolicy{}), // a worker's tool's name: left out
		},
		unavailable: []string{"mcp server down: connection refused"},
		answer: func(name string, args json.RawMessage) (string, error) {
			switch name {
			case "mcp:ev/echo":
				return "Echo: " + string(args), nil
			case "mcp:ev/write":
				return "", fmt.Errorf("%w: the disk is full", activities.ErrToolFailed)
			}
			return "", errors.New("connection refused")
		},
	}
	own := activities.NewTool("run_sql", "Run SQL.", activities.ToolPolicy{ReadOnly: true}, func(context.Context, struct{}) (any, error) { return 1, nil })
	planner := &recordingPlanner{}
	a := &activities.Agent{Transcript: store, Tools: []activities.Tool{own}, Remote: src, Planner: planner, ResultMaxBytes: 1024}

	list, err := a.ListTools(ctx, activities.ListToolsInput{Task: key})
	if err != nil {
		t.Fatal(err)
	}
	names := func(infos []activities.ToolInfo) string {
		var b strings.Builder
		for _, i := range infos {
			fmt.Fprintf(&b, "%s/%d/%s ", i.Name, i.Attempts, i.Timeout)
		}
		return b.String()
	}
	if got := names(list.Tools); got != "run_sql/3/30s mcp:ev/echo/3/1m0s mcp:ev/write/1/1m0s " || list.RecordID == "" ||
		len(list.Unavailable) != 1 {
		t.Fatalf("list: %s %+v", got, list)
	}
	// A retried listing finds the record, and the source's tools changing
	// afterwards change nothing for the task.
	src.tools = nil
	again, err := a.ListTools(ctx, activities.ListToolsInput{Task: key})
	if err != nil || names(again.Tools) != names(list.Tools) || src.lists != 1 {
		t.Fatalf("listed again: %v %+v (%d lists)", err, again, src.lists)
	}

	leaf, err := a.StartTask(ctx, activities.StartTaskInput{Task: key, Goal: "echo hi"})
	if err != nil {
		t.Fatal(err)
	}
	window := convo.WindowConfig{Strategy: convo.StrategyTokenLimit, MaxTokens: 4000}
	step := 0
	// call plans a step that calls name and runs the call.
	call := func(name string) (activities.CallToolResult, string, error) {
		t.Helper()
		step++
		planner.step = activities.PlanStep{Calls: []convo.ToolCall{{Name: name, Args: json.RawMessage(`{"message":"hi"}`)}}}
		th, err := a.Think(ctx, activities.ThinkInput{Task: key, Goal: "echo hi", Step: step, Leaf: leaf, ToolsID: list.RecordID, Window: window})
		if err != nil || len(th.Calls) != 1 {
			t.Fatalf("think: %v %+v", err, th)
		}
		res, err := a.CallTool(ctx, activities.CallToolInput{Task: key, CallID: th.Calls[0].ID, ToolsID: list.RecordID})
		m, _, _ := store.Get(ctx, key, th.Calls[0].ID+".r")
		leaf = th.Calls[0].ID + ".r"
		return res, m.Content, err
	}
	if res, content, err := call("mcp:ev/echo"); err != nil || !res.OK || content != `Echo: {"message":"hi"}` {
		t.Fatalf("echo: %v %+v %q", err, res, content)
	}
	if got := specNames(planner.tools); got != "run_sql mcp:ev/echo mcp:ev/write" {
		t.Fatalf("the step offered %s", got)
	}
	if res, content, err := call("mcp:ev/write"); err != nil || res.OK || !strings.Contains(content, "the disk is full") || len(res.Facts.ErrorHistory) != 1 {
		t.Fatalf("write: %v %+v %q", err, res, content)
	}
	// Not in the record: unknown, and the source is not asked.
	if res, content, err := call("mcp:ev/other"); err != nil || res.OK || !strings.Contains(content, `unknown tool \"mcp:ev/other\"`) ||
		!strings.Contains(content, "mcp:ev/echo") || len(src.calls) != 2 {
		t.Fatalf("other: %v %+v %q %v", err, res, content, src.calls)
	}
	// The server failing: returned, for the workflow to retry.
	src.answer = func(string, json.RawMessage) (string, error) { return "", errors.New("connection refused") }
	if _, _, err := call("mcp:ev/echo"); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("a server failing: %v", err)
	}

	// A task without a record (started before remote tools) is offered the
	// worker's tools alone.
	planner.step = activities.PlanStep{Answer: "done"}
	old := activities.TaskKey(activities.SessionKey{Tenant: "t", SessionID: "s"}, "old")
	oldLeaf, err := a.StartTask(ctx, activities.StartTaskInput{Task: old, Goal: "g"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Think(ctx, activities.ThinkInput{Task: old, Goal: "g", Step: 1, Leaf: oldLeaf,
		Window: convo.WindowConfig{Strategy: convo.StrategyTokenLimit, MaxTokens: 4000}}); err != nil {
		t.Fatal(err)
	}
	if got := specNames(planner.tools); got != "run_sql" {
		t.Fatalf("an old task was offered %s", got)
	}
}

// A remote text result over the cap is cut, and says so.
func TestRemoteResultsAreCapped(t *testing.T) {
	store, err := transcript.Open(transcript.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ctx := t.Context()
	key := activities.TaskKey(activities.SessionKey{Tenant: "t", SessionID: "s"}, "big")
	src := &fakeSource{tools: []activities.RemoteTool{remoteTool("mcp:ev/big", activities.ToolPolicy{ReadOnly: true})},
		answer: func(string, json.RawMessage) (string, error) { return strings.Repeat("x", 5000), nil }}
	planner := &recordingPlanner{step: activities.PlanStep{Calls: []convo.ToolCall{{Name: "mcp:ev/big"}}}}
	a := &activities.Agent{Transcript: store, Remote: src, Planner: planner, ResultMaxBytes: 1024}
	list, err := a.ListTools(ctx, activities.ListToolsInput{Task: key})
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := a.StartTask(ctx, activities.StartTaskInput{Task: key, Goal: "g"})
	th, err := a.Think(ctx, activities.ThinkInput{Task: key, Goal: "g", Step: 1, Leaf: leaf, ToolsID: list.RecordID,
		Window: convo.WindowConfig{Strategy: convo.StrategyTokenLimit, MaxTokens: 4000}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.CallTool(ctx, activities.CallToolInput{Task: key, CallID: th.Calls[0].ID, ToolsID: list.RecordID}); err != nil {
		t.Fatal(err)
	}
	m, _, _ := store.Get(ctx, key, th.Calls[0].ID+".r")
	if len(m.Content) > 1200 || !strings.Contains(m.Content, "CTXFLOW_TOOL_RESULT_MAX_BYTES") {
		t.Fatalf("stored %d bytes: %.200s", len(m.Content), m.Content)
	}
}

// recordingPlanner answers with step and keeps the tools it was offered.
type recordingPlanner struct {
	step  activities.PlanStep
	tools []activities.ToolSpec
}

func (p *recordingPlanner) Next(_ context.Context, req activities.PlanRequest) (activities.PlanStep, error) {
	p.tools = req.Tools
	return p.step, nil
}

func specNames(specs []activities.ToolSpec) string {
	names := make([]string, len(specs))
	for i, s := range specs {
		names[i] = s.Name
	}
	return strings.Join(names, " ")
}

var wireName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// TestWireNames: every tool name is offered under a name OpenAI's API
// takes, distinct names stay distinct, and the model's calls are mapped
// back, in native calls and in the view's earlier calls alike.
func TestWireNames(t *testing.T) {
	for name, want := range map[string]string{
		"run_sql":                            "run_sql",
		"mcp:everything/get-sum":             "mcp__everything__get-sum",
		"mcp:fs/read.text":                   "mcp__fs__read_text",
		"mcp:fs/" + strings.Repeat("a", 100): "",
	} {
		got := activities.WireName(name)
		if !wireName.MatchString(got) || want != "" && got != want {
			t.Errorf("WireName(%q) = %q, want %q", name, got, want)
		}
	}
	if a, b := activities.WireName("mcp:fs/"+strings.Repeat("a", 100)), activities.WireName("mcp:fs/"+strings.Repeat("a", 101)); a == b {
		t.Errorf("two long names meet: %q", a)
	}

	m := &toolModel{native: activities.ChatResponse{ToolCalls: []convo.ToolCall{
		{Name: "mcp__ev__get-sum", Args: json.RawMessage(`{"a":1,"b":2}`)},
		{Name: "mcp__fs__read_text", Args: json.RawMessage(`{}`)},
		{Name: "mcp__fs__read_text_", Args: json.RawMessage(`{}`)}, // not offered: left as it is
	}}}
	req := planRequest()
	req.Tools = append(req.Tools,
		activities.ToolSpec{Name: "mcp:ev/get-sum", Parameters: json.RawMessage(`{"type":"object"}`)},
		activities.ToolSpec{Name: "mcp:fs/read.text", Parameters: json.RawMessage(`{"type":"object"}`)},
		activities.ToolSpec{Name: "mcp:fs/read_text", Parameters: json.RawMessage(`{"type":"object"}`)},
	)
	req.View = append(req.View,
		convo.ModelMessage{Role: "assistant", ToolCalls: []convo.ToolCall{{ID: "c1", Name: "mcp:ev/get-sum"}}},
		convo.ModelMessage{Role: "tool", ToolCallID: "c1", ToolName: "mcp:ev/get-sum", Content: "3"},
	)
	step, err := activities.ModelPlanner{Model: m}.Next(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if len(step.Calls) != 3 || step.Calls[0].Name != "mcp:ev/get-sum" || step.Calls[1].Name != "mcp:fs/read.text" || step.Calls[2].Name != "mcp__fs__read_text_" {
		t.Fatalf("calls: %+v", step.Calls)
	}
	sent := m.reqs[0]
	offered := specNames(sent.Tools)
	for _, s := range sent.Tools {
		if !wireName.MatchString(s.Name) {
			t.Errorf("offered %q", s.Name)
		}
	}
	if !strings.Contains(offered, "mcp__ev__get-sum") || strings.Count(offered, "mcp__fs__read_text") != 2 || strings.Contains(offered, ":") {
		t.Fatalf("offered %s", offered)
	}
	n := len(sent.Messages)
	if sent.Messages[n-2].ToolCalls[0].Name != "mcp__ev__get-sum" || sent.Messages[n-1].ToolName != "mcp__ev__get-sum" {
		t.Fatalf("the view sent: %+v", sent.Messages[n-2:])
	}
	if req.Tools[2].Name != "mcp:ev/get-sum" || req.View[len(req.View)-1].ToolName != "mcp:ev/get-sum" {
		t.Fatal("the request was changed in place")
	}

	// A call the model wrote as text, under either name.
	for _, name := range []string{"mcp__ev__get-sum", "mcp:ev/get-sum"} {
		m := &toolModel{native: activities.ChatResponse{Content: `<tool_call>{"name": "` + name + `", "arguments": {"a": 1, "b": 2}}</tool_call>`}}
		step, err := activities.ModelPlanner{Model: m}.Next(t.Context(), req)
		if err != nil || len(step.Calls) != 1 || step.Calls[0].Name != "mcp:ev/get-sum" {
			t.Fatalf("%s as text: %v %+v", name, err, step)
		}
	}
}
