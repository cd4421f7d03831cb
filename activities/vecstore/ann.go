package vecstore

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Dense search is exact below annConfig.ExactBelow chunks with vectors and
// approximate (HNSW, hnsw.go) above. The graph is derived from the chunks:
// saved at a clean Close and loaded by the next Open when it cannot be
// stale (hnsw_file.go), otherwise built in a background goroutine while
// searches scan exactly. Once it is there, every write updates it under the
// store's lock (an upsert inserts a node, a deletion leaves a tombstone that
// is never returned), and when tombstones outnumber the live nodes a new
// graph is built in the background while the old one serves.
//
// A build works on a snapshot of the chunks taken under the lock; the
// writes made meanwhile are journalled and replayed onto the new graph,
// the last few under the lock, so that the graph swapped in holds exactly
// the store's chunks.
//
// A graph's recall depends on the data (on real embeddings, which lie on a
// few topics, it is near 1 at a small ef; on random vectors it is poor at
// any affordable one), so every graph is calibrated after its build, and
// again whenever it has doubled: queries near sample chunks are searched
// for their ten nearest through the graph at ef = EfSearch, 2×, 4× … up to
// MaxEf and exactly, and the graph serves at the smallest ef whose recall
// reaches calibrationRecall; when none does, searches scan exactly.
//
// A filtered search (Filter: every real search has the tenant's) finds the
// chunks holding its rarest key=value term in the postings, and scans them
// exactly when they are fewer than ExactBelow; otherwise it walks the graph
// accepting only matching chunks (the walk goes on through the others), and
// scans exactly when the walk finds fewer than asked for or costs more than
// the scan would.

// annConfig configures the dense index.
type annConfig struct {
	// ExactBelow: collections with fewer chunks with vectors, and filters
	// matching fewer, are searched exactly.
	ExactBelow int
	Params     hnswParams
	// MaxEf is the largest ef a calibration tries.
	MaxEf int
	// inline builds and calibrates the graph in the write that calls for
	// it, not in the background (tests).
	inline bool
}

// defaultANN is measured on 384-dimensional vectors (bench_test.go, the
// README's retrieval section). ExactBelow: a scan of 5k chunks takes 0.6 ms
// (p50, 2 busy cores), of 10k 2 ms, of 20k 13 ms (past the cache), while
// below 5k the graph saves under half a millisecond and may lose recall.
var defaultANN = annConfig{
	ExactBelow: 5000,
	Params:     hnswParams{M: 16, EfConstruction: 100, EfSearch: 64},
	MaxEf:      512,
}

const (
	calibrationSamples = 50
	calibrationRecall  = 0.97 // measured on 500 neighbours; the target is 0.95
)

// annOp is a journalled write: add e, or delete id.
type annOp struct {
	e  *entry
	id string
}

// annState is the store's dense index; guarded by Store.mu.
type annState struct {
	cfg         annConfig
	g           *graph         // nil: exact search only
	building    bool           // a build runs
	calibrating bool           // a calibration runs
	journal     []annOp        // writes since the running build's snapshot
	stop        chan struct{}  // closed by Close
	bg          sync.WaitGroup // the build or calibration running
	builds      int            // builds finished (tests)
	saved       int64          // the log's size when the graph file was written or loaded, -1 for none
	// searches answered by the graph and by a scan (tests, benchmarks);
	// counted under the read lock, hence atomic
	approx, exact atomic.Int64
}

// termKey is a filter term's key in Store.terms.
func termKey(k, v string) string { return k + metaSep + v }

// indexPut and indexRemove keep the postings and the graph in step with
// the chunks (called by put and remove, under the lock).
func (s *Store) indexPut(e *entry) {
	if e.zero {
		return
	}
	e.row = len(s.rows)
	s.rows = append(s.rows, e)
	for k, v := range e.meta {
		key := termKey(k, v)
		set := s.terms[key]
		if set == nil {
			set = map[*entry]struct{}{}
			s.terms[key] = set
		}
		set[e] = struct{}{}
	}
	if s.ann.g != nil {
		s.ann.g.add(e)
	}
	if s.ann.building {
		s.ann.journal = append(s.ann.journal, annOp{e: e})
	}
}

func (s *Store) indexRemove(e *entry) {
	if e.zero {
		return
	}
	last := s.rows[len(s.rows)-1]
	s.rows[e.row], last.row = last, e.row
	s.rows[len(s.rows)-1] = nil
	s.rows = s.rows[:len(s.rows)-1]
	for k, v := range e.meta {
		key := termKey(k, v)
		if set := s.terms[key]; set != nil {
			delete(set, e)
			if len(set) == 0 {
				delete(s.terms, key)
			}
		}
	}
	if s.ann.g != nil {
		s.ann.g.remove(e.id)
	}
	if s.ann.building {
		s.ann.journal = append(s.ann.journal, annOp{id: e.id})
	}
}

// maybeIndex, called under the lock after writes and at Open, starts a
// build of the graph when the collection has grown to ExactBelow chunks
// with vectors or when tombstones outnumber the live nodes, and a
// calibration when the graph has doubled since its last; it drops the
// graph when the collection has shrunk to half of ExactBelow.
func (s *Store) maybeIndex() {
	a := &s.ann
	if s.closed || a.building || s.dim == 0 {
		return
	}
	if a.g != nil && len(s.rows) < a.cfg.ExactBelow/2 {
		a.g = nil
		return
	}
	switch {
	case a.g == nil && len(s.rows) >= a.cfg.ExactBelow:
	case a.g != nil && a.g.dead > a.g.live() && a.g.dead >= a.cfg.ExactBelow/2:
	case a.g != nil && !a.calibrating && a.g.live() >= 2*a.g.calibrated:
		g := a.g
		if a.cfg.inline {
			s.calibrate(g, true)
			return
		}
		a.calibrating = true
		a.bg.Add(1)
		go func() {
			defer a.bg.Done()
			s.calibrate(g, false)
		}()
		return
	default:
		return
	}
	snap := slices.Clone(s.rows)
	// The same chunks give the same graph, whatever their order.
	slices.SortFunc(snap, func(a, b *entry) int { return strings.Compare(a.id, b.id) })
	if a.cfg.inline {
		a.g, _ = buildGraph(snap, a.cfg.Params, nil)
		a.builds++
		s.calibrate(a.g, true)
		return
	}
	a.building = true
	a.journal = nil
	a.bg.Add(1)
	go func() {
		defer a.bg.Done()
		s.build(snap)
	}()
}

// buildGraph makes a graph of snap; ok is false when stop was closed
// before it was done.
func buildGraph(snap []*entry, p hnswParams, stop chan struct{}) (_ *graph, ok bool) {
	g := newGraph(p)
	for i, e := range snap {
		if i%256 == 0 && stopped(stop) {
			return nil, false
		}
		g.add(e)
	}
	return g, true
}

func stopped(stop chan struct{}) bool {
	select {
	case <-stop:
		return true
	default:
		return false
	}
}

// build makes a graph of snap, replays the journal onto it, swaps it in
// and calibrates it. It gives up when the store is closed.
func (s *Store) build(snap []*entry) {
	start := time.Now()
	g, ok := buildGraph(snap, s.ann.cfg.Params, s.ann.stop)
	if !ok {
		return
	}
	replay := func(ops []annOp) {
		for _, op := range ops {
			if op.e != nil {
				g.add(op.e)
			} else {
				g.remove(op.id)
			}
		}
	}
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return
		}
		ops := s.ann.journal
		s.ann.journal = nil
		if len(ops) <= 256 {
			replay(ops)
			s.ann.g = g
			s.ann.building = false
			s.ann.calibrating = true
			s.ann.builds++
			s.mu.Unlock()
			s.logger.Debug("vecstore: dense index built", "collection", s.name, "chunks", len(snap), "took", time.Since(start))
			s.calibrate(g, false)
			return
		}
		s.mu.Unlock()
		if stopped(s.ann.stop) {
			return
		}
		replay(ops) // the new graph is this goroutine's alone until swapped in
	}
}

// calibrate sets g.ef and g.calibrated (see the top of the file) and
// clears ann.calibrating. locked: the caller holds the write lock.
func (s *Store) calibrate(g *graph, locked bool) {
	ef, n, recall, ok := s.measure(g, locked)
	if !locked {
		s.mu.Lock()
		defer s.mu.Unlock()
	}
	s.ann.calibrating = false
	if ok && s.ann.g == g {
		g.ef, g.calibrated = ef, n
		s.logger.Debug("vecstore: dense index calibrated", "collection", s.name, "chunks", n, "ef", ef, "recall", recall)
	}
}

// measure finds the smallest ef at which g's recall@10 reaches
// calibrationRecall (-1 for none) on samples of its n chunks. Unless the
// caller holds the lock, it takes the read lock for each sample, so that
// writes go on meanwhile; ok is false when g was replaced or the store
// closed.
func (s *Store) measure(g *graph, locked bool) (ef, n int, recall float64, ok bool) {
	rlock := func() bool {
		if !locked {
			s.mu.RLock()
		}
		return s.ann.g == g && !s.closed
	}
	runlock := func() {
		if !locked {
			s.mu.RUnlock()
		}
	}
	if !rlock() {
		runlock()
		return 0, 0, 0, false
	}
	n = g.live()
	live := make([]*entry, 0, n)
	for _, e := range g.ents {
		if e != nil {
			live = append(live, e)
		}
	}
	runlock()
	rng := rand.New(rand.NewPCG(uint64(n), 1))
	rng.Shuffle(len(live), func(i, j int) { live[i], live[j] = live[j], live[i] })
	samples := live[:min(calibrationSamples, len(live))]
	if len(samples) == 0 {
		return 0, 1, 0, true
	}
	var efs []int
	for ef := max(s.ann.cfg.Params.EfSearch, 10); ef <= s.ann.cfg.MaxEf; ef *= 2 {
		efs = append(efs, ef)
	}
	found := make([]int, len(efs))
	total := 0
	const k = 10
	q := make([]float32, len(samples[0].vec))
	for _, e := range samples {
		// A query near the chunk, not on it (cosine about 0.7): a chunk's
		// own neighbours are easier to find, being linked to it.
		var norm float64
		for i := range q {
			q[i] = float32(rng.NormFloat64())
			norm += float64(q[i]) * float64(q[i])
		}
		scale := float32(1 / math.Sqrt(norm))
		for i := range q {
			q[i] = e.vec[i] + scale*q[i]
		}
		q, _, _ = normalise(q)
		if !rlock() {
			runlock()
			return 0, 0, 0, false
		}
		truth := map[*entry]bool{}
		for _, c := range s.exact(q, k, nil, nil) {
			truth[c.e] = true
		}
		total += len(truth)
		for i, ef := range efs {
			cs, _ := g.search(q, max(ef, k), nil, 0)
			for _, c := range cs[:min(k, len(cs))] {
				if truth[g.ents[c.id]] {
					found[i]++
				}
			}
		}
		runlock()
	}
	for i := range efs {
		if recall = float64(found[i]) / float64(max(total, 1)); recall >= calibrationRecall {
			return efs[i], n, recall, true
		}
	}
	return -1, n, recall, true
}

// waitIndex waits for a running build or calibration to end (tests,
// benchmarks).
func (s *Store) WaitIndex() {
	s.ann.bg.Wait()
}

// candidates returns the chunks with vectors that may match filter: those
// holding its rarest term (nil, 0 when some term is held by none); all of
// them (nil, len(s.rows)) when there is no filter.
func (s *Store) candidates(filter map[string]string) (map[*entry]struct{}, int) {
	if len(filter) == 0 {
		return nil, len(s.rows)
	}
	var best map[*entry]struct{}
	for k, v := range filter {
		set := s.terms[termKey(k, v)]
		if len(set) == 0 {
			return nil, 0
		}
		if best == nil || len(set) < len(best) {
			best = set
		}
	}
	return best, len(best)
}
