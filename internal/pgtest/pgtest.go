// Package pgtest gives tests a PostgreSQL database: the project's own
// throw-away server (scripts/postgres.sh, Debian's PostgreSQL installed
// when missing), started once per test binary, and a fresh database for
// each caller. A server that cannot start fails the test; nothing skips.
package pgtest

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver
)

var (
	once   sync.Once
	dir    string
	admin  string // URL of the server's postgres database
	err    error
	serial atomic.Int64
)

func script() string {
	_, self, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(self), "..", "..", "scripts", "postgres.sh")
}

func start() {
	if dir, err = os.MkdirTemp("", "ctxflow-pg-*"); err != nil {
		return
	}
	out, e := exec.Command(script(), "start", dir).Output()
	if e != nil {
		var stderr string
		if ee, ok := e.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		err = fmt.Errorf("scripts/postgres.sh start: %v\n%s", e, stderr)
		return
	}
	admin = strings.TrimSpace(string(out))
}

// Database creates a new, empty database on the project's PostgreSQL
// server (starting it on first use) and returns its URL.
func Database(t testing.TB) string {
	t.Helper()
	once.Do(start)
	if err != nil {
		t.Fatalf("PostgreSQL for the tests: %v", err)
	}
	name := fmt.Sprintf("test_%d_%d", os.Getpid(), serial.Add(1))
	db, e := sql.Open("pgx", admin)
	if e != nil {
		t.Fatal(e)
	}
	defer db.Close()
	if _, e := db.ExecContext(context.Background(), "CREATE DATABASE "+name); e != nil {
		t.Fatalf("create database %s: %v", name, e)
	}
	return strings.Replace(admin, "/postgres?", "/"+name+"?", 1)
}

// Stop stops the server, if it was started; call it from TestMain after
// the tests ran.
func Stop() {
	if dir == "" {
		return
	}
	_ = exec.Command(script(), "stop", dir).Run()
	_ = os.RemoveAll(dir)
}
