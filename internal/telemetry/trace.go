package telemetry

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
	"go.temporal.io/sdk/interceptor"

	"github.com/ctxflow/ctxflow/workflows"
)

// tracing is a tracer provider and the Temporal interceptor that uses it.
type tracing struct {
	provider    *sdktrace.TracerProvider
	interceptor interceptor.ClientInterceptor
}

// newTracing sets up the exporter o.Tracing names (nil when off). The
// provider becomes OpenTelemetry's global one, with W3C trace context
// propagation, so that the API's request spans and the Temporal client's
// spans share a trace: one per turn, from the HTTP request through the
// session workflow (which runs the turn under its update's span, see
// [workflows.TraceContextKey]) to every activity and child workflow.
func newTracing(ctx context.Context, o Options) (*tracing, error) {
	exp := o.exporter
	switch {
	case exp != nil: // a test's
	case o.Tracing == "" || o.Tracing == "off":
		return nil, nil
	case o.Tracing == "stdout":
		w := o.Stdout
		if w == nil {
			w = os.Stdout
		}
		exp = &jsonExporter{w: w}
	case o.Tracing == "otlp":
		var err error
		if exp, err = otlptracegrpc.New(ctx); err != nil {
			return nil, fmt.Errorf("otlp trace exporter: %w", err)
		}
	default:
		return nil, fmt.Errorf("trace exporter %q: want off, stdout or otlp", o.Tracing)
	}
	opts := []sdktrace.TracerProviderOption{
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", o.Service))),
		sdktrace.WithBatcher(exp),
	}
	if o.Tracing == "stdout" || o.exporter != nil { // a span is written as it ends
		opts[1] = sdktrace.WithSyncer(exp)
	}
	tp := sdktrace.NewTracerProvider(opts...)
	ic, err := temporalotel.NewTracingInterceptor(temporalotel.TracerOptions{
		Tracer:         tp.Tracer("ctxflow"),
		SpanContextKey: workflows.TraceContextKey{},
	})
	if err != nil {
		_ = tp.Shutdown(ctx)
		return nil, fmt.Errorf("temporal tracing interceptor: %w", err)
	}
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	return &tracing{provider: tp, interceptor: ic}, nil
}

func (t *tracing) shutdown(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return t.provider.Shutdown(ctx)
}

// jsonExporter writes one JSON object per span and line. (OpenTelemetry's
// stdouttrace exporter is not among ctxflow's modules; this is its useful
// part.)
type jsonExporter struct {
	mu sync.Mutex
	w  io.Writer
}

// SpanLine is one span as the stdout exporter writes it.
type SpanLine struct {
	TraceID    string            `json:"traceId"`
	SpanID     string            `json:"spanId"`
	ParentID   string            `json:"parentSpanId,omitempty"`
	Name       string            `json:"name"`
	Kind       string            `json:"kind"`
	Service    string            `json:"service"`
	Start      time.Time         `json:"start"`
	DurationMS float64           `json:"durationMs"`
	Status     string            `json:"status,omitempty"`
	Attributes map[string]string `json:"attributes,omitempty"`
}

func (e *jsonExporter) ExportSpans(_ context.Context, spans []sdktrace.ReadOnlySpan) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	enc := json.NewEncoder(e.w)
	for _, s := range spans {
		l := SpanLine{
			TraceID: s.SpanContext().TraceID().String(), SpanID: s.SpanContext().SpanID().String(),
			Name: s.Name(), Kind: s.SpanKind().String(), Start: s.StartTime().UTC(),
			DurationMS: float64(s.EndTime().Sub(s.StartTime()).Microseconds()) / 1000,
		}
		if st := s.Status(); st.Code == codes.Error {
			l.Status = strings.TrimSuffix("error: "+st.Description, ": ")
		}
		if s.Parent().IsValid() {
			l.ParentID = s.Parent().SpanID().String()
		}
		if v, ok := s.Resource().Set().Value("service.name"); ok {
			l.Service = v.AsString()
		}
		if attrs := s.Attributes(); len(attrs) > 0 {
			l.Attributes = make(map[string]string, len(attrs))
			for _, a := range attrs {
				l.Attributes[string(a.Key)] = a.Value.String()
			}
		}
		if err := enc.Encode(l); err != nil {
			return err
		}
	}
	return nil
}

func (e *jsonExporter) Shutdown(context.Context) error { return nil }
