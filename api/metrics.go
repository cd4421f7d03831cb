package api

import (
	"bytes"
	"regexp"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/ctxflow/ctxflow/internal/telemetry"
)

// RequestObserver is implemented by an [Options.Metrics] handler that also
// records the API's requests (telemetry.Metrics does): each request's
// route template, method, status and duration.
type RequestObserver interface {
	ObserveRequest(method, route string, status int, d time.Duration)
}

// metricsRoutes registers GET /metrics.
func (s *Server) metricsRoutes(r *gin.Engine) {
	if s.opts.Metrics != nil {
		r.GET("/metrics", gin.WrapH(s.opts.Metrics))
	}
}

// observe is the per-request telemetry: a server span (joining the
// caller's trace when it sends a traceparent header; the Temporal client's
// spans hang below it, so a turn is one trace), the request metrics, and
// the session and turn ids the access log adds to its line.
func (s *Server) observe(c *gin.Context) {
	start := time.Now()
	route := c.FullPath()
	if route == "" {
		route = "unmatched" // 404s: not one series per probed path
	}
	span := trace.SpanFromContext(c.Request.Context()) // no-op for probes
	if route != "/healthz" && route != "/readyz" && route != "/metrics" {
		ctx := otel.GetTextMapPropagator().Extract(c.Request.Context(), propagation.HeaderCarrier(c.Request.Header))
		ctx, span = otel.Tracer("ctxflow/api").Start(ctx, c.Request.Method+" "+route, trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(attribute.String("http.request.method", c.Request.Method), attribute.String("http.route", route)))
		defer span.End()
		c.Request = c.Request.WithContext(ctx)
	}
	var sniff *headWriter
	if c.Request.Method == "POST" && strings.HasPrefix(route, "/v1/sessions/:id/") {
		sniff = &headWriter{ResponseWriter: c.Writer}
		c.Writer = sniff
	}

	c.Next()

	status := c.Writer.Status()
	if obs, ok := s.opts.Metrics.(RequestObserver); ok {
		obs.ObserveRequest(c.Request.Method, route, status, time.Since(start))
	}
	span.SetAttributes(attribute.Int("http.response.status_code", status))
	if status >= 500 {
		span.SetStatus(codes.Error, "")
	}
	var attrs []any
	if strings.HasPrefix(route, "/v1/sessions/:id") {
		if ref, err := sessionOf(c); err == nil {
			attrs = append(attrs, "tenant", ref.tenant, "session", ref.id)
			span.SetAttributes(attribute.String("ctxflow.tenant", ref.tenant), attribute.String("ctxflow.session", ref.id))
		}
	}
	turn := c.Param("turnId")
	if turn == "" {
		turn = c.Param("taskId")
	}
	if turn == "" && sniff != nil {
		turn = sniff.turnID()
	}
	if turn != "" {
		attrs = append(attrs, "turn", turn)
		span.SetAttributes(attribute.String("ctxflow.turn", turn))
	}
	// The access log, around this middleware, logs with the request's
	// context once this returns.
	c.Request = c.Request.WithContext(telemetry.WithLogAttrs(c.Request.Context(), attrs...))
}

// headWriter keeps the start of a response, where a turn's answer (its
// result, the 202 of a queued turn, a stream's first event) names the turn
// id the handler chose.
type headWriter struct {
	gin.ResponseWriter
	head []byte
}

const headBytes = 512

func (w *headWriter) Write(b []byte) (int, error) {
	if n := headBytes - len(w.head); n > 0 {
		w.head = append(w.head, b[:min(n, len(b))]...)
	}
	return w.ResponseWriter.Write(b)
}

func (w *headWriter) WriteString(s string) (int, error) {
	if n := headBytes - len(w.head); n > 0 {
		w.head = append(w.head, s[:min(n, len(s))]...)
	}
	return w.ResponseWriter.WriteString(s)
}

var turnIDField = regexp.MustCompile(`"(?:turnId|taskId)"\s*:\s*"([^"\\]{1,128})"`)

func (w *headWriter) turnID() string {
	if m := turnIDField.FindSubmatch(w.head); m != nil && bytes.IndexByte(m[1], '\n') < 0 {
		return string(m[1])
	}
	return ""
}
