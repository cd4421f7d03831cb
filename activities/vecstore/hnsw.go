package vecstore

import (
	"math"
	"math/rand/v2"
	"slices"
	"sync"
)

// The approximate dense index: a Hierarchical Navigable Small World graph
// (Malkov & Yashunin, "Efficient and robust approximate nearest neighbor
// search using HNSW graphs", 2018) over the chunks' unit vectors, with
// distance 1 − cosine. It is derived from the chunks (see ann.go for when
// it is built, calibrated and used, hnsw_file.go for its file).
//
// A node is a slot: its vector, its entry (nil once deleted) and its links,
// layer 0's in one flat array of 2M per node, the upper layers' per node.
// A deleted chunk leaves a tombstone: the node still routes searches but is
// never a result; the graph is rebuilt when tombstones outnumber the live
// nodes. The graph is not safe for concurrent writes: writes hold the
// store's lock, searches its read lock.
//
// github.com/coder/hnsw (v0.6.1) was measured first and not used: its layer
// search stops at the first expansion that does not improve the best
// distance and keeps only k results, so that its recall@10 at 10k
// 384-dimensional vectors stayed below 0.1 on random ones and below 0.5 on
// clustered ones, whatever its ef; and it has no filtered search.

// hnswParams tune the graph.
type hnswParams struct {
	// M is the number of links a node gets on insertion, and the most it
	// keeps on the upper layers; layer 0 keeps up to 2M.
	M int
	// EfConstruction is the breadth of the search that finds a new node's
	// neighbours.
	EfConstruction int
	// EfSearch is the breadth of a query's search on layer 0 (at least the
	// number of results asked for).
	EfSearch int
}

// cand is a node with its distance to a query.
type cand struct {
	d  float32
	id int32
}

// candHeap is a binary heap of candidates: the nearest at the root, or the
// farthest when far is set.
type candHeap struct {
	a   []cand
	far bool
}

// above reports whether a[i] belongs nearer the root than a[j].
func (h *candHeap) above(i, j int) bool {
	if h.far {
		return h.a[i].d > h.a[j].d
	}
	return h.a[i].d < h.a[j].d
}

func (h *candHeap) push(c cand) {
	h.a = append(h.a, c)
	for i := len(h.a) - 1; i > 0; {
		p := (i - 1) / 2
		if !h.above(i, p) {
			break
		}
		h.a[p], h.a[i] = h.a[i], h.a[p]
		i = p
	}
}

func (h *candHeap) pop() cand {
	top := h.a[0]
	n := len(h.a) - 1
	h.a[0] = h.a[n]
	h.a = h.a[:n]
	for i := 0; ; {
		l, first := 2*i+1, i
		if l < n && h.above(l, first) {
			first = l
		}
		if r := l + 1; r < n && h.above(r, first) {
			first = r
		}
		if first == i {
			break
		}
		h.a[i], h.a[first] = h.a[first], h.a[i]
		i = first
	}
	return top
}

func byDistance(a, b cand) int {
	switch {
	case a.d < b.d:
		return -1
	case a.d > b.d:
		return 1
	}
	return int(a.id) - int(b.id)
}

// visited marks the nodes a search has seen: a mark equal to the current
// epoch is set, so that a reset costs nothing but every 65535th.
type visited struct {
	marks []uint16
	epoch uint16
}

var visitedPool = sync.Pool{New: func() any { return new(visited) }}

func (v *visited) reset(n int) {
	if len(v.marks) < n {
		v.marks = make([]uint16, n+n/4)
		v.epoch = 0
	}
	v.epoch++
	if v.epoch == 0 {
		clear(v.marks)
		v.epoch = 1
	}
}

// visit marks s and reports whether it was marked already.
func (v *visited) visit(s int32) bool {
	if v.marks[s] == v.epoch {
		return true
	}
	v.marks[s] = v.epoch
	return false
}

// graph is an HNSW graph.
type graph struct {
	p      hnswParams
	m0     int     // most links on layer 0
	ml     float64 // level multiplier, 1/ln(M)
	rng    *rand.Rand
	vecs   [][]float32 // slot → unit vector
	ents   []*entry    // slot → chunk; nil for a tombstone
	links0 []int32     // slot*m0 … slot*m0+n0[slot]: layer-0 links
	n0     []uint8
	upper  [][][]int32 // slot → layer-1 → links (nil below layer 1)
	slots  map[string]int32
	ep     int32 // entry point, -1 when empty
	top    int   // entry point's layer
	dead   int
	// ef is the search breadth the calibration chose (ann.go): 0 before
	// one, -1 when no affordable one reaches the recall (searches scan).
	ef         int
	calibrated int // live nodes at the last calibration
	// scratch for writes (never used by searches)
	scratch []cand
}

func newGraph(p hnswParams) *graph {
	m0 := min(2*p.M, math.MaxUint8)
	return &graph{
		p:     p,
		m0:    m0,
		ml:    1 / math.Log(float64(max(p.M, 2))),
		rng:   rand.New(rand.NewPCG(0x5eed, uint64(p.M))),
		slots: map[string]int32{},
		ep:    -1,
	}
}

// live is the number of nodes that are not tombstones.
func (g *graph) live() int { return len(g.slots) }

func (g *graph) links(s int32, layer int) []int32 {
	if layer == 0 {
		base := int(s) * g.m0
		return g.links0[base : base+int(g.n0[s])]
	}
	return g.upper[s][layer-1]
}

func (g *graph) setLinks(s int32, layer int, cs []cand) {
	if layer == 0 {
		base := int(s) * g.m0
		for i, c := range cs {
			g.links0[base+i] = c.id
		}
		g.n0[s] = uint8(len(cs))
		return
	}
	ls := g.upper[s][layer-1][:0]
	for _, c := range cs {
		ls = append(ls, c.id)
	}
	g.upper[s][layer-1] = ls
}

func (g *graph) randomLevel() int {
	l := int(-math.Log(1-g.rng.Float64()) * g.ml)
	return min(l, 16)
}

// add inserts e (a chunk with a non-zero vector), replacing the live node
// of its id.
func (g *graph) add(e *entry) {
	g.remove(e.id)
	s := int32(len(g.vecs))
	level := g.randomLevel()
	g.vecs = append(g.vecs, e.vec)
	g.ents = append(g.ents, e)
	g.links0 = slices.Grow(g.links0, g.m0)[:len(g.links0)+g.m0]
	g.n0 = append(g.n0, 0)
	var up [][]int32
	if level > 0 {
		up = make([][]int32, level)
		for i := range up {
			up[i] = make([]int32, 0, g.p.M)
		}
	}
	g.upper = append(g.upper, up)
	g.slots[e.id] = s
	if g.ep < 0 {
		g.ep, g.top = s, level
		return
	}
	q := e.vec
	ep := cand{1 - dot(q, g.vecs[g.ep]), g.ep}
	for l := g.top; l > level; l-- {
		ep = g.greedy(q, ep, l)
	}
	vis := visitedPool.Get().(*visited)
	defer visitedPool.Put(vis)
	eps := []cand{ep}
	for l := min(level, g.top); l >= 0; l-- {
		w, _ := g.searchLayer(q, eps, g.p.EfConstruction, l, nil, vis, 0)
		sel := g.selectNeighbours(make([]cand, 0, g.p.M), w, g.p.M)
		g.setLinks(s, l, sel)
		mmax := g.p.M
		if l == 0 {
			mmax = g.m0
		}
		for _, n := range sel {
			g.connect(n.id, cand{n.d, s}, l, mmax)
		}
		eps = w
	}
	if level > g.top {
		g.ep, g.top = s, level
	}
}

// remove makes the node of id a tombstone; it reports whether there was
// one.
func (g *graph) remove(id string) bool {
	s, ok := g.slots[id]
	if !ok {
		return false
	}
	delete(g.slots, id)
	g.ents[s] = nil
	g.dead++
	return true
}

// connect links n to c (c.d is their distance) on a layer, pruning n's
// links with the heuristic when it has mmax already.
func (g *graph) connect(n int32, c cand, layer, mmax int) {
	ls := g.links(n, layer)
	if len(ls) < mmax {
		if layer == 0 {
			g.links0[int(n)*g.m0+len(ls)] = c.id
			g.n0[n]++
		} else {
			g.upper[n][layer-1] = append(ls, c.id)
		}
		return
	}
	cs := append(g.scratch[:0], c)
	vn := g.vecs[n]
	for _, x := range ls {
		cs = append(cs, cand{1 - dot(vn, g.vecs[x]), x})
	}
	slices.SortFunc(cs, byDistance)
	g.scratch = cs
	g.setLinks(n, layer, g.selectNeighbours(cs[:0], cs, mmax))
}

// selectNeighbours is the paper's heuristic (its algorithm 4): from
// candidates sorted nearest first, keep one only when it is nearer to the
// base than to every one kept already, up to m. It spreads the links over
// directions, which keeps clustered data navigable. The result is appended
// to out, which may be cs[:0].
func (g *graph) selectNeighbours(out, cs []cand, m int) []cand {
	for _, c := range cs {
		if len(out) >= m {
			break
		}
		vc := g.vecs[c.id]
		keep := true
		for _, r := range out {
			if 1-dot(vc, g.vecs[r.id]) < c.d {
				keep = false
				break
			}
		}
		if keep {
			out = append(out, c)
		}
	}
	return out
}

// greedy walks a layer from ep to the node nearest q.
func (g *graph) greedy(q []float32, ep cand, layer int) cand {
	for moved := true; moved; {
		moved = false
		for _, nb := range g.links(ep.id, layer) {
			if d := 1 - dot(q, g.vecs[nb]); d < ep.d {
				ep, moved = cand{d, nb}, true
			}
		}
	}
	return ep
}

// searchLayer is the paper's algorithm 2: the ef nodes nearest q that ok
// accepts (every node, tombstones too, when ok is nil), nearest first,
// found by a best-first walk of one layer from eps. Nodes ok refuses still
// route the walk, which goes on until ef accepted ones are found or no
// candidate can improve them.
//
// budget > 0 bounds the distances computed: past it the walk stops and
// reports exhausted (the caller scans exactly instead).
func (g *graph) searchLayer(q []float32, eps []cand, ef, layer int, ok func(int32) bool, vis *visited, budget int) (_ []cand, exhausted bool) {
	vis.reset(len(g.vecs))
	cands := candHeap{a: make([]cand, 0, 2*ef)}
	res := candHeap{a: make([]cand, 0, ef+1), far: true}
	for _, e := range eps {
		if vis.visit(e.id) {
			continue
		}
		cands.push(e)
		if ok == nil || ok(e.id) {
			res.push(e)
			if len(res.a) > ef {
				res.pop()
			}
		}
	}
	for len(cands.a) > 0 {
		c := cands.pop()
		if len(res.a) >= ef && c.d > res.a[0].d {
			break
		}
		for _, nb := range g.links(c.id, layer) {
			if vis.visit(nb) {
				continue
			}
			if budget > 0 {
				if budget--; budget == 0 {
					return nil, true
				}
			}
			d := 1 - dot(q, g.vecs[nb])
			if len(res.a) < ef || d < res.a[0].d {
				cands.push(cand{d, nb})
				if ok == nil || ok(nb) {
					res.push(cand{d, nb})
					if len(res.a) > ef {
						res.pop()
					}
				}
			}
		}
	}
	out := res.a
	slices.SortFunc(out, byDistance)
	return out, false
}

// search returns up to ef live nodes near q (unit length) that accept
// takes (nil: all), nearest first; exhausted when budget (> 0) distances
// did not suffice.
func (g *graph) search(q []float32, ef int, accept func(*entry) bool, budget int) (_ []cand, exhausted bool) {
	if g.ep < 0 {
		return nil, false
	}
	ep := cand{1 - dot(q, g.vecs[g.ep]), g.ep}
	for l := g.top; l > 0; l-- {
		ep = g.greedy(q, ep, l)
	}
	ok := func(s int32) bool { return g.ents[s] != nil }
	if accept != nil {
		ok = func(s int32) bool {
			e := g.ents[s]
			return e != nil && accept(e)
		}
	}
	vis := visitedPool.Get().(*visited)
	defer visitedPool.Put(vis)
	return g.searchLayer(q, []cand{ep}, ef, 0, ok, vis, budget)
}

// bytes estimates the graph's memory, the vectors aside (they are the
// chunks').
func (g *graph) bytes() int {
	n := 4*cap(g.links0) + cap(g.n0) + 24*cap(g.vecs) + 8*cap(g.ents) + 24*cap(g.upper)
	for _, up := range g.upper {
		for _, ls := range up {
			n += 24 + 4*cap(ls)
		}
	}
	return n + 48*len(g.slots) // the id map: header, slot, table overhead
}
