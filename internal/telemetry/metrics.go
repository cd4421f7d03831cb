package telemetry

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.temporal.io/sdk/client"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
)

// secondsBuckets bound the latency histograms, from a fast HTTP route to a
// slow model call (OpenTelemetry's default buckets are for milliseconds).
var secondsBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// Metrics is one Prometheus registry holding the API's request metrics,
// the Go runtime's, and everything recorded through the Temporal SDK's
// metrics handler: the SDK's own temporal_* series and ctxflow's workflow
// and activity metrics (ctxflow_*).
type Metrics struct {
	reg      *prometheus.Registry
	meters   *sdkmetric.MeterProvider
	temporal client.MetricsHandler
	http     *prometheus.HistogramVec
	serve    http.Handler
}

// NewMetrics builds the registry.
func NewMetrics(log *slog.Logger) (*Metrics, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	exp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo(), otelprom.WithoutTargetInfo())
	if err != nil {
		return nil, fmt.Errorf("prometheus exporter: %w", err)
	}
	meters := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp), sdkmetric.WithView(sdkmetric.NewView(
		sdkmetric.Instrument{Kind: sdkmetric.InstrumentKindHistogram, Unit: "s"},
		sdkmetric.Stream{Aggregation: sdkmetric.AggregationExplicitBucketHistogram{Boundaries: secondsBuckets}},
	)))
	m := &Metrics{
		reg:    reg,
		meters: meters,
		temporal: temporalotel.NewMetricsHandler(temporalotel.MetricsHandlerOptions{
			Meter:                meters.Meter("temporal-sdk-go"),
			UseMonotonicCounters: true,
			// The SDK's default panics: a metric must never take a worker down.
			OnError: func(err error) { log.Warn("metric not recorded", "error", err) },
		}),
		http: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "ctxflow_http_request_duration_seconds",
			Help:    "HTTP requests by route template, method and status: latency, and count (_count).",
			Buckets: secondsBuckets,
		}, []string{"route", "method", "status"}),
	}
	reg.MustRegister(m.http)
	m.serve = promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)})
	return m, nil
}

// Temporal is the handler to give the Temporal client (and through it the
// workers): the SDK's metrics and ctxflow's workflow and activity metrics.
func (m *Metrics) Temporal() client.MetricsHandler {
	if m == nil {
		return client.MetricsNopHandler
	}
	return m.temporal
}

// ServeHTTP serves the registry in Prometheus's text format.
func (m *Metrics) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if m == nil {
		http.NotFound(w, r)
		return
	}
	m.serve.ServeHTTP(w, r)
}

// ObserveRequest records one HTTP request. route is the route's template
// ("/v1/sessions/:id"), never the path, so ids do not become series.
func (m *Metrics) ObserveRequest(method, route string, status int, d time.Duration) {
	if m == nil {
		return
	}
	m.http.WithLabelValues(route, method, strconv.Itoa(status)).Observe(d.Seconds())
}

// Shutdown stops the meters.
func (m *Metrics) Shutdown(ctx context.Context) error {
	if m == nil {
		return nil
	}
	return m.meters.Shutdown(ctx)
}
