package workflows_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.temporal.io/sdk/workflow"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/workflows"
)

func TestDeleteDocumentWorkflow(t *testing.T) {
	store := &memStore{chunks: map[string]activities.Chunk{}}
	path := writeDoc(t, 30)
	env := ingestEnv(t, store)
	env.ExecuteWorkflow(workflows.IngestWorkflowName, workflows.IngestInput{DocumentID: "doc", Path: path, BatchSize: 4})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	store.chunks["other#0"] = activities.Chunk{ID: "other#0", DocumentID: "other"}
	n := len(store.chunks)

	for range 2 { // deleting again (nothing left) succeeds too
		env = ingestEnv(t, store)
		env.RegisterWorkflowWithOptions(workflows.DeleteDocumentWorkflow, workflow.RegisterOptions{Name: workflows.DeleteDocumentWorkflowName})
		env.ExecuteWorkflow(workflows.DeleteDocumentWorkflowName, workflows.DeleteDocumentInput{DocumentID: "doc"})
		if err := env.GetWorkflowError(); err != nil {
			t.Fatal(err)
		}
		var res workflows.DeleteDocumentResult
		if err := env.GetWorkflowResult(&res); err != nil || res != (workflows.DeleteDocumentResult{DocumentID: "doc", Deleted: true}) {
			t.Fatalf("result %+v, %v", res, err)
		}
		if len(store.chunks) != 1 || store.chunks["other#0"].ID == "" {
			t.Fatalf("store holds %d chunks (had %d), want only the other document's", len(store.chunks), n)
		}
	}
}

func TestDeleteDocumentWorkflowRetriesTheStore(t *testing.T) {
	store := &flakyDelete{memStore: memStore{chunks: map[string]activities.Chunk{"doc#0": {ID: "doc#0", DocumentID: "doc"}}}, failures: 2}
	env := ingestEnv(t, store)
	env.RegisterWorkflowWithOptions(workflows.DeleteDocumentWorkflow, workflow.RegisterOptions{Name: workflows.DeleteDocumentWorkflowName})
	env.ExecuteWorkflow(workflows.DeleteDocumentWorkflowName, workflows.DeleteDocumentInput{DocumentID: "doc"})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if store.calls != 3 || len(store.chunks) != 0 {
		t.Errorf("%d delete calls, %d chunks left; want 3 calls (2 failures, retried) and none", store.calls, len(store.chunks))
	}
}

func TestIngestWorkflowPassages(t *testing.T) {
	store := &memStore{chunks: map[string]activities.Chunk{}}
	path := filepath.Join(t.TempDir(), "upload-abc.jsonl")
	body := `{"id":"p1","text":"Temporal keeps history.","title":"Temporal","url":"https://temporal.io"}` + "\n" +
		`{"id":"p2","text":"华为Mate60的价格是5999元。"}` + "\n"
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	env := ingestEnv(t, store)
	env.ExecuteWorkflow(workflows.IngestWorkflowName, workflows.IngestInput{DocumentID: "faq", Path: path, Source: "faq.jsonl"})
	var p workflows.IngestProgress
	if err := env.GetWorkflowResult(&p); err != nil {
		t.Fatal(err)
	}
	if p.Chunks != 2 || p.Stored != 2 || p.Bytes != len(body) {
		t.Errorf("progress = %+v", p)
	}
	for _, c := range store.chunks {
		if c.DocumentID != "faq" || c.Metadata["source"] != "faq.jsonl" || !strings.HasPrefix(c.ID, c.Metadata["passage"]+"#0-") {
			t.Errorf("chunk %+v", c)
		}
	}

	// A bad line fails the ingestion at once, naming the line.
	if err := os.WriteFile(path, []byte(body+`{"id":"p3","text":""}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env = ingestEnv(t, store)
	env.ExecuteWorkflow(workflows.IngestWorkflowName, workflows.IngestInput{DocumentID: "faq", Path: path, Source: "faq.jsonl"})
	err := env.GetWorkflowError()
	if !hasErrType(err, activities.CodeInvalidArgument) || !strings.Contains(err.Error(), `line 3: passage "p3" has no "text"`) {
		t.Errorf("error = %v, want a bad-input error naming line 3", err)
	}
}

// flakyDelete fails its first deletes.
type flakyDelete struct {
	memStore
	failures, calls int
}

func (s *flakyDelete) DeleteDocument(ctx context.Context, doc string) error {
	s.calls++
	if s.calls <= s.failures {
		return errors.New("store unavailable")
	}
	return s.memStore.DeleteDocument(ctx, doc)
}
