package tests

import (
	"fmt"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ctxflow/ctxflow/tests/fakeollama"
	"github.com/ctxflow/ctxflow/workflows"
)

// BenchmarkCluster puts the same load on the embedded stack (the embedded
// Temporal server on SQLite and the API in this process, one worker
// process: BenchmarkThroughput's) and on `make cluster` (scripts/cluster.sh:
// Temporal on PostgreSQL, two workers and the API, each a process), in one
// run: 10 sessions' chat turns at once over HTTP (?wait=true, the fake
// model answering at once). It reports turns/s and a turn's p50 and p99.
func BenchmarkCluster(b *testing.B) {
	const sessions = 10
	b.Run("embedded", func(b *testing.B) {
		s := startStack(b, stackOptions{})
		s.startWorker()
		loadSessions(b, s.apiClient, sessions)
	})
	b.Run("cluster", func(b *testing.B) {
		fs := httptest.NewServer(fakeollama.New(fakeollama.Options{}))
		b.Cleanup(fs.Close)
		loadSessions(b, startCluster(b, "OLLAMA_HOST="+fs.URL).apiClient, sessions)
	})
}

// loadSessions starts the sessions, then runs b.N turns over them, each
// session one turn at a time.
func loadSessions(b *testing.B, api apiClient, sessions int) {
	ctx := b.Context()
	for i := range sessions { // the first turn starts a session's workflow
		if _, _, err := api.turn(ctx, fmt.Sprintf("load-%03d", i), "warm", "hello"); err != nil {
			b.Fatal(err)
		}
	}
	var next atomic.Int64
	var mu sync.Mutex
	durations := make([]time.Duration, 0, b.N)
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for i := range sessions {
		wg.Go(func() {
			for j := 0; next.Add(1) <= int64(b.N); j++ {
				t0 := time.Now()
				res, _, err := api.turn(ctx, fmt.Sprintf("load-%03d", i), fmt.Sprintf("t%d", j), fmt.Sprintf("question %d", j))
				if err != nil || res.Status != workflows.TurnCompleted {
					b.Errorf("turn: %v %+v", err, res)
					return
				}
				mu.Lock()
				durations = append(durations, time.Since(t0))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "turns/s")
	if len(durations) > 0 {
		b.ReportMetric(ms(quantile(durations, 0.5)), "p50-ms")
		b.ReportMetric(ms(quantile(durations, 0.99)), "p99-ms")
	}
}
