// Package api is ctxflow's HTTP front door: a Gin router that turns requests
// into Temporal signals, updates and queries on session workflows, and
// document uploads into ingestion workflows. Handlers only translate; the
// workflows do the work.
package api

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"go.temporal.io/sdk/client"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/convo"
	"github.com/ctxflow/ctxflow/workflows"
)

// Options configure the API.
type Options struct {
	// Defaults are the session options of new sessions (from the environment).
	Defaults workflows.SessionConfig
	// Limits are passed to every session the API starts.
	Limits workflows.Limits
	// MaxInFlight bounds the /v1 requests served at once (default 512):
	// one more is answered 429 with Retry-After, before it costs Temporal
	// anything. Streams and `?wait=true` requests hold their place until
	// they end.
	MaxInFlight int
	// Namespace is the Temporal namespace of the client (default
	// "default"): an erase deletes workflow runs in it.
	Namespace string
	// MaxBodyBytes bounds request bodies (default 1 MiB).
	MaxBodyBytes int64
	// TurnWaitTimeout bounds a `?wait=true` turn (default 5 minutes).
	TurnWaitTimeout time.Duration
	// UploadDir is where POST /v1/documents stores uploaded documents, named
	// by the SHA-256 of their bytes, for the workers to read by the same
	// absolute path ("" turns uploads off).
	UploadDir string
	// MaxUploadBytes bounds the body of POST /v1/documents (default 32 MiB);
	// MaxBodyBytes bounds every other body.
	MaxUploadBytes int64
	// IngestWaitTimeout bounds a `?wait=true` upload (default 5 minutes);
	// after it the answer is 202 and the ingestion goes on.
	IngestWaitTimeout time.Duration
	// Keys maps the SHA-256 (hex) of each API key to its tenant. With keys,
	// every /v1 request needs one (Authorization: Bearer <key>, or
	// X-API-Key) and acts as the key's tenant; nil: no keys, and
	// X-Tenant-ID picks the tenant.
	Keys map[string]string
	// TokenSecret signs the page tokens of listings (CTXFLOW_TOKEN_SECRET,
	// or the data dir's token-secret): the API processes of a deployment
	// share it. Empty: a random secret of this process.
	TokenSecret []byte
	// Collection is the knowledge base's collection (CTXFLOW_COLLECTION),
	// which the seeds' requests may name (default "rag_documents").
	Collection string
	// Broker brings answer deltas to streamed turns; nil: streams have
	// steps and the final result, but no tokens.
	Broker activities.Broker
	// Metrics serves GET /metrics (Prometheus); nil: no metrics route.
	Metrics http.Handler
	// Transcripts reads transcripts for the messages routes and the
	// summary text; nil when this process cannot read them (see
	// [Transcripts]).
	Transcripts Transcripts
	// ApproveTools are each tenant's approveTools ("*": every tenant's),
	// given to the sessions it starts (workflows.Limits.ApproveTools).
	ApproveTools map[string][]string
	// Models tells the context a chat model is served with: a session whose
	// window and answer cannot fit it is refused when it is created. nil:
	// not checked.
	Models ModelContext
	Logger *slog.Logger
}

// ModelContext tells the context length, in tokens, that a chat model is
// served with (0: unknown).
type ModelContext interface {
	ContextLength(ctx context.Context, model string) (int, error)
}

// Transcripts reads session transcripts. An API process can read them when
// it shares the workers' store: `ctxflow dev` runs both in one process.
type Transcripts interface {
	// Get returns one message (ok false when there is none).
	Get(ctx context.Context, s activities.SessionKey, id string) (convo.Message, bool, error)
	// Branch returns the messages from the root to leafID, root first.
	Branch(ctx context.Context, s activities.SessionKey, leafID string) ([]convo.Message, error)
	// All returns every message, parents before children, in the order
	// they were added.
	All(ctx context.Context, s activities.SessionKey) ([]convo.Message, error)
}

// Server serves the HTTP API.
type Server struct {
	c        client.Client
	opts     Options
	log      *slog.Logger
	inFlight chan struct{} // a place for each /v1 request being served
}

// New returns an API server that talks to Temporal through c.
func New(c client.Client, opts Options) *Server {
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = 1 << 20
	}
	if opts.MaxInFlight <= 0 {
		opts.MaxInFlight = 512
	}
	if opts.TurnWaitTimeout <= 0 {
		opts.TurnWaitTimeout = 5 * time.Minute
	}
	if opts.Collection == "" {
		opts.Collection = "rag_documents"
	}
	if opts.Namespace == "" {
		opts.Namespace = "default"
	}
	if opts.MaxUploadBytes <= 0 {
		opts.MaxUploadBytes = 32 << 20
	}
	if opts.IngestWaitTimeout <= 0 {
		opts.IngestWaitTimeout = 5 * time.Minute
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if len(opts.TokenSecret) == 0 {
		opts.TokenSecret = make([]byte, 32)
		_, _ = rand.Read(opts.TokenSecret)
	}
	return &Server{c: c, opts: opts, log: opts.Logger, inFlight: make(chan struct{}, opts.MaxInFlight)}
}

// Handler returns the router.
func (s *Server) Handler() http.Handler {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.HandleMethodNotAllowed = true
	r.Use(s.requestID, s.accessLog, s.observe, s.recoverJSON, s.limitBody)
	r.NoRoute(func(c *gin.Context) {
		writeError(c, errNotFound("no route %s %s", c.Request.Method, c.Request.URL.Path))
	})
	r.NoMethod(func(c *gin.Context) {
		e := errInvalid("method %s not allowed", c.Request.Method)
		e.status = http.StatusMethodNotAllowed
		writeError(c, e)
	})

	r.GET("/healthz", func(c *gin.Context) { c.JSON(http.StatusOK, gin.H{"status": "ok"}) })
	r.GET("/readyz", s.ready)
	s.metricsRoutes(r)
	s.webRoutes(r)
	s.seedRoutes(r)

	v1 := r.Group("/v1", s.admit, s.authenticate)
	s.openAPIRoutes(v1)
	v1.POST("/sessions", s.createSession)
	v1.GET("/sessions", s.listSessions)
	v1.GET("/sessions/:id", s.getSession)
	v1.DELETE("/sessions/:id", s.deleteSession)
	v1.POST("/sessions/:id/turns", s.postTurn)
	v1.GET("/sessions/:id/turns/:turnId", s.getTurn)
	v1.GET("/sessions/:id/turns/:turnId/events", s.turnEvents)
	v1.POST("/sessions/:id/turns/:turnId/cancel", s.cancelTurn)
	v1.POST("/sessions/:id/continue", s.continueTask)
	v1.POST("/sessions/:id/compress", s.compress)
	v1.GET("/sessions/:id/steps", s.getSteps)
	v1.GET("/sessions/:id/messages", s.getMessages)
	v1.GET("/sessions/:id/tree", s.getTree)
	v1.POST("/sessions/:id/branch", s.postBranch)
	v1.POST("/sessions/:id/messages/:messageId/edit", s.postEdit)
	v1.POST("/sessions/:id/fork", s.postFork)
	v1.GET("/sessions/:id/export", s.getExport)
	v1.POST("/sessions/import", s.postImport)
	v1.POST("/sessions/:id/tasks", s.postTask)
	v1.GET("/sessions/:id/tasks/:taskId", s.getTask)
	v1.DELETE("/sessions/:id/tasks/:taskId", s.deleteTask)
	v1.POST("/sessions/:id/tasks/:taskId/approvals/:callId", s.postApproval)
	v1.POST("/rag/corrective", s.postCorrective)
	v1.POST("/documents", s.postDocument)
	v1.GET("/documents/:id", s.getDocument)
	v1.DELETE("/documents/:id", s.deleteDocument)
	return r
}

// ready answers 200 only when Temporal answers.
func (s *Server) ready(c *gin.Context) {
	ctx, cancel := context.WithTimeout(c.Request.Context(), 3*time.Second)
	defer cancel()
	if _, err := s.c.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
		writeError(c, errUnavailable("temporal is not reachable: %v", err))
		return
	}
	c.JSON(http.StatusOK, gin.H{"status": "ready"})
}

const requestIDHeader = "X-Request-ID"

func (s *Server) requestID(c *gin.Context) {
	id := c.GetHeader(requestIDHeader)
	if id == "" || len(id) > 128 {
		id = newID("req")
	}
	c.Set("requestID", id)
	c.Header(requestIDHeader, id)
	c.Next()
}

func (s *Server) accessLog(c *gin.Context) {
	start := time.Now()
	c.Next()
	level := slog.LevelInfo
	if c.Writer.Status() >= 500 {
		level = slog.LevelWarn
	}
	s.log.Log(c.Request.Context(), level, "http",
		"method", c.Request.Method, "path", c.Request.URL.Path, "status", c.Writer.Status(),
		"duration", time.Since(start).Round(time.Microsecond), "requestId", c.GetString("requestID"))
}

func (s *Server) recoverJSON(c *gin.Context) {
	defer func() {
		if v := recover(); v != nil {
			s.log.Error("panic in handler", "panic", v, "path", c.Request.URL.Path, "requestId", c.GetString("requestID"))
			writeError(c, errInternal("internal error (request %s)", c.GetString("requestID")))
			c.Abort()
		}
	}()
	c.Next()
}

// admit serves a request if fewer than MaxInFlight are being served, and
// answers 429 (overloaded, Retry-After: 1) otherwise: under a flood the
// API sheds load at once rather than letting every request time out.
func (s *Server) admit(c *gin.Context) {
	select {
	case s.inFlight <- struct{}{}:
		defer func() { <-s.inFlight }()
		c.Next()
	default:
		writeError(c, errCode(activities.CodeOverloaded, "%d requests in flight, the most this API serves at once", cap(s.inFlight)))
	}
}

// limitBody bounds request bodies: uploads by MaxUploadBytes, the rest by
// MaxBodyBytes.
func (s *Server) limitBody(c *gin.Context) {
	limit := s.opts.MaxBodyBytes
	if c.Request.Method == http.MethodPost && (c.FullPath() == "/v1/documents" || c.FullPath() == "/v1/sessions/import") {
		limit = s.opts.MaxUploadBytes
	}
	if c.Request.ContentLength > limit {
		writeError(c, errTooLarge(limit))
		c.Abort()
		return
	}
	c.Request.Body = http.MaxBytesReader(c.Writer, c.Request.Body, limit)
	c.Next()
}

// newID returns a random id with a prefix, e.g. "turn-3f9a...".
func newID(prefix string) string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}

// keyTenant is the gin context key of the tenant an API key authenticated.
const keyTenant = "ctxflow.tenant"

// authenticate checks the API key of a /v1 request when the API has keys:
// an unknown or missing key is a 401, and the request's tenant is the
// key's (an X-Tenant-ID naming another is refused, never followed).
func (s *Server) authenticate(c *gin.Context) {
	if s.opts.Keys == nil {
		c.Next()
		return
	}
	key := c.GetHeader("X-API-Key")
	if auth := c.GetHeader("Authorization"); key == "" && auth != "" {
		scheme, token, _ := strings.Cut(auth, " ")
		if strings.EqualFold(scheme, "Bearer") {
			key = strings.TrimSpace(token)
		}
	}
	if key == "" {
		writeError(c, errCode(activities.CodeUnauthenticated, "this API needs an API key: send Authorization: Bearer <key>"))
		c.Abort()
		return
	}
	sum := sha256.Sum256([]byte(key))
	t, ok := s.opts.Keys[hex.EncodeToString(sum[:])]
	if !ok {
		writeError(c, errCode(activities.CodeUnauthenticated, "unknown API key"))
		c.Abort()
		return
	}
	if h := c.GetHeader(tenantHeader); h != "" && h != t {
		writeError(c, errInvalid("%s names another tenant than the API key's: leave it out", tenantHeader))
		c.Abort()
		return
	}
	c.Set(keyTenant, t)
	c.Next()
}
