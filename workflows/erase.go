package workflows

import (
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/workflow"

	"github.com/ctxflow/ctxflow/activities"
)

// Erasure and retention (docs/operations.md, "Retention and erasure"): the
// stores belong to the workers, so an erase is a workflow whose one
// activity ([activities.Eraser]) deletes the session's (or the tenant's)
// workflow runs from Temporal, then its transcripts, documents and
// uploads. Its caller (the API, `ctxflow erase`) deletes the erase's own
// run once it has the result, so that nothing in Temporal names what was
// erased; the audit line the activity logs stays.
const (
	EraseWorkflowName     = "EraseWorkflow"
	RetentionWorkflowName = "RetentionWorkflow"
	// RetentionScheduleID names the schedule that starts the retention
	// sweep (and the sweep's workflow id).
	RetentionScheduleID = "ctxflow-retention"
)

var ea *activities.Eraser // method references only

// EraseStartOptions are the start options of an erase: id names the
// request, not what it erases.
func EraseStartOptions(id string) client.StartWorkflowOptions {
	return client.StartWorkflowOptions{
		ID: "erase/" + id, TaskQueue: TaskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		StaticSummary:            "Erase",
	}
}

// eraseCtx runs an erase's activity: it may wait minutes for Temporal to
// delete histories (it heartbeats meanwhile), and it is retried: every
// step of it may run again.
func eraseCtx(ctx workflow.Context, summary string, timeout time.Duration) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: timeout,
		HeartbeatTimeout:    time.Minute,
		RetryPolicy:         retryPolicy(time.Second, time.Minute, 10),
		Summary:             summary,
	})
}

// EraseWorkflow erases a session, or a whole tenant, for good.
func EraseWorkflow(ctx workflow.Context, req activities.EraseRequest) (activities.EraseCounts, error) {
	var out activities.EraseCounts
	err := workflow.ExecuteActivity(eraseCtx(ctx, "erase", 30*time.Minute), ea.Erase, req).Get(ctx, &out)
	if err != nil {
		return out, fmt.Errorf("erase: %w", err)
	}
	return out, nil
}

// RetentionWorkflow is one retention sweep (started by the schedule
// RetentionScheduleID): it erases the sessions idle longer than their
// tenant's period. Its history holds counts, never a session's id.
func RetentionWorkflow(ctx workflow.Context) (activities.SweepResult, error) {
	var out activities.SweepResult
	err := workflow.ExecuteActivity(eraseCtx(ctx, "retention sweep", 2*time.Hour), ea.SweepRetention).Get(ctx, &out)
	if err != nil {
		return out, fmt.Errorf("retention sweep: %w", err)
	}
	return out, nil
}
