// Package mcp brings the tools of Model Context Protocol servers to the
// agent: it is an [activities.ToolSource] over the official Go SDK
// (github.com/modelcontextprotocol/go-sdk), the only package that imports
// it.
//
// A server is a command run over stdio or a streamable-HTTP endpoint
// ([ParseServers]). Its tools are named "mcp:<server>/<tool>" and
// scheduled by their annotations: a tool the server marks read-only
// (readOnlyHint) or idempotent (idempotentHint) is retried, any other runs
// once. A tool's result is text for the model. An error result (isError),
// a tool the server no longer has, or arguments it refuses wrap
// [activities.ErrToolFailed]; a server that cannot be reached is an error
// of its own, which the task retries as the policy allows and then
// observes.
//
// One session a server is kept open and shared by the worker's calls; it
// is opened on first use and again after it broke.
package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ctxflow/ctxflow/activities"
)

// Prefix starts the name of every MCP tool: "mcp:<server>/<tool>".
const Prefix = "mcp:"

// ToolName is the namespaced name of a server's tool.
func ToolName(server, tool string) string { return Prefix + server + "/" + tool }

// SplitName is ToolName's inverse.
func SplitName(name string) (server, tool string, ok bool) {
	rest, ok := strings.CutPrefix(name, Prefix)
	if !ok {
		return "", "", false
	}
	server, tool, ok = strings.Cut(rest, "/")
	return server, tool, ok && server != "" && tool != ""
}

// listTimeout bounds the listing of one server's tools (connecting
// included): a server that does not answer by then is left out.
const listTimeout = 30 * time.Second

// Servers are the configured MCP servers.
type Servers struct {
	servers []Server
	log     *slog.Logger
	client  *sdk.Client
	// transport opens a server's transport (replaced by tests).
	transport func(Server) (sdk.Transport, error)

	mu       sync.Mutex
	sessions map[string]*session
	closed   bool
}

var _ activities.ToolSource = (*Servers)(nil)

// session is the open session of one server, opened once at a time.
type session struct {
	mu sync.Mutex // held while connecting
	cs *sdk.ClientSession
	// done is closed when cs's connection ends.
	done chan struct{}
}

// New returns the servers; none is contacted before its tools are listed.
func New(servers []Server, log *slog.Logger) *Servers {
	if log == nil {
		log = slog.Default()
	}
	s := &Servers{
		servers: servers, log: log, sessions: map[string]*session{},
		// No capabilities: ctxflow serves no roots, sampling or
		// elicitation to the servers.
		client: sdk.NewClient(&sdk.Implementation{Name: "ctxflow", Version: "1"}, &sdk.ClientOptions{Capabilities: &sdk.ClientCapabilities{}}),
	}
	s.transport = s.openTransport
	return s
}

// Names are the servers' names, in configuration order.
func (s *Servers) Names() []string {
	out := make([]string, len(s.servers))
	for i, srv := range s.servers {
		out[i] = srv.Name
	}
	return out
}

// List implements [activities.ToolSource]: the tools of every server
// tenant may use, listed at once, in configuration order.
func (s *Servers) List(ctx context.Context, tenant string) ([]activities.RemoteTool, []string, error) {
	type listed struct {
		tools []activities.RemoteTool
		err   error
	}
	results := make([]listed, len(s.servers))
	var wg sync.WaitGroup
	for i, srv := range s.servers {
		if !srv.allows(tenant) {
			continue
		}
		wg.Go(func() {
			results[i].tools, results[i].err = s.list(ctx, srv)
		})
	}
	wg.Wait()
	var tools []activities.RemoteTool
	var unavailable []string
	for i, r := range results {
		if r.err != nil {
			s.log.Warn("mcp server unavailable: its tools are not offered", "server", s.servers[i].Name, "error", r.err)
			unavailable = append(unavailable, fmt.Sprintf("mcp server %s: %v", s.servers[i].Name, r.err))
		}
		tools = append(tools, r.tools...)
	}
	return tools, unavailable, nil
}

func (s *Servers) list(ctx context.Context, srv Server) ([]activities.RemoteTool, error) {
	ctx, cancel := context.WithTimeout(ctx, listTimeout)
	defer cancel()
	cs, err := s.session(ctx, srv)
	if err != nil {
		return nil, err
	}
	var out []activities.RemoteTool
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			s.broken(srv.Name, cs, err)
			return nil, fmt.Errorf("list tools: %w", err)
		}
		out = append(out, remoteTool(srv, t))
	}
	return out, nil
}

// remoteTool is a server's tool as the agent offers and schedules it.
func remoteTool(srv Server, t *sdk.Tool) activities.RemoteTool {
	params := json.RawMessage(`{"type":"object"}`)
	if t.InputSchema != nil {
		if b, err := json.Marshal(t.InputSchema); err == nil && string(b) != "null" {
			params = b
		}
	}
	desc := t.Description
	if desc == "" {
		desc = t.Title
	}
	policy := activities.ToolPolicy{Timeout: srv.Timeout}
	if a := t.Annotations; a != nil {
		policy.ReadOnly, policy.Idempotent = a.ReadOnlyHint, a.IdempotentHint
		if desc == "" {
			desc = a.Title
		}
	}
	return activities.RemoteTool{
		Spec:   activities.ToolSpec{Name: ToolName(srv.Name, t.Name), Description: desc, Parameters: params},
		Policy: policy,
	}
}

// Call implements [activities.ToolSource].
func (s *Servers) Call(ctx context.Context, tenant, name string, args json.RawMessage) (string, error) {
	server, tool, ok := SplitName(name)
	if !ok {
		return "", fmt.Errorf("%w: %q is not an MCP tool name (mcp:<server>/<tool>)", activities.ErrToolFailed, name)
	}
	srv, ok := s.server(server)
	if !ok || !srv.allows(tenant) {
		return "", fmt.Errorf("%w: there is no MCP server %q (the tool may have been removed since the task listed it)", activities.ErrToolFailed, server)
	}
	arguments, err := objectArgs(args)
	if err != nil {
		return "", err
	}
	res, err := s.call(ctx, srv, tool, arguments)
	switch rpcErr, refused := refusal(err); {
	case refused:
		// The server answered and refused: an unknown (vanished) tool,
		// arguments it does not take.
		return "", fmt.Errorf("%w: mcp server %s refused the call of %s: %s (code %d)", activities.ErrToolFailed, srv.Name, tool, rpcErr.Message, rpcErr.Code)
	case err != nil:
		return "", fmt.Errorf("mcp server %s: call %s: %w", srv.Name, tool, err)
	}
	text := ResultText(res)
	if res.IsError {
		return "", fmt.Errorf("%w: %s", activities.ErrToolFailed, text)
	}
	return text, nil
}

// call calls tool on srv's session. A session the server no longer knows
// (an HTTP server restarted: the request was not run) is opened anew and
// the call made once more; any other failure of the session closes it, for
// the next call to open a new one.
func (s *Servers) call(ctx context.Context, srv Server, tool string, args json.RawMessage) (*sdk.CallToolResult, error) {
	for attempt := 1; ; attempt++ {
		cs, err := s.session(ctx, srv)
		if err != nil {
			return nil, err
		}
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: tool, Arguments: args})
		if _, refused := refusal(err); err == nil || refused || ctx.Err() != nil {
			return res, err
		}
		s.broken(srv.Name, cs, err)
		if attempt > 1 || !errors.Is(err, sdk.ErrSessionMissing) {
			return nil, err
		}
	}
}

// localCodes are the JSON-RPC error codes the SDK gives failures of its
// own side (unknown, client or server closing, rejected by the transport):
// not an answer of the server.
var localCodes = []int64{-32001, -32003, -32004, -32005}

// refusal reports an error that is the server's answer to a call: a
// JSON-RPC error response (unknown tool, invalid params).
func refusal(err error) (*jsonrpc.Error, bool) {
	var rpcErr *jsonrpc.Error
	if errors.As(err, &rpcErr) && !slices.Contains(localCodes, rpcErr.Code) {
		return rpcErr, true
	}
	return nil, false
}

// objectArgs are the model's arguments as the JSON object MCP sends.
func objectArgs(args json.RawMessage) (json.RawMessage, error) {
	if s := strings.TrimSpace(string(args)); s == "" || s == "null" {
		return json.RawMessage("{}"), nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(args, &obj); err != nil {
		return nil, fmt.Errorf("%w: arguments must be a JSON object: %v", activities.ErrToolArgs, err)
	}
	return args, nil
}

// ResultText is a tool result as text for the model: its text content
// whole, a line naming each image, audio clip or resource link, an
// embedded resource's text; the structured content as JSON when there is
// nothing else.
func ResultText(res *sdk.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		switch c := c.(type) {
		case *sdk.TextContent:
			parts = append(parts, c.Text)
		case *sdk.ImageContent:
			parts = append(parts, fmt.Sprintf("[image: %s, %d bytes]", c.MIMEType, len(c.Data)))
		case *sdk.AudioContent:
			parts = append(parts, fmt.Sprintf("[audio: %s, %d bytes]", c.MIMEType, len(c.Data)))
		case *sdk.ResourceLink:
			parts = append(parts, fmt.Sprintf("[resource link: %s %s]", c.Name, c.URI))
		case *sdk.EmbeddedResource:
			switch r := c.Resource; {
			case r == nil:
			case r.Text != "":
				parts = append(parts, r.Text)
			default:
				parts = append(parts, fmt.Sprintf("[resource: %s, %s, %d bytes]", r.URI, r.MIMEType, len(r.Blob)))
			}
		default:
			if b, err := json.Marshal(c); err == nil {
				parts = append(parts, string(b))
			}
		}
	}
	if len(parts) == 0 && res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			parts = append(parts, string(b))
		}
	}
	return strings.Join(parts, "\n")
}

func (s *Servers) server(name string) (Server, bool) {
	for _, srv := range s.servers {
		if srv.Name == name {
			return srv, true
		}
	}
	return Server{}, false
}

// session returns the open session of srv, opening one if there is none
// or it broke.
func (s *Servers) session(ctx context.Context, srv Server) (*sdk.ClientSession, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, errors.New("the MCP client is closed")
	}
	ss := s.sessions[srv.Name]
	if ss == nil {
		ss = &session{}
		s.sessions[srv.Name] = ss
	}
	s.mu.Unlock()

	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.cs != nil {
		select {
		case <-ss.done:
			ss.cs = nil
		default:
			return ss.cs, nil
		}
	}
	t, err := s.transport(srv)
	if err != nil {
		return nil, err
	}
	cs, err := s.client.Connect(ctx, t, nil)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cs.Wait(); close(done) }()
	ss.cs, ss.done = cs, done
	s.log.Debug("mcp server connected", "server", srv.Name)
	return cs, nil
}

// broken closes a session that failed for a reason other than the
// server's answer, so that the next call opens a new one.
func (s *Servers) broken(name string, cs *sdk.ClientSession, err error) {
	s.mu.Lock()
	ss := s.sessions[name]
	s.mu.Unlock()
	if ss == nil {
		return
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.cs == cs {
		s.log.Info("mcp session broke: the next call reconnects", "server", name, "error", err)
		_ = cs.Close()
		ss.cs = nil
	}
}

// Close ends every session (stopping the stdio servers).
func (s *Servers) Close() error {
	s.mu.Lock()
	s.closed = true
	sessions := s.sessions
	s.sessions = map[string]*session{}
	s.mu.Unlock()
	var errs []error
	for name, ss := range sessions {
		ss.mu.Lock()
		if ss.cs != nil {
			if err := ss.cs.Close(); err != nil && !errors.Is(err, sdk.ErrConnectionClosed) {
				errs = append(errs, fmt.Errorf("close mcp server %s: %w", name, err))
			}
			ss.cs = nil
		}
		ss.mu.Unlock()
	}
	return errors.Join(errs...)
}

// stdioEnv are the worker's environment variables a stdio server gets.
var stdioEnv = []string{"PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "LANG", "TMPDIR"}

func (s *Servers) openTransport(srv Server) (sdk.Transport, error) {
	if srv.URL != "" {
		hc := &http.Client{}
		if len(srv.Headers) > 0 {
			hc.Transport = headerTransport{headers: srv.Headers, base: http.DefaultTransport}
		}
		// No standalone SSE stream: ctxflow asks, and needs no
		// notifications from the server.
		return &sdk.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: hc, DisableStandaloneSSE: true}, nil
	}
	cmd := exec.Command(srv.Command[0], srv.Command[1:]...) // the operator's configured command
	for _, k := range stdioEnv {
		if v, ok := os.LookupEnv(k); ok {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	for k, v := range srv.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stderr = &logWriter{log: s.log.With("mcp_server", srv.Name)}
	return &sdk.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}, nil
}

// headerTransport adds headers to every request.
type headerTransport struct {
	headers map[string]string
	base    http.RoundTripper
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range t.headers {
		r.Header.Set(k, v)
	}
	return t.base.RoundTrip(r)
}

// logWriter logs a stdio server's stderr, a line at a time, at debug
// level.
type logWriter struct {
	log *slog.Logger
	mu  sync.Mutex
	buf []byte
}

var _ io.Writer = (*logWriter)(nil)

func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for len(w.buf) > 0 {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 && len(w.buf) < 4096 {
			break
		}
		if i < 0 {
			i = len(w.buf)
		}
		if line := strings.TrimSpace(string(w.buf[:i])); line != "" {
			w.log.Debug("mcp server stderr", "line", line)
		}
		w.buf = append(w.buf[:0], w.buf[min(i+1, len(w.buf)):]...)
	}
	return len(p), nil
}
