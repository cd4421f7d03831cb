package activities

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
)

// Helpers every activity shares: heartbeats, failure classification, text
// clipping for messages and traces.

// keepAlive heartbeats while a long call runs, so that the server notices a
// dead worker after the heartbeat timeout instead of the call's own timeout.
// The returned func stops it. Outside an activity, or without a heartbeat
// timeout, it does nothing.
func keepAlive(ctx context.Context) (stop func()) {
	if !activity.IsActivity(ctx) {
		return func() {}
	}
	hb := activity.GetInfo(ctx).HeartbeatTimeout
	if hb <= 0 {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(hb / 3)
		defer t.Stop()
		for { // not at once: a call that ends within hb/3 needs no heartbeat
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			activity.RecordHeartbeat(ctx)
		}
	}()
	return func() { cancel(); <-done }
}

// logger is the activity's logger, or slog's default outside an activity
// (the worker's start-up check).
func logger(ctx context.Context) interface {
	Info(string, ...any)
	Warn(string, ...any)
	Debug(string, ...any)
} {
	if activity.IsActivity(ctx) {
		return activity.GetLogger(ctx)
	}
	return slog.Default()
}

// modelFailure says what failed of a model port's error; a permanent model
// error (unknown model, bad request) becomes a non-retryable activity
// error, anything else stays retryable.
func modelFailure(what string, err error) error {
	err = fmt.Errorf("%s: %w", what, err)
	if IsPermanent(err) {
		return Permanent(CodeModelPermanent, err.Error(), err)
	}
	return err
}

// lastAttempt makes a retryable err final (code unavailable) when this is
// attempt attempts or later of the activity (attempts 0: never). Attempts
// lost with a worker count too, but they never end the call on their own:
// the retry policy allows more attempts than attempts.
func lastAttempt(ctx context.Context, attempts int, err error) error {
	if err == nil || attempts <= 0 || !activity.IsActivity(ctx) || int(activity.GetInfo(ctx).Attempt) < attempts {
		return err
	}
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) && appErr.NonRetryable() {
		return err
	}
	return Permanent(CodeOf(err), fmt.Sprintf("%v (attempt %d of %d)", err, activity.GetInfo(ctx).Attempt, attempts), err)
}

// withContext prefixes err's message with what failed. An application
// error keeps its type and retryability: Temporal reads them from the
// returned error itself, so fmt.Errorf's wrapping would make a permanent
// failure retryable.
func withContext(what string, err error) error {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) && appErr.NonRetryable() {
		return Permanent(appErr.Type(), what+": "+appErr.Message(), err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// errNoJSON is returned when a model's structured answer cannot be read
// even after it was shown its parse error.
var errNoJSON = errors.New("no valid JSON after a correction attempt")
