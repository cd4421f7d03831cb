package activities_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"

	"github.com/ctxflow/ctxflow/activities"
)

// TestPermanent: the one constructor of failures with a code makes an
// application error of that type that retries do not repeat, its cause
// kept in the chain.
func TestPermanent(t *testing.T) {
	cause := errors.New("line 3: bad JSON")
	tests := []struct {
		code, msg string
		cause     error
	}{
		{activities.CodeInvalidArgument, "imported transcript", cause},
		{activities.CodeNotFound, "session s1 has no message m9", nil},
		{activities.CodeConflict, "session s1 is busy", nil},
	}
	for _, tc := range tests {
		err := activities.Permanent(tc.code, tc.msg, tc.cause)
		var ae *temporal.ApplicationError
		if !errors.As(err, &ae) || ae.Type() != tc.code || ae.Message() != tc.msg || !ae.NonRetryable() || !errors.Is(err, tc.cause) && tc.cause != nil {
			t.Errorf("Permanent(%s, %q, %v) = %#v", tc.code, tc.msg, tc.cause, err)
		}
		if got := activities.CodeOf(err); got != tc.code {
			t.Errorf("CodeOf(Permanent(%s)) = %s", tc.code, got)
		}
	}
}

// TestCause: the one walker of error chains finds the code and what went
// wrong under the layers workflows and the SDK wrap around a failure, in
// the process and after Temporal carried it (its failure converter).
func TestCause(t *testing.T) {
	inner := activities.Permanent(activities.CodeModelPermanent, `model "nope" not found`, nil)
	tests := []struct {
		name    string
		err     error
		code    string // what Cause says
		msg     string
		codeOf  string // what CodeOf says
		carried string // Cause's message once the failure converter carried err ("" = msg)
		noCarry bool   // err is not an error Temporal carries as such
	}{
		{name: "nil", err: nil, noCarry: true},
		{name: "permanent", err: activities.Permanent(activities.CodeNotFound, "no message m9", nil),
			code: "not_found", msg: "no message m9", codeOf: "not_found"},
		{name: "plain cause", err: activities.Permanent(activities.CodeInvalidArgument, "imported transcript", errors.New("line 3: bad JSON")),
			code: "invalid_argument", msg: "imported transcript: line 3: bad JSON", codeOf: "invalid_argument", carried: "imported transcript"},
		{name: "context added", err: activities.Permanent(activities.CodeModelPermanent, `generate: model "nope" not found`, inner),
			code: "model_permanent", msg: `generate: model "nope" not found`, codeOf: "model_permanent"},
		{name: "under a workflow's layer", err: temporal.NewApplicationErrorWithCause("prepare doc: activity error", "wrapError", inner),
			code: "model_permanent", msg: `model "nope" not found`, codeOf: "model_permanent"},
		{name: "wrapped and joined", err: fmt.Errorf("workflow execution error: %w", errors.Join(inner)),
			code: "model_permanent", msg: `model "nope" not found`, codeOf: "model_permanent", noCarry: true},
		{name: "innermost code wins", err: activities.Permanent(activities.CodeUnavailable, "after 3 attempts", activities.Permanent(activities.CodeNotFound, "no document d1", nil)),
			code: "not_found", msg: "no document d1", codeOf: "not_found"},
		{name: "no code", err: temporal.NewApplicationErrorWithCause("prepare doc: activity error", "wrapError", temporal.NewApplicationError("the cause", "")),
			code: "", msg: "the cause", codeOf: "unavailable"},
		{name: "no code, wrapped as the SDK carries it", err: fmt.Errorf("mcp server web: call echo: %w", fmt.Errorf("sending initialize: %w", errors.New("connection refused"))),
			code: "", msg: "mcp server web: call echo: sending initialize: connection refused", codeOf: "unavailable"},
		{name: "a type not in the vocabulary", err: temporal.NewNonRetryableApplicationError("invalid limits", "BadInput", nil),
			code: "", msg: "invalid limits", codeOf: "unavailable"},
		{name: "timeout", err: temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_START_TO_CLOSE, nil),
			code: "", msg: "timed out (" + enumspb.TIMEOUT_TYPE_START_TO_CLOSE.String() + ")", codeOf: "unavailable"},
		{name: "canceled", err: temporal.NewCanceledError(), code: "", msg: "canceled", codeOf: "conflict"},
		{name: "context canceled", err: fmt.Errorf("load: %w", context.Canceled), code: "", msg: "load: context canceled", codeOf: "conflict", noCarry: true},
		{name: "plain", err: errors.New("dial tcp: refused"), code: "", msg: "dial tcp: refused", codeOf: "unavailable", noCarry: true},
	}
	fc := temporal.GetDefaultFailureConverter()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if code, msg := activities.Cause(tc.err); code != tc.code || msg != tc.msg {
				t.Errorf("Cause = %q, %q; want %q, %q", code, msg, tc.code, tc.msg)
			}
			if got := activities.CodeOf(tc.err); got != tc.codeOf {
				t.Errorf("CodeOf = %q, want %q", got, tc.codeOf)
			}
			if tc.noCarry {
				return
			}
			carried := fc.FailureToError(fc.ErrorToFailure(tc.err))
			want := tc.msg
			if tc.carried != "" {
				want = tc.carried
			}
			if code, msg := activities.Cause(carried); code != tc.code || msg != want {
				t.Errorf("carried: Cause = %q, %q; want %q, %q", code, msg, tc.code, want)
			}
			if got := activities.CodeOf(carried); got != tc.codeOf {
				t.Errorf("carried: CodeOf = %q, want %q", got, tc.codeOf)
			}
		})
	}
}
