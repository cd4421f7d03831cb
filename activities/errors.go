package activities

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"go.temporal.io/sdk/temporal"
)

// Failure codes: the one vocabulary of what went wrong. Activities fail
// with application errors of these types (non-retryable ones are named in
// every retry policy), workflows carry them on their results
// ([CodeOf]), and the API answers each with one HTTP status and what to do.
const (
	// CodeInvalidArgument: the request (or the document) is wrong; fixing
	// it is the caller's part.
	CodeInvalidArgument = "invalid_argument"
	// CodeNotFound: what the request names does not exist.
	CodeNotFound = "not_found"
	// CodeConflict: the request clashes with the state (a session being
	// closed, a turn id used for another question, a document busy).
	CodeConflict = "conflict"
	// CodeTooLarge: a body or document over a limit.
	CodeTooLarge = "too_large"
	// CodeUnavailable: a model, store or worker did not answer in time,
	// after the retries: trying again later may work.
	CodeUnavailable = "unavailable"
	// CodeModelPermanent: the model refused the request for good (an
	// unknown model, a bad request): another model or request is needed.
	CodeModelPermanent = "model_permanent"
	// CodeDimensionMismatch: the collection's vectors and every configured
	// embedder disagree on the dimension: only configuration can fix it.
	CodeDimensionMismatch = "dimension_mismatch"
	// CodeDocumentChanged: a document's file changed during its ingestion.
	CodeDocumentChanged = "document_changed"
	// CodeUnauthenticated: the request has no API key, or one the API
	// does not know.
	CodeUnauthenticated = "unauthenticated"
	// CodeOverloaded: the API has as many requests in flight as it takes
	// (CTXFLOW_API_MAX_INFLIGHT); the answer says when to try again.
	CodeOverloaded = "overloaded"
	// CodeInternal: a bug.
	CodeInternal = "internal"
)

// Permanent returns a failure with a code that retries do not fix: a
// non-retryable application error of type code. It is the one way
// activities and workflows fail with a code; msg says what failed, and
// cause, when not nil, stays in the chain ([Cause] reads it).
func Permanent(code, msg string, cause error) error {
	return temporal.NewNonRetryableApplicationError(msg, code, cause)
}

// Cause reads err's chain of application errors — an activity's own error
// under the layers a workflow, a child workflow and the SDK wrap around
// it — and returns its failure code and what went wrong. code is the
// innermost failure code in the chain ("" when no application error
// carries one); msg is the message of the outermost application error of
// that code (the activity's error, with the context it added), or, when
// none has a code, of the outermost application error whose message holds
// the innermost one's, followed by its cause
// when that is a plain error; without application errors, a timeout's type
// or err's own message. It is the one walker of error chains: [CodeOf],
// the API and the workflows read failures through it.
func Cause(err error) (code, msg string) {
	if err == nil {
		return "", ""
	}
	var chain []*temporal.ApplicationError
	for e := err; e != nil; e = errors.Unwrap(e) {
		var ae *temporal.ApplicationError
		if !errors.As(e, &ae) {
			break
		}
		chain = append(chain, ae)
		if Known(ae.Type()) {
			code = ae.Type()
		}
		e = ae
	}
	if len(chain) == 0 {
		var timeout *temporal.TimeoutError
		if errors.As(err, &timeout) {
			return "", "timed out (" + timeout.TimeoutType().String() + ")"
		}
		return "", err.Error()
	}
	// Without a code, the outermost error that still says what the
	// innermost says: the activity's own error with the context it added
	// ("mcp server web: call echo: … refused"; the SDK carries each error it
	// wraps as a nested application error, so the innermost is only the
	// last cause), not a workflow's layer that says only where it failed
	// ("prepare doc: activity error").
	root := chain[len(chain)-1]
	for _, ae := range chain {
		if strings.Contains(ae.Message(), root.Message()) {
			root = ae
			break
		}
	}
	if code != "" {
		for _, ae := range chain {
			if ae.Type() == code {
				root = ae
				break
			}
		}
	}
	msg = root.Message()
	if cause := errors.Unwrap(root); cause != nil && !errors.As(cause, new(*temporal.ApplicationError)) {
		msg += ": " + cause.Error()
	}
	return code, msg
}

// CodeOf returns the failure code of err ([Cause]); CodeConflict for a
// cancellation and CodeUnavailable for timeouts and failures without a
// code (what retries did not fix), "" for nil.
func CodeOf(err error) string {
	if err == nil {
		return ""
	}
	if code, _ := Cause(err); code != "" {
		return code
	}
	var canceled *temporal.CanceledError
	if errors.As(err, &canceled) || errors.Is(err, context.Canceled) {
		return CodeConflict
	}
	return CodeUnavailable
}

// Known reports whether code is one of the failure codes above.
func Known(code string) bool {
	switch code {
	case CodeInvalidArgument, CodeNotFound, CodeConflict, CodeTooLarge, CodeUnavailable,
		CodeModelPermanent, CodeDimensionMismatch, CodeDocumentChanged, CodeUnauthenticated,
		CodeOverloaded, CodeInternal:
		return true
	}
	return false
}

// RetryableStatus reports whether a model server's HTTP error status may
// go away if the request is sent again unchanged: 408, 425, 429, 499
// (nginx's and Ollama's "request canceled") and 5xx but 501; the model
// adapters classify by it.
func RetryableStatus(status int) bool {
	switch status {
	case http.StatusRequestTimeout, http.StatusTooEarly, http.StatusTooManyRequests, 499:
		return true
	case http.StatusNotImplemented:
		return false
	}
	return status >= http.StatusInternalServerError
}
