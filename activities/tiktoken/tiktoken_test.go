package tiktoken

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
)

func mustNew(tb fataler, enc string) *Tokenizer {
	tb.Helper()
	tok, err := New(enc)
	if err != nil {
		tb.Fatalf("New(%q): %v", enc, err)
	}
	return tok
}

func TestCountKnownValues(t *testing.T) {
	tests := []struct {
		enc, text string
		want      int
	}{
		{CL100kBase, "", 0},
		{CL100kBase, "hello world", 2},
		{CL100kBase, "Hello, world!", 4},
		{CL100kBase, "tiktoken is great!", 6},
		{CL100kBase, "<|endoftext|>", 7},
		{O200kBase, "hello world", 2},
		{O200kBase, "tiktoken is great!", 6},
		{CL100kBase, "你好，世界", 6},
		{O200kBase, "你好，世界", 3},
	}
	for _, tt := range tests {
		got := mustNew(t, tt.enc).Count(tt.text)
		if got != tt.want {
			t.Errorf("%s Count(%q) = %d, want %d", tt.enc, tt.text, got, tt.want)
		}
	}
}

// TestTokenIDs pins the exact ids (OpenAI cookbook values), so a wrong
// embedded rank file cannot pass on counts alone.
func TestTokenIDs(t *testing.T) {
	tests := []struct {
		enc, text string
		want      []int
	}{
		{CL100kBase, "hello world", []int{15339, 1917}},
		{CL100kBase, "tiktoken is great!", []int{83, 1609, 5963, 374, 2294, 0}},
		{CL100kBase, "你好，世界", []int{57668, 53901, 3922, 3574, 244, 98220}},
		{O200kBase, "hello world", []int{24912, 2375}},
		{O200kBase, "tiktoken is great!", []int{83, 8251, 2488, 382, 2212, 0}},
		{O200kBase, "你好，世界", []int{177519, 979, 28428}},
	}
	for _, tt := range tests {
		got := mustNew(t, tt.enc).encode(tt.text)
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s encode(%q) = %v, want %v", tt.enc, tt.text, got, tt.want)
		}
	}
}

func TestUnknownEncoding(t *testing.T) {
	if _, err := New("gpt2"); err == nil {
		t.Fatal("New(gpt2) succeeded, want an error")
	}
}

func TestSharedEncoding(t *testing.T) {
	a, b := mustNew(t, CL100kBase), mustNew(t, CL100kBase)
	if reflect.ValueOf(a.ranks).UnsafePointer() != reflect.ValueOf(b.ranks).UnsafePointer() {
		t.Error("two tokenizers of one encoding do not share the loaded ranks")
	}
	if a.Encoding() != CL100kBase {
		t.Errorf("Encoding() = %q", a.Encoding())
	}
}

func TestCountConcurrent(t *testing.T) {
	texts := []string{"hello world", strings.Repeat("上下文管理 context ", 50), "tool output {\"rows\": [1,2,3]}"}
	want := make([]int, len(texts))
	for i, s := range texts {
		want[i] = mustNew(t, O200kBase).Count(s)
	}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tok := mustNew(t, O200kBase)
			for k := 0; k < 50; k++ {
				i := (g + k) % len(texts)
				if got := tok.Count(texts[i]); got != want[i] {
					t.Errorf("goroutine %d: Count = %d, want %d", g, got, want[i])
					return
				}
			}
		}()
	}
	wg.Wait()
}

func TestCountInvalidUTF8(t *testing.T) {
	tok := mustNew(t, CL100kBase)
	if n := tok.Count("\xff\xfe abc \xc3"); n <= 0 {
		t.Errorf("Count(invalid UTF-8) = %d, want > 0", n)
	}
}

// TestCountMemo: Count remembers long texts, and its counts stay those of
// count as texts come back, are crowded out into the previous generation
// and out of the memo altogether.
func TestCountMemo(t *testing.T) {
	tok := mustNew(t, CL100kBase)
	text := func(i int) string { return fmt.Sprintf("turn %d: %s", i, englishText) }
	if n := tok.Count(text(0)); n != tok.count(text(0)) {
		t.Fatalf("Count = %d, count = %d", n, tok.count(text(0)))
	}
	if _, ok := tok.memo.get(text(0)); !ok {
		t.Fatal("a long text is not remembered")
	}
	if tok.Count("hi"); len(tok.memo.cur) != 1 {
		t.Errorf("a short text is remembered: %d texts", len(tok.memo.cur))
	}
	texts := 3 * memoBytes / len(text(0)) // three generations' worth
	for i := range texts {
		if got, want := tok.Count(text(i)), tok.count(text(i)); got != want {
			t.Fatalf("text %d: Count = %d, count = %d", i, got, want)
		}
	}
	if tok.memo.size > memoBytes || len(tok.memo.prev) == 0 {
		t.Errorf("memo holds %d bytes (at most %d) and %d previous texts", tok.memo.size, memoBytes, len(tok.memo.prev))
	}
	for _, i := range []int{0, texts / 2, texts - 1} { // forgotten, previous, current
		if got, want := tok.Count(text(i)), tok.count(text(i)); got != want {
			t.Errorf("text %d again: Count = %d, count = %d", i, got, want)
		}
	}
	if _, ok := tok.memo.cur[text(texts/2)]; !ok && len(tok.memo.prev) > 0 {
		t.Errorf("a previous text counted again is not moved to the current generation")
	}
}
