package workflows

import (
	"errors"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/ctxflow/ctxflow/activities"
)

// nonRetryable are the failure codes no retry can fix: every policy stops
// on them at once.
var nonRetryable = []string{
	activities.CodeInvalidArgument, activities.CodeNotFound, activities.CodeModelPermanent,
	activities.CodeDimensionMismatch, activities.CodeDocumentChanged,
}

// lostWorkerAttempts is how many more attempts than its own failure budget
// a model call's policy allows: attempts cut short by a killed or lost
// worker (heartbeat timeouts), which should not fail a turn whose model
// works. The activity ends the call after its own budget (see
// activities.GenerateInput.Attempts).
const lostWorkerAttempts = 10

// retryPolicy backs off from initial by doubling up to max, for at most
// attempts attempts (0: without a bound but the timeouts).
func retryPolicy(initial, max time.Duration, attempts int) *temporal.RetryPolicy {
	return &temporal.RetryPolicy{
		InitialInterval: initial, BackoffCoefficient: 2, MaximumInterval: max,
		MaximumAttempts: int32(attempts), NonRetryableErrorTypes: nonRetryable,
	}
}

// localCtx is the context of a cheap step that runs as a local activity:
// transcript and store reads and writes on the worker, retried quickly.
func localCtx(ctx workflow.Context, summary string) workflow.Context {
	return workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		// Without a schedule-to-close timeout the SDK ends the retries at
		// the start-to-close one (10 s): a store down for longer failed
		// the turn after six attempts. Ten attempts take about 26 s.
		ScheduleToCloseTimeout: time.Minute,
		StartToCloseTimeout:    10 * time.Second,
		RetryPolicy:            retryPolicy(200*time.Millisecond, 5*time.Second, 10),
		Summary:                summary,
	})
}

// fastModelCtx is the context of a fast model's call in the workflow task
// (Limits.FastModel): one attempt, bounded well under the workflow task's
// own timeout; the caller falls back to a regular activity.
func fastModelCtx(ctx workflow.Context, limits Limits, summary string) workflow.Context {
	timeout := max(2*time.Second, 4*limits.FastModel)
	return workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		ScheduleToCloseTimeout: timeout,
		StartToCloseTimeout:    timeout,
		RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 1},
		Summary:                summary,
	})
}

// permanent reports a failure no retry can fix (a non-retryable
// application error: unknown model, invalid request).
func permanent(err error) bool {
	var appErr *temporal.ApplicationError
	return errors.As(err, &appErr) && appErr.NonRetryable()
}

// modelCall runs a model activity fn(arg) into out: in the workflow task
// when the model is fast (one attempt), else — or when that attempt fails
// for a reason a retry may fix — as a regular activity with attempts
// attempts. It reports whether the answer came from the workflow task.
func modelCall(ctx workflow.Context, limits Limits, fast bool, summary string, attempts int, fn, arg, out any) (inTask bool, err error) {
	if fast {
		if done, err := inTaskCall(ctx, limits, summary, fn, arg, out); done {
			return true, err
		}
	}
	return false, workflow.ExecuteActivity(activityCtx(ctx, limits, summary, limits.LLMTimeout, attempts), fn, arg).Get(ctx, out)
}

// inTaskCall is one attempt of a fast call (a model's, or retrieval's) in
// the workflow task; done is false when it failed for a reason a retry may
// fix (logged): the caller makes it again as an activity.
func inTaskCall(ctx workflow.Context, limits Limits, summary string, fn, arg, out any) (done bool, err error) {
	err = workflow.ExecuteLocalActivity(fastModelCtx(ctx, limits, summary+" (fast, in the workflow task)"), fn, arg).Get(ctx, out)
	if err == nil || permanent(err) {
		return true, err
	}
	workflow.GetLogger(ctx).Info("fast call failed in the workflow task; calling it as an activity", "call", summary, "error", err)
	return false, nil
}

// activityCtx is the context of a regular activity under limits: model
// calls, retrieval, tools. One that may run longer than the heartbeat
// timeout heartbeats, so that a worker crash is noticed after
// Limits.HeartbeatTimeout rather than after timeout.
func activityCtx(ctx workflow.Context, limits Limits, summary string, timeout time.Duration, attempts int) workflow.Context {
	var heartbeat time.Duration
	if timeout > limits.HeartbeatTimeout {
		heartbeat = limits.HeartbeatTimeout
	}
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: timeout,
		HeartbeatTimeout:    heartbeat,
		RetryPolicy:         retryPolicy(500*time.Millisecond, 10*time.Second, attempts),
		Summary:             summary,
		// A cancellable call (a turn's answer) waits for its partial answer.
		WaitForCancellation: workflow.GetActivityOptions(ctx).WaitForCancellation,
	})
}

// storeCtx is the context of a document's activities: long, heartbeating,
// retried patiently (a store or embedder may be down for a while).
func storeCtx(ctx workflow.Context, summary string, timeout time.Duration) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: timeout,
		HeartbeatTimeout:    ingestHeartbeat,
		RetryPolicy:         retryPolicy(time.Second, time.Minute, 10),
		Summary:             summary,
	})
}
