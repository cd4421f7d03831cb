package main

import (
	"bytes"
	"net"
	"strings"
	"testing"
	"time"
)

// TestHelpForEveryCommand: `ctxflow CMD -h` (and --help) prints the
// command's usage on stdout and exits 0, for every command of the usage,
// without loading anything or dialling the cluster, the API or the
// database (all pointed at a listener that must see no connection).
func TestHelpForEveryCommand(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	addr := ln.Addr().String()
	t.Setenv("TEMPORAL_ADDRESS", addr)
	t.Setenv("CTXFLOW_API_URL", "http://"+addr)
	t.Setenv("DATABASE_URL", "postgres://u:p@"+addr+"/db")
	t.Setenv("CTXFLOW_DATA_DIR", t.TempDir())
	cmds := commandNames()
	if len(cmds) < 10 {
		t.Fatalf("commands %v", cmds)
	}
	for _, cmd := range cmds {
		for _, h := range []string{"-h", "--help"} {
			var stdout, stderr bytes.Buffer
			if code := run([]string{cmd, h}, &stdout, &stderr); code != 0 || !strings.HasPrefix(stdout.String(), "usage: ctxflow "+cmd) {
				t.Errorf("ctxflow %s %s = %d, stdout %q, stderr %q", cmd, h, code, stdout.String(), stderr.String())
			}
		}
	}
	var stdout bytes.Buffer
	if code := run([]string{"ingest", "--tenant", "acme", "-h", "docs/"}, &stdout, new(bytes.Buffer)); code != 0 || !strings.Contains(stdout.String(), "PATH") {
		t.Errorf("ctxflow ingest --tenant acme -h docs/ = %d, %q", code, stdout.String())
	}
	if err := ln.(*net.TCPListener).SetDeadline(time.Now().Add(100 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if c, err := ln.Accept(); err == nil {
		c.Close()
		t.Error("a help dialled out")
	}
}

// commandNames are the commands the usage lists.
func commandNames() []string {
	var out []string
	for _, line := range strings.Split(usage, "\n") {
		if synopsis, _, ok := commandLine(line); ok {
			name, _, _ := strings.Cut(synopsis, " ")
			out = append(out, name)
		}
	}
	return out
}
