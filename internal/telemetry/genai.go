package telemetry

import (
	"context"
	"encoding/json"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/activity"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/workflows"
)

// The spans of model and tool calls follow OpenTelemetry's semantic
// conventions for generative AI (semconv v1.41.0, the newest in the otel
// module ctxflow uses): a model call is a client span "chat <model>", a
// tool call an internal span "execute_tool <tool>", each a child of the
// activity's RunActivity span, so that a turn's trace shows which model
// answered, the tokens it took and why it stopped. Both are recorded only
// inside activities, as the model metrics are (start-up checks make none).
//
// Prompts and answers (gen_ai.input.messages, gen_ai.output.messages) are
// not recorded: they are the tenants' data, and stay in the transcripts.

// genAITracer is the tracer of the GenAI spans, from the global provider
// at the time of the call (telemetry.New sets it; without tracing it is a
// no-op).
func genAITracer() trace.Tracer { return otel.Tracer("ctxflow/genai") }

// TraceModel wraps a chat model so that every call made by an activity is
// a GenAI "chat" span (see docs/operations.md, Observability). provider is
// the gen_ai.provider.name of the worker's engine ("ollama", "openai",
// "offline"); a response that names its engine overrides it.
func TraceModel(m activities.ChatModel, provider string) activities.ChatModel {
	return tracedModel{m, provider}
}

type tracedModel struct {
	activities.ChatModel
	provider string
}

func (m tracedModel) Chat(ctx context.Context, req activities.ChatRequest, onDelta func(string)) (activities.ChatResponse, error) {
	if !activity.IsActivity(ctx) {
		return m.ChatModel.Chat(ctx, req, onDelta)
	}
	attrs := append(conversation(ctx),
		semconv.GenAIOperationNameChat,
		semconv.GenAIRequestModel(req.Model),
	)
	if o := req.Options; o.Temperature != nil {
		attrs = append(attrs, semconv.GenAIRequestTemperature(*o.Temperature))
	}
	if o := req.Options; o.NumPredict > 0 {
		attrs = append(attrs, semconv.GenAIRequestMaxTokens(o.NumPredict))
	}
	if o := req.Options; o.Seed != nil {
		attrs = append(attrs, semconv.GenAIRequestSeed(*o.Seed))
	}
	if len(req.Format) > 0 {
		attrs = append(attrs, semconv.GenAIOutputTypeJSON)
	}
	ctx, span := genAITracer().Start(ctx, strings.TrimSpace("chat "+req.Model),
		trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	defer span.End()
	resp, err := m.ChatModel.Chat(ctx, req, onDelta)
	provider := m.provider
	if resp.Engine != "" {
		provider = resp.Engine
	}
	if provider != "" {
		span.SetAttributes(semconv.GenAIProviderNameKey.String(provider))
	}
	if resp.Model != "" {
		span.SetAttributes(semconv.GenAIResponseModel(resp.Model))
	}
	if resp.PromptTokens > 0 {
		span.SetAttributes(semconv.GenAIUsageInputTokens(resp.PromptTokens))
	}
	if resp.CompletionTokens > 0 {
		span.SetAttributes(semconv.GenAIUsageOutputTokens(resp.CompletionTokens))
	}
	if r := finishReason(resp); r != "" {
		span.SetAttributes(semconv.GenAIResponseFinishReasons(r))
	}
	if err != nil {
		fail(span, err)
	}
	return resp, err
}

// finishReason is why the model stopped, as its provider said; a call
// that ended in tool calls without a reason is "tool_calls".
func finishReason(resp activities.ChatResponse) string {
	if resp.DoneReason == "" && len(resp.ToolCalls) > 0 {
		return "tool_calls"
	}
	return resp.DoneReason
}

// TraceTools wraps the worker's own tools so that every call made by an
// activity is a GenAI "execute_tool" span of tool type "function".
func TraceTools(tools []activities.Tool) []activities.Tool {
	out := make([]activities.Tool, len(tools))
	for i, t := range tools {
		out[i] = tracedTool{t}
	}
	return out
}

type tracedTool struct{ activities.Tool }

func (t tracedTool) Call(ctx context.Context, args json.RawMessage) (any, error) {
	spec := t.Spec()
	ctx, span := startTool(ctx, spec.Name, spec.Description, "function")
	if span == nil {
		return t.Tool.Call(ctx, args)
	}
	defer span.End()
	out, err := t.Tool.Call(ctx, args)
	if err != nil {
		fail(span, err)
	}
	return out, err
}

// TraceToolSource wraps a source of remote tools (MCP servers) so that
// every call made by an activity is a GenAI "execute_tool" span of tool
// type "extension"; nil stays nil.
func TraceToolSource(s activities.ToolSource) activities.ToolSource {
	if s == nil {
		return nil
	}
	return tracedSource{s}
}

type tracedSource struct{ activities.ToolSource }

func (s tracedSource) Call(ctx context.Context, tenant, name string, args json.RawMessage) (string, error) {
	ctx, span := startTool(ctx, name, "", "extension")
	if span == nil {
		return s.ToolSource.Call(ctx, tenant, name, args)
	}
	defer span.End()
	out, err := s.ToolSource.Call(ctx, tenant, name, args)
	if err != nil {
		fail(span, err)
	}
	return out, err
}

// startTool starts the span of a tool call, nil outside an activity. The
// call's id comes from the CallTool activity's input (see activityLogs).
func startTool(ctx context.Context, name, description, kind string) (context.Context, trace.Span) {
	if !activity.IsActivity(ctx) {
		return ctx, nil
	}
	attrs := append(conversation(ctx),
		semconv.GenAIOperationNameExecuteTool,
		semconv.GenAIToolName(name),
		semconv.GenAIToolType(kind),
	)
	if description != "" {
		attrs = append(attrs, semconv.GenAIToolDescription(description))
	}
	if id, _ := ctx.Value(toolCallKey{}).(string); id != "" {
		attrs = append(attrs, semconv.GenAIToolCallID(id))
	}
	return genAITracer().Start(ctx, "execute_tool "+name, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
}

// fail marks a span failed with err's type (semconv error.type).
func fail(span trace.Span, err error) {
	span.RecordError(err)
	span.SetStatus(codes.Error, err.Error())
	span.SetAttributes(semconv.ErrorType(err))
}

// toolCallKey holds the id of the tool call a CallTool activity runs.
type toolCallKey struct{}

// conversation is the gen_ai.conversation.id (the session id, as the API
// names it) and ctxflow.tenant of the activity's workflow: the session's,
// or a child's of the session (an agent task, a corrective retrieval),
// whose workflow ids start with the session's.
func conversation(ctx context.Context) []attribute.KeyValue {
	tenant, session, ok := workflows.ParseSessionWorkflowID(activity.GetInfo(ctx).WorkflowExecution.ID)
	if !ok {
		return nil
	}
	session, _, _ = strings.Cut(session, "/") // ".../task/<id>", ".../rag/<turn>"
	return []attribute.KeyValue{semconv.GenAIConversationID(session), attribute.String("ctxflow.tenant", tenant)}
}
