package lexical

import (
	"math"
	"strings"
	"unicode/utf8"
)

// DefaultDim is the dimension of [Embedder] vectors when none is set.
const DefaultDim = 384

// Embedder embeds texts without a model: each text becomes a bag of hashed
// features, folded into a fixed number of dimensions with random signs
// (feature hashing) and L2-normalised. Features are character 1-, 2- and
// 3-grams of CJK runs, and for other scripts the words (lower case, plural
// folded; function words weigh little) and their character 3-grams with
// word boundaries, so that texts
// sharing words, word pieces or Chinese characters are close by cosine.
//
// The zero value embeds in [DefaultDim] dimensions. Embedder is safe for
// concurrent use, and its vectors depend only on the text and Dim.
type Embedder struct {
	// Dim is the vector dimension; 0 means DefaultDim.
	Dim int
}

// Dimension returns the dimension of the vectors.
func (e Embedder) Dimension() int {
	if e.Dim <= 0 {
		return DefaultDim
	}
	return e.Dim
}

// Embed returns one unit vector per text, in order. A text without
// features (empty, or only spaces and punctuation) embeds to the zero
// vector.
func (e Embedder) Embed(texts []string) [][]float32 {
	out := make([][]float32, len(texts))
	for i, t := range texts {
		out[i] = e.embed(t)
	}
	return out
}

// Feature weights.
const (
	wCJK1     = 0.5
	wCJK2     = 1.0
	wCJK3     = 1.0
	wWord     = 1.0
	wSubword  = 0.4
	wStopword = 0.2
)

// FNV-1a, 64 bits (as hash/fnv), inlined to hash substrings without
// copying them.
const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

func fnv64a(kind byte, s string) uint64 {
	h := uint64(fnvOffset)
	h ^= uint64(kind)
	h *= fnvPrime
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime
	}
	return h
}

func (e Embedder) embed(text string) []float32 {
	dim := e.Dimension()
	acc := make([]float64, dim)
	add := func(kind byte, feature string, w float64) {
		x := fnv64a(kind, feature)
		if x>>63 == 1 {
			w = -w
		}
		acc[x%uint64(dim)] += w
	}
	var offs []int
	for _, t := range scan(strings.ToLower(text)) {
		switch t.kind {
		case tokCJK:
			// offs[i] is where rune i starts; n-grams are substrings.
			offs = offs[:0]
			for i := range t.text {
				offs = append(offs, i)
			}
			offs = append(offs, len(t.text))
			n := len(offs) - 1
			for i := 0; i < n; i++ {
				add('1', t.text[offs[i]:offs[i+1]], wCJK1)
				if i+2 <= n {
					add('2', t.text[offs[i]:offs[i+2]], wCJK2)
				}
				if i+3 <= n {
					add('3', t.text[offs[i]:offs[i+3]], wCJK3)
				}
			}
		case tokWord:
			if stopwords[t.text] {
				add('w', t.text, wStopword)
				continue
			}
			add('w', stem(t.text), wWord)
			if utf8.RuneCountInString(t.text) < 2 {
				continue
			}
			padded := "<" + t.text + ">"
			offs = offs[:0]
			for i := range padded {
				offs = append(offs, i)
			}
			offs = append(offs, len(padded))
			for i := 0; i+3 < len(offs); i++ {
				add('s', padded[offs[i]:offs[i+3]], wSubword)
			}
		}
	}
	var norm float64
	for _, v := range acc {
		norm += v * v
	}
	vec := make([]float32, dim)
	if norm == 0 {
		return vec
	}
	norm = math.Sqrt(norm)
	for i, v := range acc {
		vec[i] = float32(v / norm)
	}
	return vec
}
