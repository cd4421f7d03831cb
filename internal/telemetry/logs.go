package telemetry

import (
	"context"
	"log/slog"
	"reflect"

	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/log"

	"github.com/ctxflow/ctxflow/activities"
)

type logAttrsKey struct{}

// WithLogAttrs returns ctx carrying attributes (slog key-value pairs) that a
// [LogHandler] adds to every record logged with the context, e.g. the
// session and turn of an API request for its access log line.
func WithLogAttrs(ctx context.Context, args ...any) context.Context {
	if len(args) == 0 {
		return ctx
	}
	prev, _ := ctx.Value(logAttrsKey{}).([]any)
	return context.WithValue(ctx, logAttrsKey{}, append(append([]any(nil), prev...), args...))
}

// LogHandler wraps h so that a record logged with a context gets the
// context's [WithLogAttrs] attributes, and its trace and span ids when the
// context holds a recording span.
func LogHandler(h slog.Handler) slog.Handler { return ctxHandler{h} }

type ctxHandler struct{ slog.Handler }

func (h ctxHandler) Handle(ctx context.Context, r slog.Record) error {
	if ctx != nil {
		if args, _ := ctx.Value(logAttrsKey{}).([]any); len(args) > 0 {
			r = r.Clone()
			r.Add(args...)
		}
		if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
			r.AddAttrs(slog.String("traceId", sc.TraceID().String()), slog.String("spanId", sc.SpanID().String()))
		}
	}
	return h.Handler.Handle(ctx, r)
}

func (h ctxHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return ctxHandler{h.Handler.WithAttrs(attrs)}
}

func (h ctxHandler) WithGroup(name string) slog.Handler { return ctxHandler{h.Handler.WithGroup(name)} }

// activityLogs adds the session, task, turn and tool call named by an
// activity's input (its SessionKey argument, or the Session, Task, TurnID
// and CallID fields of its input struct) to the activity's logger, and the
// tool call's id to the context, for the call's span (see [TraceTools]).
type activityLogs struct {
	interceptor.WorkerInterceptorBase
}

func (*activityLogs) InterceptActivity(_ context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	i := &activityLogsIn{}
	i.Next = next
	return i
}

type activityLogsIn struct {
	interceptor.ActivityInboundInterceptorBase
}

func (i *activityLogsIn) Init(outbound interceptor.ActivityOutboundInterceptor) error {
	o := &activityLogsOut{}
	o.Next = outbound
	return i.Next.Init(o)
}

func (i *activityLogsIn) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	if args := activityAttrs(in.Args); len(args) > 0 {
		ctx = context.WithValue(ctx, logAttrsKey{}, args)
		for i := 0; i+1 < len(args); i += 2 {
			if args[i] == "call" {
				ctx = context.WithValue(ctx, toolCallKey{}, args[i+1])
			}
		}
	}
	return i.Next.ExecuteActivity(ctx, in)
}

type activityLogsOut struct {
	interceptor.ActivityOutboundInterceptorBase
}

func (o *activityLogsOut) GetLogger(ctx context.Context) log.Logger {
	l := o.Next.GetLogger(ctx)
	if args, _ := ctx.Value(logAttrsKey{}).([]any); len(args) > 0 {
		return log.With(l, args...)
	}
	return l
}

var sessionKeyType = reflect.TypeFor[activities.SessionKey]()

// activityAttrs finds the session, task, turn and tool call of an
// activity's arguments.
func activityAttrs(args []any) []any {
	var out []any
	for _, a := range args {
		v := reflect.ValueOf(a)
		if v.Kind() == reflect.Pointer && !v.IsNil() {
			v = v.Elem()
		}
		if !v.IsValid() {
			continue
		}
		switch {
		case v.Type() == sessionKeyType:
			out = append(out, "session", v.Interface().(activities.SessionKey).String())
		case v.Kind() == reflect.Struct:
			for _, f := range []struct{ field, key string }{{"Session", "session"}, {"Task", "task"}} {
				if fv := v.FieldByName(f.field); fv.IsValid() && fv.Type() == sessionKeyType && !fv.IsZero() {
					out = append(out, f.key, fv.Interface().(activities.SessionKey).String())
				}
			}
			for _, f := range []struct{ field, key string }{{"TurnID", "turn"}, {"CallID", "call"}} {
				if fv := v.FieldByName(f.field); fv.IsValid() && fv.Kind() == reflect.String && fv.String() != "" {
					out = append(out, f.key, fv.String())
				}
			}
		}
	}
	return out
}
