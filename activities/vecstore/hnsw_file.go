package vecstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
)

// The graph is saved at a clean Close, next to the chunk log, so that the
// next Open need not rebuild it (a build of 100k chunks takes a minute; a
// load, a fraction of a second). The file is derived, like the keyword
// index, and trusted only when it cannot be stale: it is removed by the
// first write of a process (with the dirty marker), written at Close after
// the last write, and records the size of the log it was saved against, its
// parameters and a checksum; Open loads it only when the previous process
// closed cleanly, the log is undamaged and of that size, and the file's
// nodes are exactly the chunks with vectors. Otherwise the graph is
// rebuilt in the background. Tombstones are not saved: their links are
// dropped, and a graph with more than a tenth of them is not saved at all.
//
//	magic | uvarint log size, dimension, M, nodes, entry node, top layer,
//	calibrated ef + 1, nodes at the calibration | per node: id, top layer,
//	per layer its links | crc32c of all before

const (
	graphName  = "dense.hnsw"
	graphMagic = "ctxflow-hnsw\x01"
)

// encodeGraph returns g's live nodes in the file's format.
func encodeGraph(g *graph, logSize int64, dim int) ([]byte, bool) {
	if g.ep < 0 || g.dead > len(g.ents)/10 {
		return nil, false
	}
	remap := make([]int32, len(g.ents))
	n := int32(0)
	ep, top := g.ep, g.top
	if g.ents[ep] == nil { // a tombstone: the live node on the highest layer
		ep, top = -1, -1
	}
	for s, e := range g.ents {
		remap[s] = -1
		if e == nil {
			continue
		}
		remap[s] = n
		n++
		if l := len(g.upper[s]); l > top {
			ep, top = int32(s), l
		}
	}
	if n == 0 {
		return nil, false
	}
	b := make([]byte, 0, len(graphMagic)+int(n)*(16+g.m0*3))
	b = append(b, graphMagic...)
	for _, v := range []uint64{uint64(logSize), uint64(dim), uint64(g.p.M), uint64(n), uint64(remap[ep]), uint64(top), uint64(g.ef + 1), uint64(g.calibrated)} {
		b = binary.AppendUvarint(b, v)
	}
	links := func(ls []int32) {
		live := 0
		for _, x := range ls {
			if remap[x] >= 0 {
				live++
			}
		}
		b = binary.AppendUvarint(b, uint64(live))
		for _, x := range ls {
			if remap[x] >= 0 {
				b = binary.AppendUvarint(b, uint64(remap[x]))
			}
		}
	}
	for s, e := range g.ents {
		if e == nil {
			continue
		}
		b = appendString(b, e.id)
		b = binary.AppendUvarint(b, uint64(len(g.upper[s])))
		links(g.links(int32(s), 0))
		for _, ls := range g.upper[s] {
			links(ls)
		}
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli)), true
}

// decodeGraph rebuilds a graph from b over the store's chunks: every node
// must be a chunk with a vector of dimension dim, and every such chunk a
// node.
func decodeGraph(b []byte, p hnswParams, logSize int64, dim int, chunks map[string]*entry, vectors int) (*graph, error) {
	if len(b) < len(graphMagic)+4 || string(b[:len(graphMagic)]) != graphMagic {
		return nil, errors.New("not a graph file")
	}
	body := b[:len(b)-4]
	if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(b[len(b)-4:]) {
		return nil, errors.New("checksum mismatch")
	}
	d := &decoder{b: body[len(graphMagic):]}
	size, fdim, m, n, ep, top := d.uvarint(), d.uvarint(), d.uvarint(), d.uvarint(), d.uvarint(), d.uvarint()
	ef, calibrated := d.uvarint(), d.uvarint()
	switch {
	case d.err != nil:
		return nil, d.err
	case size != uint64(logSize):
		return nil, fmt.Errorf("saved against a log of %d bytes, the log has %d", size, logSize)
	case fdim != uint64(dim) || m != uint64(p.M):
		return nil, fmt.Errorf("dimension %d and M %d, want %d and %d", fdim, m, dim, p.M)
	case n != uint64(vectors):
		return nil, fmt.Errorf("%d nodes for %d chunks with vectors", n, vectors)
	case ep >= n || top > 16:
		return nil, errors.New("bad entry point")
	case ef > 1<<20 || calibrated > 1<<40:
		return nil, errors.New("bad calibration")
	}
	g := newGraph(p)
	g.vecs = make([][]float32, 0, n)
	g.ents = make([]*entry, 0, n)
	g.links0 = make([]int32, int(n)*g.m0)
	g.n0 = make([]uint8, n)
	g.upper = make([][][]int32, n)
	g.slots = make(map[string]int32, n)
	readLinks := func(max int) []int32 {
		k := d.uvarint()
		if k > uint64(max) {
			d.err = fmt.Errorf("%d links, at most %d", k, max)
		}
		if d.err != nil {
			return nil
		}
		ls := make([]int32, k)
		for i := range ls {
			x := d.uvarint()
			if x >= n {
				d.err = errors.New("a link past the nodes")
			}
			ls[i] = int32(x)
		}
		return ls
	}
	for s := range int32(n) {
		id := d.string()
		level := d.uvarint()
		if d.err != nil {
			return nil, d.err
		}
		e, ok := chunks[id]
		switch {
		case !ok || e.zero || len(e.vec) != dim:
			return nil, fmt.Errorf("node %q is not a chunk with a vector", id)
		case level > top:
			return nil, fmt.Errorf("node %q above the top layer", id)
		}
		if _, dup := g.slots[id]; dup {
			return nil, fmt.Errorf("node %q twice", id)
		}
		g.vecs = append(g.vecs, e.vec)
		g.ents = append(g.ents, e)
		g.slots[id] = s
		ls := readLinks(g.m0)
		copy(g.links0[int(s)*g.m0:], ls)
		g.n0[s] = uint8(len(ls))
		if level > 0 {
			g.upper[s] = make([][]int32, level)
			for l := range g.upper[s] {
				g.upper[s][l] = readLinks(p.M)
			}
		}
		if d.err != nil {
			return nil, d.err
		}
	}
	if len(d.b) != 0 {
		return nil, errors.New("trailing bytes")
	}
	if len(g.upper[ep]) != int(top) {
		return nil, errors.New("the entry point is not on the top layer")
	}
	g.ep, g.top = int32(ep), int(top)
	g.ef, g.calibrated = int(ef)-1, int(calibrated)
	return g, nil
}

// saveGraph writes the graph file at a clean Close (under the lock).
func (s *Store) saveGraph() error {
	if s.dir == "" || s.log == nil || s.ann.building || s.ann.g == nil || !s.dirty && s.ann.saved == s.log.size {
		return nil // nothing to save, or saved as it is
	}
	b, ok := encodeGraph(s.ann.g, s.log.size, s.dim)
	if !ok {
		return nil
	}
	if err := writeLog(filepath.Join(s.dir, graphName), b); err != nil {
		return fmt.Errorf("vecstore: save the dense index: %w", err)
	}
	s.ann.saved = s.log.size
	return nil
}

// loadGraph loads the graph file at Open when the previous process closed
// cleanly; a missing or stale file is removed and the graph rebuilt.
func (s *Store) loadGraph(clean bool, logSize int64) {
	path := filepath.Join(s.dir, graphName)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return
	}
	if err == nil && !clean {
		err = errors.New("the previous process did not close cleanly")
	}
	if err == nil {
		var g *graph
		if g, err = decodeGraph(b, s.ann.cfg.Params, logSize, s.dim, s.chunks, len(s.rows)); err == nil {
			s.ann.g = g
			s.ann.saved = logSize
			return
		}
	}
	s.logger.Info("vecstore: rebuilding the dense index", "collection", s.name, "reason", err)
	_ = os.Remove(path)
}
