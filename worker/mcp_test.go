package worker

import (
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ctxflow/ctxflow/internal/config"
)

func TestOpenMCP(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	if s, err := openMCP(config.Config{MCPTimeout: time.Minute}, log); err != nil || s != nil {
		t.Fatalf("none configured: %v %v", s, err)
	}
	s, err := openMCP(config.Config{MCPServers: "ev=stdio:node ev.js stdio; web=http://127.0.0.1:3001/mcp", MCPTimeout: time.Minute}, log)
	if err != nil || s == nil || !slices.Equal(s.Names(), []string{"ev", "web"}) {
		t.Fatalf("two servers: %v %v", s, err)
	}
	_ = s.Close()
	if _, err := openMCP(config.Config{MCPServers: "ev=ftp://x", MCPTimeout: time.Minute}, log); err == nil || !strings.Contains(err.Error(), "CTXFLOW_MCP_SERVERS") {
		t.Fatalf("a bad list: %v", err)
	}
}
