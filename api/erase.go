package api

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/workflows"
)

// eraseWait bounds how long DELETE ?erase=true waits for the erase before
// it answers 202 (it goes on).
const eraseWait = 2 * time.Minute

// eraseSession answers DELETE /v1/sessions/{id}?erase=true: the session is
// erased for good (docs/operations.md, "Retention and erasure"): 204 once
// it is, 404 when nothing of it was found, 202 while it goes on.
func (s *Server) eraseSession(c *gin.Context, ref sessionRef) {
	ctx := c.Request.Context()
	s.closeRunning(ctx, ref)
	req := activities.EraseRequest{Tenant: ref.tenant, SessionID: ref.id, Actor: "api", RequestID: c.GetString("requestID")}
	wctx, cancel := context.WithTimeout(ctx, eraseWait)
	defer cancel()
	n, err := Erase(wctx, s.c, s.opts.Namespace, newID("erase"), req)
	switch {
	case err == nil && n.Zero():
		writeError(c, errNotFound("session %s not found", ref.id))
	case err == nil:
		c.Status(http.StatusNoContent)
	case wctx.Err() != nil && ctx.Err() == nil:
		c.JSON(http.StatusAccepted, gin.H{"sessionId": ref.id, "status": "erasing"})
	default:
		writeError(c, fromTemporal("erase session "+ref.id, err))
	}
}

// closeRunning closes a session whose run is open (without deleting: the
// erase counts and deletes), so that the turns it accepted end before it
// is erased (an erase ends a run in the middle of a turn otherwise). Best
// effort, for 5 s: the erase ends the run anyway.
func (s *Server) closeRunning(ctx context.Context, ref sessionRef) {
	desc, err := s.c.DescribeWorkflowExecution(ctx, ref.workflowID(), "")
	if err != nil || desc.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	h, err := s.c.UpdateWorkflow(cctx, client.UpdateWorkflowOptions{
		WorkflowID: ref.workflowID(), UpdateName: workflows.UpdateClose,
		Args: []any{workflows.CloseRequest{}}, WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err == nil {
		err = h.Get(cctx, nil)
	}
	if err != nil {
		s.log.Info("erase: the session did not close first; the erase ends it", "session", ref.id, "error", err)
	}
}

// Erase runs an erase (a session, or a whole tenant when req.SessionID is
// "") on the workers as the workflow erase/<id>, waits for it within ctx,
// and then deletes that workflow's own run, so that nothing in Temporal
// names what was erased (the workers' audit line says it).
func Erase(ctx context.Context, c client.Client, namespace, id string, req activities.EraseRequest) (activities.EraseCounts, error) {
	var n activities.EraseCounts
	run, err := c.ExecuteWorkflow(ctx, workflows.EraseStartOptions(id), workflows.EraseWorkflowName, req)
	if err != nil {
		return n, err
	}
	if err := run.Get(ctx, &n); err != nil {
		if ctx.Err() != nil { // still erasing: its run is deleted when it ends
			go func() {
				bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Hour)
				defer cancel()
				if run.Get(bctx, nil) == nil {
					_ = deleteRun(bctx, c, namespace, run.GetID())
				}
			}()
		}
		return n, err
	}
	if err := deleteRun(ctx, c, namespace, run.GetID()); err != nil {
		return n, fmt.Errorf("the erase is done, but its own workflow %s was not deleted: %w", run.GetID(), err)
	}
	return n, nil
}

// deleteRun deletes an erase's own workflow run once it has ended.
func deleteRun(ctx context.Context, c client.Client, namespace, wid string) error {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	_, err := activities.DeleteWorkflows(dctx, c, namespace, "WorkflowId = '"+wid+"'", []string{wid}, 30*time.Second)
	return err
}
