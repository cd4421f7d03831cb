package workflows_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/workflows"
)

// remoteSource is a ToolSource of the task tests (MCP servers): echo
// answers, write refuses (an error result), down's server does not answer.
type remoteSource struct {
	mu    sync.Mutex
	tools []activities.RemoteTool
	lists int
	calls map[string]int
}

func (s *remoteSource) List(context.Context, string) ([]activities.RemoteTool, []string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lists++
	return s.tools, []string{"mcp server gone: connection refused"}, nil
}

func (s *remoteSource) Call(_ context.Context, _, name string, args json.RawMessage) (string, error) {
	s.mu.Lock()
	s.calls[name]++
	s.mu.Unlock()
	switch name {
	case "mcp:ev/echo":
		return "Echo: " + string(args), nil
	case "mcp:ev/write":
		return "", fmt.Errorf("%w: read-only file system", activities.ErrToolFailed)
	}
	return "", errors.New("mcp server ev: connection refused")
}

func (s *remoteSource) called(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[name]
}

// TestTaskRemoteTools (issue 25, item 2): the task lists its tools once,
// in an activity, and every step offers that list, even when the servers'
// tools change meanwhile; a remote call's text reaches the next step; an
// error result is an observation; a server that does not answer is tried
// as its tool's annotations allow (read-only: 3 times) and then observed;
// the task finishes.
func TestTaskRemoteTools(t *testing.T) {
	store := newStore(t)
	ro := activities.ToolPolicy{Timeout: 5 * time.Second, ReadOnly: true}
	spec := func(name string) activities.ToolSpec {
		return activities.ToolSpec{Name: name, Parameters: json.RawMessage(`{"type":"object"}`)}
	}
	src := &remoteSource{calls: map[string]int{}, tools: []activities.RemoteTool{
		{Spec: spec("mcp:ev/echo"), Policy: ro},
		{Spec: spec("mcp:ev/write"), Policy: activities.ToolPolicy{Timeout: 5 * time.Second}},
		{Spec: spec("mcp:ev/down"), Policy: ro},
	}}
	planner := &scriptedPlanner{plan: func(n int, req activities.PlanRequest) activities.PlanStep {
		switch n {
		case 1:
			src.mu.Lock()
			src.tools = nil // the servers' tools change: the task's do not
			src.mu.Unlock()
			return use("mcp:ev/echo", map[string]string{"message": "hi"})
		case 2:
			return use("mcp:ev/down", map[string]string{})
		case 3:
			return use("mcp:ev/write", map[string]string{"path": "/x"})
		}
		return activities.PlanStep{Answer: "done: " + req.View[len(req.View)-1].Content}
	}}
	h := newHarnessWith(t, store, func(_ *activities.Session, env *testsuite.TestWorkflowEnvironment) {
		env.RegisterWorkflowWithOptions(workflows.TaskWorkflow, workflow.RegisterOptions{Name: workflows.TaskWorkflowName})
		env.RegisterActivity(&activities.Agent{Transcript: store, Tools: fakeTools(&sync.Map{}), Remote: src, Planner: planner, Tokenizer: cl100k})
	})
	h.env.ExecuteWorkflow(workflows.TaskWorkflowName, taskInput(10))
	th := &taskHarness{env: h.env}
	st := th.result(t)
	if st.Status != workflows.TaskFinished || len(st.Steps) != 4 {
		t.Fatalf("task: %s %+v", st.Status, st.Steps)
	}
	if s := st.Steps[0]; s.Tool != "mcp:ev/echo" || !s.OK || s.Observation != `Echo: {"message":"hi"}` {
		t.Errorf("echo: %+v", s)
	}
	if s := st.Steps[1]; s.Tool != "mcp:ev/down" || s.OK || !strings.Contains(s.Observation, "the tool failed after its retries") {
		t.Errorf("down: %+v", s)
	}
	if s := st.Steps[2]; s.Tool != "mcp:ev/write" || s.OK || !strings.Contains(s.Observation, "read-only file system") {
		t.Errorf("write: %+v", s)
	}
	if src.lists != 1 || src.called("mcp:ev/echo") != 1 || src.called("mcp:ev/down") != 3 || src.called("mcp:ev/write") != 1 {
		t.Errorf("%d listings, calls %v", src.lists, src.calls)
	}
	for _, req := range planner.requests() {
		names := make([]string, len(req.Tools))
		for i, s := range req.Tools {
			names[i] = s.Name
		}
		if !slices.Contains(names, "mcp:ev/echo") || !slices.Contains(names, "mcp:ev/down") || !slices.Contains(names, "list_tables") {
			t.Fatalf("step %d was offered %v", req.Step, names)
		}
	}
	if !strings.Contains(st.Answer, "connection refused") && !strings.Contains(st.Answer, "read-only file system") {
		t.Errorf("the last step did not see the last observation: %q", st.Answer)
	}
}
