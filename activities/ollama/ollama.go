// Package ollama is the [activities.ChatModel] adapter for an Ollama server.
//
// It is the only package of ctxflow that imports the Ollama SDK
// (github.com/ollama/ollama/api). Ollama's types stay inside it: requests are
// built from [activities.ChatRequest] and [convo.ModelMessage], answers are
// returned as [activities.ChatResponse], and every failure is returned either
// as a classified [*activities.ModelError] or, when the caller's context
// ended, as the context's own error (see [Client.Chat]).
//
// Use [New] to build a [Client]; [Client.Ping] and [Client.HasModel] serve
// readiness checks and provider selection.
package ollama

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/ollama/ollama/api"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/convo"
)

// DefaultHost is the server address used when Config.Host is empty. The
// package does not read the environment: the worker passes OLLAMA_HOST as
// internal/config read it.
const DefaultHost = "http://127.0.0.1:11434"

// DefaultTimeout bounds one call when Config.Timeout is zero (the worker
// sets Timeout from LLM_TIMEOUT).
const DefaultTimeout = 60 * time.Second

// Config configures a [Client]. The zero value is usable: it talks to
// [DefaultHost] with a [DefaultTimeout] per call.
type Config struct {
	// Host is the server address, in OLLAMA_HOST syntax:
	// "[scheme://]host[:port][/path]". Empty means DefaultHost. As in Ollama, a host without a
	// scheme gets http and port 11434, and "http://host" or "https://host"
	// without a port gets port 80 or 443.
	Host string
	// Timeout bounds each call (Chat, including its whole stream, Ping and
	// HasModel). Zero means DefaultTimeout; negative means no bound other
	// than the caller's context.
	Timeout time.Duration
	// KeepAlive asks the server to keep the model loaded this long after a
	// chat call. Zero leaves the server's default (5 minutes); negative keeps
	// the model loaded indefinitely.
	KeepAlive time.Duration
	// NumCtx is the context length (num_ctx) asked for on every chat call
	// that does not set its own: the same for every call, so that the server
	// never reloads the model for another size. Zero leaves the server's
	// default (4,096 tokens on most machines), which cuts longer prompts
	// silently; the server caps it at the model's own context length.
	NumCtx int
	// HTTPClient sends the requests; nil means a client over
	// http.DefaultTransport. It is copied, not modified. Leave its Timeout
	// zero: Timeout above already bounds each call, and a client timeout
	// would also cut long streams.
	HTTPClient *http.Client
}

// Client is an Ollama chat model. It is safe for concurrent use.
type Client struct {
	api       *api.Client
	http      *http.Client
	base      *url.URL
	host      string
	timeout   time.Duration
	keepAlive *api.Duration
	numCtx    int
	dims      activities.Dims
}

var _ activities.ChatModel = (*Client)(nil)

// New returns a client for the server cfg names. It does not contact the
// server: use [Client.Ping] for that.
func New(cfg Config) (*Client, error) {
	base, err := parseHost(cfg.Host)
	if err != nil {
		return nil, fmt.Errorf("ollama: %w", err)
	}

	var hc http.Client
	if cfg.HTTPClient != nil {
		hc = *cfg.HTTPClient
	}
	hc.Transport = probeTransport{base: cmp.Or[http.RoundTripper](hc.Transport, http.DefaultTransport)}

	c := &Client{
		api:     api.NewClient(base, &hc),
		http:    &hc,
		base:    base,
		host:    base.String(),
		timeout: cmp.Or(cfg.Timeout, DefaultTimeout),
		numCtx:  cfg.NumCtx,
	}
	if cfg.NumCtx < 0 {
		return nil, fmt.Errorf("ollama: num_ctx %d is negative", cfg.NumCtx)
	}
	if cfg.KeepAlive != 0 {
		c.keepAlive = &api.Duration{Duration: cfg.KeepAlive}
	}
	return c, nil
}

// Host returns the server's base URL, e.g. "http://127.0.0.1:11434".
func (c *Client) Host() string { return c.host }

// Chat sends req to the server and returns the complete answer.
//
// When onDelta is non-nil the answer is streamed and onDelta is called with
// each non-empty fragment, in order, before Chat returns; when it is nil the
// answer is requested in one piece. PromptTokens and CompletionTokens are the
// server's prompt_eval_count and eval_count. Content is the answer's text
// only: a thinking model's reasoning (Ollama's message.thinking) is left out.
// req.Tools are offered to the model as functions; the calls it makes come
// back in ToolCalls, with ids "call_N" when the server gives none.
//
// Errors: if ctx ends first, Chat returns ctx.Err() wrapped (not a
// ModelError), whatever the transport reported. Otherwise every error is a
// *activities.ModelError:
//
//   - invalid request (unknown role, empty model, malformed tool arguments or
//     format), HTTP 401/403, and HTTP 4xx other than 408, 425, 429 and 499
//     (e.g. 404 unknown model, 400 bad request), and HTTP 501: Retryable=false;
//   - HTTP 5xx (but 501), 408, 425, 429, 499, connection failures, the
//     per-call Timeout, an error reported by the server mid-stream, and a
//     stream that ends before the final message: Retryable=true.
//
// StatusCode is set when the server answered with an HTTP error status, and
// Message then carries the server's own message.
func (c *Client) Chat(ctx context.Context, req activities.ChatRequest, onDelta func(delta string)) (activities.ChatResponse, error) {
	what := fmt.Sprintf("ollama chat %q", req.Model)
	areq, err := c.chatRequest(req, onDelta != nil)
	if err != nil {
		return activities.ChatResponse{}, &activities.ModelError{Message: what + ": invalid request", Err: err}
	}

	callCtx, pr, cancel := c.begin(ctx)
	defer cancel()

	var (
		content strings.Builder
		calls   []api.ToolCall
		final   api.ChatResponse
		done    bool
	)
	err = c.chat(callCtx, areq, func(r api.ChatResponse) error {
		if r.Message.Content != "" {
			content.WriteString(r.Message.Content)
			if onDelta != nil {
				onDelta(r.Message.Content)
			}
		}
		calls = append(calls, r.Message.ToolCalls...)
		if r.Done {
			final, done = r, true
		}
		return nil
	})
	if err == nil && !done {
		// The SDK ends quietly when the body ends, cleanly or not: a stream
		// without its final message is an interrupted answer.
		err = errIncomplete
		if rerr := pr.readError(); rerr != nil {
			err = fmt.Errorf("%w: %w", errIncomplete, rerr)
		}
	}
	if err != nil {
		return activities.ChatResponse{}, c.classify(ctx, callCtx, pr, what, err)
	}
	toolCalls, err := fromAPIToolCalls(calls)
	if err != nil {
		return activities.ChatResponse{}, &activities.ModelError{Retryable: true, Message: what + ": unreadable tool call", Err: err}
	}
	return activities.ChatResponse{
		Content:          content.String(),
		Model:            cmp.Or(final.Model, req.Model),
		PromptTokens:     final.PromptEvalCount,
		CompletionTokens: final.EvalCount,
		ToolCalls:        toolCalls,
		DoneReason:       final.DoneReason,
	}, nil
}

// Ping reports whether the server answers (GET /api/version). Its errors are
// classified as Chat's are.
func (c *Client) Ping(ctx context.Context) error {
	callCtx, pr, cancel := c.begin(ctx)
	defer cancel()
	if _, err := c.api.Version(callCtx); err != nil {
		return c.classify(ctx, callCtx, pr, "ollama ping "+c.host, err)
	}
	return nil
}

// HasModel reports whether the server has the model called name, resolving
// the name as the server does (e.g. "llama3" is "llama3:latest"), through
// POST /api/show. An unknown model is (false, nil); other failures are
// classified as Chat's are.
func (c *Client) HasModel(ctx context.Context, name string) (bool, error) {
	what := fmt.Sprintf("ollama show %q", name)
	if strings.TrimSpace(name) == "" {
		return false, &activities.ModelError{Message: what + ": invalid request", Err: errNoModel}
	}
	callCtx, pr, cancel := c.begin(ctx)
	defer cancel()
	_, err := c.api.Show(callCtx, &api.ShowRequest{Model: name})
	if err == nil {
		return true, nil
	}
	if se, ok := errors.AsType[api.StatusError](err); ok && se.StatusCode == http.StatusNotFound && ctx.Err() == nil {
		return false, nil
	}
	return false, c.classify(ctx, callCtx, pr, what, err)
}

// ContextLength is the context a chat call with model gets: Config.NumCtx,
// capped by the model's own context length as the server reports it
// (POST /api/show, model_info "<architecture>.context_length"); the
// model's own when NumCtx is zero. 0 means unknown. Errors are classified
// as Chat's are; an unknown model is a permanent one.
func (c *Client) ContextLength(ctx context.Context, model string) (int, error) {
	what := fmt.Sprintf("ollama show %q", model)
	callCtx, pr, cancel := c.begin(ctx)
	defer cancel()
	res, err := c.api.Show(callCtx, &api.ShowRequest{Model: model})
	if err != nil {
		return 0, c.classify(ctx, callCtx, pr, what, err)
	}
	own := modelContextLength(res.ModelInfo)
	switch {
	case c.numCtx == 0:
		return own, nil
	case own > 0:
		return min(c.numCtx, own), nil
	}
	return c.numCtx, nil
}

// modelContextLength reads "<general.architecture>.context_length" from
// /api/show's model_info; 0 when absent.
func modelContextLength(info map[string]any) int {
	arch, _ := info["general.architecture"].(string)
	n, _ := info[arch+".context_length"].(float64) // JSON numbers
	return int(n)
}

// Pull downloads model to the server (POST /api/pull), reporting each
// progress message to progress (total and completed are bytes, 0 when the
// server gives none). Errors are classified as Chat's are.
func (c *Client) Pull(ctx context.Context, model string, progress func(status string, completed, total int64)) error {
	what := fmt.Sprintf("ollama pull %q", model)
	pr := &probe{} // no per-call timeout: a pull takes as long as the download
	callCtx, cancel := context.WithCancel(context.WithValue(ctx, probeKey{}, pr))
	defer cancel()
	err := c.api.Pull(callCtx, &api.PullRequest{Model: model}, func(r api.ProgressResponse) error {
		if progress != nil {
			progress(r.Status, r.Completed, r.Total)
		}
		return nil
	})
	if err != nil {
		return c.classify(ctx, callCtx, pr, what, err)
	}
	return nil
}

// chatRequest converts req to the SDK's request. Its errors describe an
// invalid request.
func (c *Client) chatRequest(req activities.ChatRequest, stream bool) (*api.ChatRequest, error) {
	if strings.TrimSpace(req.Model) == "" {
		return nil, errNoModel
	}
	msgs, err := toAPIMessages(req.Messages)
	if err != nil {
		return nil, err
	}
	o := req.Options
	if o.NumCtx == 0 {
		o.NumCtx = c.numCtx
	}
	opts, err := toAPIOptions(o)
	if err != nil {
		return nil, err
	}
	format, err := toAPIFormat(req.Format)
	if err != nil {
		return nil, err
	}
	tools, err := toAPITools(req.Tools)
	if err != nil {
		return nil, err
	}
	return &api.ChatRequest{
		Model:     req.Model,
		Messages:  msgs,
		Tools:     tools,
		Stream:    &stream,
		Format:    format,
		KeepAlive: c.keepAlive,
		Options:   opts,
	}, nil
}

// parseHost reads an address in OLLAMA_HOST syntax, as Ollama's own
// envconfig.Host does, but refuses an invalid address instead of replacing
// parts of it with defaults.
func parseHost(s string) (*url.URL, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		s = DefaultHost
	}
	defaultPort := "11434"
	scheme, hostport, ok := strings.Cut(s, "://")
	switch {
	case !ok:
		scheme, hostport = "http", s
	case scheme == "http":
		defaultPort = "80"
	case scheme == "https":
		defaultPort = "443"
	default:
		return nil, fmt.Errorf("host %q: scheme must be http or https", s)
	}
	hostport, path, _ := strings.Cut(hostport, "/")
	if strings.ContainsAny(hostport, "@?# ") {
		return nil, fmt.Errorf("host %q: not of the form [scheme://]host[:port][/path]", s)
	}
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		// No port: hostport is a name, an IP address or empty.
		host, port = strings.Trim(hostport, "[]"), defaultPort
	}
	if host == "" {
		host = "127.0.0.1"
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
		return nil, fmt.Errorf("host %q: invalid port %q", s, port)
	}
	u := &url.URL{Scheme: scheme, Host: net.JoinHostPort(host, port)}
	if path = strings.Trim(path, "/"); path != "" {
		u.Path = "/" + path
	}
	return u, nil
}

// toAPIMessages converts the model view to Ollama messages.
func toAPIMessages(msgs []convo.ModelMessage) ([]api.Message, error) {
	out := make([]api.Message, 0, len(msgs))
	for i, m := range msgs {
		switch m.Role {
		case "system", "user", "assistant", "tool":
		default:
			return nil, fmt.Errorf("message %d: role %q is not system, user, assistant or tool", i, m.Role)
		}
		am := api.Message{
			Role:       m.Role,
			Content:    m.Content,
			ToolName:   m.ToolName,
			ToolCallID: m.ToolCallID,
		}
		for j, tc := range m.ToolCalls {
			args := api.NewToolCallFunctionArguments()
			if raw := strings.TrimSpace(string(tc.Args)); raw != "" && raw != "null" {
				if !strings.HasPrefix(raw, "{") {
					return nil, fmt.Errorf("message %d: tool call %q: arguments must be a JSON object", i, tc.Name)
				}
				if err := args.UnmarshalJSON(tc.Args); err != nil {
					return nil, fmt.Errorf("message %d: tool call %q: arguments: %w", i, tc.Name, err)
				}
			}
			am.ToolCalls = append(am.ToolCalls, api.ToolCall{
				ID: tc.ID,
				Function: api.ToolCallFunction{
					Index:     j,
					Name:      tc.Name,
					Arguments: args,
				},
			})
		}
		out = append(out, am)
	}
	return out, nil
}

// toAPIOptions converts the generation options; zero values are left out so
// that the model's own defaults apply.
func toAPIOptions(o activities.ModelOptions) (map[string]any, error) {
	if o.NumCtx < 0 {
		return nil, fmt.Errorf("num_ctx %d is negative", o.NumCtx)
	}
	if o.NumPredict < -2 {
		return nil, fmt.Errorf("num_predict %d is below -2", o.NumPredict)
	}
	opts := make(map[string]any, 4)
	if o.Temperature != nil {
		opts["temperature"] = *o.Temperature
	}
	if o.NumCtx > 0 {
		opts["num_ctx"] = o.NumCtx
	}
	if o.NumPredict != 0 {
		opts["num_predict"] = o.NumPredict
	}
	if o.Seed != nil {
		opts["seed"] = *o.Seed
	}
	if len(opts) == 0 {
		return nil, nil
	}
	return opts, nil
}

// toAPIFormat passes a JSON schema through and turns the bare word json
// (JSON mode) into the JSON string "json" that Ollama expects.
func toAPIFormat(f []byte) ([]byte, error) {
	s := strings.TrimSpace(string(f))
	switch {
	case s == "":
		return nil, nil
	case s == "json":
		return []byte(`"json"`), nil
	case !json.Valid([]byte(s)):
		return nil, fmt.Errorf("format is neither \"json\" nor a valid JSON schema")
	}
	return []byte(s), nil
}

// toAPITools declares tools as Ollama functions; each Parameters must be a
// JSON object schema.
func toAPITools(specs []activities.ToolSpec) (api.Tools, error) {
	if len(specs) == 0 {
		return nil, nil
	}
	out := make(api.Tools, 0, len(specs))
	for _, t := range specs {
		if strings.TrimSpace(t.Name) == "" {
			return nil, errors.New("a tool has no name")
		}
		var params api.ToolFunctionParameters
		if raw := strings.TrimSpace(string(t.Parameters)); raw != "" {
			if err := json.Unmarshal(t.Parameters, &params); err != nil {
				return nil, fmt.Errorf("tool %q: parameters are not a JSON schema object: %w", t.Name, err)
			}
		}
		if params.Type == "" {
			params.Type = "object"
		}
		out = append(out, api.Tool{Type: "function", Function: api.ToolFunction{Name: t.Name, Description: t.Description, Parameters: params}})
	}
	return out, nil
}

// fromAPIToolCalls converts the model's tool calls; a call without an id
// gets "call_N", N its position.
func fromAPIToolCalls(calls []api.ToolCall) ([]convo.ToolCall, error) {
	if len(calls) == 0 {
		return nil, nil
	}
	out := make([]convo.ToolCall, 0, len(calls))
	for i, c := range calls {
		args, err := c.Function.Arguments.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("tool call %q: %w", c.Function.Name, err)
		}
		id := c.ID
		if id == "" {
			id = fmt.Sprintf("call_%d", i)
		}
		out = append(out, convo.ToolCall{ID: id, Name: c.Function.Name, Args: args})
	}
	return out, nil
}
