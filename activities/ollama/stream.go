package ollama

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"

	"github.com/ollama/ollama/api"
	"github.com/ollama/ollama/envconfig"
)

// maxLine is the longest line of a chat stream read, as the SDK's 8 MB.
const maxLine = 8 << 20

// lineBufs holds the first buffers of chat stream readers: the SDK
// allocates (and zeroes) 8 MB for every call, which under load was a third
// of a worker's CPU in the garbage collector. A line longer than a pooled
// buffer still grows to maxLine.
var lineBufs = sync.Pool{New: func() any { b := make([]byte, 64<<10); return &b }}

// chat is api.Client.Chat without its 8 MB buffer a call: the same request
// (POST /api/chat, NDJSON) and the same errors (api.StatusError,
// api.AuthorizationError, a stream error as a plain error). Signed requests
// (OLLAMA_AUTH, ollama.com) go through the SDK, which signs them.
func (c *Client) chat(ctx context.Context, req *api.ChatRequest, fn api.ChatResponseFunc) error {
	if envconfig.UseAuth() || c.base.Hostname() == "ollama.com" {
		return c.api.Chat(ctx, req, fn)
	}
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base.JoinPath("/api/chat").String(), bytes.NewReader(body))
	if err != nil {
		return err
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "application/x-ndjson")
	hreq.Header.Set("User-Agent", "ctxflow")
	resp, err := c.http.Do(hreq)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()

	buf := lineBufs.Get().(*[]byte)
	defer lineBufs.Put(buf)
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(*buf, maxLine)
	for sc.Scan() {
		if err := chatLine(resp, sc.Bytes(), fn); err != nil {
			return err
		}
	}
	// As the SDK: a read error ends the stream quietly; Chat reports the
	// missing final message, with the error the probe saw.
	return nil
}

// chatLine reads one line of a chat stream as the SDK does: an error
// status or an error field ends the stream with that error. The line is
// parsed once, the answer and the error fields together.
func chatLine(resp *http.Response, line []byte, fn api.ChatResponseFunc) error {
	var r struct {
		api.ChatResponse
		Error     string `json:"error,omitempty"`
		SigninURL string `json:"signin_url,omitempty"`
	}
	err := json.Unmarshal(line, &r)
	switch {
	case err != nil && resp.StatusCode >= http.StatusBadRequest:
		return api.StatusError{StatusCode: resp.StatusCode, Status: resp.Status, ErrorMessage: string(line)}
	case err != nil:
		return errors.New(string(line))
	case resp.StatusCode == http.StatusUnauthorized:
		return api.AuthorizationError{StatusCode: resp.StatusCode, Status: resp.Status, SigninURL: r.SigninURL}
	case resp.StatusCode >= http.StatusBadRequest:
		return api.StatusError{StatusCode: resp.StatusCode, Status: resp.Status, ErrorMessage: r.Error}
	case r.Error != "":
		return errors.New(r.Error)
	}
	return fn(r.ChatResponse)
}
