package telemetry

import sdktrace "go.opentelemetry.io/otel/sdk/trace"

// WithExporter makes New trace into exp, each span as it ends (the trace
// tests' in-memory exporter).
func WithExporter(o Options, exp sdktrace.SpanExporter) Options {
	o.exporter = exp
	return o
}
