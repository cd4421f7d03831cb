// Package vectorstoretest is the conformance suite every
// activities.VectorStore implementation runs: the same assertions for the
// embedded store, Milvus and any test double.
package vectorstoretest

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/ctxflow/ctxflow/activities"
)

// Run runs the suite. open must return a new, empty store whose collection
// has dimension dim (or learns it from the first upsert), and arrange for
// it to be released when t ends.
func Run(t *testing.T, open func(t *testing.T, dim int) activities.VectorStore) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, open func(t *testing.T, dim int) activities.VectorStore)
	}{
		{"EmptySearch", testEmptySearch},
		{"UpsertReplace", testUpsertReplace},
		{"DeleteDocument", testDeleteDocument},
		{"DenseRanking", testDenseRanking},
		{"KeywordEnglish", testKeywordEnglish},
		{"KeywordChinese", testKeywordChinese},
		{"Hybrid", testHybrid},
		{"TopK", testTopK},
		{"MinScore", testMinScore},
		{"Filter", testFilter},
		{"Info", testInfo},
		{"DimensionMismatch", testDimensionMismatch},
		{"ZeroVector", testZeroVector},
		{"Concurrency", testConcurrency},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open) })
	}
}

var ctx = context.Background()

// vec returns a dim-dimensional vector with the given leading components.
func vec(dim int, xs ...float32) []float32 {
	v := make([]float32, dim)
	copy(v, xs)
	return v
}

// axis returns the unit vector along axis i.
func axis(dim, i int) []float32 {
	v := make([]float32, dim)
	v[i%dim] = 1
	return v
}

func upsert(t *testing.T, s activities.VectorStore, chunks ...activities.Chunk) {
	t.Helper()
	if err := s.Upsert(ctx, chunks); err != nil {
		t.Fatalf("Upsert: %v", err)
	}
}

func search(t *testing.T, s activities.VectorStore, req activities.SearchRequest) []activities.Hit {
	t.Helper()
	hits, err := s.Search(ctx, req)
	if err != nil {
		t.Fatalf("Search(%+v): %v", req, err)
	}
	checkHits(t, req, hits)
	return hits
}

// checkHits asserts what holds for every result: scores finite, ordered,
// at least MinScore (0 meaning no minimum), at most TopK, ids unique, filter respected.
func checkHits(t *testing.T, req activities.SearchRequest, hits []activities.Hit) {
	t.Helper()
	seen := map[string]bool{}
	for i, h := range hits {
		if math.IsNaN(h.Score) || math.IsInf(h.Score, 0) {
			t.Errorf("hit %d (%s) has score %v", i, h.Chunk.ID, h.Score)
		}
		if i > 0 && h.Score > hits[i-1].Score {
			t.Errorf("hits not ordered by score: %v then %v", hits[i-1].Score, h.Score)
		}
		if req.MinScore != 0 && h.Score < req.MinScore {
			t.Errorf("hit %s scores %v < MinScore %v", h.Chunk.ID, h.Score, req.MinScore)
		}
		if seen[h.Chunk.ID] {
			t.Errorf("hit %s returned twice", h.Chunk.ID)
		}
		seen[h.Chunk.ID] = true
		for k, v := range req.Filter {
			if got, ok := h.Chunk.Metadata[k]; !ok || got != v {
				t.Errorf("hit %s has metadata %v, filter %v", h.Chunk.ID, h.Chunk.Metadata, req.Filter)
			}
		}
	}
	if req.TopK > 0 && len(hits) > req.TopK {
		t.Errorf("%d hits > TopK %d", len(hits), req.TopK)
	}
}

func ids(hits []activities.Hit) []string {
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = h.Chunk.ID
	}
	return out
}

func contains(hits []activities.Hit, id string) bool {
	for _, h := range hits {
		if h.Chunk.ID == id {
			return true
		}
	}
	return false
}

func count(t *testing.T, s activities.VectorStore) int {
	t.Helper()
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatalf("Info: %v", err)
	}
	return info.Count
}

func testEmptySearch(t *testing.T, open func(t *testing.T, dim int) activities.VectorStore) {
	s := open(t, 4)
	for _, mode := range []activities.SearchMode{activities.SearchDense, activities.SearchKeyword, activities.SearchHybrid} {
		hits := search(t, s, activities.SearchRequest{Mode: mode, Vector: axis(4, 0), Text: "anything 任何", TopK: 5})
		if len(hits) != 0 {
			t.Errorf("%s search of an empty store: %v", mode, ids(hits))
		}
	}
	if n := count(t, s); n != 0 {
		t.Errorf("empty store counts %d", n)
	}
}

func testUpsertReplace(t *testing.T, open func(t *testing.T, dim int) activities.VectorStore) {
	s := open(t, 4)
	upsert(t, s,
		activities.Chunk{ID: "a", DocumentID: "d1", Text: "alpha original", Vector: axis(4, 0)},
		activities.Chunk{ID: "b", DocumentID: "d1", Text: "beta", Vector: axis(4, 1)},
	)
	if n := count(t, s); n != 2 {
		t.Fatalf("count %d, want 2", n)
	}
	upsert(t, s, activities.Chunk{ID: "a", DocumentID: "d1", Text: "alpha replaced", Vector: axis(4, 2), Metadata: map[string]string{"v": "2"}})
	if n := count(t, s); n != 2 {
		t.Fatalf("count after replace %d, want 2", n)
	}
	hits := search(t, s, activities.SearchRequest{Mode: activities.SearchDense, Vector: axis(4, 2), TopK: 1})
	if len(hits) != 1 || hits[0].Chunk.ID != "a" || hits[0].Chunk.Text != "alpha replaced" || hits[0].Chunk.DocumentID != "d1" || hits[0].Chunk.Metadata["v"] != "2" {
		t.Fatalf("after replace, dense search finds %+v", hits)
	}
	if math.Abs(hits[0].Score-1) > 1e-4 {
		t.Errorf("identical vector scores %v, want 1", hits[0].Score)
	}
	if hits := search(t, s, activities.SearchRequest{Mode: activities.SearchKeyword, Text: "original", TopK: 5}); len(hits) != 0 {
		t.Errorf("replaced text still found: %v", ids(hits))
	}
	if hits := search(t, s, activities.SearchRequest{Mode: activities.SearchKeyword, Text: "replaced", TopK: 5}); len(hits) != 1 || hits[0].Chunk.ID != "a" {
		t.Errorf("new text not found: %v", ids(hits))
	}
	// Same id twice in one batch: one chunk.
	upsert(t, s,
		activities.Chunk{ID: "c", DocumentID: "d2", Text: "first", Vector: axis(4, 3)},
		activities.Chunk{ID: "c", DocumentID: "d2", Text: "second", Vector: axis(4, 3)},
	)
	if n := count(t, s); n != 3 {
		t.Errorf("count %d after a batch with a repeated id, want 3", n)
	}
}

func testDeleteDocument(t *testing.T, open func(t *testing.T, dim int) activities.VectorStore) {
	s := open(t, 4)
	upsert(t, s,
		activities.Chunk{ID: "d1-0", DocumentID: "d1", Text: "shared words one", Vector: axis(4, 0)},
		activities.Chunk{ID: "d1-1", DocumentID: "d1", Text: "shared words two", Vector: axis(4, 1)},
		activities.Chunk{ID: "d2-0", DocumentID: "d2", Text: "shared words three", Vector: axis(4, 2)},
	)
	if err := s.DeleteDocument(ctx, "d1"); err != nil {
		t.Fatalf("DeleteDocument: %v", err)
	}
	if n := count(t, s); n != 1 {
		t.Errorf("count %d after delete, want 1", n)
	}
	for _, mode := range []activities.SearchMode{activities.SearchDense, activities.SearchKeyword, activities.SearchHybrid} {
		hits := search(t, s, activities.SearchRequest{Mode: mode, Vector: axis(4, 0), Text: "shared words", TopK: 10})
		if len(hits) != 1 || hits[0].Chunk.ID != "d2-0" {
			t.Errorf("%s after delete: %v, want [d2-0]", mode, ids(hits))
		}
	}
	if err := s.DeleteDocument(ctx, "nope"); err != nil {
		t.Errorf("deleting an unknown document: %v", err)
	}
	// A chunk id moved to another document belongs to the new one only.
	upsert(t, s, activities.Chunk{ID: "d2-0", DocumentID: "d3", Text: "moved", Vector: axis(4, 2)})
	if err := s.DeleteDocument(ctx, "d2"); err != nil {
		t.Fatal(err)
	}
	if n := count(t, s); n != 1 {
		t.Errorf("deleting the old document removed a moved chunk: count %d", n)
	}
	if err := s.DeleteDocument(ctx, "d3"); err != nil {
		t.Fatal(err)
	}
	if n := count(t, s); n != 0 {
		t.Errorf("count %d, want 0", n)
	}
}

func testDenseRanking(t *testing.T, open func(t *testing.T, dim int) activities.VectorStore) {
	s := open(t, 4)
	upsert(t, s,
		activities.Chunk{ID: "far", DocumentID: "d", Text: "x", Vector: vec(4, 0, 0, 1, 0)},
		activities.Chunk{ID: "near", DocumentID: "d", Text: "x", Vector: vec(4, 1, 0.2, 0, 0)},
		activities.Chunk{ID: "exact", DocumentID: "d", Text: "x", Vector: vec(4, 2, 0, 0, 0)}, // not unit: cosine ignores length
		activities.Chunk{ID: "mid", DocumentID: "d", Text: "x", Vector: vec(4, 1, 1, 0, 0)},
		activities.Chunk{ID: "opposite", DocumentID: "d", Text: "x", Vector: vec(4, -1, 0, 0, 0)},
	)
	hits := search(t, s, activities.SearchRequest{Mode: activities.SearchDense, Vector: vec(4, 3, 0, 0, 0), TopK: 5})
	want := []string{"exact", "near", "mid", "far", "opposite"}
	if got := ids(hits); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("dense order %v, want %v", got, want)
	}
	wantScores := []float64{1, 1 / math.Sqrt(1.04), 1 / math.Sqrt(2), 0, -1}
	for i, h := range hits {
		if math.Abs(h.Score-wantScores[i]) > 1e-4 {
			t.Errorf("%s scores %v, want cosine %v", h.Chunk.ID, h.Score, wantScores[i])
		}
	}
}

func textCorpus(dim int) []activities.Chunk {
	texts := []string{
		"Temporal workflows retry failed activities with exponential backoff.",
		"The weather in Paris is mild in spring.",
		"Go channels synchronise goroutines; a workflow is not a goroutine.",
		"华为Mate60的价格是5999元，比上一代贵。",
		"苹果iPhone15的价格在中国是5999元起。",
		"华为公司成立于1987年，总部在深圳。",
		"今天北京的天气很好，适合出去散步。",
		"Retry policies: maximum attempts, backoff coefficient, non-retryable errors.",
	}
	out := make([]activities.Chunk, len(texts))
	for i, tx := range texts {
		lang := "en"
		if strings.ContainsFunc(tx, func(r rune) bool { return r >= 0x4e00 && r <= 0x9fff }) {
			lang = "zh"
		}
		out[i] = activities.Chunk{
			ID: fmt.Sprintf("t%d", i), DocumentID: "doc-" + lang, Text: tx, Vector: axis(dim, i),
			Metadata: map[string]string{"lang": lang, "n": strconv.Itoa(i)},
		}
	}
	return out
}

func testKeywordEnglish(t *testing.T, open func(t *testing.T, dim int) activities.VectorStore) {
	s := open(t, 8)
	upsert(t, s, textCorpus(8)...)
	hits := search(t, s, activities.SearchRequest{Mode: activities.SearchKeyword, Text: "retry backoff", TopK: 3})
	if len(hits) < 2 {
		t.Fatalf("keyword hits %v, want t7 and t0", ids(hits))
	}
	top := map[string]bool{hits[0].Chunk.ID: true, hits[1].Chunk.ID: true}
	if !top["t0"] || !top["t7"] {
		t.Errorf("keyword top two %v, want t0 and t7", ids(hits))
	}
	for _, h := range hits {
		if h.Score <= 0 {
			t.Errorf("keyword hit %s scores %v", h.Chunk.ID, h.Score)
		}
	}
	hits = search(t, s, activities.SearchRequest{Mode: activities.SearchKeyword, Text: "weather Paris", TopK: 3})
	if len(hits) == 0 || hits[0].Chunk.ID != "t1" {
		t.Errorf("keyword 'weather Paris' → %v, want t1 first", ids(hits))
	}
	if hits := search(t, s, activities.SearchRequest{Mode: activities.SearchKeyword, Text: "xylophone", TopK: 3}); len(hits) != 0 {
		t.Errorf("unrelated word found %v", ids(hits))
	}
}

func testKeywordChinese(t *testing.T, open func(t *testing.T, dim int) activities.VectorStore) {
	s := open(t, 8)
	upsert(t, s, textCorpus(8)...)
	hits := search(t, s, activities.SearchRequest{Mode: activities.SearchKeyword, Text: "华为Mate60价格", TopK: 3})
	if len(hits) == 0 || hits[0].Chunk.ID != "t3" {
		t.Fatalf("keyword 华为Mate60价格 → %v, want t3 first", ids(hits))
	}
	hits = search(t, s, activities.SearchRequest{Mode: activities.SearchKeyword, Text: "北京天气", TopK: 3})
	if len(hits) == 0 || hits[0].Chunk.ID != "t6" {
		t.Errorf("keyword 北京天气 → %v, want t6 first", ids(hits))
	}
	hits = search(t, s, activities.SearchRequest{Mode: activities.SearchKeyword, Text: "华为总部在哪里", TopK: 3})
	if len(hits) == 0 || hits[0].Chunk.ID != "t5" {
		t.Errorf("keyword 华为总部在哪里 → %v, want t5 first", ids(hits))
	}
}

func testHybrid(t *testing.T, open func(t *testing.T, dim int) activities.VectorStore) {
	s := open(t, 8)
	upsert(t, s, textCorpus(8)...)
	// Dense best: t2 (its axis); keyword best: t3. Each list's best scores
	// 1/61 at least, and only chunks found by both lists can outrank it:
	// here the three keyword matches, so TopK 4 must hold both bests.
	req := activities.SearchRequest{Mode: activities.SearchHybrid, Vector: axis(8, 2), Text: "华为Mate60价格", TopK: 4}
	hits := search(t, s, req)
	if !contains(hits, "t2") || !contains(hits, "t3") {
		t.Errorf("hybrid %v lacks the dense best t2 or the keyword best t3", ids(hits))
	}
	for _, h := range hits {
		if h.Score <= 0 || h.Score > 2.0/61+1e-9 {
			t.Errorf("hybrid hit %s scores %v, not an RRF score", h.Chunk.ID, h.Score)
		}
	}
	// A chunk best in both lists comes first.
	hits = search(t, s, activities.SearchRequest{Mode: activities.SearchHybrid, Vector: axis(8, 3), Text: "华为Mate60价格", TopK: 3})
	if len(hits) == 0 || hits[0].Chunk.ID != "t3" {
		t.Errorf("hybrid with agreeing lists → %v, want t3 first", ids(hits))
	}
}

func testTopK(t *testing.T, open func(t *testing.T, dim int) activities.VectorStore) {
	s := open(t, 8)
	var chunks []activities.Chunk
	for i := range 20 {
		chunks = append(chunks, activities.Chunk{
			ID: fmt.Sprintf("c%02d", i), DocumentID: "d", Text: "common word number " + strconv.Itoa(i),
			Vector: vec(8, 1, float32(i)/10),
		})
	}
	upsert(t, s, chunks...)
	for _, mode := range []activities.SearchMode{activities.SearchDense, activities.SearchKeyword, activities.SearchHybrid} {
		for _, k := range []int{1, 3, 20, 50} {
			hits := search(t, s, activities.SearchRequest{Mode: mode, Vector: axis(8, 0), Text: "common word", TopK: k})
			if want := min(k, 20); len(hits) != want {
				t.Errorf("%s TopK %d: %d hits, want %d", mode, k, len(hits), want)
			}
		}
	}
	hits := search(t, s, activities.SearchRequest{Mode: activities.SearchDense, Vector: axis(8, 0), TopK: 3})
	if strings.Join(ids(hits), ",") != "c00,c01,c02" {
		t.Errorf("dense TopK 3: %v, want c00,c01,c02", ids(hits))
	}
}

func testMinScore(t *testing.T, open func(t *testing.T, dim int) activities.VectorStore) {
	s := open(t, 4)
	upsert(t, s,
		activities.Chunk{ID: "same", DocumentID: "d", Text: "apple banana", Vector: vec(4, 1, 0)},
		activities.Chunk{ID: "close", DocumentID: "d", Text: "apple", Vector: vec(4, 1, 0.5)},
		activities.Chunk{ID: "orth", DocumentID: "d", Text: "cherry", Vector: vec(4, 0, 1)},
	)
	hits := search(t, s, activities.SearchRequest{Mode: activities.SearchDense, Vector: vec(4, 1, 0), TopK: 10, MinScore: 0.8})
	if strings.Join(ids(hits), ",") != "same,close" {
		t.Errorf("dense MinScore 0.8: %v, want same,close", ids(hits))
	}
	hits = search(t, s, activities.SearchRequest{Mode: activities.SearchDense, Vector: vec(4, 1, 0), TopK: 10, MinScore: 0.99})
	if strings.Join(ids(hits), ",") != "same" {
		t.Errorf("dense MinScore 0.99: %v, want same", ids(hits))
	}
	all := search(t, s, activities.SearchRequest{Mode: activities.SearchKeyword, Text: "apple banana", TopK: 10})
	if len(all) != 2 {
		t.Fatalf("keyword: %v, want two hits", ids(all))
	}
	hits = search(t, s, activities.SearchRequest{Mode: activities.SearchKeyword, Text: "apple banana", TopK: 10, MinScore: all[0].Score})
	if strings.Join(ids(hits), ",") != "same" {
		t.Errorf("keyword MinScore = best score: %v, want same", ids(hits))
	}
	hits = search(t, s, activities.SearchRequest{Mode: activities.SearchHybrid, Vector: vec(4, 1, 0), Text: "apple banana", TopK: 10, MinScore: 2.0/61 - 1e-9})
	if strings.Join(ids(hits), ",") != "same" {
		t.Errorf("hybrid MinScore 2/61: %v, want same", ids(hits))
	}
}

func testFilter(t *testing.T, open func(t *testing.T, dim int) activities.VectorStore) {
	s := open(t, 8)
	upsert(t, s, textCorpus(8)...)
	for _, mode := range []activities.SearchMode{activities.SearchDense, activities.SearchKeyword, activities.SearchHybrid} {
		req := activities.SearchRequest{Mode: mode, Vector: axis(8, 3), Text: "华为Mate60价格 retry", TopK: 10, Filter: map[string]string{"lang": "en"}}
		hits := search(t, s, req)
		if len(hits) == 0 {
			t.Errorf("%s with filter lang=en: no hits", mode)
		}
		if contains(hits, "t3") {
			t.Errorf("%s with filter lang=en returned t3", mode)
		}
		req.Filter = map[string]string{"lang": "zh", "n": "3"}
		hits = search(t, s, req)
		if len(hits) != 1 || hits[0].Chunk.ID != "t3" {
			t.Errorf("%s with filter lang=zh,n=3: %v, want [t3]", mode, ids(hits))
		}
		req.Filter = map[string]string{"lang": "fr"}
		if hits := search(t, s, req); len(hits) != 0 {
			t.Errorf("%s with filter lang=fr: %v", mode, ids(hits))
		}
		req.Filter = map[string]string{"missing": ""}
		if hits := search(t, s, req); len(hits) != 0 {
			t.Errorf("%s with a filter on a missing key: %v", mode, ids(hits))
		}
	}
}

func testInfo(t *testing.T, open func(t *testing.T, dim int) activities.VectorStore) {
	s := open(t, 8)
	upsert(t, s, textCorpus(8)...)
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Name == "" || info.Dimension != 8 || info.Count != 8 {
		t.Errorf("Info %+v, want a name, dimension 8, count 8", info)
	}
}

func testDimensionMismatch(t *testing.T, open func(t *testing.T, dim int) activities.VectorStore) {
	s := open(t, 4)
	upsert(t, s, activities.Chunk{ID: "ok", DocumentID: "d", Text: "fine", Vector: axis(4, 0)})
	err := s.Upsert(ctx, []activities.Chunk{
		{ID: "ok2", DocumentID: "d", Text: "fine", Vector: axis(4, 1)},
		{ID: "bad", DocumentID: "d", Text: "wrong", Vector: make([]float32, 7)},
	})
	if err == nil {
		t.Fatal("upserting a 7-dimensional vector into a 4-dimensional collection succeeded")
	}
	if msg := err.Error(); !strings.Contains(msg, "4") || !strings.Contains(msg, "7") {
		t.Errorf("mismatch error %q does not name both dimensions", msg)
	}
	if n := count(t, s); n != 1 {
		t.Errorf("a refused batch changed the count to %d", n)
	}
	for _, mode := range []activities.SearchMode{activities.SearchDense, activities.SearchHybrid} {
		_, err = s.Search(ctx, activities.SearchRequest{Mode: mode, Vector: axis(7, 0), Text: "fine", TopK: 3})
		if err == nil {
			t.Errorf("%s search with a 7-dimensional query succeeded", mode)
		} else if msg := err.Error(); !strings.Contains(msg, "4") || !strings.Contains(msg, "7") {
			t.Errorf("mismatch error %q does not name both dimensions", msg)
		}
	}
}

func testZeroVector(t *testing.T, open func(t *testing.T, dim int) activities.VectorStore) {
	s := open(t, 4)
	upsert(t, s,
		activities.Chunk{ID: "zero", DocumentID: "d", Text: "empty embedding", Vector: make([]float32, 4)},
		activities.Chunk{ID: "one", DocumentID: "d", Text: "real embedding", Vector: axis(4, 0)},
	)
	if n := count(t, s); n != 2 {
		t.Errorf("count %d, want 2", n)
	}
	hits := search(t, s, activities.SearchRequest{Mode: activities.SearchDense, Vector: axis(4, 0), TopK: 5})
	if len(hits) == 0 || hits[0].Chunk.ID != "one" {
		t.Errorf("dense with a stored zero vector: %v", ids(hits))
	}
	// A zero query vector must not crash nor yield NaN scores.
	search(t, s, activities.SearchRequest{Mode: activities.SearchDense, Vector: make([]float32, 4), TopK: 5})
	hits = search(t, s, activities.SearchRequest{Mode: activities.SearchHybrid, Vector: make([]float32, 4), Text: "empty embedding", TopK: 5})
	if len(hits) == 0 || hits[0].Chunk.ID != "zero" {
		t.Errorf("hybrid with a zero query vector: %v, want zero first by keyword", ids(hits))
	}
}

func testConcurrency(t *testing.T, open func(t *testing.T, dim int) activities.VectorStore) {
	s := open(t, 8)
	upsert(t, s, textCorpus(8)...)
	const workers = 8
	var wg sync.WaitGroup
	errs := make(chan error, workers*64)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 15 {
				doc := fmt.Sprintf("w%d-%d", w, i)
				if err := s.Upsert(ctx, []activities.Chunk{
					{ID: doc + "-a", DocumentID: doc, Text: "concurrent 并发 text " + doc, Vector: vec(8, float32(w+1), float32(i+1))},
					{ID: doc + "-b", DocumentID: doc, Text: "more words", Vector: axis(8, w)},
				}); err != nil {
					errs <- err
					return
				}
				for _, mode := range []activities.SearchMode{activities.SearchDense, activities.SearchKeyword, activities.SearchHybrid} {
					if _, err := s.Search(ctx, activities.SearchRequest{Mode: mode, Vector: axis(8, i), Text: "concurrent 并发", TopK: 5, Filter: map[string]string{}}); err != nil {
						errs <- err
						return
					}
				}
				if _, err := s.Info(ctx); err != nil {
					errs <- err
					return
				}
				if i%2 == 0 {
					if err := s.DeleteDocument(ctx, doc); err != nil {
						errs <- err
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// 8 corpus chunks + per worker 7 surviving documents of 2 chunks.
	if n, want := count(t, s), 8+workers*7*2; n != want {
		t.Errorf("count %d after concurrent writes, want %d", n, want)
	}
}
