package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/temporal"

	"github.com/ctxflow/ctxflow/workflows"
)

// apiError is an error with its HTTP status and a stable code:
// invalid_argument, not_found, conflict, unavailable or internal.
type apiError struct {
	status int
	code   string
	msg    string
	// extra fields merged into the error body (e.g. the failed turn).
	extra gin.H
}

func (e *apiError) Error() string { return e.code + ": " + e.msg }

func errInvalid(format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, code: "invalid_argument", msg: fmt.Sprintf(format, args...)}
}

func errNotFound(format string, args ...any) *apiError {
	return &apiError{status: http.StatusNotFound, code: "not_found", msg: fmt.Sprintf(format, args...)}
}

func errConflict(format string, args ...any) *apiError {
	return &apiError{status: http.StatusConflict, code: "conflict", msg: fmt.Sprintf(format, args...)}
}

func errUnavailable(format string, args ...any) *apiError {
	return &apiError{status: http.StatusServiceUnavailable, code: "unavailable", msg: fmt.Sprintf(format, args...)}
}

func errInternal(format string, args ...any) *apiError {
	return &apiError{status: http.StatusInternalServerError, code: "internal", msg: fmt.Sprintf(format, args...)}
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
		appErr    *temporal.ApplicationError
		queryFail *serviceerror.QueryFailed
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
	case errors.As(err, &appErr) && appErr.Type() == workflows.ErrTypeInvalidTurn:
		return errInvalid("%s", appErr.Message())
	case errors.As(err, &appErr) && appErr.Type() == workflows.ErrTypeConflict:
		return errConflict("%s", appErr.Message())
	case errors.As(err, &queryFail):
		return errNotFound("%s: %s", what, queryFail.Message)
	case errors.As(err, &exhausted), errors.As(err, &unavail), errors.As(err, &deadline),
		errors.Is(err, context.DeadlineExceeded):
		return errUnavailable("%s: %v", what, err)
	}
	return errInternal("%s: %v", what, err)
}

func writeError(c *gin.Context, err error) {
	var ae *apiError
	if !errors.As(err, &ae) {
		ae = errInternal("%v", err)
	}
	body := gin.H{"error": gin.H{"code": ae.code, "message": ae.msg, "requestId": c.GetString("requestID")}}
	for k, v := range ae.extra {
		body[k] = v
	}
	c.AbortWithStatusJSON(ae.status, body)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
