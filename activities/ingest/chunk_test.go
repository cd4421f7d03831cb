package ingest

import (
	"errors"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/ctxflow/ctxflow/activities/tiktoken"
	"github.com/ctxflow/ctxflow/convo"
)

func tok(t testing.TB) convo.Tokenizer {
	t.Helper()
	tk, err := tiktoken.New("cl100k_base")
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

func TestSentences(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"Hello world. How are you? Fine!", []string{"Hello world. ", "How are you? ", "Fine!"}},
		{"华为Mate60多少钱？它的配置呢。好的", []string{"华为Mate60多少钱？", "它的配置呢。", "好的"}},
		{"Version 1.5 is out. Good.", []string{"Version 1.5 is out. ", "Good."}},
		{"  leading space. x", []string{"  leading space. ", "x"}},
		{"line one\nline two\n\n", []string{"line one\n", "line two\n\n"}},
		{"他说：“好。”然后走了。", []string{"他说：“好。”", "然后走了。"}},
		{"", nil},
	}
	for _, tc := range tests {
		got := Sentences(tc.in)
		if strings.Join(got, "|") != strings.Join(tc.want, "|") || len(got) != len(tc.want) {
			t.Errorf("Sentences(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// Joining the sentences gives the text back.
func TestPropSentencesAreLossless(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		text := rapid.StringMatching(`[a-z 。！？.!?\n华为价格0-9”]{0,80}`).Draw(t, "text")
		if strings.TrimSpace(text) == "" {
			return // blank text has no sentences
		}
		if got := strings.Join(Sentences(text), ""); got != text {
			t.Fatalf("join(Sentences(%q)) = %q", text, got)
		}
	})
}

func genDoc(t *rapid.T) string {
	sentences := rapid.SliceOfN(rapid.OneOf(
		rapid.StringMatching(`[A-Z][a-z]{1,9}( [a-z]{1,9}){0,30}[.!?] `),
		rapid.StringMatching(`[华为手机价格配置版本电池屏幕相机]{1,60}[。！？]`),
		rapid.StringMatching(`[a-z]{40,200}\. `), // long "words"
	), 1, 40).Draw(t, "sentences")
	return strings.Join(sentences, "")
}

// Every piece fits; every sentence is in some piece, in order; ids are
// stable and unique.
func TestPropChunks(t *testing.T) {
	tk := tok(t)
	rapid.Check(t, func(t *rapid.T) {
		doc := genDoc(t)
		opts := ChunkOptions{MaxTokens: rapid.IntRange(8, 200).Draw(t, "max"), Overlap: -1}
		if rapid.Bool().Draw(t, "with overlap") {
			opts.Overlap = rapid.IntRange(0, 50).Draw(t, "overlap")
		}
		pieces, err := Chunk("doc-1", doc, tk, opts)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for i, p := range pieces {
			if p.Tokens > opts.MaxTokens || p.Tokens != tk.Count(p.Text) || p.Text == "" || p.Index != i || seen[p.ID] {
				t.Fatalf("piece %d = %+v (max %d)", i, p, opts.MaxTokens)
			}
			seen[p.ID] = true
		}
		// Whitespace aside: without overlap the pieces tile the document
		// exactly; with it, each piece is a part of the document, the first
		// its beginning and the last its end.
		full := compact(doc)
		if opts.Overlap < 0 {
			if got := compact(strings.Join(piecesText(pieces), "")); got != full {
				t.Fatalf("pieces join to %q, want %q", got, full)
			}
		}
		for i, p := range pieces {
			if !strings.Contains(full, compact(p.Text)) {
				t.Fatalf("piece %d %q is not part of the document", i, p.Text)
			}
		}
		if !strings.HasPrefix(full, compact(pieces[0].Text)) || !strings.HasSuffix(full, compact(pieces[len(pieces)-1].Text)) {
			t.Fatal("the pieces do not reach both ends of the document")
		}
		again, _ := Chunk("doc-1", doc, tk, opts)
		if strings.Join(ids(again), ",") != strings.Join(ids(pieces), ",") {
			t.Fatal("chunk ids are not stable")
		}
	})
}

func piecesText(ps []Piece) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Text
	}
	return out
}

func ids(ps []Piece) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.ID
	}
	return out
}

func TestChunkOverlapAndLanguages(t *testing.T) {
	tk := tok(t)
	en := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 20)
	pieces, err := Chunk("en", en, tk, ChunkOptions{MaxTokens: 40, Overlap: 12})
	if err != nil {
		t.Fatal(err)
	}
	if len(pieces) < 5 {
		t.Fatalf("%d pieces", len(pieces))
	}
	for i := 1; i < len(pieces); i++ {
		last := Sentences(pieces[i-1].Text + " ")
		if !strings.HasPrefix(pieces[i].Text, strings.TrimSpace(last[len(last)-1])) {
			t.Errorf("piece %d does not start with the last sentence of piece %d", i, i-1)
		}
	}
	zh := strings.Repeat("华为Mate60的价格是5999元。它的电池容量是5000毫安时。", 10)
	pieces, err = Chunk("zh", zh, tk, ChunkOptions{MaxTokens: 30, Overlap: -1})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pieces {
		if !strings.HasSuffix(p.Text, "。") {
			t.Errorf("zh piece %q is not cut at a sentence end", p.Text)
		}
	}
	if strings.Join(piecesText(pieces), "") != zh {
		t.Error("without overlap, the zh pieces do not join back to the text")
	}
	if _, err := Chunk("e", " \n ", tk, ChunkOptions{}); !errors.Is(err, ErrEmptyDocument) {
		t.Errorf("blank document: %v", err)
	}
	if _, err := Chunk("e", "caf\xc3", tk, ChunkOptions{}); err == nil {
		t.Error("invalid UTF-8 accepted")
	}
}

func compact(s string) string {
	return strings.Join(strings.Fields(s), "")
}
