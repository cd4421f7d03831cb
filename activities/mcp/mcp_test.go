package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ctxflow/ctxflow/activities"
)

// stdioEnvVar makes the test binary an MCP server over stdio (TestMain).
const stdioEnvVar = "CTXFLOW_MCP_TEST_STDIO"

func TestMain(m *testing.M) {
	if os.Getenv(stdioEnvVar) == "1" {
		if err := testServer().Run(context.Background(), &sdk.StdioTransport{}); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

type echoArgs struct {
	Message string `json:"message" jsonschema:"the text to echo"`
}

// testServer is an MCP server built with the SDK: echo (read-only), fail
// (an error result), write (no annotations: runs once) and image.
func testServer() *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "test", Version: "1"}, nil)
	sdk.AddTool(s, &sdk.Tool{Name: "echo", Description: "Echoes the message", Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *sdk.CallToolRequest, a echoArgs) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "Echo: " + a.Message}}}, nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "fail", Description: "Always fails"},
		func(_ context.Context, _ *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "the disk is full"}}}, nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "write", Description: "Writes", Annotations: &sdk.ToolAnnotations{IdempotentHint: false}},
		func(_ context.Context, _ *sdk.CallToolRequest, a echoArgs) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "wrote " + a.Message}}}, nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "image", Description: "A picture", Annotations: &sdk.ToolAnnotations{IdempotentHint: true}},
		func(_ context.Context, _ *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{
				&sdk.TextContent{Text: "here it is"}, &sdk.ImageContent{MIMEType: "image/png", Data: []byte{1, 2, 3}},
			}}, nil, nil
		})
	return s
}

// httpServer serves srv over streamable HTTP.
func httpServer(t *testing.T, srv *sdk.Server) *httptest.Server {
	t.Helper()
	hs := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil))
	t.Cleanup(hs.Close)
	return hs
}

func newServers(t *testing.T, servers ...Server) *Servers {
	t.Helper()
	s := New(servers, nil)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func find(tools []activities.RemoteTool, name string) (activities.RemoteTool, bool) {
	i := slices.IndexFunc(tools, func(t activities.RemoteTool) bool { return t.Spec.Name == name })
	if i < 0 {
		return activities.RemoteTool{}, false
	}
	return tools[i], true
}

func TestListAndCallOverHTTP(t *testing.T) {
	srv := testServer()
	hs := httpServer(t, srv)
	s := newServers(t, Server{Name: "t", URL: hs.URL, Timeout: 7 * time.Second})
	ctx := t.Context()

	tools, unavailable, err := s.List(ctx, "default")
	if err != nil || len(unavailable) != 0 {
		t.Fatalf("list: %v %v", err, unavailable)
	}
	if len(tools) != 4 {
		t.Fatalf("%d tools: %+v", len(tools), tools)
	}
	echo, ok := find(tools, "mcp:t/echo")
	if !ok || echo.Spec.Description != "Echoes the message" || !strings.Contains(string(echo.Spec.Parameters), `"message"`) {
		t.Fatalf("echo: %+v", echo)
	}
	// Retries follow the annotations: read-only and idempotent tools are
	// retried, others run once; all with the server's timeout.
	for name, attempts := range map[string]int{"mcp:t/echo": 3, "mcp:t/image": 3, "mcp:t/write": 1, "mcp:t/fail": 1} {
		tool, _ := find(tools, name)
		if info := tool.Policy.Info(name); info.Attempts != attempts || info.Timeout != 7*time.Second {
			t.Errorf("%s: %+v, want %d attempts and 7s", name, info, attempts)
		}
	}

	got, err := s.Call(ctx, "default", "mcp:t/echo", json.RawMessage(`{"message": "hi"}`))
	if err != nil || got != "Echo: hi" {
		t.Fatalf("echo = %q, %v", got, err)
	}
	got, err = s.Call(ctx, "default", "mcp:t/image", nil)
	if err != nil || got != "here it is\n[image: image/png, 3 bytes]" {
		t.Fatalf("image = %q, %v", got, err)
	}

	t.Run("an error result", func(t *testing.T) {
		_, err := s.Call(ctx, "default", "mcp:t/fail", json.RawMessage(`{}`))
		if !errors.Is(err, activities.ErrToolFailed) || !strings.Contains(err.Error(), "the disk is full") {
			t.Fatalf("fail: %v", err)
		}
	})
	t.Run("arguments the server refuses", func(t *testing.T) {
		_, err := s.Call(ctx, "default", "mcp:t/echo", json.RawMessage(`{"message": 3}`))
		if !errors.Is(err, activities.ErrToolFailed) {
			t.Fatalf("echo with a number: %v", err)
		}
		_, err = s.Call(ctx, "default", "mcp:t/echo", json.RawMessage(`[1]`))
		if !errors.Is(err, activities.ErrToolArgs) {
			t.Fatalf("echo with an array: %v", err)
		}
	})
	t.Run("a tool that vanished", func(t *testing.T) {
		srv.RemoveTools("write")
		_, err := s.Call(ctx, "default", "mcp:t/write", json.RawMessage(`{"message": "x"}`))
		if !errors.Is(err, activities.ErrToolFailed) || !strings.Contains(err.Error(), "write") {
			t.Fatalf("write after its removal: %v", err)
		}
		_, err = s.Call(ctx, "default", "mcp:gone/echo", json.RawMessage(`{}`))
		if !errors.Is(err, activities.ErrToolFailed) {
			t.Fatalf("a server not configured: %v", err)
		}
	})
}

func TestServerDown(t *testing.T) {
	hs := httptest.NewServer(nil)
	url := hs.URL
	hs.Close()
	s := newServers(t, Server{Name: "down", URL: url + "/mcp", Timeout: time.Second},
		Server{Name: "nocmd", Command: []string{"/nonexistent/mcp-server"}, Timeout: time.Second})
	tools, unavailable, err := s.List(t.Context(), "default")
	if err != nil || len(tools) != 0 || len(unavailable) != 2 ||
		!strings.HasPrefix(unavailable[0], "mcp server down: ") || !strings.HasPrefix(unavailable[1], "mcp server nocmd: ") {
		t.Fatalf("list: %v %v %q", err, tools, unavailable)
	}
	// A call is the server failing, not the model's to fix: the task
	// retries it as the policy allows, then observes the error.
	_, err = s.Call(t.Context(), "default", "mcp:down/echo", json.RawMessage(`{"message": "hi"}`))
	if err == nil || errors.Is(err, activities.ErrToolFailed) || !strings.Contains(err.Error(), "mcp server down") {
		t.Fatalf("call: %v", err)
	}
}

// TestRestartedServer: an HTTP server that restarted no longer knows the
// session; the call opens a new one and is made.
func TestRestartedServer(t *testing.T) {
	var handler atomic.Pointer[sdk.StreamableHTTPHandler]
	start := func() {
		handler.Store(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return testServer() }, nil))
	}
	start()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { handler.Load().ServeHTTP(w, r) }))
	defer hs.Close()
	s := newServers(t, Server{Name: "t", URL: hs.URL, Timeout: 5 * time.Second})
	if _, err := s.Call(t.Context(), "default", "mcp:t/echo", json.RawMessage(`{"message": "1"}`)); err != nil {
		t.Fatal(err)
	}
	start() // a new server: it knows no session
	got, err := s.Call(t.Context(), "default", "mcp:t/echo", json.RawMessage(`{"message": "2"}`))
	if err != nil || got != "Echo: 2" {
		t.Fatalf("after the restart: %q %v", got, err)
	}
}

func TestStdioServer(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	s := newServers(t, Server{Name: "local", Command: []string{self}, Env: map[string]string{stdioEnvVar: "1"}, Timeout: 5 * time.Second})
	tools, unavailable, err := s.List(t.Context(), "default")
	if err != nil || len(unavailable) != 0 || len(tools) != 4 {
		t.Fatalf("list: %v %v %+v", err, unavailable, tools)
	}
	got, err := s.Call(t.Context(), "default", "mcp:local/echo", json.RawMessage(`{"message": "over stdio"}`))
	if err != nil || got != "Echo: over stdio" {
		t.Fatalf("echo = %q, %v", got, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestTenants(t *testing.T) {
	hs := httpServer(t, testServer())
	s := newServers(t, Server{Name: "acme", URL: hs.URL, Timeout: time.Second, Tenants: []string{"acme"}})
	if tools, _, _ := s.List(t.Context(), "other"); len(tools) != 0 {
		t.Fatalf("another tenant sees %+v", tools)
	}
	if tools, _, _ := s.List(t.Context(), "acme"); len(tools) != 4 {
		t.Fatalf("acme sees %+v", tools)
	}
	if _, err := s.Call(t.Context(), "other", "mcp:acme/echo", json.RawMessage(`{"message": "x"}`)); !errors.Is(err, activities.ErrToolFailed) {
		t.Fatalf("another tenant's call: %v", err)
	}
}

func TestParseServers(t *testing.T) {
	got, err := ParseServers("everything=stdio:node /x/index.js stdio; web = http://127.0.0.1:3001/mcp\nfs=stdio:npx -y fs", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	want := []Server{
		{Name: "everything", Command: []string{"node", "/x/index.js", "stdio"}, Timeout: time.Minute},
		{Name: "web", URL: "http://127.0.0.1:3001/mcp", Timeout: time.Minute},
		{Name: "fs", Command: []string{"npx", "-y", "fs"}, Timeout: time.Minute},
	}
	if !slices.EqualFunc(got, want, func(a, b Server) bool {
		return a.Name == b.Name && slices.Equal(a.Command, b.Command) && a.URL == b.URL && a.Timeout == b.Timeout
	}) {
		t.Fatalf("compact: %+v", got)
	}
	got, err = ParseServers(`[{"name": "fs", "command": ["npx", "-y", "a b"], "env": {"K": "v"}, "timeout": "2m", "tenants": ["acme"]},
		{"name": "search", "url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer x"}}]`, time.Minute)
	if err != nil || len(got) != 2 || got[0].Command[2] != "a b" || got[0].Env["K"] != "v" || got[0].Timeout != 2*time.Minute ||
		!slices.Equal(got[0].Tenants, []string{"acme"}) || got[1].Headers["Authorization"] != "Bearer x" || got[1].Timeout != time.Minute {
		t.Fatalf("JSON: %+v %v", got, err)
	}
	if got, err := ParseServers("  ", time.Minute); err != nil || got != nil {
		t.Fatalf("empty: %v %v", got, err)
	}
	for _, bad := range []string{
		"noequals", "a=ftp://x", "a b=stdio:x", "a/b=stdio:x", "a=stdio:x;a=stdio:y", "a=stdio:", "a=http://",
		`[{"name": "a"}]`, `[{"name": "a", "command": ["x"], "url": "http://x"}]`, `[{"name": "a", "command": ["x"], "timeout": "soon"}]`,
		`[{"name": "a", "command": ["x"], "bogus": 1}]`, `[{"name": "a", "command": ["x"], "timeout": "-1s"}]`,
	} {
		if _, err := ParseServers(bad, time.Minute); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestSplitName(t *testing.T) {
	if s, tool, ok := SplitName(ToolName("fs", "read/file")); !ok || s != "fs" || tool != "read/file" {
		t.Fatalf("%q %q %v", s, tool, ok)
	}
	for _, bad := range []string{"run_sql", "mcp:", "mcp:fs", "mcp:/x", "mcp:fs/"} {
		if _, _, ok := SplitName(bad); ok {
			t.Errorf("%q splits", bad)
		}
	}
}
