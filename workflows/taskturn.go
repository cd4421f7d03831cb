package workflows

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/workflow"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/convo"
)

// continueWords are the questions that resume a paused task.
var continueWords = regexp.MustCompile(`(?i)^\s*(?:请?继续|接着|continue|go on|keep going|carry on|resume)\s*[.!。！]*\s*$`)

func isContinue(q string) bool { return continueWords.MatchString(q) }

// runTask is a task turn: a new task (KindTask) is started as a child
// workflow; a continue (KindContinue) signals the paused one. Either way
// the turn waits for the task's next event — a pause with its progress
// summary, the answer, or an error — and answers with it.
func (s *session) runTask(ctx workflow.Context, req TurnRequest, cfg SessionConfig, res *TurnResult) (activities.GenerateResult, error) {
	var ev TaskEvent
	err := s.step(ctx, res, "task", func() (map[string]any, error) {
		var err error
		if req.Kind == KindTask {
			ev, err = s.startTask(ctx, req, cfg)
		} else {
			ev, err = s.resumeTask(ctx, req)
		}
		s.stop = nil
		d := map[string]any{"taskId": ev.TaskID, "workflowId": ev.State.WorkflowID, "type": ev.Type,
			"status": ev.State.Status, "step": ev.State.Step, "pauses": ev.State.Pauses}
		return d, err
	})
	if err != nil {
		return activities.GenerateResult{}, err
	}
	st := ev.State
	s.st.Task = &TaskRef{TaskID: ev.TaskID, WorkflowID: st.WorkflowID, Status: st.Status, Step: st.Step, Pauses: st.Pauses}
	res.Type, res.Task = ev.Type, &st
	gen := activities.GenerateResult{Engine: st.Engine, Model: cfg.LLMModel}
	switch ev.Type {
	case TypeFinish:
		gen.Answer = st.Answer
	case TypePause:
		gen.Answer = st.Summary
		s.st.Task.Summary = convo.Clip(st.Summary, 2000)
	case TypeApproval:
		res.Pending, s.st.Task.Pending = st.Pending, st.Pending
		gen.Answer = approvalText(st.Pending)
	default:
		gen.Answer = fmt.Sprintf("The task stopped: %s.", st.Error)
	}
	return gen, nil
}

// startTask starts the task as a child that outlives the session's run
// (a paused task waits across the session's continue-as-new and idle
// ends) and waits for its first event.
func (s *session) startTask(ctx workflow.Context, req TurnRequest, cfg SessionConfig) (TaskEvent, error) {
	maxSteps := req.MaxSteps
	if maxSteps <= 0 {
		maxSteps = cfg.MaxSteps
	}
	id := TaskWorkflowID(s.key.Tenant, s.key.SessionID, req.TurnID)
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID:        id,
		ParentClosePolicy: enumspb.PARENT_CLOSE_POLICY_ABANDON,
		StaticSummary:     fmt.Sprintf("agent task %s of session %s: %s", req.TurnID, s.key, convo.Clip(req.Question, 80)),
	})
	child := workflow.ExecuteChildWorkflow(cctx, TaskWorkflowName, TaskInput{
		Tenant: s.key.Tenant, SessionID: s.key.SessionID, TaskID: req.TurnID, Goal: req.Question, MaxSteps: maxSteps,
		Model: cfg.LLMModel, Facts: s.st.Facts, Notify: workflow.GetInfo(ctx).WorkflowExecution.ID, Limits: s.limits,
		RecentMessages: s.limits.TaskRecentMessages, ApproveTools: union(cfg.ApproveTools.List(), s.limits.ApproveTools), ApprovalTimeout: cfg.ApprovalWait(),
	})
	if err := child.GetChildWorkflowExecution().Get(ctx, nil); err != nil {
		return TaskEvent{TaskID: req.TurnID}, fmt.Errorf("start task %s: %w", req.TurnID, err)
	}
	s.st.Task = &TaskRef{TaskID: req.TurnID, WorkflowID: id, Status: TaskRunning}
	s.stopTaskOnCancel(id)
	return s.awaitEvent(ctx, req.TurnID, -1)
}

// resumeTask signals the paused task to continue and waits for its next
// event.
func (s *session) resumeTask(ctx workflow.Context, req TurnRequest) (TaskEvent, error) {
	t := *s.st.Task
	// Approval events no turn took (the task waited again after a
	// decision) predate this continue: the next event is the answer.
	s.events = slices.DeleteFunc(s.events, func(e TaskEvent) bool { return e.TaskID == t.TaskID && e.Type == TypeApproval })
	var err error
	if req.Guidance != "" && workflow.GetVersion(ctx, steerChange, workflow.DefaultVersion, 1) >= 1 {
		// Before the continue: the task reads it before its next step.
		err = workflow.SignalExternalWorkflow(ctx, t.WorkflowID, "", SignalSteer, Guidance{TurnID: req.TurnID, Text: req.Guidance}).Get(ctx, nil)
	}
	if err == nil {
		err = workflow.SignalExternalWorkflow(ctx, t.WorkflowID, "", SignalContinue, nil).Get(ctx, nil)
	}
	if err != nil {
		// The task ended after it paused (a cancel whose event is still on
		// its way): nothing is paused any more.
		s.st.Task.Status = TaskCanceled
		return TaskEvent{TaskID: t.TaskID}, activities.Permanent(activities.CodeConflict, fmt.Sprintf("task %s is no longer paused (canceled or ended)", t.TaskID), err)
	}
	s.st.Task.Status = TaskRunning
	s.stopTaskOnCancel(t.WorkflowID)
	return s.awaitEvent(ctx, t.TaskID, t.Pauses)
}

// awaitEvent waits for the task's next event: a pause after the given
// count of pauses, or its end.
func (s *session) awaitEvent(ctx workflow.Context, taskID string, pauses int) (TaskEvent, error) {
	var ev TaskEvent
	err := workflow.Await(ctx, func() bool {
		for i, e := range s.events {
			if e.TaskID == taskID && (e.Type != TypePause || e.State.Pauses > pauses) {
				ev = e
				s.events = append(s.events[:i:i], s.events[i+1:]...)
				return true
			}
		}
		return false
	})
	return ev, err
}

// approvalText is the answer of a turn whose task waits for approval.
func approvalText(pending []PendingCall) string {
	var b strings.Builder
	b.WriteString("The task waits for approval of:")
	for _, p := range pending {
		b.WriteString("\n- " + p.Tool + " " + p.Arguments + " (call " + p.CallID + ")")
		if p.Reason != "" {
			b.WriteString(": " + convo.Clip(p.Reason, 200))
		}
	}
	return b.String()
}
