package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"go.temporal.io/api/serviceerror"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/workflows"
)

// apiError is an error with its HTTP status and a stable code (one of
// activities' Code* failure codes).
type apiError struct {
	status int
	code   string
	msg    string
	// extra fields merged into the error body (e.g. the failed turn).
	extra gin.H
}

func (e *apiError) Error() string { return e.code + ": " + e.msg }

// answer is how the API answers a failure code: one status each, and what
// the caller can do about it.
type answer struct {
	status int
	hint   string
}

// answers maps every failure code to its answer: the one table all routes
// use, whether the failure is the request's or a workflow's.
var answers = map[string]answer{
	activities.CodeInvalidArgument:   {http.StatusBadRequest, "fix the request"},
	activities.CodeNotFound:          {http.StatusNotFound, "check the id"},
	activities.CodeConflict:          {http.StatusConflict, "wait for what is in progress, then try again"},
	activities.CodeTooLarge:          {http.StatusRequestEntityTooLarge, "send less"},
	activities.CodeUnavailable:       {http.StatusServiceUnavailable, "try again later"},
	activities.CodeModelPermanent:    {http.StatusBadRequest, "choose another model (llmModel), or change the request"},
	activities.CodeDimensionMismatch: {http.StatusInternalServerError, "retrying does not help: an operator must configure an embedding model of the collection's dimension, or a new collection"},
	activities.CodeDocumentChanged:   {http.StatusConflict, "upload the document again"},
	activities.CodeUnauthenticated:   {http.StatusUnauthorized, "send an API key: Authorization: Bearer <key>"},
	activities.CodeOverloaded:        {http.StatusTooManyRequests, "slow down: try again after Retry-After seconds"},
	activities.CodeInternal:          {http.StatusInternalServerError, "report it with the request id"},
}

// errCode returns an API error of a code.
func errCode(code, format string, args ...any) *apiError {
	a, ok := answers[code]
	if !ok {
		code, a = activities.CodeInternal, answers[activities.CodeInternal]
	}
	return &apiError{status: a.status, code: code, msg: fmt.Sprintf(format, args...)}
}

func errInvalid(format string, args ...any) *apiError {
	return errCode(activities.CodeInvalidArgument, format, args...)
}

func errNotFound(format string, args ...any) *apiError {
	return errCode(activities.CodeNotFound, format, args...)
}

func errConflict(format string, args ...any) *apiError {
	return errCode(activities.CodeConflict, format, args...)
}

func errUnavailable(format string, args ...any) *apiError {
	return errCode(activities.CodeUnavailable, format, args...)
}

func errInternal(format string, args ...any) *apiError {
	return errCode(activities.CodeInternal, format, args...)
}

func errTooLarge(limit int64) *apiError {
	return errCode(activities.CodeTooLarge, "request body over the limit of %d bytes", limit)
}

// failed answers a failure of a workflow or an activity: what failed, the
// root cause's message, and what to do, under the status of its code.
func failed(code, what, msg string) *apiError {
	e := errCode(code, "%s: %s", what, msg)
	e.msg += " (" + answers[e.code].hint + ")"
	return e
}

// turnCode is the failure code a failed or rejected turn is answered
// with, on every route: its own, or for a result recorded before turns
// carried one, invalid_argument when the session refused the turn (the
// request's fault) and unavailable when it failed (what retries did not
// fix, as [activities.CodeOf] says of a failure without a code).
func turnCode(res workflows.TurnResult) string {
	switch {
	case res.ErrorCode != "":
		return res.ErrorCode
	case res.Status == workflows.TurnRejected:
		return activities.CodeInvalidArgument
	}
	return activities.CodeUnavailable
}

// fromTemporal maps an error of a Temporal call to an API error.
func fromTemporal(what string, err error) *apiError {
	var (
		ae        *apiError
		notFound  *serviceerror.NotFound
		invalid   *serviceerror.InvalidArgument
		exists    *serviceerror.WorkflowExecutionAlreadyStarted
		exhausted *serviceerror.ResourceExhausted
		unavail   *serviceerror.Unavailable
		deadline  *serviceerror.DeadlineExceeded
		queryFail *serviceerror.QueryFailed
		notReady  *serviceerror.WorkflowNotReady
	)
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.As(err, &notFound):
		return errNotFound("%s: not found", what)
	case errors.As(err, &exists):
		return errConflict("%s: already exists", what)
	case errors.As(err, &invalid):
		return errInvalid("%s: %s", what, invalid.Message)
	case errors.As(err, &queryFail):
		return errNotFound("%s: %s", what, queryFail.Message)
	case errors.As(err, &exhausted), errors.As(err, &unavail), errors.As(err, &deadline), errors.As(err, &notReady),
		errors.Is(err, context.DeadlineExceeded):
		return errUnavailable("%s: %v", what, err)
	}
	if code, msg := activities.Cause(err); code != "" {
		// An update's validator or handler refused: the session's verdict.
		return errCode(code, "%s", msg)
	}
	return errInternal("%s: %v", what, err)
}

// whileNotReady runs send, an update of a fixed update id, again while the
// server answers that the workflow cannot take it yet: its last workflow
// task failed or timed out (a worker was killed mid-task), and updates are
// refused until a worker completes the task again. The update id makes
// every attempt the same update, so the caller sees a slower answer, not a
// failure; what is still not ready when ctx ends is answered as 503.
func whileNotReady(ctx context.Context, send func() error) error {
	wait := 50 * time.Millisecond
	for {
		err := send()
		var notReady *serviceerror.WorkflowNotReady
		if !errors.As(err, &notReady) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

func writeError(c *gin.Context, err error) {
	if c.Request.Context().Err() != nil { // the client is gone: nobody reads it, nothing failed here
		c.AbortWithStatus(statusClientClosed)
		return
	}
	var ae *apiError
	if !errors.As(err, &ae) {
		ae = errInternal("%v", err)
	}
	body := gin.H{"error": gin.H{"code": ae.code, "message": ae.msg, "requestId": c.GetString("requestID")}}
	for k, v := range ae.extra {
		body[k] = v
	}
	if c.GetBool(keySeedShape) { // a seed's route (seeds.go)
		body = seedErrorBody(ae, c.GetString("requestID"))
	}
	if ae.code == activities.CodeOverloaded {
		c.Header("Retry-After", "1")
	}
	c.AbortWithStatusJSON(ae.status, body)
}

// statusClientClosed is what the access log says of a request whose client
// went away before its answer (nginx's 499), instead of the 5xx the
// canceled work would have made of it.
const statusClientClosed = 499
