// Package ingest turns documents into chunks for the vector store:
// token-aware chunking that respects sentences in Chinese and English, with
// overlap and stable ids.
package ingest

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/ctxflow/ctxflow/convo"
)

// ChunkOptions bound the chunks.
type ChunkOptions struct {
	// MaxTokens is the most tokens a chunk may hold (default 256).
	MaxTokens int
	// Overlap is how many tokens of trailing sentences a chunk repeats from
	// the one before (default 32; 0 keeps the default, negative means none).
	Overlap int
}

func (o ChunkOptions) withDefaults() ChunkOptions {
	if o.MaxTokens <= 0 {
		o.MaxTokens = 256
	}
	switch {
	case o.Overlap == 0:
		o.Overlap = 32
	case o.Overlap < 0:
		o.Overlap = 0
	}
	o.Overlap = min(o.Overlap, o.MaxTokens/2)
	return o
}

// Piece is one chunk of a document.
type Piece struct {
	// ID is stable: the same document id, position and text give the same
	// id, so re-ingesting an unchanged document is idempotent.
	ID     string
	Index  int
	Text   string
	Tokens int
	// Metadata is stored with the chunk (a passage's id, title and url).
	Metadata map[string]string
}

// ErrEmptyDocument is returned for a document with no text.
var ErrEmptyDocument = errors.New("document has no text")

// Chunk splits text into pieces of at most MaxTokens tokens. Pieces are made
// of whole sentences where a sentence fits; a longer sentence is cut at word
// boundaries (between characters for CJK). Each piece after the first starts
// with the trailing sentences of the one before that fit in Overlap tokens.
func Chunk(documentID, text string, tok convo.Tokenizer, opts ChunkOptions) ([]Piece, error) {
	if documentID == "" {
		return nil, errors.New("chunk: empty document id")
	}
	if !utf8.ValidString(text) {
		return nil, fmt.Errorf("chunk %s: text is not valid UTF-8", documentID)
	}
	opts = opts.withDefaults()
	var units []unit
	for _, s := range Sentences(text) {
		for _, part := range splitLong(s, tok, opts.MaxTokens) {
			if strings.TrimSpace(part) != "" {
				units = append(units, unit{part, tok.Count(part)})
			}
		}
	}
	if len(units) == 0 {
		return nil, fmt.Errorf("chunk %s: %w", documentID, ErrEmptyDocument)
	}

	var pieces []Piece
	start := 0
	for start < len(units) {
		end, total := start, 0
		for end < len(units) && (end == start || total+units[end].tokens <= opts.MaxTokens) {
			total += units[end].tokens
			end++
		}
		// Token counts are not quite additive across unit boundaries: the
		// joined text is the one that must fit.
		body, n := join(units[start:end], tok)
		for n > opts.MaxTokens && end > start+1 {
			end--
			body, n = join(units[start:end], tok)
		}
		pieces = append(pieces, Piece{ID: chunkID(documentID, len(pieces), body), Index: len(pieces), Text: body, Tokens: n})
		if end == len(units) {
			break
		}
		// The next piece repeats the trailing units that fit in Overlap,
		// but always moves forward.
		next, over := end, 0
		for next > start+1 && over+units[next-1].tokens <= opts.Overlap {
			over += units[next-1].tokens
			next--
		}
		start = next
	}
	return pieces, nil
}

type unit struct {
	text   string
	tokens int
}

func join(units []unit, tok convo.Tokenizer) (string, int) {
	var b strings.Builder
	for _, u := range units {
		b.WriteString(u.text)
	}
	body := strings.TrimSpace(b.String())
	return body, tok.Count(body)
}

func chunkID(documentID string, index int, text string) string {
	h := sha256.Sum256([]byte(fmt.Sprintf("%s\x00%d\x00%s", documentID, index, text)))
	return fmt.Sprintf("%s#%d-%s", documentID, index, hex.EncodeToString(h[:6]))
}

// Sentences splits text into sentences, keeping each one's terminator and
// trailing space so that joining them gives the text back. Boundaries are
// . ! ? followed by a space (English), 。！？；… (Chinese) and line breaks.
func Sentences(text string) []string {
	var out []string
	start := 0
	runes := []rune(text)
	pos := 0 // byte offset of runes[i]
	for i, r := range runes {
		size := utf8.RuneLen(r)
		end := -1
		switch {
		case strings.ContainsRune("。！？；…", r):
			end = pos + size
		case r == '\n':
			end = pos + size
		case strings.ContainsRune(".!?", r) && (i+1 == len(runes) || unicode.IsSpace(runes[i+1])):
			end = pos + size
		}
		pos += size
		if end < 0 {
			continue
		}
		// Keep closing quotes and following spaces with the sentence.
		for end < len(text) {
			r2, n := utf8.DecodeRuneInString(text[end:])
			if r2 != '\n' && (unicode.IsSpace(r2) || strings.ContainsRune("”’\"')）」", r2)) {
				end += n
				continue
			}
			break
		}
		switch {
		case end <= start:
		case strings.TrimSpace(text[start:end]) != "":
			out = append(out, text[start:end])
			start = end
		case len(out) > 0: // blank: belongs to the sentence before
			out[len(out)-1] += text[start:end]
			start = end
		default: // leading blank: joins the first sentence
		}
	}
	if start < len(text) {
		if strings.TrimSpace(text[start:]) != "" {
			out = append(out, text[start:])
		} else if len(out) > 0 {
			out[len(out)-1] += text[start:]
		}
	}
	return out
}

// splitLong cuts a sentence longer than max tokens at word boundaries
// (between any two CJK characters), each part at most max tokens.
func splitLong(s string, tok convo.Tokenizer, maxTokens int) []string {
	if tok.Count(s) <= maxTokens {
		return []string{s}
	}
	words := words(s)
	var out []string
	var cur strings.Builder
	for _, w := range words {
		if cur.Len() > 0 && tok.Count(cur.String()+w) > maxTokens {
			out = append(out, cur.String())
			cur.Reset()
		}
		if tok.Count(w) > maxTokens { // a single overlong "word": cut by runes
			for _, r := range w {
				if cur.Len() > 0 && tok.Count(cur.String()+string(r)) > maxTokens {
					out = append(out, cur.String())
					cur.Reset()
				}
				cur.WriteRune(r)
			}
			continue
		}
		cur.WriteString(w)
	}
	if cur.Len() > 0 {
		out = append(out, cur.String())
	}
	return out
}

// words splits s into words that keep their trailing space; each CJK
// character is a word of its own.
func words(s string) []string {
	var out []string
	start := 0
	for i, r := range s {
		switch {
		case unicode.Is(unicode.Han, r) || unicode.Is(unicode.Hiragana, r) || unicode.Is(unicode.Katakana, r):
			if i > start {
				out = append(out, s[start:i])
			}
			out = append(out, string(r))
			start = i + utf8.RuneLen(r)
		case unicode.IsSpace(r):
			out = append(out, s[start:i+utf8.RuneLen(r)])
			start = i + utf8.RuneLen(r)
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}
