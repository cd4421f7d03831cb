// Package openai is the [activities.ChatModel] and [activities.Embedder]
// adapter for a server that speaks OpenAI's chat completions and embeddings
// API: vLLM, llama.cpp's server, LM Studio, Ollama's /v1, or a hosted API.
//
// It is the only package of ctxflow that imports the OpenAI SDK
// (github.com/openai/openai-go/v3). The SDK's types stay inside it: requests
// are built from [activities.ChatRequest] and [convo.ModelMessage], answers
// are returned as [activities.ChatResponse], and every failure is returned
// either as a classified [*activities.ModelError] or, when the caller's
// context ended, as the context's own error (see [Client.Chat]).
//
// The SDK's own retries are off (Temporal retries the activity) and nothing
// bounds a call but the caller's context: the activity's deadline.
package openai

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/shared"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/convo"
)

// Config configures a [Client].
type Config struct {
	// BaseURL is the API's base URL, the part before /chat/completions,
	// e.g. "http://127.0.0.1:8000/v1" (vLLM) or "https://api.openai.com/v1".
	// Required.
	BaseURL string
	// APIKey is sent as "Authorization: Bearer <key>"; empty sends none (a
	// local server).
	APIKey string
	// HTTPClient sends the requests; nil means a client over
	// http.DefaultTransport. It is copied, not modified. Leave its Timeout
	// zero: the caller's context bounds each call, and a client timeout
	// would also cut long streams.
	HTTPClient *http.Client
	// Logger reports what the adapter repairs (a tool call's unreadable
	// arguments); nil means slog.Default().
	Logger *slog.Logger
	// ContextLength is the context, in tokens, that the server serves its
	// chat models with (see [Client.ContextLength]); 0: ask the server.
	ContextLength int
}

// Client is an OpenAI-compatible chat model and embedder. It is safe for
// concurrent use.
type Client struct {
	chat    oai.ChatCompletionService
	embed   oai.EmbeddingService
	models  oai.ModelService
	baseURL string
	// contextLength is Config.ContextLength.
	contextLength int
	log           *slog.Logger
	dims          activities.Dims
}

var (
	_ activities.ChatModel = (*Client)(nil)
	_ activities.Embedder  = (*Client)(nil)
)

// New returns a client for the server cfg names. It does not contact the
// server. The SDK's environment variables (OPENAI_BASE_URL, OPENAI_API_KEY,
// ...) are not read: cfg is the whole configuration.
func New(cfg Config) (*Client, error) {
	base, err := parseBaseURL(cfg.BaseURL)
	if err != nil {
		return nil, fmt.Errorf("openai: %w", err)
	}
	hc := &http.Client{}
	if cfg.HTTPClient != nil {
		copied := *cfg.HTTPClient
		hc = &copied
	}
	opts := []option.RequestOption{
		option.WithBaseURL(base),
		option.WithHTTPClient(hc),
		option.WithMaxRetries(0), // Temporal retries the activity
	}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	}
	// The services, unlike openai.NewClient, read no environment variable.
	return &Client{
		chat:    oai.NewChatCompletionService(opts...),
		embed:   oai.NewEmbeddingService(opts...),
		models:  oai.NewModelService(opts...),
		baseURL: base,
		log:     cmp.Or(cfg.Logger, slog.Default()),

		contextLength: cfg.ContextLength,
	}, nil
}

// BaseURL returns the API's base URL, e.g. "http://127.0.0.1:8000/v1".
func (c *Client) BaseURL() string { return c.baseURL }

// parseBaseURL checks an http(s) URL with a host, and drops a trailing
// slash.
func parseBaseURL(s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", errors.New("base URL is empty")
	}
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return "", fmt.Errorf("base URL %q: %w", s, err)
	case u.Scheme != "http" && u.Scheme != "https":
		return "", fmt.Errorf("base URL %q: scheme must be http or https", s)
	case u.Host == "":
		return "", fmt.Errorf("base URL %q has no host", s)
	case u.RawQuery != "" || u.Fragment != "":
		return "", fmt.Errorf("base URL %q: no query or fragment, please", s)
	}
	return strings.TrimRight(u.String(), "/"), nil
}

// Chat sends req to POST {base}/chat/completions and returns the complete
// answer.
//
// When onDelta is non-nil the answer is streamed (with
// stream_options.include_usage) and onDelta is called with each non-empty
// fragment, in order, before Chat returns; when it is nil the answer is
// requested in one piece. PromptTokens and CompletionTokens are the
// server's usage.prompt_tokens and usage.completion_tokens (0 when it sends
// none). DoneReason is the finish_reason ("stop", "length", "tool_calls",
// ...).
//
// Content is the answer's text only: reasoning the server sends apart
// (reasoning_content, reasoning) is never read, and <think>…</think> blocks
// in the text are removed, from the streamed fragments too. A refusal (the
// refusal field) is the answer's text when there is no other. Options:
// Temperature, Seed and NumPredict (as max_tokens; -1 and -2 send none) are
// passed on; NumCtx has no equivalent in this API, the server's own applies.
// Format "json" is JSON mode (response_format json_object), a JSON schema
// is structured output (json_schema, not strict: the server may not take
// every schema in strict mode).
//
// req.Tools are offered as functions; the calls come back in ToolCalls,
// with ids "call_N" when the server gives none. A call's arguments that are
// not a JSON object are returned as a JSON string holding the model's text,
// so that the tool refuses them (activities.ErrToolArgs) and the agent
// shows the model an error observation, as for any arguments that do not
// fit; the adapter logs a warning.
//
// Errors: if ctx ends first, Chat returns ctx.Err() wrapped (not a
// ModelError), whatever the transport reported. Otherwise every error is a
// *activities.ModelError, classified as the Ollama adapter's:
//
//   - invalid request (unknown role, empty model, bad tool schema or
//     format), HTTP 4xx other than 408, 425, 429 and 499 (404: an unknown
//     model, whose message says so), and HTTP 501: Retryable=false;
//   - HTTP 5xx (but 501), 408, 425, 429, 499, connection failures, an error
//     event mid-stream, a stream that ends before its finish reason, and an
//     answer without a choice: Retryable=true.
//
// StatusCode is set when the server answered with an HTTP error status, and
// Message then carries the server's own message.
func (c *Client) Chat(ctx context.Context, req activities.ChatRequest, onDelta func(delta string)) (activities.ChatResponse, error) {
	what := fmt.Sprintf("openai chat %q", req.Model)
	params, err := chatParams(req)
	if err != nil {
		return activities.ChatResponse{}, &activities.ModelError{Message: what + ": invalid request", Err: err}
	}
	pr := &probe{}
	var a answer
	if onDelta == nil {
		var resp *oai.ChatCompletion
		resp, err = c.chat.New(ctx, params, pr.option())
		if err == nil {
			err = a.complete(resp)
		}
	} else {
		params.StreamOptions.IncludeUsage = param.NewOpt(true)
		err = a.stream(c.chat.NewStreaming(ctx, params, pr.option()), onDelta)
	}
	if err != nil {
		return activities.ChatResponse{}, c.classify(ctx, pr, what, err)
	}
	return a.response(c.log, what, req.Model), nil
}

// chatParams converts req to the SDK's request. Its errors describe an
// invalid request.
func chatParams(req activities.ChatRequest) (oai.ChatCompletionNewParams, error) {
	var p oai.ChatCompletionNewParams
	if strings.TrimSpace(req.Model) == "" {
		return p, errNoModel
	}
	msgs, err := toMessages(req.Messages)
	if err != nil {
		return p, err
	}
	if err := setOptions(&p, req.Options); err != nil {
		return p, err
	}
	if p.ResponseFormat, err = toFormat(req.Format); err != nil {
		return p, err
	}
	if p.Tools, err = toTools(req.Tools); err != nil {
		return p, err
	}
	p.Model, p.Messages = req.Model, msgs
	return p, nil
}

// toMessages converts the model view to chat messages.
func toMessages(msgs []convo.ModelMessage) ([]oai.ChatCompletionMessageParamUnion, error) {
	out := make([]oai.ChatCompletionMessageParamUnion, 0, len(msgs))
	for i, m := range msgs {
		switch m.Role {
		case "system":
			out = append(out, oai.SystemMessage(m.Content))
		case "user":
			out = append(out, oai.UserMessage(m.Content))
		case "tool":
			out = append(out, oai.ToolMessage(m.Content, m.ToolCallID))
		case "assistant":
			var am oai.ChatCompletionAssistantMessageParam
			if m.Content != "" || len(m.ToolCalls) == 0 {
				am.Content.OfString = param.NewOpt(m.Content)
			}
			for _, tc := range m.ToolCalls {
				am.ToolCalls = append(am.ToolCalls, oai.ChatCompletionMessageToolCallUnionParam{
					OfFunction: &oai.ChatCompletionMessageFunctionToolCallParam{
						ID:       tc.ID,
						Function: oai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: tc.Name, Arguments: argumentsText(tc.Args)},
					},
				})
			}
			out = append(out, oai.ChatCompletionMessageParamUnion{OfAssistant: &am})
		default:
			return nil, fmt.Errorf("message %d: role %q is not system, user, assistant or tool", i, m.Role)
		}
	}
	return out, nil
}

// argumentsText is a tool call's arguments as the API carries them, a
// string: the JSON object, or the model's own text when it was not one (see
// readArguments).
func argumentsText(args json.RawMessage) string {
	raw := strings.TrimSpace(string(args))
	if raw == "" || raw == "null" {
		return "{}"
	}
	var s string
	if strings.HasPrefix(raw, `"`) && json.Unmarshal(args, &s) == nil {
		return s
	}
	return raw
}

// setOptions sets the generation options; zero values are left out so that
// the server's defaults apply.
func setOptions(p *oai.ChatCompletionNewParams, o activities.ModelOptions) error {
	if o.NumCtx < 0 {
		return fmt.Errorf("num_ctx %d is negative", o.NumCtx)
	}
	if o.NumPredict < -2 {
		return fmt.Errorf("num_predict %d is below -2", o.NumPredict)
	}
	if o.Temperature != nil {
		p.Temperature = param.NewOpt(*o.Temperature)
	}
	if o.NumPredict > 0 {
		// max_tokens, not max_completion_tokens: the one every
		// OpenAI-compatible server reads (Ollama reads no other).
		p.MaxTokens = param.NewOpt(int64(o.NumPredict))
	}
	if o.Seed != nil {
		p.Seed = param.NewOpt(int64(*o.Seed))
	}
	return nil
}

// toFormat turns "json" into JSON mode and a JSON schema into structured
// output.
func toFormat(f []byte) (oai.ChatCompletionNewParamsResponseFormatUnion, error) {
	var out oai.ChatCompletionNewParamsResponseFormatUnion
	s := strings.TrimSpace(string(f))
	switch {
	case s == "":
	case s == "json" || s == `"json"`:
		out.OfJSONObject = &shared.ResponseFormatJSONObjectParam{}
	case !json.Valid([]byte(s)) || !strings.HasPrefix(s, "{"):
		return out, errors.New(`format is neither "json" nor a JSON schema object`)
	default:
		out.OfJSONSchema = &shared.ResponseFormatJSONSchemaParam{
			JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "response", Schema: json.RawMessage(s)},
		}
	}
	return out, nil
}

// toTools declares tools as functions; each Parameters must be a JSON
// object schema.
func toTools(specs []activities.ToolSpec) ([]oai.ChatCompletionToolUnionParam, error) {
	if len(specs) == 0 {
		return nil, nil
	}
	out := make([]oai.ChatCompletionToolUnionParam, 0, len(specs))
	for _, t := range specs {
		if strings.TrimSpace(t.Name) == "" {
			return nil, errors.New("a tool has no name")
		}
		params := shared.FunctionParameters{}
		if raw := strings.TrimSpace(string(t.Parameters)); raw != "" {
			if err := json.Unmarshal(t.Parameters, &params); err != nil {
				return nil, fmt.Errorf("tool %q: parameters are not a JSON schema object: %w", t.Name, err)
			}
		}
		if params == nil { // "null"
			params = shared.FunctionParameters{}
		}
		if _, ok := params["type"]; !ok {
			params["type"] = "object"
		}
		fn := shared.FunctionDefinitionParam{Name: t.Name, Parameters: params}
		if t.Description != "" {
			fn.Description = param.NewOpt(t.Description)
		}
		out = append(out, oai.ChatCompletionFunctionTool(fn))
	}
	return out, nil
}
