package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/convo"
)

var (
	// errIncomplete reports a stream that ended before the server said why
	// the answer stopped (no finish_reason).
	errIncomplete = errors.New("answer ended before its finish reason (server stopped mid-stream?)")
	// errNoModel reports a request without a model name.
	errNoModel = errors.New("model name is empty")
)

// maxErrorBody is the most of an error response's body read for its message.
const maxErrorBody = 64 << 10

// classify turns err, the failure of the call described by what, into the
// caller's context error or a *activities.ModelError (see Client.Chat).
func (c *Client) classify(ctx context.Context, pr *probe, what string, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return fmt.Errorf("%s: %w", what, ctxErr)
	}
	// The probe saw every error status, whatever its body: the SDK makes an
	// *openai.Error only of a body with an "error" object.
	if status, body := pr.result(); status >= http.StatusBadRequest {
		return c.statusError(what, status, errorMessage(body))
	}
	if ae, ok := errors.AsType[*oai.Error](err); ok {
		return c.statusError(what, ae.StatusCode, ae.Message)
	}
	return &activities.ModelError{Retryable: true, Message: what, Err: err}
}

// statusError classifies an HTTP error status; msg is the server's message.
func (c *Client) statusError(what string, status int, msg string) *activities.ModelError {
	msg = strings.TrimSpace(msg)
	if msg == "" {
		msg = http.StatusText(status)
	}
	if status == http.StatusNotFound {
		// An unknown model, or a base URL that is not the API's.
		hint := ", usually ending in /v1"
		if strings.HasSuffix(c.baseURL, "/v1") {
			hint = ""
		}
		msg += fmt.Sprintf(" (does the server at %s serve this model, and is that its OpenAI-compatible base URL%s?)", c.baseURL, hint)
	}
	return &activities.ModelError{
		StatusCode: status,
		Retryable:  activities.RetryableStatus(status),
		Message:    fmt.Sprintf("%s: HTTP %d: %s", what, status, msg),
	}
}

// errorMessage reads the message of an error body in the shapes servers
// use: OpenAI's {"error": {"message": ...}}, {"error": "..."},
// {"message": ...} (older vLLM), {"detail": ...} (FastAPI); else the text.
func errorMessage(body []byte) string {
	var v struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
		Detail  any             `json:"detail"`
	}
	if json.Unmarshal(body, &v) == nil {
		var inner struct {
			Message string `json:"message"`
		}
		var s string
		switch {
		case json.Unmarshal(v.Error, &inner) == nil && inner.Message != "":
			return inner.Message
		case json.Unmarshal(v.Error, &s) == nil && s != "":
			return s
		case v.Message != "":
			return v.Message
		case v.Detail != nil:
			if s, ok := v.Detail.(string); ok {
				return s
			}
			b, _ := json.Marshal(v.Detail)
			return string(b)
		}
	}
	return convo.Clip(strings.TrimSpace(string(body)), 500)
}

// probe records, for one call, the HTTP status and the body of an error
// response, which the SDK keeps only when the body is OpenAI's error shape.
type probe struct {
	mu     sync.Mutex
	status int
	body   []byte
}

func (p *probe) result() (int, []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.status, p.body
}

// option is the middleware that fills the probe.
func (p *probe) option() option.RequestOption {
	return option.WithMiddleware(func(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
		resp, err := next(req)
		if err != nil || resp == nil {
			return resp, err
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		p.status = resp.StatusCode
		if resp.StatusCode >= http.StatusBadRequest && resp.Body != nil {
			// Read here and given back to the SDK, which reads it again. A
			// read error leaves what was read: the status says enough.
			b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
			_ = resp.Body.Close()
			p.body = b
			resp.Body = io.NopCloser(bytes.NewReader(b))
		}
		return resp, nil
	})
}
