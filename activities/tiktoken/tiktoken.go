// Package tiktoken is the [convo.Tokenizer] adapter for OpenAI's BPE
// encodings cl100k_base and o200k_base.
//
// The BPE ranks are the files embedded in github.com/pkoukk/tiktoken-go-loader
// (its offline loader): nothing is downloaded at run time. Each encoding is
// parsed once per process, on first use, and shared by all tokenizers.
//
// Counting does not go through tiktoken-go's regexp2-based splitter, which
// manages about 1 MB/s: the encodings' pre-tokenizing expressions are
// implemented directly (pretokenize.go) and byte-pair merging follows
// tiktoken's algorithm (bpe.go). Differential tests and a fuzz target check
// every split and token id against tiktoken-go itself, which this package
// keeps as its reference; it is the only package importing tiktoken-go.
package tiktoken

import (
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/ctxflow/ctxflow/convo"
	tiktoken_loader "github.com/pkoukk/tiktoken-go-loader"
)

// Supported encodings.
const (
	// CL100kBase is the encoding of GPT-4 and GPT-3.5-turbo.
	CL100kBase = "cl100k_base"
	// O200kBase is the encoding of GPT-4o.
	O200kBase = "o200k_base"
)

// Tokenizer counts tokens with one BPE encoding. It is safe for concurrent
// use.
type Tokenizer struct {
	name  string
	ranks map[string]int // read-only after loading
	split func(r []rune, emit func(a, b int))
	memo  memo
}

var _ convo.Tokenizer = (*Tokenizer)(nil)

type encodingOnce struct {
	once  sync.Once
	ranks map[string]int
	err   error
}

var encodings = map[string]*encodingOnce{CL100kBase: {}, O200kBase: {}}

// New returns a tokenizer for encoding, CL100kBase or O200kBase. The first
// call for an encoding parses its embedded ranks (a few hundred
// milliseconds); later calls share them.
func New(encoding string) (*Tokenizer, error) {
	e, ok := encodings[encoding]
	if !ok {
		return nil, fmt.Errorf("tiktoken: unsupported encoding %q (want %s or %s)", encoding, CL100kBase, O200kBase)
	}
	e.once.Do(func() {
		e.ranks, e.err = tiktoken_loader.NewOfflineLoader().LoadTiktokenBpe(encoding + ".tiktoken")
	})
	if e.err != nil {
		return nil, fmt.Errorf("tiktoken: load %s: %w", encoding, e.err)
	}
	split := splitCL100k
	if encoding == O200kBase {
		split = splitO200k
	}
	return &Tokenizer{name: encoding, ranks: e.ranks, split: split}, nil
}

// Encoding returns the encoding's name.
func (t *Tokenizer) Encoding() string { return t.name }

// Count returns the number of tokens text encodes to, exactly as tiktoken's
// encode_ordinary: special-token text such as "<|endoftext|>" counts as
// ordinary text, as user content must. Invalid UTF-8 bytes count as U+FFFD.
//
// A turn counts the same texts again and again (its window's messages and
// documents, once for the request's calibration and once more in the
// offline engine), so the counts of recent long texts are remembered.
func (t *Tokenizer) Count(text string) int {
	if len(text) < memoMin || len(text) > memoMax {
		return t.count(text)
	}
	if n, ok := t.memo.get(text); ok {
		return n
	}
	n := t.count(text)
	t.memo.put(text, n)
	return n
}

// count is Count without the memo.
func (t *Tokenizer) count(text string) int {
	n := 0
	t.pieces(text, func(piece string) {
		if _, ok := t.ranks[piece]; ok {
			n++
			return
		}
		n += bpeCount(piece, t.ranks)
	})
	return n
}

// encode returns the token ids of text (for tests against the reference).
func (t *Tokenizer) encode(text string) []int {
	var ids []int
	t.pieces(text, func(piece string) {
		if id, ok := t.ranks[piece]; ok {
			ids = append(ids, id)
			return
		}
		parts := bpeParts(piece, t.ranks, nil)
		for i := 0; i+1 < len(parts); i++ {
			ids = append(ids, t.ranks[piece[parts[i][0]:parts[i+1][0]]])
		}
	})
	return ids
}

// pieces calls fn with each pre-token of text, in order.
func (t *Tokenizer) pieces(text string, fn func(piece string)) {
	if text == "" {
		return
	}
	if !utf8.ValidString(text) {
		text = string([]rune(text)) // as regexp2 sees it: each bad byte is U+FFFD
	}
	runes := make([]rune, 0, len(text))
	offs := make([]int, 0, len(text)+1)
	for i, r := range text {
		runes = append(runes, r)
		offs = append(offs, i)
	}
	offs = append(offs, len(text))
	t.split(runes, func(a, b int) { fn(text[offs[a]:offs[b]]) })
}

// The memo holds texts of memoMin to memoMax bytes, memoBytes of them at
// most in each of its two generations: shorter texts are counted about as
// fast as they are looked up, and a generation that is full becomes the
// previous one, whose texts move back when they are counted again.
const (
	memoMin   = 64
	memoMax   = 64 << 10
	memoBytes = 2 << 20
)

// memo remembers the counts of recent texts (see Count).
type memo struct {
	mu        sync.Mutex
	cur, prev map[string]int
	size      int // bytes of cur's texts
}

func (m *memo) get(text string) (int, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if n, ok := m.cur[text]; ok {
		return n, true
	}
	n, ok := m.prev[text]
	if ok {
		m.add(text, n)
	}
	return n, ok
}

func (m *memo) put(text string, n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.add(text, n)
}

func (m *memo) add(text string, n int) {
	if m.cur == nil || m.size+len(text) > memoBytes {
		m.prev, m.cur, m.size = m.cur, make(map[string]int), 0
	}
	m.cur[strings.Clone(text)] = n // not the caller's backing array
	m.size += len(text)
}
