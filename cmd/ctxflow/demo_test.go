package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxflow/ctxflow/internal/devserver"
)

// TestPlanDemo: the demo knowledge base is due on a new data dir and after
// an ingestion cut short (kb.pending left), not on a data dir that has a
// Temporal database and no kb.pending, nor when it is off; a path that does
// not exist is an error that names the variable.
func TestPlanDemo(t *testing.T) {
	dir := t.TempDir()
	d, err := planDemo(demoBuiltin, dir)
	if err != nil || d.source != demoBuiltin {
		t.Fatalf("new data dir: %+v, %v", d, err)
	}
	// The server made its database; the ingestion did not finish.
	db := filepath.Join(dir, "temporal", devserver.DatabaseFileName)
	if err := os.MkdirAll(filepath.Dir(db), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(db, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if d, err := planDemo(demoBuiltin, dir); err != nil || d.source != demoBuiltin {
		t.Fatalf("kb.pending left: %+v, %v", d, err)
	}
	if err := os.Remove(d.pending); err != nil {
		t.Fatal(err)
	}
	if d, err := planDemo(demoBuiltin, dir); err != nil || d.source != "" {
		t.Fatalf("ingested before: %+v, %v", d, err)
	}
	if d, err := planDemo(demoOff, t.TempDir()); err != nil || d.source != "" {
		t.Fatalf("off: %+v, %v", d, err)
	}
	if d, err := planDemo(dir, t.TempDir()); err != nil || d.source != dir {
		t.Fatalf("a directory: %+v, %v", d, err)
	}
	if _, err := planDemo(filepath.Join(dir, "nope"), t.TempDir()); err == nil || !strings.Contains(err.Error(), "CTXFLOW_DEMO_DOCS") {
		t.Fatalf("a missing path: %v", err)
	}
}

// TestWritePages: the built-in pages are written as files the workers read.
func TestWritePages(t *testing.T) {
	dir := t.TempDir()
	if err := writePages(dir); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "huawei-mate60.md"))
	if err != nil || !strings.Contains(string(b), "5999元") {
		t.Fatalf("huawei-mate60.md: %v %q", err, b)
	}
}
