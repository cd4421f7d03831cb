// Package fakeollama is a small, deterministic Ollama-compatible HTTP server
// for end-to-end tests and manual checks. It is test tooling, not production
// code, and it imports only the standard library, so it also checks that
// ctxflow speaks Ollama's wire format rather than sharing the SDK's types.
//
// It serves the endpoints ctxflow uses:
//
//	HEAD|GET /            "Ollama is running"
//	GET  /api/version     {"version": "0.17.4"}
//	GET  /api/tags        the models of Options.Models
//	POST /api/show        a model's details, or 404 {"error":"model 'x' not found"}
//	POST /api/pull        any model, with three progress messages: served from then on
//	POST /api/chat        NDJSON stream (default) or one JSON object ("stream": false);
//	                      unknown model: 404 {"error":"model \"x\" not found, try pulling it first"}
//
// The default chat reply is "answer N to: LAST", N being the number of user
// messages in the request and LAST the content of the last one, so a test can
// see that the history reached the model. With "format" set, the reply is a
// JSON value shaped by the schema (see [Options.Reply]). Failures can be
// injected with [Fake.FailNext] and [Fake.BreakNext].
//
// Use it in tests as httptest.NewServer(fakeollama.New(opts)), or run
// `go run ./tests/fakeollama/cmd/fakeollama` and point OLLAMA_HOST at it.
package fakeollama

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultModel is the model a fake has when Options.Models is empty.
const DefaultModel = "qwen2.5:0.5b"

// Version is the Ollama version the fake reports.
const Version = "0.17.4"

// Options configures a [Fake].
type Options struct {
	// Delay is how long /api/chat waits before answering; the wait ends
	// early, without an answer, if the request is canceled.
	Delay time.Duration
	// ChunkDelay is the pause between two streamed fragments.
	ChunkDelay time.Duration
	// Models are the model names the fake claims to have; empty means
	// {DefaultModel}. A name without a tag means name:latest, and names
	// match case-insensitively, as in Ollama.
	Models []string
	// Reply, if set, makes the reply to a chat request; its result is sent
	// as is, also when the request has a format. If nil, the reply is
	// DefaultReply(req), or, when req.Format is set, SchemaReply(req).
	// It is called from concurrent requests.
	Reply func(req ChatRequestLite) string
}

// ChatRequestLite is the part of an /api/chat request the fake reads.
type ChatRequestLite struct {
	// Model is the requested model name, as sent.
	Model string `json:"model"`
	// Messages is the conversation, oldest first.
	Messages []MessageLite `json:"messages"`
	// Stream is false only when the request said "stream": false.
	Stream bool `json:"stream"`
	// Format is the request's format, raw: `"json"` or a JSON schema.
	Format json.RawMessage `json:"format,omitempty"`
	// Options are the request's model options (temperature, num_ctx, ...),
	// as decoded JSON (numbers are float64).
	Options map[string]any `json:"options,omitempty"`
	// KeepAlive is the request's keep_alive, raw (e.g. `"5m0s"` or `-1`).
	KeepAlive json.RawMessage `json:"keep_alive,omitempty"`
	// Tools are the functions the request offers the model, raw (a reply
	// never calls them natively: a script may write calls as text).
	Tools json.RawMessage `json:"tools,omitempty"`
}

// MessageLite is one message of a [ChatRequestLite].
type MessageLite struct {
	// Role is "system", "user", "assistant" or "tool".
	Role    string `json:"role"`
	Content string `json:"content"`
	// ToolCalls is an assistant message's tool calls, raw.
	ToolCalls json.RawMessage `json:"tool_calls,omitempty"`
	// ToolName and ToolCallID identify the call a "tool" message answers.
	ToolName   string `json:"tool_name,omitempty"`
	ToolCallID string `json:"tool_call_id,omitempty"`
}

// CallCounts counts the requests a [Fake] received, by endpoint, injected
// failures included.
type CallCounts struct {
	// Version, Tags, Show and Chat count the requests to /api/version,
	// /api/tags, /api/show and /api/chat.
	Version, Tags, Show, Chat int64
	// Failed counts the chat requests answered by FailNext or BreakNext.
	Failed int64
}

// Fake is an Ollama-compatible http.Handler. It is safe for concurrent use.
type Fake struct {
	opts   Options
	models []string // as given, for /api/tags
	known  map[string]bool
	mux    *http.ServeMux

	version, tags, show, chat, failed atomic.Int64

	mu         sync.Mutex
	failN      int
	failStatus int
	breakN     int
	last       *ChatRequestLite
	script     func(ChatRequestLite) string
}

var _ http.Handler = (*Fake)(nil)

// New returns a fake serving opts.
func New(opts Options) *Fake {
	f := &Fake{opts: opts, known: map[string]bool{}, mux: http.NewServeMux()}
	f.models = opts.Models
	if len(f.models) == 0 {
		f.models = []string{DefaultModel}
	}
	for _, m := range f.models {
		f.known[normalize(m)] = true
	}
	f.mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprint(w, "Ollama is running")
	})
	f.mux.HandleFunc("GET /api/version", f.handleVersion)
	f.mux.HandleFunc("GET /api/tags", f.handleTags)
	f.mux.HandleFunc("POST /api/show", f.handleShow)
	f.mux.HandleFunc("POST /api/chat", f.handleChat)
	f.mux.HandleFunc("POST /api/pull", f.handlePull)
	return f
}

// ServeHTTP implements http.Handler.
func (f *Fake) ServeHTTP(w http.ResponseWriter, r *http.Request) { f.mux.ServeHTTP(w, r) }

// Calls returns the number of requests received so far, by endpoint.
func (f *Fake) Calls() CallCounts {
	return CallCounts{
		Version: f.version.Load(),
		Tags:    f.tags.Load(),
		Show:    f.show.Load(),
		Chat:    f.chat.Load(),
		Failed:  f.failed.Load(),
	}
}

// FailNext makes the next n chat requests fail with the HTTP status given
// (500 if it is not an error status) and the body
// {"error":"fakeollama: injected failure"}. n <= 0 cancels pending failures.
// Failures are answered at once, without Delay.
func (f *Fake) FailNext(n, status int) {
	if status < 400 || status > 599 {
		status = http.StatusInternalServerError
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failN, f.failStatus = max(n, 0), status
}

// BreakNext makes the next n chat requests die mid-answer: a streamed answer
// sends its first fragment and the connection is then closed; a non-streamed
// one is closed before any byte is sent. n <= 0 cancels pending breaks.
// FailNext failures are used up first.
func (f *Fake) BreakNext(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.breakN = max(n, 0)
}

// SetReply makes the replies of the chat requests that follow, as
// Options.Reply does, for a test that scripts the model after the fake
// started; nil gives the fake's own replies again.
func (f *Fake) SetReply(reply func(req ChatRequestLite) string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.script = reply
}

// LastChat returns the last chat request that named a known model (ok is
// false if none did).
func (f *Fake) LastChat() (req ChatRequestLite, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.last == nil {
		return ChatRequestLite{}, false
	}
	return *f.last, true
}

// HasModel reports whether the fake claims to have the model called name.
func (f *Fake) HasModel(name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.known[normalize(name)]
}

// handlePull "downloads" any model: it streams three progress messages
// and the model is served from then on.
func (f *Fake) handlePull(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model string `json:"model"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Model == "" {
		writeError(w, http.StatusBadRequest, "model is required")
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	enc := json.NewEncoder(w)
	_ = enc.Encode(map[string]any{"status": "pulling manifest"})
	_ = enc.Encode(map[string]any{"status": "pulling 0123abcd", "digest": "sha256:0123abcd", "total": 1 << 20, "completed": 1 << 19})
	f.mu.Lock()
	if !f.known[normalize(req.Model)] {
		f.known[normalize(req.Model)] = true
		f.models = append(f.models, req.Model)
	}
	f.mu.Unlock()
	_ = enc.Encode(map[string]any{"status": "success"})
}

// DefaultReply is the reply used when Options.Reply is nil and the request
// has no format: "answer N to: LAST", N being the number of user messages and
// LAST the content of the last one.
func DefaultReply(req ChatRequestLite) string {
	n, last := 0, ""
	for _, m := range req.Messages {
		if m.Role == "user" {
			n++
			last = m.Content
		}
	}
	return Answer(n, last)
}

// Answer is the default reply to the n-th user message, question: what
// tests expect of a session answered by the fake.
func Answer(n int, question string) string { return fmt.Sprintf("answer %d to: %s", n, question) }

func (f *Fake) handleVersion(w http.ResponseWriter, _ *http.Request) {
	f.version.Add(1)
	writeJSON(w, http.StatusOK, map[string]string{"version": Version})
}

// modifiedAt is the fixed modification time of every fake model.
var modifiedAt = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

type detailsWire struct {
	ParentModel       string   `json:"parent_model"`
	Format            string   `json:"format"`
	Family            string   `json:"family"`
	Families          []string `json:"families"`
	ParameterSize     string   `json:"parameter_size"`
	QuantizationLevel string   `json:"quantization_level"`
}

var fakeDetails = detailsWire{
	Format:            "gguf",
	Family:            "fake",
	Families:          []string{"fake"},
	ParameterSize:     "0B",
	QuantizationLevel: "F16",
}

func (f *Fake) handleTags(w http.ResponseWriter, _ *http.Request) {
	f.tags.Add(1)
	type model struct {
		Name       string      `json:"name"`
		Model      string      `json:"model"`
		ModifiedAt time.Time   `json:"modified_at"`
		Size       int64       `json:"size"`
		Digest     string      `json:"digest"`
		Details    detailsWire `json:"details"`
	}
	f.mu.Lock()
	names := slices.Clone(f.models)
	f.mu.Unlock()
	models := make([]model, 0, len(names))
	for _, name := range names {
		sum := sha256.Sum256([]byte(name))
		models = append(models, model{
			Name:       name,
			Model:      name,
			ModifiedAt: modifiedAt,
			Size:       1 << 20,
			Digest:     hex.EncodeToString(sum[:]),
			Details:    fakeDetails,
		})
	}
	writeJSON(w, http.StatusOK, map[string]any{"models": models})
}

func (f *Fake) handleShow(w http.ResponseWriter, r *http.Request) {
	f.show.Add(1)
	var req struct {
		Model string `json:"model"`
		Name  string `json:"name"` // deprecated spelling, still accepted by Ollama
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	name := req.Model
	if name == "" {
		name = req.Name
	}
	switch {
	case name == "":
		writeError(w, http.StatusBadRequest, "model is required")
	case !f.HasModel(name):
		writeError(w, http.StatusNotFound, fmt.Sprintf("model '%s' not found", name))
	default:
		writeJSON(w, http.StatusOK, map[string]any{
			"modelfile":    "# Modelfile generated by fakeollama\nFROM " + name + "\n",
			"parameters":   "",
			"template":     "{{ .Prompt }}",
			"details":      fakeDetails,
			"model_info":   map[string]any{"general.architecture": "fake"},
			"capabilities": []string{"completion"},
			"modified_at":  modifiedAt,
		})
	}
}

// chatChunk is one line of an /api/chat answer.
type chatChunk struct {
	Model           string      `json:"model"`
	CreatedAt       time.Time   `json:"created_at"`
	Message         messageWire `json:"message"`
	Done            bool        `json:"done"`
	DoneReason      string      `json:"done_reason,omitempty"`
	PromptEvalCount int         `json:"prompt_eval_count,omitempty"`
	EvalCount       int         `json:"eval_count,omitempty"`
}

type messageWire struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

func (f *Fake) handleChat(w http.ResponseWriter, r *http.Request) {
	f.chat.Add(1)
	var wire struct {
		ChatRequestLite
		Stream *bool `json:"stream"`
	}
	if err := json.NewDecoder(r.Body).Decode(&wire); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	// Read the body to its end: only then does the server watch the
	// connection and cancel r.Context() when the client leaves.
	_, _ = io.Copy(io.Discard, r.Body)
	req := wire.ChatRequestLite
	req.Stream = wire.Stream == nil || *wire.Stream

	failStatus, breakIt := f.takeFailure()
	if failStatus != 0 {
		f.failed.Add(1)
		writeError(w, failStatus, "fakeollama: injected failure")
		return
	}
	switch {
	case req.Model == "":
		writeError(w, http.StatusBadRequest, "model is required")
		return
	case !f.HasModel(req.Model):
		writeError(w, http.StatusNotFound, fmt.Sprintf("model %q not found, try pulling it first", req.Model))
		return
	}
	f.mu.Lock()
	f.last = &req
	f.mu.Unlock()

	if !sleep(r.Context(), f.opts.Delay) {
		return
	}
	if breakIt {
		f.failed.Add(1)
	}

	reply := f.reply(req)
	fragments := splitFragments(reply)
	doneReason := "stop"
	if n, ok := req.Options["num_predict"].(float64); ok && n > 0 && int(n) < len(fragments) {
		fragments, doneReason = fragments[:int(n)], "length"
	}
	final := chatChunk{
		Model:           req.Model,
		CreatedAt:       time.Now().UTC(),
		Message:         messageWire{Role: "assistant"},
		Done:            true,
		DoneReason:      doneReason,
		PromptEvalCount: promptTokens(req),
		EvalCount:       len(fragments),
	}

	if !req.Stream {
		if breakIt {
			closeConn(w)
			return
		}
		final.Message.Content = strings.Join(fragments, "")
		writeJSON(w, http.StatusOK, final)
		return
	}

	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	enc := json.NewEncoder(w)
	for i, frag := range fragments {
		if i > 0 && !sleep(r.Context(), f.opts.ChunkDelay) {
			return
		}
		chunk := chatChunk{Model: req.Model, CreatedAt: time.Now().UTC(), Message: messageWire{Role: "assistant", Content: frag}}
		if enc.Encode(chunk) != nil || rc.Flush() != nil {
			return
		}
		if breakIt {
			closeConn(w)
			return
		}
	}
	if breakIt { // nothing was streamed: die before the final message
		closeConn(w)
		return
	}
	final.CreatedAt = time.Now().UTC()
	if enc.Encode(final) == nil {
		_ = rc.Flush() // the answer is complete; a failed flush only means the client left
	}
}

// takeFailure uses up one pending FailNext (its status) or BreakNext (true).
func (f *Fake) takeFailure() (status int, breakIt bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.failN > 0:
		f.failN--
		return f.failStatus, false
	case f.breakN > 0:
		f.breakN--
		return 0, true
	}
	return 0, false
}

func (f *Fake) reply(req ChatRequestLite) string {
	f.mu.Lock()
	script := f.script
	f.mu.Unlock()
	switch {
	case script != nil:
		return script(req)
	case f.opts.Reply != nil:
		return f.opts.Reply(req)
	case len(req.Format) > 0 && string(req.Format) != "null" && string(req.Format) != `""`:
		return SchemaReply(req)
	}
	return DefaultReply(req)
}

// splitFragments cuts a reply into the fragments streamed one per line:
// each word with the spaces that follow it.
func splitFragments(s string) []string {
	var out []string
	for _, frag := range strings.SplitAfter(s, " ") {
		if frag == "" {
			continue
		}
		if frag == " " && len(out) > 0 {
			out[len(out)-1] += frag
			continue
		}
		out = append(out, frag)
	}
	return out
}

// promptTokens is the fake's prompt_eval_count: the number of
// whitespace-separated words in all messages.
func promptTokens(req ChatRequestLite) int {
	n := 0
	for _, m := range req.Messages {
		n += len(strings.Fields(m.Content))
	}
	return n
}

// normalize makes a model name comparable: lower case, with ":latest" when
// it has no tag.
func normalize(name string) string {
	name = strings.ToLower(strings.TrimSpace(name))
	if !strings.Contains(name[strings.LastIndex(name, "/")+1:], ":") {
		name += ":latest"
	}
	return name
}

// sleep waits d, or less if ctx ends first; it reports whether the whole wait
// happened.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// closeConn drops the client's connection without finishing the response,
// as a server that dies mid-answer does.
func closeConn(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return // not hijackable (HTTP/2): the answer just ends without its final message
	}
	_ = conn.Close() // the point is to break the connection; its close error changes nothing
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // the status is sent; a write error means the client left
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}
