package ollama

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/ollama/ollama/api"

	"github.com/ctxflow/ctxflow/activities"
)

var (
	// errIncomplete reports a stream that ended before its final message.
	errIncomplete = errors.New("answer ended before the final message (server stopped mid-stream?)")
	// errNoModel reports a request without a model name.
	errNoModel = errors.New("model name is empty")
	// errCallTimeout is the cause of the context of a call that ran out of
	// Config.Timeout, which tells it apart from the caller's own deadline.
	errCallTimeout = errors.New("ollama call timed out")
)

// begin derives the context of one call: the per-call timeout and a probe
// that records what the SDK does not report.
func (c *Client) begin(ctx context.Context) (context.Context, *probe, context.CancelFunc) {
	pr := &probe{}
	callCtx := context.WithValue(ctx, probeKey{}, pr)
	if c.timeout > 0 {
		callCtx, cancel := context.WithTimeoutCause(callCtx, c.timeout, errCallTimeout)
		return callCtx, pr, cancel
	}
	callCtx, cancel := context.WithCancel(callCtx)
	return callCtx, pr, cancel
}

// classify turns err, the failure of the call described by what, into the
// caller's context error or a *activities.ModelError (see Client.Chat).
func (c *Client) classify(ctx, callCtx context.Context, pr *probe, what string, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return fmt.Errorf("%s: %w", what, ctxErr)
	}
	if errors.Is(context.Cause(callCtx), errCallTimeout) {
		return &activities.ModelError{
			Retryable: true,
			Message:   fmt.Sprintf("%s: no complete answer within %s", what, c.timeout),
			Err:       context.DeadlineExceeded,
		}
	}
	if ae, ok := errors.AsType[api.AuthorizationError](err); ok {
		msg := "unauthorized"
		if ae.SigninURL != "" {
			msg += " (sign in at " + ae.SigninURL + ")"
		}
		return statusError(what, ae.StatusCode, msg)
	}
	if se, ok := errors.AsType[api.StatusError](err); ok {
		return statusError(what, se.StatusCode, se.ErrorMessage)
	}
	if status := pr.statusCode(); status >= http.StatusBadRequest {
		// An error status with an empty body: the SDK's streaming reader
		// sees no line and reports nothing, but the probe saw the status.
		return statusError(what, status, "")
	}
	return &activities.ModelError{Retryable: true, Message: what, Err: err}
}

// statusError classifies an HTTP error status; msg is the server's message.
func statusError(what string, status int, msg string) *activities.ModelError {
	msg = strings.TrimSpace(msg)
	if msg == "" {
		msg = http.StatusText(status)
	}
	return &activities.ModelError{
		StatusCode: status,
		Retryable:  activities.RetryableStatus(status),
		Message:    fmt.Sprintf("%s: HTTP %d: %s", what, status, msg),
	}
}

// probeKey is the context key of a call's *probe.
type probeKey struct{}

// probe records, for one call, the HTTP status and the error that ended the
// response body. The SDK hides both when a stream ends early or an error
// status comes with an empty body.
type probe struct {
	mu      sync.Mutex
	status  int
	readErr error
}

func (p *probe) statusCode() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.status
}

func (p *probe) readError() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.readErr
}

// probeTransport fills the *probe found in a request's context.
type probeTransport struct {
	base http.RoundTripper
}

// RoundTrip implements http.RoundTripper.
func (t probeTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	pr, ok := req.Context().Value(probeKey{}).(*probe)
	if err != nil || !ok {
		return resp, err
	}
	pr.mu.Lock()
	pr.status = resp.StatusCode
	pr.mu.Unlock()
	resp.Body = &probedBody{ReadCloser: resp.Body, probe: pr}
	return resp, nil
}

// probedBody records the first read error other than io.EOF.
type probedBody struct {
	io.ReadCloser
	probe *probe
}

func (b *probedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		b.probe.mu.Lock()
		if b.probe.readErr == nil {
			b.probe.readErr = err
		}
		b.probe.mu.Unlock()
	}
	return n, err
}
