// Package mcptest installs and runs a real MCP server for ctxflow's
// end-to-end tests: @modelcontextprotocol/server-everything, pinned by
// scripts/mcp/package-lock.json and installed from the npm registry by
// scripts/mcp-server.sh. A test that needs it fails, never skips, when it
// cannot be installed.
package mcptest

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// ScriptPath returns the path of scripts/mcp-server.sh.
func ScriptPath() (string, error) {
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		p := filepath.Join(filepath.Dir(file), "..", "..", "scripts", "mcp-server.sh")
		if _, err := os.Stat(p); err == nil {
			return filepath.Clean(p), nil
		}
	}
	dir, err := os.Getwd() // built with -trimpath: look up for the module root
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "scripts", "mcp-server.sh"), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("mcptest: scripts/mcp-server.sh not found above the working directory")
		}
		dir = parent
	}
}

var (
	installOnce sync.Once
	command     []string
	installErr  error
)

// Command installs the server (once a test binary; the script caches it)
// and returns the command that runs it: append "stdio", or
// "streamableHttp" with PORT in the environment. A failure is fatal to
// the test.
func Command(t testing.TB) []string {
	t.Helper()
	installOnce.Do(func() {
		script, err := ScriptPath()
		if err != nil {
			installErr = err
			return
		}
		var stdout, stderr bytes.Buffer
		cmd := exec.Command("bash", script, "install")
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			installErr = fmt.Errorf("mcptest: %s install failed (%v):\n%s", script, err, stderr.String())
			return
		}
		command = strings.Fields(strings.TrimSpace(stdout.String()))
		if len(command) == 0 {
			installErr = fmt.Errorf("mcptest: %s install printed no command:\n%s", script, stderr.String())
		}
	})
	if installErr != nil {
		t.Fatal(installErr)
	}
	return append([]string(nil), command...)
}

// Server is the server running over streamable HTTP.
type Server struct {
	// URL is its MCP endpoint, http://127.0.0.1:PORT/mcp.
	URL  string
	cmd  *exec.Cmd
	log  *bytes.Buffer
	mu   sync.Mutex
	done chan struct{}
}

// StartHTTP starts the server over streamable HTTP on a free port and
// waits until it listens; it is stopped when the test ends.
func StartHTTP(t testing.TB) *Server {
	t.Helper()
	base := Command(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	s := &Server{URL: "http://127.0.0.1:" + strconv.Itoa(port) + "/mcp", log: &bytes.Buffer{}, done: make(chan struct{})}
	s.cmd = exec.Command(base[0], append(base[1:], "streamableHttp")...)
	s.cmd.Env = append(os.Environ(), "PORT="+strconv.Itoa(port))
	s.cmd.Stdout, s.cmd.Stderr = s.writer(), s.writer()
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("mcptest: start %v: %v", s.cmd.Args, err)
	}
	go func() { _ = s.cmd.Wait(); close(s.done) }()
	t.Cleanup(s.Stop)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		// A GET without a session is refused, but only by a server that
		// listens.
		if resp, err := http.Get(s.URL); err == nil {
			_ = resp.Body.Close()
			return s
		}
		select {
		case <-s.done:
			t.Fatalf("mcptest: the server exited:\n%s", s.Log())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("mcptest: the server did not listen at %s within 30s:\n%s", s.URL, s.Log())
		}
	}
}

// Stop stops the server and waits for it to exit.
func (s *Server) Stop() {
	if s.cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	<-s.done
}

// Log is what the server printed.
func (s *Server) Log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.log.String()
}

type lockedWriter struct{ s *Server }

func (w lockedWriter) Write(p []byte) (int, error) {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	return w.s.log.Write(p)
}

func (s *Server) writer() lockedWriter { return lockedWriter{s} }
