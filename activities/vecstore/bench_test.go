package vecstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/ctxflow/ctxflow/activities"
)

// BenchmarkSearch measures dense search over N chunks of 384 dimensions
// (N = CTXFLOW_BENCH_CHUNKS, default 10000) and reports latency p50/p99
// and recall@10 against an exact brute-force scan.
func BenchmarkSearch(b *testing.B) {
	const dim, k = 384, 10
	n := 10000
	if v := os.Getenv("CTXFLOW_BENCH_CHUNKS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n <= 0 {
			b.Fatalf("CTXFLOW_BENCH_CHUNKS=%q", v)
		}
	}
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	randVec := func() []float32 {
		v := make([]float32, dim)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return v
	}
	s, err := Open(Options{Collection: "bench", Dimension: dim})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	vecs := make([][]float32, n)
	const batch = 1000
	for i := 0; i < n; i += batch {
		chunks := make([]activities.Chunk, 0, batch)
		for j := i; j < min(i+batch, n); j++ {
			vecs[j] = randVec()
			chunks = append(chunks, activities.Chunk{ID: fmt.Sprintf("c%07d", j), DocumentID: fmt.Sprintf("d%d", j/10), Text: "chunk " + strconv.Itoa(j), Vector: vecs[j]})
		}
		if err := s.Upsert(ctx, chunks); err != nil {
			b.Fatal(err)
		}
	}
	queries := make([][]float32, 50)
	for i := range queries {
		queries[i] = randVec()
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
