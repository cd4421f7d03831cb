package tiktoken

import "math"

// bpeParts runs byte-pair merging on piece with the encoding's ranks and
// returns the boundaries of the resulting tokens (len = tokens + 1). It is the
// algorithm of OpenAI's tiktoken (and tiktoken-go's bytePairMerge): repeatedly
// merge the adjacent pair with the lowest rank, leftmost first on ties. buf is
// reused between calls.
func bpeParts(piece string, ranks map[string]int, buf [][2]int) [][2]int {
	parts := buf[:0]
	for i := 0; i <= len(piece); i++ {
		parts = append(parts, [2]int{i, math.MaxInt})
	}
	rank := func(i, skip int) int {
		if i+skip+2 < len(parts) {
			if r, ok := ranks[piece[parts[i][0]:parts[i+skip+2][0]]]; ok {
				return r
			}
		}
		return math.MaxInt
	}
	for i := 0; i < len(parts)-2; i++ {
		parts[i][1] = rank(i, 0)
	}
	for len(parts) > 1 {
		minRank, minIdx := math.MaxInt, -1
		for i := 0; i < len(parts)-1; i++ {
			if parts[i][1] < minRank {
				minRank, minIdx = parts[i][1], i
			}
		}
		if minIdx < 0 {
			break
		}
		i := minIdx
		parts[i][1] = rank(i, 1)
		if i > 0 {
			parts[i-1][1] = rank(i-1, 1)
		}
		parts = append(parts[:i+1], parts[i+2:]...)
	}
	return parts
}

// longPiece is the piece length (bytes) above which bpeCount switches from
// the quadratic scan to the heap.
const longPiece = 48

// bpeCount is len(bpeParts(piece))-1, computed in O(n log n) for long pieces
// (a CJK run between punctuation is one piece). It merges in the same order:
// a min-heap on (rank, position) gives the lowest rank, leftmost first.
func bpeCount(piece string, ranks map[string]int) int {
	if len(piece) <= longPiece {
		var buf [longPiece + 1][2]int
		return len(bpeParts(piece, ranks, buf[:0])) - 1
	}
	n := len(piece)
	// Parts are a linked list over byte offsets: a part starting at i spans
	// [i, next[i]). Merging i with next[i] unlinks next[i], so a part's
	// index is its start forever. Offset n is the end sentinel.
	next := make([]int, n+1)
	prev := make([]int, n+1)
	rank := make([]int, n+1)
	for i := range next {
		next[i], prev[i] = i+1, i-1
	}
	pairRank := func(i int) int {
		if j := next[i]; j < n {
			if r, ok := ranks[piece[i:next[j]]]; ok {
				return r
			}
		}
		return math.MaxInt
	}
	h := make(pairHeap, 0, n)
	for i := 0; i < n; i++ {
		rank[i] = pairRank(i)
		if rank[i] != math.MaxInt {
			h = append(h, pair{rank[i], i})
		}
	}
	h.init()
	parts := n
	for len(h) > 0 {
		p := h.pop()
		i := p.pos
		if next[i] == -1 || rank[i] != p.rank { // stale entry
			continue
		}
		j := next[i] // merge i with j
		next[i] = next[j]
		prev[next[j]] = i
		next[j] = -1
		parts--
		for _, k := range [2]int{i, prev[i]} {
			if k < 0 {
				continue
			}
			if rank[k] = pairRank(k); rank[k] != math.MaxInt {
				h.push(pair{rank[k], k})
			}
		}
	}
	return parts
}

type pair struct{ rank, pos int }

// pairHeap is a binary min-heap ordered by (rank, pos).
type pairHeap []pair

func (h pairHeap) less(a, b int) bool {
	return h[a].rank < h[b].rank || (h[a].rank == h[b].rank && h[a].pos < h[b].pos)
}

func (h pairHeap) init() {
	for i := len(h)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func (h *pairHeap) push(p pair) {
	*h = append(*h, p)
	for i := len(*h) - 1; i > 0; {
		parent := (i - 1) / 2
		if !h.less(i, parent) {
			break
		}
		(*h)[i], (*h)[parent] = (*h)[parent], (*h)[i]
		i = parent
	}
}

func (h *pairHeap) pop() pair {
	old := *h
	top := old[0]
	last := len(old) - 1
	old[0] = old[last]
	*h = old[:last]
	h.down(0)
	return top
}

func (h pairHeap) down(i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		m := l
		if r := l + 1; r < len(h) && h.less(r, l) {
			m = r
		}
		if !h.less(m, i) {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}
