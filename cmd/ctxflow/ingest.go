package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/ctxflow/ctxflow/workflows"
)

// ingestible are the file types `ctxflow ingest` takes from a directory.
var ingestible = map[string]bool{".md": true, ".markdown": true, ".txt": true, ".html": true, ".htm": true}

// runIngest ingests files (or the supported files below directories) through
// IngestWorkflow, one workflow per document, showing a progress bar.
func runIngest(ctx context.Context, c client.Client, paths []string, out io.Writer) error {
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
			if d.IsDir() || (path != abs && !ingestible[strings.ToLower(filepath.Ext(path))]) {
				return nil
			}
			files = append(files, path)
			return nil
		})
		if err != nil {
			return fmt.Errorf("ingest %s: %w", p, err)
		}
	}
	for _, f := range files {
		if err := ingestFile(ctx, c, f, out); err != nil {
			return err
		}
	}
	return nil
}

var unsafeID = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// documentID is stable for a path: its base name (made safe) and a short
// hash of the absolute path, so re-ingesting a file replaces its chunks.
func documentID(abs string) string {
	h := sha256.Sum256([]byte(abs))
	name := strings.Trim(unsafeID.ReplaceAllString(filepath.Base(abs), "_"), "_.")
	if len(name) > 80 {
		name = name[:80]
	}
	return name + "-" + hex.EncodeToString(h[:4])
}

func ingestFile(ctx context.Context, c client.Client, path string, out io.Writer) error {
	doc := documentID(path)
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: workflows.IngestWorkflowID(doc), TaskQueue: workflows.TaskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		StaticSummary:            "Ingest " + filepath.Base(path),
		StaticDetails:            "document `" + doc + "` from `" + path + "`",
	}, workflows.IngestWorkflowName, workflows.IngestInput{DocumentID: doc, Path: path})
	if err != nil {
		return fmt.Errorf("ingest %s: %w", path, err)
	}
	done := make(chan error, 1)
	var res workflows.IngestProgress
	go func() { done <- run.Get(ctx, &res) }()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if err != nil {
				fmt.Fprintln(out)
				return fmt.Errorf("ingest %s: %w", path, err)
			}
			fmt.Fprintf(out, "\r%s %s: %d chunks, %d bytes\n", bar(res.Done, res.Batches), filepath.Base(path), res.Stored, res.Bytes)
			return nil
		case <-tick.C:
			if v, err := c.QueryWorkflow(ctx, run.GetID(), run.GetRunID(), workflows.QueryProgress); err == nil {
				var p workflows.IngestProgress
				if v.Get(&p) == nil {
					fmt.Fprintf(out, "\r%s %s", bar(p.Done, p.Batches), filepath.Base(path))
				}
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func bar(done, total int) string {
	const width = 24
	n := 0
	if total > 0 {
		n = done * width / total
	}
	return fmt.Sprintf("[%s%s] %d/%d", strings.Repeat("#", n), strings.Repeat("-", width-n), done, total)
}
