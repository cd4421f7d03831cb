package vecstore

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/activities/vectorstoretest"
)

func openT(t *testing.T, opts Options) *Store {
	t.Helper()
	s, err := Open(opts)
	if err != nil {
		t.Fatalf("Open(%+v): %v", opts, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func TestConformanceMemory(t *testing.T) {
	vectorstoretest.Run(t, func(t *testing.T, dim int) activities.VectorStore {
		return openT(t, Options{Collection: "mem", Dimension: dim})
	})
}

func TestConformanceDisk(t *testing.T) {
	vectorstoretest.Run(t, func(t *testing.T, dim int) activities.VectorStore {
		return openT(t, Options{Dir: t.TempDir(), Collection: "disk", Dimension: dim})
	})
}

func TestConformanceLearntDimension(t *testing.T) {
	vectorstoretest.Run(t, func(t *testing.T, dim int) activities.VectorStore {
		return openT(t, Options{Dir: t.TempDir(), Collection: "learnt 学习/x"})
	})
}

func TestReopen(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(Options{Dir: dir, Collection: "kb"})
	if err != nil {
		t.Fatal(err)
	}
	chunks := []activities.Chunk{
		{ID: "a", DocumentID: "d1", Text: "华为Mate60的价格是5999元", Vector: []float32{1, 0, 0}, Metadata: map[string]string{"lang": "zh"}},
		{ID: "b", DocumentID: "d1", Text: "retry with backoff", Vector: []float32{0, 1, 0}},
		{ID: "c", DocumentID: "d2", Text: "zero vector chunk", Vector: []float32{0, 0, 0}},
		{ID: "d", DocumentID: "d3", Text: "to be deleted", Vector: []float32{0, 0, 1}},
	}
	if err := s.Upsert(ctx, chunks); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteDocument(ctx, "d3"); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := s.Info(ctx); !errors.Is(err, ErrClosed) {
		t.Errorf("Info after Close: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "kb", "dirty")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("dirty marker left after Close: %v", err)
	}

	check := func(s *Store) {
		t.Helper()
		info, err := s.Info(ctx)
		if err != nil || info != (activities.CollectionInfo{Name: "kb", Dimension: 3, Count: 3}) {
			t.Fatalf("Info after reopen: %+v, %v", info, err)
		}
		hits, err := s.Search(ctx, activities.SearchRequest{Mode: activities.SearchKeyword, Text: "华为Mate60价格", TopK: 1})
		if err != nil || len(hits) != 1 || hits[0].Chunk.ID != "a" || hits[0].Chunk.Metadata["lang"] != "zh" || hits[0].Chunk.DocumentID != "d1" {
			t.Fatalf("keyword after reopen: %+v, %v", hits, err)
		}
		hits, err = s.Search(ctx, activities.SearchRequest{Mode: activities.SearchDense, Vector: []float32{0, 2, 0}, TopK: 5})
		if err != nil || len(hits) != 2 || hits[0].Chunk.ID != "b" {
			t.Fatalf("dense after reopen: %+v, %v", hits, err)
		}
		if err := s.DeleteDocument(ctx, "d1"); err != nil {
			t.Fatal(err)
		}
		if info, _ := s.Info(ctx); info.Count != 1 {
			t.Fatalf("delete by document after reopen left %d chunks", info.Count)
		}
		if err := s.Upsert(ctx, chunks[:2]); err != nil {
			t.Fatal(err)
		}
	}
	s2 := openT(t, Options{Dir: dir, Collection: "kb"})
	check(s2)
	if _, err := Open(Options{Dir: dir, Collection: "kb"}); err == nil {
		t.Fatal("opening an open collection twice succeeded")
	}
	// Simulate a crash: the dirty marker survives, so the keyword index is
	// rebuilt from the vectors.
	if err := s2.text.Close(); err != nil {
		t.Fatal(err)
	}
	s2.release()
	s2.closed = true
	if _, err := os.Stat(filepath.Join(dir, "kb", "dirty")); err != nil {
		t.Fatalf("dirty marker missing after writes: %v", err)
	}
	s3 := openT(t, Options{Dir: dir, Collection: "kb"})
	check(s3)

	// The dimension is fixed even when the collection is empty.
	if err := s3.DeleteDocument(ctx, "d1"); err != nil {
		t.Fatal(err)
	}
	if err := s3.DeleteDocument(ctx, "d2"); err != nil {
		t.Fatal(err)
	}
	if err := s3.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = Open(Options{Dir: dir, Collection: "kb", Dimension: 384})
	if !errors.Is(err, ErrDimension) {
		t.Fatalf("reopening with another dimension: %v, want ErrDimension", err)
	}
	s4 := openT(t, Options{Dir: dir, Collection: "kb"})
	err = s4.Upsert(ctx, []activities.Chunk{{ID: "x", DocumentID: "d", Text: "x", Vector: make([]float32, 384)}})
	if !errors.Is(err, ErrDimension) {
		t.Fatalf("upsert of another dimension into the emptied collection: %v, want ErrDimension", err)
	}
	t.Log(err)
}

func TestDimensionErrors(t *testing.T) {
	ctx := context.Background()
	s := openT(t, Options{Dimension: 4})
	err := s.Upsert(ctx, []activities.Chunk{{ID: "a", Vector: make([]float32, 3)}})
	if !errors.Is(err, ErrDimension) {
		t.Fatalf("Upsert: %v, want ErrDimension", err)
	}
	if err := s.Upsert(ctx, []activities.Chunk{{ID: "a", Vector: []float32{1, 0, 0, 0}}}); err != nil {
		t.Fatal(err)
	}
	_, err = s.Search(ctx, activities.SearchRequest{Mode: activities.SearchDense, Vector: make([]float32, 3)})
	if !errors.Is(err, ErrDimension) {
		t.Fatalf("Search: %v, want ErrDimension", err)
	}
	// Mixed dimensions in the first batch of a learning store.
	l := openT(t, Options{})
	err = l.Upsert(ctx, []activities.Chunk{{ID: "a", Vector: []float32{1, 0}}, {ID: "b", Vector: []float32{1, 0, 0}}})
	if !errors.Is(err, ErrDimension) {
		t.Fatalf("mixed batch: %v, want ErrDimension", err)
	}
	if info, _ := l.Info(ctx); info.Dimension != 0 || info.Count != 0 {
		t.Fatalf("a refused batch fixed the dimension: %+v", info)
	}
}

func TestSearchModes(t *testing.T) {
	ctx := context.Background()
	s := openT(t, Options{Dimension: 2})
	if err := s.Upsert(ctx, []activities.Chunk{{ID: "a", Text: "hello", Vector: []float32{1, 0}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Search(ctx, activities.SearchRequest{Mode: "fuzzy", Text: "hello"}); err == nil {
		t.Error("unknown mode accepted")
	}
	if _, err := s.Search(ctx, activities.SearchRequest{Mode: activities.SearchDense, Text: "hello"}); err == nil {
		t.Error("dense search without a vector accepted")
	}
	for _, req := range []activities.SearchRequest{{Text: "hello"}, {Vector: []float32{1, 0}}, {Text: "hello", Vector: []float32{1, 0}}} {
		hits, err := s.Search(ctx, req)
		if err != nil || len(hits) != 1 {
			t.Errorf("Search(%+v) with the default mode: %v, %v", req, hits, err)
		}
	}
}
