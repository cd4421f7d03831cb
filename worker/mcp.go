package worker

import (
	"fmt"
	"log/slog"

	"github.com/ctxflow/ctxflow/activities/mcp"
	"github.com/ctxflow/ctxflow/internal/config"
)

// openMCP returns the MCP servers CTXFLOW_MCP_SERVERS names (nil for
// none). None is contacted here: a task lists their tools when it starts.
func openMCP(cfg config.Config, log *slog.Logger) (*mcp.Servers, error) {
	servers, err := mcp.ParseServers(cfg.MCPServers, cfg.MCPTimeout)
	if err != nil {
		return nil, fmt.Errorf("CTXFLOW_MCP_SERVERS: %w", err)
	}
	if len(servers) == 0 {
		return nil, nil
	}
	s := mcp.New(servers, log)
	log.Info("agent tools: MCP servers", "servers", s.Names())
	return s, nil
}
