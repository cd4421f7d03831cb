package vecstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/activities/vectorstoretest"
)

func gaussian(rng *rand.Rand, dim int) []float32 {
	v := make([]float32, dim)
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	return v
}

// randomChunks makes n chunks of dimension dim in documents of 10, with
// metadata "tenant" (t0 for 80%, t1 for 15%, t2 for 5%) and "lang" (zh for
// one in 50).
func randomChunks(rng *rand.Rand, from, n, dim int) []activities.Chunk {
	out := make([]activities.Chunk, n)
	for i := range out {
		j := from + i
		tenant := "t0"
		switch r := j % 20; {
		case r == 0:
			tenant = "t2"
		case r <= 3:
			tenant = "t1"
		}
		lang := "en"
		if j%50 == 7 {
			lang = "zh"
		}
		out[i] = activities.Chunk{
			ID: fmt.Sprintf("c%06d", j), DocumentID: fmt.Sprintf("d%d", j/10), Text: fmt.Sprintf("chunk %d", j),
			Vector: gaussian(rng, dim), Metadata: map[string]string{"tenant": tenant, "lang": lang},
		}
	}
	return out
}

func upsertT(t testing.TB, s *Store, chunks []activities.Chunk) {
	t.Helper()
	if err := s.Upsert(context.Background(), chunks); err != nil {
		t.Fatal(err)
	}
}

func denseT(t testing.TB, s *Store, q []float32, k int, filter map[string]string) []activities.Hit {
	t.Helper()
	hits, err := s.Search(context.Background(), activities.SearchRequest{Mode: activities.SearchDense, Vector: q, TopK: k, Filter: filter})
	if err != nil {
		t.Fatal(err)
	}
	return hits
}

// exactT is the exact scan's answer, whatever the index.
func exactT(s *Store, q []float32, k int, filter map[string]string) []scored {
	s.mu.RLock()
	defer s.mu.RUnlock()
	qn, _, _ := normalise(q)
	return s.exact(qn, k, filter, nil)
}

func hitIDs(hits []activities.Hit) []string {
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = h.Chunk.ID
	}
	return out
}

func scoredIDs(cs []scored) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.e.id
	}
	return out
}

// checkIndex checks that the postings and the graph hold exactly the
// store's chunks with vectors.
func checkIndex(t *testing.T, s *Store) {
	t.Helper()
	s.mu.RLock()
	defer s.mu.RUnlock()
	vectors := 0
	terms := map[string]int{}
	for _, e := range s.chunks {
		if e.zero {
			continue
		}
		vectors++
		if e.row >= len(s.rows) || s.rows[e.row] != e {
			t.Errorf("chunk %s is not at its row %d of the scan", e.id, e.row)
		}
		for k, v := range e.meta {
			terms[termKey(k, v)]++
			if _, ok := s.terms[termKey(k, v)][e]; !ok {
				t.Errorf("chunk %s is missing from the postings of %s=%s", e.id, k, v)
			}
		}
		if g := s.ann.g; g != nil {
			if slot, ok := g.slots[e.id]; !ok || g.ents[slot] != e {
				t.Errorf("chunk %s is not in the graph as it is stored", e.id)
			}
		}
	}
	if vectors != len(s.rows) {
		t.Errorf("rows = %d, counted %d", len(s.rows), vectors)
	}
	for k, set := range s.terms {
		if len(set) != terms[k] {
			t.Errorf("postings of %q hold %d chunks, want %d", k, len(set), terms[k])
		}
	}
	if g := s.ann.g; g != nil {
		if g.live() != vectors {
			t.Errorf("graph holds %d live nodes, want %d", g.live(), vectors)
		}
		live := 0
		for _, e := range g.ents {
			if e != nil {
				live++
			}
		}
		if live+g.dead != len(g.ents) || live != g.live() {
			t.Errorf("graph: %d live + %d dead of %d slots, %d ids", live, g.dead, len(g.ents), g.live())
		}
	}
}

func TestDotAVX2MatchesGo(t *testing.T) {
	if !hasAVX2FMA {
		t.Skip("no AVX2 and FMA here: dot is dotGo")
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range append([]int{384, 768, 1024}, func() []int {
		var ns []int
		for n := range 80 {
			ns = append(ns, n)
		}
		return ns
	}()...) {
		a, b := gaussian(rng, n), gaussian(rng, n)
		var want float64
		for i := range a {
			want += float64(a[i]) * float64(b[i])
		}
		got, gotGo := float64(dotAVX2(a, b)), float64(dotGo(a, b))
		if tol := 1e-5 * float64(max(n, 1)); math.Abs(got-want) > tol || math.Abs(gotGo-want) > tol {
			t.Errorf("n=%d: dotAVX2 %v, dotGo %v, want %v", n, got, gotGo, want)
		}
	}
}

// The conformance suite again, with every search above 0 chunks taking
// the graph.
func TestConformanceApproximate(t *testing.T) {
	cfg := annConfig{ExactBelow: 1, Params: defaultANN.Params, MaxEf: defaultANN.MaxEf, inline: true}
	vectorstoretest.Run(t, func(t *testing.T, dim int) activities.VectorStore {
		s, err := openWith(Options{Collection: "ann", Dimension: dim}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

// On a few hundred chunks the graph finds exactly what the scan finds,
// ids, order and scores: the top 10 with the default parameters, the top
// 50 too when ef covers the collection.
func TestApproximateEqualsExactOnSmallSets(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	s, err := openWith(Options{Dimension: 32}, annConfig{ExactBelow: 100, Params: defaultANN.Params, MaxEf: defaultANN.MaxEf, inline: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	upsertT(t, s, randomChunks(rng, 0, 400, 32))
	if s.ann.g == nil || s.ann.g.live() != 400 {
		t.Fatal("no graph over 400 chunks")
	}
	before := s.ann.approx.Load()
	for i := range 100 {
		q := gaussian(rng, 32)
		if i == 50 {
			s.ann.g.ef = 400
		}
		ks := []int{1, 5, 10}
		if i >= 50 {
			ks = append(ks, 50, 100)
		}
		for _, k := range ks {
			hits := denseT(t, s, q, k, nil)
			want := exactT(s, q, k, nil)
			if !slices.Equal(hitIDs(hits), scoredIDs(want)) {
				t.Fatalf("k=%d: graph %v, exact %v", k, hitIDs(hits), scoredIDs(want))
			}
			for i, h := range hits {
				if h.Score != float64(want[i].score) || *h.Similarity != h.Score {
					t.Fatalf("k=%d: %s scores %v, exact %v", k, h.Chunk.ID, h.Score, want[i].score)
				}
			}
		}
	}
	if n := s.ann.approx.Load() - before; n != 400 {
		t.Errorf("the graph answered %d of 400 searches", n)
	}
}

// recall is the share of exact's top k that hits hold.
func recall(hits []activities.Hit, exact []scored) float64 {
	want := scoredIDs(exact)
	if len(want) == 0 && len(hits) == 0 {
		return 1
	}
	found := 0
	for _, h := range hits {
		if slices.Contains(want, h.Chunk.ID) {
			found++
		}
	}
	return float64(found) / float64(max(len(want), 1))
}

// On a few thousand random chunks (the hardest case for a graph) the
// default parameters find at least 95% of the true ten nearest.
func TestApproximateRecall(t *testing.T) {
	const n, dim = 3000, 64
	rng := rand.New(rand.NewPCG(7, 8))
	s, err := openWith(Options{Dimension: dim}, annConfig{ExactBelow: 1000, Params: defaultANN.Params, MaxEf: defaultANN.MaxEf})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	start := time.Now()
	for i := 0; i < n; i += 500 {
		upsertT(t, s, randomChunks(rng, i, 500, dim))
	}
	s.WaitIndex()
	t.Logf("%d chunks indexed in %v", n, time.Since(start))
	checkIndex(t, s)
	if s.ann.g == nil {
		t.Fatal("no graph")
	}
	var sum float64
	const queries = 100
	before := s.ann.approx.Load()
	for range queries {
		q := gaussian(rng, dim)
		sum += recall(denseT(t, s, q, 10, nil), exactT(s, q, 10, nil))
	}
	if n := s.ann.approx.Load() - before; n != queries {
		t.Errorf("the graph answered %d of %d searches", n, queries)
	}
	if r := sum / queries; r < 0.95 {
		t.Errorf("recall@10 = %.3f, want >= 0.95", r)
	} else {
		t.Logf("recall@10 = %.3f", r)
	}
}

// Filters hold exactly: every hit matches; a filter that few chunks match
// is scanned exactly; a common one walks the graph with good recall; a
// combination the graph cannot satisfy falls back to the scan.
func TestApproximateFilters(t *testing.T) {
	const n, dim = 2000, 32
	rng := rand.New(rand.NewPCG(9, 10))
	s, err := openWith(Options{Dimension: dim}, annConfig{ExactBelow: 150, Params: defaultANN.Params, MaxEf: defaultANN.MaxEf, inline: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	upsertT(t, s, randomChunks(rng, 0, n, dim))
	filters := []map[string]string{
		{"tenant": "t0"},                 // 80%: the graph
		{"tenant": "t1"},                 // 15% (300): the graph or, past its budget, a scan
		{"tenant": "t2"},                 // 5% (100 < 150): a scan
		{"tenant": "t0", "lang": "zh"},   // 40 chunks: a scan of lang's postings
		{"tenant": "t1", "lang": "en"},   // on tenant's postings
		{"tenant": "t2", "lang": "zh"},   // none: t2 is j%20==0, zh is j%50==7
		{"tenant": "nobody"},             // no postings
		{"tenant": "t0", "missing": "x"}, // no postings
	}
	for _, f := range filters {
		var sum float64
		approx, exact := s.ann.approx.Load(), s.ann.exact.Load()
		for range 30 {
			q := gaussian(rng, dim)
			hits := denseT(t, s, q, 10, f)
			want := exactT(s, q, 10, f)
			for _, h := range hits {
				if !matches(h.Chunk.Metadata, f) {
					t.Fatalf("filter %v returned %s with %v", f, h.Chunk.ID, h.Chunk.Metadata)
				}
			}
			if len(hits) != len(want) {
				t.Fatalf("filter %v: %d hits, exact %d", f, len(hits), len(want))
			}
			sum += recall(hits, want)
			if f["tenant"] == "t2" || f["lang"] == "zh" {
				if !slices.Equal(hitIDs(hits), scoredIDs(want)) {
					t.Fatalf("selective filter %v: %v, exact %v", f, hitIDs(hits), scoredIDs(want))
				}
			}
		}
		if r := sum / 30; r < 0.95 {
			t.Errorf("filter %v: recall@10 %.3f", f, r)
		}
		approx, exact = s.ann.approx.Load()-approx, s.ann.exact.Load()-exact
		t.Logf("filter %v: recall@10 %.3f, %d searches by the graph, %d by a scan", f, sum/30, approx, exact)
		if f["tenant"] == "t0" && len(f) == 1 && approx != 30 || f["tenant"] == "t2" && approx != 0 || f["lang"] == "zh" && approx != 0 {
			t.Errorf("filter %v: %d searches by the graph, %d by a scan", f, approx, exact)
		}
	}
	// A combination that the graph walk cannot fill (rare within a common
	// term): the walk gives up within its budget and the scan answers.
	if err := s.Upsert(context.Background(), []activities.Chunk{{ID: "odd", DocumentID: "odd", Vector: gaussian(rng, dim), Metadata: map[string]string{"tenant": "t0", "lang": "en", "odd": "1"}}}); err != nil {
		t.Fatal(err)
	}
	s.ann.cfg.ExactBelow = 1 // even 1-chunk postings take the graph
	exact := s.ann.exact.Load()
	hits := denseT(t, s, gaussian(rng, dim), 5, map[string]string{"tenant": "t0", "odd": "1"})
	if len(hits) != 1 || hits[0].Chunk.ID != "odd" || s.ann.exact.Load() != exact+1 {
		t.Errorf("rare combination: %v, want [odd] from the scan", hitIDs(hits))
	}
}

// Upserts of an id and deletions show at once, in the graph as in the
// scan; when tombstones outnumber the live nodes the graph is rebuilt.
func TestApproximateUpsertsAndDeletes(t *testing.T) {
	ctx := context.Background()
	const dim = 16
	rng := rand.New(rand.NewPCG(11, 12))
	s, err := openWith(Options{Dimension: dim}, annConfig{ExactBelow: 100, Params: defaultANN.Params, MaxEf: defaultANN.MaxEf})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	chunks := randomChunks(rng, 0, 600, dim)
	upsertT(t, s, chunks)
	s.WaitIndex()
	if s.ann.g == nil {
		t.Fatal("no graph")
	}
	// Replace c000001's vector: its old vector no longer finds it, its new
	// one finds it first with cosine 1.
	moved := chunks[1]
	moved.Vector = gaussian(rng, dim)
	upsertT(t, s, []activities.Chunk{moved})
	hits := denseT(t, s, moved.Vector, 1, nil)
	if len(hits) != 1 || hits[0].Chunk.ID != moved.ID || math.Abs(hits[0].Score-1) > 1e-5 {
		t.Fatalf("the new vector finds %v", hits)
	}
	for _, h := range denseT(t, s, chunks[1].Vector, 600, nil) {
		if h.Chunk.ID == moved.ID {
			want := float64(dot(mustNormalise(chunks[1].Vector), mustNormalise(moved.Vector)))
			if h.Score != want {
				t.Fatalf("the replaced chunk scores %v against its old vector, want %v with the new one", h.Score, want)
			}
		}
	}
	// Delete documents: a deleted chunk is never returned, even for its own
	// vector.
	deleted := map[string]bool{}
	for d := 0; d < 25; d++ {
		doc := fmt.Sprintf("d%d", d)
		if err := s.DeleteDocument(ctx, doc); err != nil {
			t.Fatal(err)
		}
		for i := d * 10; i < d*10+10; i++ {
			deleted[chunks[i].ID] = true
		}
	}
	s.mu.RLock()
	dead := s.ann.g.dead
	s.mu.RUnlock()
	if dead != 251 {
		t.Fatalf("%d tombstones, want 251", dead)
	}
	for i := 0; i < 250; i += 7 {
		for _, h := range denseT(t, s, chunks[i].Vector, 20, nil) {
			if deleted[h.Chunk.ID] {
				t.Fatalf("deleted chunk %s returned", h.Chunk.ID)
			}
		}
	}
	checkIndex(t, s)
	// A zero vector replacing a chunk takes it out of dense search.
	zero := chunks[400]
	zero.Vector = make([]float32, dim)
	upsertT(t, s, []activities.Chunk{zero})
	for _, h := range denseT(t, s, chunks[400].Vector, 50, nil) {
		if h.Chunk.ID == zero.ID {
			t.Fatal("a zero-vector chunk was returned by dense search")
		}
	}
	// More deletions: tombstones outnumber live nodes, a new graph is
	// built without them.
	_, _, builds := annStatus(s)
	for d := 25; d < 45; d++ {
		if err := s.DeleteDocument(ctx, fmt.Sprintf("d%d", d)); err != nil {
			t.Fatal(err)
		}
		for i := d * 10; i < d*10+10; i++ {
			deleted[chunks[i].ID] = true
		}
	}
	s.WaitIndex()
	s.mu.RLock()
	rebuilt := s.ann.builds > builds
	dead, live := s.ann.g.dead, s.ann.g.live()
	s.mu.RUnlock()
	if !rebuilt || dead > live {
		t.Fatalf("after deleting 75%%: rebuilt %v, %d tombstones, %d live", rebuilt, dead, live)
	}
	checkIndex(t, s)
	for i := 0; i < 600; i += 5 {
		hits := denseT(t, s, chunks[i].Vector, 10, nil)
		for _, h := range hits {
			if deleted[h.Chunk.ID] || h.Chunk.ID == zero.ID {
				t.Fatalf("after the rebuild: %s returned", h.Chunk.ID)
			}
		}
		if !deleted[chunks[i].ID] && i != 400 && i != 1 && (len(hits) == 0 || hits[0].Chunk.ID != chunks[i].ID) {
			t.Fatalf("chunk %s is not the first hit for its own vector: %v", chunks[i].ID, hitIDs(hits))
		}
	}
}

func mustNormalise(v []float32) []float32 {
	n, _, _ := normalise(v)
	return n
}

// A collection reopened builds its graph in the background and answers
// exactly meanwhile; Close stops a build that is running.
func TestIndexBuiltAtOpen(t *testing.T) {
	dir := t.TempDir()
	const dim = 24
	cfg := annConfig{ExactBelow: 300, Params: defaultANN.Params, MaxEf: defaultANN.MaxEf}
	rng := rand.New(rand.NewPCG(13, 14))
	s, err := openWith(Options{Dir: dir, Collection: "kb", NoSync: true}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	upsertT(t, s, randomChunks(rng, 0, 1500, dim))
	if err := s.DeleteDocument(context.Background(), "d3"); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Closed while building: the build stops, nothing leaks or races.
	s, err = openWith(Options{Dir: dir, Collection: "kb"}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = openWith(Options{Dir: dir, Collection: "kb"}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	q := gaussian(rng, dim)
	first := denseT(t, s, q, 10, nil) // exact or graph, whichever is ready
	s.WaitIndex()
	checkIndex(t, s)
	if s.ann.g == nil || s.ann.g.live() != 1490 {
		t.Fatalf("graph after Open: %v", s.ann.g)
	}
	if r := recall(first, exactT(s, q, 10, nil)); r < 0.9 {
		t.Errorf("search while building: recall %.2f", r)
	}
	if r := recall(denseT(t, s, q, 10, nil), exactT(s, q, 10, nil)); r < 0.9 {
		t.Errorf("search after the build: recall %.2f", r)
	}
}

// Searches of every mode run while writes cross the threshold, start a
// build in the background, delete and replace chunks (go test -race).
func TestApproximateConcurrency(t *testing.T) {
	ctx := context.Background()
	const dim = 16
	s, err := openWith(Options{Dimension: dim}, annConfig{ExactBelow: 200, Params: defaultANN.Params, MaxEf: defaultANN.MaxEf})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var wg sync.WaitGroup
	done := make(chan struct{})
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 99))
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				req := activities.SearchRequest{Vector: gaussian(rng, dim), Text: "chunk 7", TopK: 10}
				switch i % 3 {
				case 0:
					req.Mode = activities.SearchDense
				case 1:
					req.Filter = map[string]string{"tenant": "t1"}
				}
				hits, err := s.Search(ctx, req)
				if err != nil {
					t.Error(err)
					return
				}
				for _, h := range hits {
					if !matches(h.Chunk.Metadata, req.Filter) {
						t.Errorf("hit %s does not match %v", h.Chunk.ID, req.Filter)
					}
				}
			}
		}()
	}
	rng := rand.New(rand.NewPCG(15, 16))
	for i := 0; i < 1200; i += 100 {
		upsertT(t, s, randomChunks(rng, i, 100, dim))
		if i%300 == 0 {
			if err := s.DeleteDocument(ctx, fmt.Sprintf("d%d", i/10)); err != nil {
				t.Fatal(err)
			}
			upsertT(t, s, randomChunks(rng, i/2, 20, dim)) // replace some
		}
	}
	close(done)
	wg.Wait()
	s.WaitIndex()
	checkIndex(t, s)
	if s.ann.g == nil {
		t.Fatal("no graph after 1200 chunks")
	}
}

// The graph is saved at a clean Close and loaded by the next Open; a file
// that may be stale (a crash, a log that changed, a damaged file) is never
// used: the graph is rebuilt.
func TestGraphFile(t *testing.T) {
	ctx := context.Background()
	const dim = 24
	dir := t.TempDir()
	cfg := annConfig{ExactBelow: 100, Params: defaultANN.Params, MaxEf: defaultANN.MaxEf}
	graphPath := filepath.Join(dir, "kb", graphName)
	rng := rand.New(rand.NewPCG(17, 18))
	queries := make([][]float32, 20)
	for i := range queries {
		queries[i] = gaussian(rng, dim)
	}
	answers := func(s *Store) [][]string {
		var out [][]string
		for _, q := range queries {
			out = append(out, hitIDs(denseT(t, s, q, 10, nil)))
		}
		return out
	}
	open := func() (*Store, *bytes.Buffer) {
		t.Helper()
		var logged bytes.Buffer
		s, err := openWith(Options{Dir: dir, Collection: "kb", NoSync: true, Logger: slog.New(slog.NewTextHandler(&logged, nil))}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return s, &logged
	}
	s, _ := open()
	upsertT(t, s, randomChunks(rng, 0, 400, dim))
	if err := s.DeleteDocument(ctx, "d7"); err != nil { // tombstones are not saved
		t.Fatal(err)
	}
	s.WaitIndex()
	want := answers(s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	saved, err := os.ReadFile(graphPath)
	if err != nil {
		t.Fatalf("no graph file after Close: %v", err)
	}

	// Loaded: no build, the same answers.
	s, _ = open()
	if g, building, builds := annStatus(s); g == nil || building || builds != 0 || g.live() != 390 || g.dead != 0 {
		t.Fatalf("Open did not load the graph: building %v, builds %d", building, builds)
	}
	checkIndex(t, s)
	if got := answers(s); !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("answers after loading the graph %v, before %v", got, want)
	}
	// A write removes the file; a crash then leaves none to load.
	upsertT(t, s, randomChunks(rng, 400, 10, dim))
	if _, err := os.Stat(graphPath); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("graph file after a write: %v", err)
	}
	crash(t, s)
	s, _ = open()
	if g, building, builds := annStatus(s); g != nil && builds == 0 && !building {
		t.Fatal("a graph was loaded after a crash")
	}
	s.WaitIndex()
	checkIndex(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// The old file put back (saved against a shorter log): not loaded.
	if err := os.WriteFile(graphPath, saved, 0o600); err != nil {
		t.Fatal(err)
	}
	s, logged := open()
	if _, building, builds := annStatus(s); !strings.Contains(logged.String(), "rebuilding the dense index") || !building && builds == 0 {
		t.Errorf("a stale graph file was not rebuilt: %q", logged.String())
	}
	s.WaitIndex()
	checkIndex(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// A damaged file: not loaded.
	b, err := os.ReadFile(graphPath)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x40
	if err := os.WriteFile(graphPath, b, 0o600); err != nil {
		t.Fatal(err)
	}
	s, logged = open()
	defer s.Close()
	if !strings.Contains(logged.String(), "checksum") {
		t.Errorf("a damaged graph file was not reported: %q", logged.String())
	}
	s.WaitIndex()
	checkIndex(t, s)
	for _, q := range queries {
		if r := recall(denseT(t, s, q, 10, nil), exactT(s, q, 10, nil)); r < 0.9 {
			t.Errorf("recall %.2f after the rebuild", r)
		}
	}
}

func annStatus(s *Store) (g *graph, building bool, builds int) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.ann.g, s.ann.building, s.ann.builds
}

// crash abandons s as a killed process would: no Close, the dirty marker
// left behind.
func crash(t *testing.T, s *Store) {
	t.Helper()
	s.mu.Lock()
	s.closed = true
	close(s.ann.stop)
	if err := s.text.Close(); err != nil {
		t.Fatal(err)
	}
	_ = s.log.close()
	s.release()
	s.mu.Unlock()
	s.ann.bg.Wait()
}

// Calibration picks the smallest ef that reaches the recall on the data at
// hand, again when the graph has doubled, and turns to the exact scan when
// no ef it may try does.
func TestCalibration(t *testing.T) {
	const dim = 128 // random vectors in many dimensions: a hard case
	rng := rand.New(rand.NewPCG(19, 20))
	chunks := randomChunks(rng, 0, 1200, dim)
	queries := make([][]float32, 40)
	for i := range queries {
		queries[i] = gaussian(rng, dim)
	}

	s, err := openWith(Options{Dimension: dim}, annConfig{ExactBelow: 500, Params: defaultANN.Params, MaxEf: 512, inline: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	upsertT(t, s, chunks[:500])
	first := s.ann.g.ef
	if first < defaultANN.Params.EfSearch || s.ann.g.calibrated != 500 {
		t.Fatalf("calibrated at %d chunks to ef %d", s.ann.g.calibrated, first)
	}
	upsertT(t, s, chunks[500:])
	if s.ann.g.calibrated != 1200 || s.ann.g.ef < first {
		t.Fatalf("after doubling: calibrated at %d chunks to ef %d (was %d)", s.ann.g.calibrated, s.ann.g.ef, first)
	}
	var sum float64
	for _, q := range queries {
		sum += recall(denseT(t, s, q, 10, nil), exactT(s, q, 10, nil))
	}
	t.Logf("ef %d at 500 chunks, %d at 1200: recall@10 %.3f", first, s.ann.g.ef, sum/float64(len(queries)))
	if sum/float64(len(queries)) < 0.95 {
		t.Errorf("recall@10 %.3f at the calibrated ef %d", sum/float64(len(queries)), s.ann.g.ef)
	}

	// Allowed no more than ef 16, the graph does not reach the recall: the
	// scan answers, exactly.
	low, err := openWith(Options{Dimension: dim}, annConfig{ExactBelow: 500, Params: hnswParams{M: 16, EfConstruction: 100, EfSearch: 16}, MaxEf: 16, inline: true})
	if err != nil {
		t.Fatal(err)
	}
	defer low.Close()
	upsertT(t, low, chunks)
	if low.ann.g == nil || low.ann.g.ef != -1 {
		t.Fatalf("ef %d, want -1 (scan)", low.ann.g.ef)
	}
	for _, q := range queries {
		if hits, want := denseT(t, low, q, 10, nil), exactT(low, q, 10, nil); !slices.Equal(hitIDs(hits), scoredIDs(want)) {
			t.Fatalf("scan %v, exact %v", hitIDs(hits), scoredIDs(want))
		}
	}
	if low.ann.approx.Load() != 0 {
		t.Errorf("%d searches by a graph that does not reach the recall", low.ann.approx.Load())
	}
}

// TestExactScanSharedAmongProcessors checks that the scan split among
// goroutines answers as one scan of all the rows: the same chunks, scores
// and order, ties (the same vector in rows of different shards) by id.
func TestExactScanSharedAmongProcessors(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	rng := rand.New(rand.NewPCG(3, 4))
	s := &Store{}
	n := 3*scanShard + 7
	twin := 0
	for i := range n {
		vec, _, _ := normalise(gaussian(rng, 8))
		if i%(scanShard/2) == 5 { // a twin in every half-shard
			if twin == 0 {
				twin = i
			}
			vec = s.rows[twin-1].vec
		}
		lang := "en"
		if i%3 == 0 {
			lang = "zh"
		}
		s.rows = append(s.rows, &entry{id: fmt.Sprintf("c%06d", n-i), vec: vec, row: i, meta: map[string]string{"lang": lang}})
	}
	want := func(q []float32, k int, filter map[string]string) []scored {
		var all []scored
		for _, e := range s.rows {
			if matches(e.meta, filter) {
				all = append(all, scored{e: e, score: dot(q, e.vec)})
			}
		}
		sortBest(all)
		return all[:k]
	}
	queries := [][]float32{s.rows[twin-1].vec}
	for range 10 {
		q, _, _ := normalise(gaussian(rng, 8))
		queries = append(queries, q)
	}
	for i, q := range queries {
		for _, filter := range []map[string]string{nil, {"lang": "zh"}} {
			got, exp := s.exact(q, 10, filter, nil), want(q, 10, filter)
			if !slices.Equal(got, exp) {
				t.Errorf("query %d, filter %v: scan %v, want %v", i, filter, scoredIDs(got), scoredIDs(exp))
			}
		}
	}
}
