package activities_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"go.temporal.io/sdk/temporal"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/activities/ingest"
	"github.com/ctxflow/ctxflow/activities/offline"
	"github.com/ctxflow/ctxflow/activities/tiktoken"
	"github.com/ctxflow/ctxflow/activities/vecstore"
	"github.com/ctxflow/ctxflow/convo"
)

func newIngest(t testing.TB, opts ingest.ChunkOptions) (*activities.Ingest, *vecstore.Store) {
	t.Helper()
	tok, err := tiktoken.New("cl100k_base")
	if err != nil {
		t.Fatal(err)
	}
	store, err := vecstore.Open(vecstore.Options{Collection: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	return &activities.Ingest{Store: store, Embedder: &offline.Engine{}, Parser: ingest.Parser{Tokenizer: tok, Options: opts}, EmbedModel: offline.ModelName}, store
}

// ingestAll runs the activities the way IngestWorkflow does.
func ingestAll(ctx context.Context, a *activities.Ingest, doc, path, source string, batch int) (activities.PrepareResult, int, error) {
	prep, err := a.PrepareDocument(ctx, activities.PrepareInput{DocumentID: doc, Path: path, BatchSize: batch})
	if err != nil {
		return prep, 0, err
	}
	stored := 0
	for b := range prep.Batches {
		n, err := a.IngestBatch(ctx, activities.BatchInput{DocumentID: doc, Path: path, Hash: prep.Hash, Batch: b, BatchSize: batch, Source: source})
		if err != nil {
			return prep, stored, err
		}
		stored += n
	}
	return prep, stored, nil
}

func TestIngestPassages(t *testing.T) {
	ctx := t.Context()
	a, store := newIngest(t, ingest.ChunkOptions{MaxTokens: 48, Overlap: 8})
	path := filepath.Join(t.TempDir(), "corpus.jsonl")
	long := strings.Repeat("Temporal replays workflow history to rebuild state after a crash. ", 20)
	body := `{"id":"faq-1","text":"ctxflow keeps the context of conversations.","title":"About","url":"https://ctxflow.dev/about"}` + "\n" +
		`{"id":"faq-2","text":"` + long + `"}` + "\n"
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	prep, stored, err := ingestAll(ctx, a, "corpus", path, "corpus.jsonl", 3)
	if err != nil {
		t.Fatal(err)
	}
	if prep.Chunks < 3 || stored != prep.Chunks || prep.Bytes != len(body) {
		t.Fatalf("prepare %+v, stored %d", prep, stored)
	}
	hits, err := store.Search(ctx, activities.SearchRequest{Text: "context of conversations", Mode: activities.SearchKeyword, TopK: 1})
	if err != nil || len(hits) != 1 {
		t.Fatalf("search: %v %v", hits, err)
	}
	c := hits[0].Chunk
	if !strings.HasPrefix(c.ID, "faq-1#0-") || c.DocumentID != "corpus" || c.Text != "About\nctxflow keeps the context of conversations." {
		t.Errorf("chunk = %+v", c)
	}
	want := map[string]string{"source": "corpus.jsonl", "chunk": "0", "passage": "faq-1", "title": "About", "url": "https://ctxflow.dev/about"}
	for k, v := range want {
		if c.Metadata[k] != v {
			t.Errorf("metadata %s = %q, want %q (all: %v)", k, c.Metadata[k], v, c.Metadata)
		}
	}
	// Re-ingesting is idempotent: same ids, same count.
	info1, _ := store.Info(ctx)
	if _, _, err := ingestAll(ctx, a, "corpus", path, "corpus.jsonl", 3); err != nil {
		t.Fatal(err)
	}
	if info2, _ := store.Info(ctx); info2.Count != info1.Count || info1.Count != prep.Chunks {
		t.Errorf("count %d after the first ingestion, %d after the second, want %d", info1.Count, info2.Count, prep.Chunks)
	}
	// Delete removes them all, twice is fine.
	for range 2 {
		if err := a.DeleteDocumentChunks(ctx, activities.DeleteInput{DocumentID: "corpus"}); err != nil {
			t.Fatal(err)
		}
	}
	if info, _ := store.Info(ctx); info.Count != 0 {
		t.Errorf("%d chunks after delete", info.Count)
	}
}

func TestIngestBadPassageIsPermanent(t *testing.T) {
	a, _ := newIngest(t, ingest.ChunkOptions{})
	path := filepath.Join(t.TempDir(), "bad.jsonl")
	if err := os.WriteFile(path, []byte(`{"id":"a","text":"ok"}`+"\n"+`{"id":"b","text":42}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := a.PrepareDocument(t.Context(), activities.PrepareInput{DocumentID: "bad", Path: path, BatchSize: 8})
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) || !ae.NonRetryable() || ae.Type() != activities.CodeInvalidArgument || !strings.Contains(ae.Message(), `line 2: field "text"`) {
		t.Errorf("error = %v, want a non-retryable bad-input error naming line 2", err)
	}
}

// countingTokenizer counts the calls to Count.
type countingTokenizer struct {
	convo.Tokenizer
	calls atomic.Int64
}

func (c *countingTokenizer) Count(s string) int { c.calls.Add(1); return c.Tokenizer.Count(s) }

// A document is chunked once: the batches take its chunks from the cache,
// and a changed document is chunked again (and refused by the batches).
func TestIngestChunksOnce(t *testing.T) {
	ctx := t.Context()
	a, _ := newIngest(t, ingest.ChunkOptions{MaxTokens: 32, Overlap: 4})
	parser := a.Parser.(ingest.Parser)
	tok := &countingTokenizer{Tokenizer: parser.Tokenizer}
	parser.Tokenizer = tok
	a.Parser = parser
	path := filepath.Join(t.TempDir(), "doc.md")
	if err := os.WriteFile(path, []byte(benchDoc(20_000)), 0o644); err != nil {
		t.Fatal(err)
	}
	prep, err := a.PrepareDocument(ctx, activities.PrepareInput{DocumentID: "doc", Path: path, BatchSize: 4})
	if err != nil || prep.Batches < 10 {
		t.Fatalf("prepare: %+v %v", prep, err)
	}
	chunking := tok.calls.Load()
	for b := range prep.Batches {
		if _, err := a.IngestBatch(ctx, activities.BatchInput{DocumentID: "doc", Path: path, Hash: prep.Hash, Batch: b, BatchSize: 4}); err != nil {
			t.Fatal(err)
		}
	}
	if n := tok.calls.Load() - chunking; n != 0 {
		t.Errorf("%d batches counted %d more tokens after the prepare step's %d: chunked again", prep.Batches, n, chunking)
	}
	// Another document id is other chunks.
	if _, err := a.PrepareDocument(ctx, activities.PrepareInput{DocumentID: "doc2", Path: path, BatchSize: 4}); err != nil || tok.calls.Load() == chunking {
		t.Errorf("a second document id reused the first one's chunks (%v)", err)
	}
	// Changed bytes: refused, whatever the cache holds.
	if err := os.WriteFile(path, []byte(benchDoc(10_000)), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = a.IngestBatch(ctx, activities.BatchInput{DocumentID: "doc", Path: path, Hash: prep.Hash, Batch: 0, BatchSize: 4})
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) || ae.Type() != activities.CodeDocumentChanged {
		t.Errorf("changed document: %v", err)
	}
}

// benchDoc is about size bytes of alternating English and Chinese paragraphs.
func benchDoc(size int) string {
	en := "Temporal workflows keep the state of every conversation durable, so that a worker crash loses nothing. " +
		"Each turn rewrites the question, retrieves documents and generates an answer within a token budget. "
	zh := "华为Mate60的价格是5999元，它搭载麒麟9000S处理器。会话工作流在工作进程崩溃后会从历史中恢复状态，不会丢失任何消息。" +
		"检索增强生成先改写问题，再检索相关文档，最后在令牌预算内生成回答。"
	var b strings.Builder
	for i := 0; b.Len() < size; i++ {
		fmt.Fprintf(&b, "Section %d. %s\n%s\n\n", i, en, zh)
	}
	return b.String()
}

// BenchmarkIngest measures ingestion throughput (MB/s) of a ~1 MB zh+en
// markdown document with the offline embedder and the embedded vector
// store (in memory), default chunking (256 tokens, 32 overlap) and the
// workflow's default batch size (32 chunks):
//
//   - pipeline: the activities as IngestWorkflow runs them (prepare, then
//     every batch; each activity reads and hashes the document again and
//     takes its chunks from the worker's cache);
//   - read+chunk, embed, upsert: each stage alone, once over the document.
func BenchmarkIngest(b *testing.B) {
	const batch = 32
	text := benchDoc(1 << 20)
	path := filepath.Join(b.TempDir(), "bench.md")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()

	b.Run("pipeline", func(b *testing.B) {
		a, _ := newIngest(b, ingest.ChunkOptions{})
		b.SetBytes(int64(len(text)))
		var chunks int
		for b.Loop() {
			// A fresh worker each time: its chunk cache starts empty (the
			// store keeps the chunks, so each ingestion replaces them).
			a := &activities.Ingest{Store: a.Store, Embedder: a.Embedder, Parser: a.Parser, EmbedModel: a.EmbedModel}
			prep, stored, err := ingestAll(ctx, a, "bench", path, "bench.md", batch)
			if err != nil || stored != prep.Chunks {
				b.Fatalf("stored %d of %d: %v", stored, prep.Chunks, err)
			}
			chunks = prep.Chunks
		}
		b.ReportMetric(float64(chunks), "chunks")
	})

	a, _ := newIngest(b, ingest.ChunkOptions{})
	var pieces []ingest.Piece
	b.Run("read+chunk", func(b *testing.B) {
		b.SetBytes(int64(len(text)))
		for b.Loop() {
			raw, err := os.ReadFile(path)
			if err != nil {
				b.Fatal(err)
			}
			doc, err := ingest.ParseDocument(filepath.Ext(path), raw)
			if err != nil {
				b.Fatal(err)
			}
			if pieces, err = doc.Pieces("bench", a.Parser.(ingest.Parser).Tokenizer, ingest.ChunkOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	texts := make([]string, len(pieces))
	for i, p := range pieces {
		texts[i] = p.Text
	}
	var vectors [][]float32
	b.Run("embed", func(b *testing.B) {
		b.SetBytes(int64(len(text)))
		for b.Loop() {
			var err error
			if vectors, err = a.Embedder.Embed(ctx, offline.ModelName, texts); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("upsert", func(b *testing.B) {
		b.SetBytes(int64(len(text)))
		chunks := make([]activities.Chunk, len(pieces))
		for i, p := range pieces {
			chunks[i] = activities.Chunk{ID: p.ID, DocumentID: "bench", Text: p.Text, Vector: vectors[i], Metadata: map[string]string{"source": "bench.md"}}
		}
		for b.Loop() {
			for lo := 0; lo < len(chunks); lo += batch {
				if err := a.Store.Upsert(ctx, chunks[lo:min(lo+batch, len(chunks))]); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}

// TestIngestAdaptsToTheCollectionDimension: a collection built with the
// offline embedder (384 dimensions) is fed by it, not by a configured
// embedder of another dimension; with no match the batch fails for good,
// naming both dimensions.
func TestIngestAdaptsToTheCollectionDimension(t *testing.T) {
	ctx := context.Background()
	a, store := newIngest(t, ingest.ChunkOptions{})
	vs, _ := (&offline.Engine{}).Embed(ctx, offline.ModelName, []string{"seed"})
	if err := store.Upsert(ctx, []activities.Chunk{{ID: "seed", DocumentID: "seed", Text: "seed", Vector: vs[0]}}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "doc.md")
	if err := os.WriteFile(path, []byte("The Pixel 8 costs 699 dollars. It weighs 187 grams."), 0o644); err != nil {
		t.Fatal(err)
	}
	a.Embedder, a.EmbedModel = wideEmbedder{}, "bge-m3"
	a.Alternatives = []activities.NamedEmbedder{{Embedder: &offline.Engine{}, Model: offline.ModelName}}
	prep, err := a.PrepareDocument(ctx, activities.PrepareInput{DocumentID: "doc", Path: path, BatchSize: 8})
	if err != nil {
		t.Fatal(err)
	}
	n, err := a.IngestBatch(ctx, activities.BatchInput{DocumentID: "doc", Path: path, Hash: prep.Hash, Batch: 0, BatchSize: 8})
	if err != nil || n != prep.Chunks {
		t.Fatalf("IngestBatch = %d, %v; want %d chunks through the offline embedder", n, err, prep.Chunks)
	}

	a.Alternatives = nil
	_, err = a.IngestBatch(ctx, activities.BatchInput{DocumentID: "doc", Path: path, Hash: prep.Hash, Batch: 0, BatchSize: 8})
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || !appErr.NonRetryable() || !strings.Contains(err.Error(), "dimension 384") || !strings.Contains(err.Error(), "bge-m3 (1024)") {
		t.Fatalf("error = %v, want a permanent dimension error naming both", err)
	}
}

// wideEmbedder embeds in 1024 dimensions, like bge-m3.
type wideEmbedder struct{}

func (wideEmbedder) Embed(_ context.Context, _ string, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i := range out {
		out[i] = make([]float32, 1024)
		out[i][0] = 1
	}
	return out, nil
}
