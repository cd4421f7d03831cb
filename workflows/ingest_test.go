package workflows_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/activities/ingest"
	"github.com/ctxflow/ctxflow/activities/offline"
	"github.com/ctxflow/ctxflow/activities/tiktoken"
	"github.com/ctxflow/ctxflow/lexical"
	"github.com/ctxflow/ctxflow/workflows"
)

// memStore is an in-memory VectorStore; onDelete runs after each delete.
type memStore struct {
	mu       sync.Mutex
	chunks   map[string]activities.Chunk
	upserts  int
	onDelete func()
}

func (s *memStore) Upsert(_ context.Context, cs []activities.Chunk) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range cs {
		s.chunks[c.ID] = c
	}
	s.upserts++
	return nil
}

func (s *memStore) DeleteDocument(_ context.Context, doc string) error {
	s.mu.Lock()
	for id, c := range s.chunks {
		if c.DocumentID == doc {
			delete(s.chunks, id)
		}
	}
	s.mu.Unlock()
	if s.onDelete != nil {
		s.onDelete()
	}
	return nil
}

func (s *memStore) Search(context.Context, activities.SearchRequest) ([]activities.Hit, error) {
	return nil, errors.New("not used")
}

func (s *memStore) Info(context.Context) (activities.CollectionInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return activities.CollectionInfo{Name: "mem", Count: len(s.chunks)}, nil
}

func ingestEnv(t *testing.T, store activities.VectorStore) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	tok, err := tiktoken.New("cl100k_base")
	if err != nil {
		t.Fatal(err)
	}
	env.RegisterWorkflowWithOptions(workflows.IngestWorkflow, workflow.RegisterOptions{Name: workflows.IngestWorkflowName})
	env.RegisterActivity(&activities.Ingest{
		Store: store, Embedder: &offline.Engine{}, EmbedModel: "offline",
		Parser: ingest.Parser{Tokenizer: tok, Options: ingest.ChunkOptions{MaxTokens: 40, Overlap: 8}},
	})
	return env
}

func writeDoc(t *testing.T, sentences int) string {
	t.Helper()
	var b strings.Builder
	for i := range sentences {
		fmt.Fprintf(&b, "Sentence number %d says something about ctxflow and sessions. ", i)
	}
	p := filepath.Join(t.TempDir(), "doc.md")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestIngestWorkflowStoresEveryChunkOnce(t *testing.T) {
	store := &memStore{chunks: map[string]activities.Chunk{}}
	path := writeDoc(t, 60)
	run := func() workflows.IngestProgress {
		env := ingestEnv(t, store)
		env.ExecuteWorkflow(workflows.IngestWorkflowName, workflows.IngestInput{DocumentID: "doc", Path: path, BatchSize: 4})
		if err := env.GetWorkflowError(); err != nil {
			t.Fatal(err)
		}
		var p workflows.IngestProgress
		if err := env.GetWorkflowResult(&p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	p := run()
	if p.Chunks < 10 || p.Batches != (p.Chunks+3)/4 || p.Done != p.Batches || p.Stored != p.Chunks {
		t.Fatalf("progress = %+v", p)
	}
	if len(store.chunks) != p.Chunks {
		t.Fatalf("store holds %d chunks, want %d", len(store.chunks), p.Chunks)
	}
	for _, c := range store.chunks {
		if len(c.Vector) != lexical.DefaultDim || c.DocumentID != "doc" || c.Metadata["source"] != path {
			t.Fatalf("chunk %s: %d-dim vector, doc %q, meta %v", c.ID, len(c.Vector), c.DocumentID, c.Metadata)
		}
	}
	// Again: the same chunks, replaced, not doubled.
	if again := run(); again.Chunks != p.Chunks || len(store.chunks) != p.Chunks {
		t.Fatalf("re-ingest: %+v, store %d", again, len(store.chunks))
	}
}

func TestIngestWorkflowRefusesADocumentThatChanged(t *testing.T) {
	path := writeDoc(t, 20)
	store := &memStore{chunks: map[string]activities.Chunk{}}
	store.onDelete = func() { _ = os.WriteFile(path, []byte("Rewritten meanwhile."), 0o644) }
	env := ingestEnv(t, store)
	env.ExecuteWorkflow(workflows.IngestWorkflowName, workflows.IngestInput{DocumentID: "doc", Path: path, BatchSize: 4})
	if err := env.GetWorkflowError(); !hasErrType(err, activities.CodeDocumentChanged) {
		t.Fatalf("error = %v, want %s", err, activities.CodeDocumentChanged)
	}
	if store.upserts != 0 {
		t.Errorf("%d upserts of a changed document", store.upserts)
	}
}

func TestIngestWorkflowRefusesMissingAndBrokenPDF(t *testing.T) {
	for _, path := range []string{filepath.Join(t.TempDir(), "missing.md"), writePDF(t)} {
		env := ingestEnv(t, &memStore{chunks: map[string]activities.Chunk{}})
		env.ExecuteWorkflow(workflows.IngestWorkflowName, workflows.IngestInput{DocumentID: "doc", Path: path})
		if err := env.GetWorkflowError(); !hasErrType(err, activities.CodeInvalidArgument) {
			t.Errorf("%s: error = %v, want a permanent bad-input error", path, err)
		}
	}
}

func writePDF(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "x.pdf")
	if err := os.WriteFile(p, []byte("%PDF-1.4"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// hasErrType reports whether err's chain holds an application error of typ
// (the workflow wraps its activities' errors).
func hasErrType(err error, typ string) bool {
	for err != nil {
		var ae *temporal.ApplicationError
		if !errors.As(err, &ae) {
			return false
		}
		if ae.Type() == typ {
			return true
		}
		err = errors.Unwrap(ae)
	}
	return false
}
