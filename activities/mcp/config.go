package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Server is one configured MCP server: a command run over stdio, or a
// streamable-HTTP endpoint.
type Server struct {
	// Name namespaces the server's tools: "mcp:<name>/<tool>".
	Name string
	// Command is the program and its arguments of a stdio server.
	Command []string
	// Env is added to the environment of a stdio server, which otherwise
	// gets only the worker's PATH, HOME, USER, LOGNAME, SHELL, TERM, LANG
	// and TMPDIR (not its secrets).
	Env map[string]string
	// URL is the endpoint of a streamable-HTTP server.
	URL string
	// Headers are sent with every HTTP request (e.g. Authorization).
	Headers map[string]string
	// Timeout bounds one call of one of its tools (the call's activity).
	Timeout time.Duration
	// Tenants are the tenants offered the server's tools (none: all).
	Tenants []string
}

// allows reports whether the server's tools are offered to tenant.
func (s Server) allows(tenant string) bool {
	return len(s.Tenants) == 0 || slices.Contains(s.Tenants, tenant)
}

// validName is a server name: it becomes part of tool names, which the
// model sees under their wire names (activities.WireName).
var validName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$`)

// ParseServers reads CTXFLOW_MCP_SERVERS: either a JSON array of objects
//
//	[{"name": "fs", "command": ["npx", "-y", "@modelcontextprotocol/server-filesystem", "/srv"], "env": {"K": "v"},
//	  "timeout": "2m", "tenants": ["acme"]},
//	 {"name": "search", "url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer …"}}]
//
// or the compact syntax, entries separated by ';' or newlines:
//
//	fs=stdio:npx -y @modelcontextprotocol/server-filesystem /srv; search=https://mcp.example.com/mcp
//
// where a stdio command is split at spaces (no quoting: use JSON for
// arguments with spaces). Every server's calls time out after timeout
// unless it sets its own. Names are unique, 1 to 32 of [A-Za-z0-9_-].
func ParseServers(spec string, timeout time.Duration) ([]Server, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return nil, nil
	}
	var servers []Server
	var err error
	if strings.HasPrefix(spec, "[") {
		servers, err = parseJSON(spec, timeout)
	} else {
		servers, err = parseCompact(spec, timeout)
	}
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, s := range servers {
		switch {
		case !validName.MatchString(s.Name):
			return nil, fmt.Errorf("mcp server name %q: want 1 to 32 of A-Z a-z 0-9 _ - (starting with a letter or digit)", s.Name)
		case seen[s.Name]:
			return nil, fmt.Errorf("mcp server %q is configured twice", s.Name)
		case len(s.Command) == 0 && s.URL == "", len(s.Command) > 0 && s.URL != "":
			return nil, fmt.Errorf("mcp server %q: want either a stdio command or a URL", s.Name)
		case s.Timeout <= 0:
			return nil, fmt.Errorf("mcp server %q: timeout %s: want more than 0", s.Name, s.Timeout)
		}
		if s.URL != "" {
			if u, err := url.Parse(s.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return nil, fmt.Errorf("mcp server %q: URL %q: want an http:// or https:// URL", s.Name, s.URL)
			}
		}
		seen[s.Name] = true
	}
	return servers, nil
}

func parseJSON(spec string, timeout time.Duration) ([]Server, error) {
	var raw []struct {
		Name    string            `json:"name"`
		Command []string          `json:"command"`
		Env     map[string]string `json:"env"`
		URL     string            `json:"url"`
		Headers map[string]string `json:"headers"`
		Timeout string            `json:"timeout"`
		Tenants []string          `json:"tenants"`
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(spec)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("mcp servers (JSON): %w", err)
	}
	out := make([]Server, 0, len(raw))
	for _, r := range raw {
		s := Server{Name: r.Name, Command: r.Command, Env: r.Env, URL: r.URL, Headers: r.Headers, Timeout: timeout, Tenants: r.Tenants}
		if r.Timeout != "" {
			d, err := time.ParseDuration(r.Timeout)
			if err != nil {
				return nil, fmt.Errorf("mcp server %q: timeout: %w", r.Name, err)
			}
			s.Timeout = d
		}
		out = append(out, s)
	}
	return out, nil
}

func parseCompact(spec string, timeout time.Duration) ([]Server, error) {
	var out []Server
	for _, entry := range strings.FieldsFunc(spec, func(r rune) bool { return r == ';' || r == '\n' }) {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		name, target, ok := strings.Cut(entry, "=")
		if !ok {
			return nil, fmt.Errorf("mcp server %q: want name=stdio:command args… or name=http(s)://…", entry)
		}
		s := Server{Name: strings.TrimSpace(name), Timeout: timeout}
		switch target = strings.TrimSpace(target); {
		case strings.HasPrefix(target, "stdio:"):
			s.Command = strings.Fields(strings.TrimPrefix(target, "stdio:"))
		case strings.HasPrefix(target, "http://"), strings.HasPrefix(target, "https://"):
			s.URL = target
		default:
			return nil, fmt.Errorf("mcp server %q: %q: want stdio:command args… or an http(s):// URL", s.Name, target)
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		return nil, errors.New("mcp servers: no server in the list")
	}
	return out, nil
}
