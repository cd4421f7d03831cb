package main

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/ctxflow/ctxflow/activities/ingest"
	"github.com/ctxflow/ctxflow/workflows"
)

// runIngest ingests files (or the supported files below directories) through
// IngestWorkflow, one workflow per document. Each document's result is a
// line on out; its progress is shown on progressOut (see [progress]).
func runIngest(ctx context.Context, c client.Client, args []string, out, progressOut io.Writer) error {
	tenant, paths := workflows.DefaultTenant, args
	if len(args) > 0 && (args[0] == "--tenant" || strings.HasPrefix(args[0], "--tenant=")) {
		if t, ok := strings.CutPrefix(args[0], "--tenant="); ok {
			tenant, paths = t, args[1:]
		} else if len(args) > 1 {
			tenant, paths = args[1], args[2:]
		} else {
			return fmt.Errorf("ingest: --tenant needs a tenant")
		}
		if err := workflows.ValidateID("tenant", tenant); err != nil {
			return fmt.Errorf("ingest: %w", err)
		}
	}
	if len(paths) == 0 {
		return fmt.Errorf("ingest: name at least one file or directory")
	}
	var files []string
	for _, p := range paths {
		abs, err := filepath.Abs(p)
		if err != nil {
			return fmt.Errorf("ingest %s: %w", p, err)
		}
		err = filepath.WalkDir(abs, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() || (path != abs && !ingest.Supported(filepath.Ext(path))) {
				return nil
			}
			files = append(files, path)
			return nil
		})
		if err != nil {
			return fmt.Errorf("ingest %s: %w", p, err)
		}
	}
	tty := isTerminal(progressOut)
	for _, f := range files {
		if err := ingestFile(ctx, c, tenant, f, out, &progress{w: progressOut, tty: tty, name: filepath.Base(f)}); err != nil {
			return err
		}
	}
	return nil
}

func ingestFile(ctx context.Context, c client.Client, tenant, path string, out io.Writer, bar *progress) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("ingest %s: %w", path, err)
	}
	// The same identity as an upload of the file: one document, however
	// it was ingested.
	doc := workflows.DocumentID(filepath.Base(path), sha256.Sum256(b))
	key := workflows.DocumentKey(tenant, doc)
	run, err := c.ExecuteWorkflow(ctx, workflows.DocumentStartOptions(key, "Ingest "+filepath.Base(path), "document `"+doc+"` of tenant `"+tenant+"` from `"+path+"`"),
		workflows.IngestWorkflowName, workflows.IngestInput{DocumentID: key, Path: path, Source: filepath.Base(path), Tenant: tenant})
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &started) {
		return fmt.Errorf("ingest %s: document %s is being ingested or deleted: wait for it and try again", path, doc)
	}
	if err != nil {
		return fmt.Errorf("ingest %s: %w", path, err)
	}
	done := make(chan error, 1)
	var res workflows.IngestProgress
	go func() { done <- run.Get(ctx, &res) }()
	bar.update(workflows.IngestProgress{DocumentID: doc})
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if err != nil {
				bar.end(false)
				return fmt.Errorf("ingest %s: %w", path, err)
			}
			bar.update(res)
			bar.end(true)
			fmt.Fprintf(out, "%s: %d chunks, %d bytes\n", filepath.Base(path), res.Stored, res.Bytes)
			return nil
		case <-tick.C:
			qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			v, err := c.QueryWorkflow(qctx, run.GetID(), run.GetRunID(), workflows.QueryProgress)
			var p workflows.IngestProgress
			if err == nil && v.Get(&p) == nil {
				bar.update(p)
			}
			cancel()
		case <-ctx.Done():
			bar.end(false)
			return ctx.Err()
		}
	}
}

// progress shows one document's ingestion: on a terminal a bar redrawn in
// place; elsewhere (a log, a pipe) a plain line when the batches are known
// and then at every tenth of them, so that logs stay readable.
type progress struct {
	w     io.Writer
	tty   bool
	name  string
	shown bool // the bar is on the terminal's current line
	// reported is 1 + the tenths of the batches done at the last plain
	// line, 0 before the first.
	reported int
}

func (p *progress) update(pr workflows.IngestProgress) {
	if p.tty {
		fmt.Fprintf(p.w, "\r%s %s", bar(pr.Done, pr.Batches), p.name)
		p.shown = true
		return
	}
	if pr.Batches == 0 {
		return // not chunked yet
	}
	tenth := pr.Done * 10 / pr.Batches
	if tenth+1 == p.reported {
		return
	}
	p.reported = tenth + 1
	fmt.Fprintf(p.w, "%s: %d/%d batches (%d%%), %d chunks stored of %d\n", p.name, pr.Done, pr.Batches, pr.Done*100/pr.Batches, pr.Stored, pr.Chunks)
}

// end finishes the bar's line on a terminal.
func (p *progress) end(ok bool) {
	if p.tty && p.shown {
		if !ok {
			fmt.Fprint(p.w, " failed")
		}
		fmt.Fprintln(p.w)
		p.shown = false
	}
}

func bar(done, total int) string {
	const width = 24
	n := 0
	if total > 0 {
		n = min(done*width/total, width)
	}
	return fmt.Sprintf("[%s%s] %d/%d", strings.Repeat("#", n), strings.Repeat("-", width-n), done, total)
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
