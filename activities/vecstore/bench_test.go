package vecstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/ctxflow/ctxflow/activities"
)

// benchChunks is CTXFLOW_BENCH_CHUNKS, default 10000.
func benchChunks(b *testing.B) int {
	n := 10000
	if v := os.Getenv("CTXFLOW_BENCH_CHUNKS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n <= 0 {
			b.Fatalf("CTXFLOW_BENCH_CHUNKS=%q", v)
		}
	}
	return n
}

// benchVectors returns a generator of 384-dimensional vectors: i.i.d.
// Gaussian ones, the hardest case for a graph index (every direction is
// as likely, the nearest neighbours are barely nearer than the rest); or,
// with CTXFLOW_BENCH_VECTORS=clustered, a mixture of 1,000 Gaussian
// clusters (a point is its centre plus noise of half the centre's scale per
// dimension: cosine about 0.8 within a cluster, about 0 across), closer to
// real embeddings, where documents on one topic lie together.
func benchVectors(b *testing.B, rng *rand.Rand) (next func() []float32, kind string) {
	const dim = 384
	gauss := func() []float32 {
		v := make([]float32, dim)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return v
	}
	switch kind := os.Getenv("CTXFLOW_BENCH_VECTORS"); kind {
	case "", "random":
		return gauss, "random"
	case "clustered":
		centres := make([][]float32, 1000)
		for i := range centres {
			centres[i] = gauss()
		}
		return func() []float32 {
			c, v := centres[rng.IntN(len(centres))], gauss()
			for i := range v {
				v[i] = c[i] + 0.5*v[i]
			}
			return v
		}, kind
	default:
		b.Fatalf("CTXFLOW_BENCH_VECTORS=%q: random or clustered", kind)
		return nil, ""
	}
}

func benchChunk(j int, vec []float32) activities.Chunk {
	return activities.Chunk{ID: fmt.Sprintf("c%07d", j), DocumentID: fmt.Sprintf("d%d", j/10), Text: "chunk " + strconv.Itoa(j), Vector: vec}
}

// BenchmarkSearch measures dense search over N chunks of 384 dimensions
// (N = CTXFLOW_BENCH_CHUNKS, default 10000; vectors: see benchVectors) and
// reports latency p50/p99, recall@10 against an exact brute-force scan,
// load-s (upserting the N chunks until the dense index is ready) and
// graph-MB (the graph's links; the vectors are the chunks' own).
func BenchmarkSearch(b *testing.B) {
	const k = 10
	n := benchChunks(b)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	next, kind := benchVectors(b, rng)
	s, err := Open(Options{Collection: "bench", Dimension: 384})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	vecs := make([][]float32, n)
	const batch = 1000
	start := time.Now()
	for i := 0; i < n; i += batch {
		chunks := make([]activities.Chunk, 0, batch)
		for j := i; j < min(i+batch, n); j++ {
			vecs[j] = next()
			chunks = append(chunks, benchChunk(j, vecs[j]))
		}
		if err := s.Upsert(ctx, chunks); err != nil {
			b.Fatal(err)
		}
	}
	s.WaitIndex()
	load := time.Since(start)
	queries := make([][]float32, 200)
	for i := range queries {
		queries[i] = next()
	}
	// Recall@10 against brute force.
	var found, total int
	for _, q := range queries {
		want := exactTopK(q, vecs, k)
		hits, err := s.Search(ctx, activities.SearchRequest{Mode: activities.SearchDense, Vector: q, TopK: k})
		if err != nil {
			b.Fatal(err)
		}
		for _, h := range hits {
			if slices.Contains(want, h.Chunk.ID) {
				found++
			}
		}
		total += len(want)
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		start := time.Now()
		if _, err := s.Search(ctx, activities.SearchRequest{Mode: activities.SearchDense, Vector: queries[i%len(queries)], TopK: k}); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(lat[min(len(lat)-1, len(lat)*99/100)].Microseconds())/1000, "p99-ms")
	}
	b.ReportMetric(float64(found)/float64(total), "recall@10")
	b.ReportMetric(float64(n), "chunks")
	b.ReportMetric(load.Seconds(), "load-s")
	s.mu.RLock()
	if s.ann.g != nil {
		b.ReportMetric(float64(s.ann.g.bytes())/(1<<20), "graph-MB")
	}
	s.mu.RUnlock()
	b.Logf("%d %s vectors; searches by the graph %d, by a scan %d", n, kind, s.ann.approx.Load(), s.ann.exact.Load())
}

// BenchmarkOpen measures Open of a persisted collection of N chunks
// (CTXFLOW_BENCH_CHUNKS, vectors as BenchmarkSearch's): open-s until Open
// returns (the chunk log read: searches work from then on), index-s until
// the dense index saved at the last Close is loaded, rebuild-s until it is
// built and calibrated again without its file (as after a crash), and
// heap-MB, the Go heap in use with the collection open.
func BenchmarkOpen(b *testing.B) {
	n := benchChunks(b)
	ctx := context.Background()
	next, kind := benchVectors(b, rand.New(rand.NewPCG(1, 2)))
	dir := b.TempDir()
	opts := Options{Dir: dir, Collection: "bench", Dimension: 384, NoSync: true}
	s, err := Open(opts)
	if err != nil {
		b.Fatal(err)
	}
	const batch = 1000
	for i := 0; i < n; i += batch {
		chunks := make([]activities.Chunk, 0, batch)
		for j := i; j < min(i+batch, n); j++ {
			chunks = append(chunks, benchChunk(j, next()))
		}
		if err := s.Upsert(ctx, chunks); err != nil {
			b.Fatal(err)
		}
	}
	s.WaitIndex()
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	var open, loaded, rebuilt time.Duration
	var heap uint64
	var ef int
	reopen := func() time.Duration {
		start := time.Now()
		s, err := Open(opts)
		if err != nil {
			b.Fatal(err)
		}
		open += time.Since(start)
		s.WaitIndex()
		took := time.Since(start)
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		heap = ms.HeapInuse
		if s.ann.g == nil && n >= s.ann.cfg.ExactBelow {
			b.Fatal("no dense index after Open")
		}
		if s.ann.g != nil {
			ef = s.ann.g.ef
		}
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
		return took
	}
	b.ResetTimer()
	for b.Loop() {
		loaded += reopen()
		if err := os.Remove(filepath.Join(dir, "bench", graphName)); err != nil && n >= defaultANN.ExactBelow {
			b.Fatal(err)
		}
		rebuilt += reopen()
	}
	b.ReportMetric(open.Seconds()/float64(2*b.N), "open-s")
	b.ReportMetric(loaded.Seconds()/float64(b.N), "index-s")
	b.ReportMetric(rebuilt.Seconds()/float64(b.N), "rebuild-s")
	b.ReportMetric(float64(heap)/(1<<20), "heap-MB")
	b.Logf("%d %s vectors, calibrated ef %d", n, kind, ef)
}

func exactTopK(q []float32, vecs [][]float32, k int) []string {
	qn, _, _ := normalise(q)
	type sim struct {
		i int
		s float64
	}
	sims := make([]sim, len(vecs))
	for i, v := range vecs {
		vn, _, _ := normalise(v)
		var dot float64
		for j := range qn {
			dot += float64(qn[j]) * float64(vn[j])
		}
		sims[i] = sim{i, dot}
	}
	sort.Slice(sims, func(a, b int) bool { return sims[a].s > sims[b].s })
	out := make([]string, 0, k)
	for _, s := range sims[:min(k, len(sims))] {
		out = append(out, fmt.Sprintf("c%07d", s.i))
	}
	return out
}
