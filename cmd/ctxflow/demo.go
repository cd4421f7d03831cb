package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/ctxflow/ctxflow/demo"
	"github.com/ctxflow/ctxflow/internal/devserver"
)

// The values of CTXFLOW_DEMO_DOCS that are not a path.
const (
	demoBuiltin = "builtin" // the pages of demo/, compiled in
	demoOff     = "off"
)

// demoKB is the demo knowledge base of `ctxflow dev`: ingested once, into
// a new data dir, through the same ingestion workflows as `ctxflow ingest`.
// Once is kept by two markers under $CTXFLOW_DATA_DIR/demo: kb.pending,
// written before the embedded Temporal server creates its database, and
// kb.ingested, which replaces it when every document is in. A start that
// finds kb.pending (the first, or one after an ingestion that was cut
// short) ingests; any other start does not, so documents deleted since
// stay deleted. Re-ingesting a document replaces it (its id is its file
// name), so an ingestion cut short is simply done again.
type demoKB struct {
	source  string // CTXFLOW_DEMO_DOCS; "" when nothing is due
	dir     string // $CTXFLOW_DATA_DIR/demo
	pending string
}

// planDemo decides, before the embedded server starts, whether the demo
// knowledge base is due. A path that does not exist fails the start,
// whether it is due or not: a typo should not pass unnoticed.
func planDemo(source, dataDir string) (demoKB, error) {
	if source == demoOff {
		return demoKB{}, nil
	}
	if source != demoBuiltin {
		if _, err := os.Stat(source); err != nil {
			return demoKB{}, fmt.Errorf("CTXFLOW_DEMO_DOCS: %w (want %s, %s, or a file or directory to ingest)", err, demoBuiltin, demoOff)
		}
	}
	d := demoKB{dir: filepath.Join(dataDir, "demo")}
	d.pending = filepath.Join(d.dir, "kb.pending")
	_, err := os.Stat(filepath.Join(dataDir, "temporal", devserver.DatabaseFileName))
	switch {
	case errors.Is(err, fs.ErrNotExist): // a new data dir
		if err := os.MkdirAll(d.dir, 0o755); err != nil {
			return demoKB{}, fmt.Errorf("demo knowledge base: %w", err)
		}
		if err := os.WriteFile(d.pending, []byte(source+"\n"), 0o644); err != nil {
			return demoKB{}, fmt.Errorf("demo knowledge base: %w", err)
		}
	case err != nil:
		return demoKB{}, fmt.Errorf("demo knowledge base: %w", err)
	}
	if _, err := os.Stat(d.pending); errors.Is(err, fs.ErrNotExist) {
		return demoKB{}, nil // ingested before, or not a new data dir
	} else if err != nil {
		return demoKB{}, fmt.Errorf("demo knowledge base: %w", err)
	}
	d.source = source
	return d, nil
}

// ingest ingests the demo documents when they are due, with the workers
// running. A failure is logged, not fatal: the service works without them,
// and the next start tries again.
func (d demoKB) ingest(ctx context.Context, c client.Client, log *slog.Logger) {
	if d.source == "" {
		return
	}
	start := time.Now()
	path := d.source
	if path == demoBuiltin {
		path = filepath.Join(d.dir, "kb")
		if err := writePages(path); err != nil {
			log.Warn("demo knowledge base not ingested", "error", err)
			return
		}
	}
	var out bytes.Buffer
	if err := runIngest(ctx, c, []string{path}, &out, io.Discard); err != nil {
		log.Warn("demo knowledge base not ingested; the next start tries again (CTXFLOW_DEMO_DOCS=off turns it off)", "source", d.source, "error", err)
		return
	}
	done := filepath.Join(d.dir, "kb.ingested")
	if err := os.WriteFile(done, out.Bytes(), 0o644); err != nil {
		log.Warn("demo knowledge base ingested, but not marked so: the next start ingests it again", "error", err)
		return
	}
	if err := os.Remove(d.pending); err != nil {
		log.Warn("demo knowledge base ingested, but not marked so: the next start ingests it again", "error", err)
		return
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	log.Info("demo knowledge base ingested (CTXFLOW_DEMO_DOCS; once, into a new data dir)",
		"source", d.source, "documents", len(lines), "elapsed", time.Since(start).Round(time.Millisecond))
}

// writePages writes the built-in demo pages into dir, for the workers to
// read as they read any file given to `ctxflow ingest`.
func writePages(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("demo pages: %w", err)
	}
	pages, err := fs.Glob(demo.Pages, "*.md")
	if err != nil {
		return fmt.Errorf("demo pages: %w", err)
	}
	for _, name := range pages {
		b, err := demo.Pages.ReadFile(name)
		if err != nil {
			return fmt.Errorf("demo page %s: %w", name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return fmt.Errorf("demo page %s: %w", name, err)
		}
	}
	return nil
}
