package main

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/ctxflow/ctxflow/workflows"
)

func TestProgressPlainLines(t *testing.T) {
	var b bytes.Buffer
	p := &progress{w: &b, name: "README.md"}
	p.update(workflows.IngestProgress{}) // not chunked yet: nothing
	for done := 0; done <= 20; done++ {
		p.update(workflows.IngestProgress{Chunks: 40 * 32, Batches: 40, Done: done * 2, Stored: done * 64})
		p.update(workflows.IngestProgress{Chunks: 40 * 32, Batches: 40, Done: done * 2, Stored: done * 64}) // polled again
	}
	p.end(true)
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 11 {
		t.Fatalf("%d lines, want one per tenth (0%%..100%%):\n%s", len(lines), b.String())
	}
	if lines[0] != "README.md: 0/40 batches (0%), 0 chunks stored of 1280" || lines[10] != "README.md: 40/40 batches (100%), 1280 chunks stored of 1280" {
		t.Errorf("lines %q … %q", lines[0], lines[10])
	}
	if strings.Contains(b.String(), "\r") {
		t.Error("carriage returns in plain output")
	}
}

func TestProgressBarOnATerminal(t *testing.T) {
	var b bytes.Buffer
	p := &progress{w: &b, tty: true, name: "a.md"}
	p.update(workflows.IngestProgress{})
	p.update(workflows.IngestProgress{Batches: 4, Done: 1})
	p.update(workflows.IngestProgress{Batches: 4, Done: 4})
	p.end(true)
	want := "\r[------------------------] 0/0 a.md\r[######------------------] 1/4 a.md\r[########################] 4/4 a.md\n"
	if b.String() != want {
		t.Errorf("bar output %q, want %q", b.String(), want)
	}
	b.Reset()
	p.update(workflows.IngestProgress{Batches: 4, Done: 2})
	p.end(false)
	if !strings.HasSuffix(b.String(), " failed\n") {
		t.Errorf("failed bar %q", b.String())
	}
}

func TestIsTerminal(t *testing.T) {
	if isTerminal(&bytes.Buffer{}) {
		t.Error("a buffer is a terminal")
	}
	f, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if isTerminal(f) {
		t.Error("a file is a terminal")
	}
}
