// Package telemetry is ctxflow's observability: one Prometheus registry for
// the HTTP API, the service's own metrics and the Temporal SDK's (through
// OpenTelemetry metrics), OpenTelemetry tracing through Temporal's tracing
// interceptor, and logs that carry the session and turn they are about.
//
// Workflows and activities never import this package: they record through
// the SDK's metrics handler (workflow.GetMetricsHandler, replay-safe, and
// activity.GetMetricsHandler), which the client built here feeds into the
// registry.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
)

// Options configure telemetry.
type Options struct {
	// Service names the process in traces ("ctxflow-dev", "ctxflow-worker").
	Service string
	// Tracing is the trace exporter: "" or "off", "stdout", "otlp".
	Tracing string
	// Stdout receives the stdout exporter's spans (default os.Stdout).
	Stdout io.Writer
	Logger *slog.Logger

	exporter sdktrace.SpanExporter // a test's, in place of Tracing's
}

// Telemetry is a process's metrics registry and tracer. Its methods are
// safe on a nil *Telemetry, which records nothing.
type Telemetry struct {
	*Metrics
	tracing *tracing
}

// New builds the metrics registry and, unless Tracing is off, the tracer
// provider (which becomes OpenTelemetry's global one).
func New(ctx context.Context, o Options) (*Telemetry, error) {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	m, err := NewMetrics(o.Logger)
	if err != nil {
		return nil, err
	}
	tr, err := newTracing(ctx, o)
	if err != nil {
		_ = m.Shutdown(ctx)
		return nil, err
	}
	return &Telemetry{Metrics: m, tracing: tr}, nil
}

// ClientOptions makes a Temporal client report the SDK's metrics into the
// registry and, with tracing on, trace through Temporal's interceptor (the
// workers built on the client inherit both).
func (t *Telemetry) ClientOptions(o *client.Options) {
	if t == nil {
		return
	}
	o.MetricsHandler = t.Temporal()
	if t.tracing != nil {
		o.Interceptors = append(o.Interceptors, t.tracing.interceptor)
	}
}

// Shutdown flushes the spans not yet exported and stops the meters.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	var errs []error
	if t.tracing != nil {
		errs = append(errs, t.tracing.shutdown(ctx))
	}
	errs = append(errs, t.Metrics.Shutdown(ctx))
	return errors.Join(errs...)
}

// WorkerInterceptors are the worker's own interceptors: the session and
// turn of every activity in its logger.
func WorkerInterceptors() []interceptor.WorkerInterceptor {
	return []interceptor.WorkerInterceptor{&activityLogs{}}
}

// Serve serves GET /metrics on addr until ctx ends (the worker's listener:
// a worker has no API port). It returns once the listener is bound.
func Serve(ctx context.Context, addr string, h http.Handler, log *slog.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("metrics listener on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", h)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics listener stopped", "addr", addr, "error", err)
		}
	}()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	log.Info("metrics listening", "addr", ln.Addr().String(), "path", "/metrics")
	return nil
}

// Handler serves GET /metrics and records the API's requests (see
// api.Options.Metrics); nil on a nil *Telemetry.
func (t *Telemetry) Handler() http.Handler {
	if t == nil {
		return nil
	}
	return t.Metrics
}
