package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/workflows"
)

// taskRequest is POST /v1/sessions/{id}/tasks.
type taskRequest struct {
	Goal   string `json:"goal"`
	TaskID string `json:"taskId"`
	Config struct {
		MaxSteps int `json:"maxSteps"`
	} `json:"config"`
}

// postTask starts an agent task in the session: a task turn.
func (s *Server) postTask(c *gin.Context) {
	ref, err := sessionOf(c)
	if err != nil {
		writeError(c, err)
		return
	}
	var body taskRequest
	if err := bindJSON(c, &body, false); err != nil {
		writeError(c, err)
		return
	}
	s.submitTurn(c, ref, workflows.TurnRequest{TurnID: body.TaskID, Question: body.Goal, Kind: workflows.KindTask, MaxSteps: body.Config.MaxSteps})
}

// taskOf reads a task's session, its id and its workflow.
func taskOf(c *gin.Context) (ref sessionRef, id, wid string, err error) {
	if ref, err = sessionOf(c); err != nil {
		return ref, "", "", err
	}
	id = c.Param("taskId")
	if err := workflows.ValidateID("taskId", id); err != nil {
		return ref, "", "", errInvalid("%s", err)
	}
	return ref, id, workflows.TaskWorkflowID(ref.tenant, ref.id, id), nil
}

// getTask answers GET /v1/sessions/{id}/tasks/{taskId}: the task's state
// with every step and, when this process can read transcripts, the two
// lists of seed 001: the full step log (messages, the display list) and
// the running summary of the model view (summaryText).
func (s *Server) getTask(c *gin.Context) {
	ref, id, wid, err := taskOf(c)
	if err != nil {
		writeError(c, err)
		return
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), 10*time.Second)
	defer cancel()
	v, err := s.queryWorkflow(ctx, wid, workflows.QueryState)
	if err != nil {
		writeError(c, fromTemporal("task "+id, err))
		return
	}
	var st workflows.TaskState
	if err := v.Get(&st); err != nil {
		writeError(c, errInternal("decode task %s: %v", id, err))
		return
	}
	out := gin.H{"sessionId": ref.id, "task": st, "type": taskType(st.Status)}
	key := activities.TaskKey(ref.key(), id)
	if s.opts.Transcripts != nil && st.Leaf != "" {
		msgs, err := s.opts.Transcripts.Branch(ctx, key, st.Leaf)
		if err != nil {
			s.log.Warn("read task transcript", "task", id, "error", err, "requestId", c.GetString("requestID"))
		} else {
			out["messages"] = msgs
		}
	}
	if s.opts.Transcripts != nil && st.RunningSummary != nil {
		// The model view's summary of the steps folded out of its window.
		if m, ok, err := s.opts.Transcripts.Get(ctx, key, st.RunningSummary.ID); err != nil {
			s.log.Warn("read task summary", "task", id, "error", err, "requestId", c.GetString("requestID"))
		} else if ok {
			out["summaryText"] = m.Content
		}
	}
	c.JSON(http.StatusOK, out)
}

func taskType(status string) string {
	switch status {
	case workflows.TaskPaused:
		return workflows.TypePause
	case workflows.TaskAwaiting:
		return workflows.TypeApproval
	case workflows.TaskFinished:
		return workflows.TypeFinish
	case workflows.TaskFailed, workflows.TaskCanceled:
		return workflows.TypeError
	}
	return ""
}

// taskGone says why the task's workflow wid was not found: it ended (409,
// "task <id> <ended>") or never was (404).
func (s *Server) taskGone(ctx context.Context, wid, id, ended string) *apiError {
	if _, err := s.c.DescribeWorkflowExecution(ctx, wid, ""); err == nil {
		return errConflict("task %s %s", id, ended)
	}
	return errNotFound("task %s not found", id)
}

// cancelWait bounds how long DELETE waits for a task to end.
const cancelWait = 10 * time.Second

// deleteTask cancels a task: 204 once it ended, 202 while it is still
// finishing its step, 409 for a task that had already ended.
func (s *Server) deleteTask(c *gin.Context) {
	ref, id, wid, err := taskOf(c)
	if err != nil {
		writeError(c, err)
		return
	}
	err = s.c.SignalWorkflow(c.Request.Context(), wid, "", workflows.SignalCancel, nil)
	var notFound *serviceerror.NotFound
	if errors.As(err, &notFound) {
		writeError(c, s.taskGone(c.Request.Context(), wid, id, "has already ended"))
		return
	}
	if err != nil {
		writeError(c, fromTemporal("task "+id, err))
		return
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), cancelWait)
	defer cancel()
	if err := s.c.GetWorkflow(ctx, wid, "").Get(ctx, nil); err == nil {
		c.Status(http.StatusNoContent)
		return
	}
	// Not ended within cancelWait (or its result unreadable): the cancel
	// is delivered and the task ends at its next step boundary.
	c.JSON(http.StatusAccepted, gin.H{"sessionId": ref.id, "taskId": id, "status": "canceling"})
}

// approvalRequest is POST /v1/sessions/{id}/tasks/{taskId}/approvals/{callId}.
type approvalRequest struct {
	Decision  string          `json:"decision"`
	Arguments json.RawMessage `json:"arguments"`
	Message   string          `json:"message"`
}

// approvalWait bounds how long a decision waits for the task's next stop.
const approvalWait = 2 * time.Minute

// postApproval decides a call waiting at the approval gate: an update of
// the task, whose validator refuses an unknown call (404), a call decided
// otherwise (409) and a bad decision (400). The last decision of a step
// answers at the task's next stop (its answer, a pause, another approval);
// 202 when that takes longer than approvalWait.
func (s *Server) postApproval(c *gin.Context) {
	ref, id, wid, err := taskOf(c)
	if err != nil {
		writeError(c, err)
		return
	}
	callID := c.Param("callId")
	if err := workflows.ValidateID("callId", callID); err != nil {
		writeError(c, errInvalid("%s", err))
		return
	}
	var body approvalRequest
	if err := bindJSON(c, &body, false); err != nil {
		writeError(c, err)
		return
	}
	d := workflows.ApprovalDecision{CallID: callID, Decision: body.Decision, Arguments: body.Arguments, Message: body.Message}
	if string(d.Arguments) == "null" {
		d.Arguments = nil
	}
	if err := d.Validate(); err != nil {
		writeError(c, errInvalid("%s", err))
		return
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), approvalWait)
	defer cancel()
	var st workflows.TaskState
	err = whileNotReady(ctx, func() error { // the same decision again is the same decision
		h, err := s.c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
			WorkflowID: wid, UpdateName: workflows.UpdateApproval, Args: []any{d},
			WaitForStage: client.WorkflowUpdateStageAccepted,
		})
		if err == nil {
			err = h.Get(ctx, &st)
		}
		return err
	})
	var notFound *serviceerror.NotFound
	switch {
	case errors.As(err, &notFound):
		writeError(c, s.taskGone(c.Request.Context(), wid, id, "has ended: its calls can no longer be decided"))
	case err == nil:
		c.JSON(http.StatusOK, gin.H{"sessionId": ref.id, "taskId": id, "callId": callID, "decision": d.Decision,
			"type": taskType(st.Status), "task": st})
	case ctx.Err() != nil && c.Request.Context().Err() == nil:
		c.JSON(http.StatusAccepted, gin.H{"sessionId": ref.id, "taskId": id, "callId": callID, "decision": d.Decision, "status": "accepted"})
	default:
		writeError(c, fromTemporal("task "+id, err))
	}
}
