package tiktoken

import (
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	tiktokengo "github.com/pkoukk/tiktoken-go"
	tiktoken_loader "github.com/pkoukk/tiktoken-go-loader"
	"pgregory.net/rapid"

	"github.com/ctxflow/ctxflow/internal/proptest"
)

// TestMain runs rapid properties with at least 200 cases unless
// -rapid.checks or RAPID_CHECKS says otherwise.
func TestMain(m *testing.M) { proptest.Main(m) }

// The reference is tiktoken-go with the same embedded ranks.
var (
	refOnce sync.Once
	refs    = map[string]*tiktokengo.Tiktoken{}
)

func reference(tb fataler, enc string) *tiktokengo.Tiktoken {
	tb.Helper()
	refOnce.Do(func() {
		tiktokengo.SetBpeLoader(tiktoken_loader.NewOfflineLoader())
		for _, e := range []string{CL100kBase, O200kBase} {
			if r, err := tiktokengo.GetEncoding(e); err == nil {
				refs[e] = r
			}
		}
	})
	if refs[enc] == nil {
		tb.Fatalf("reference encoding %s did not load", enc)
	}
	return refs[enc]
}

// fataler is what testing.TB and *rapid.T have in common here.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

func checkAgainstReference(tb fataler, text string) {
	tb.Helper()
	for _, enc := range []string{CL100kBase, O200kBase} {
		want := reference(tb, enc).EncodeOrdinary(text)
		tok := mustNew(tb, enc)
		if got := tok.encode(text); !slices.Equal(got, want) {
			tb.Fatalf("%s encode(%q)\n got %v\nwant %v", enc, text, got, want)
		}
		if got := tok.Count(text); got != len(want) {
			tb.Fatalf("%s Count(%q) = %d, want %d", enc, text, got, len(want))
		}
	}
}

// TestMatchesReferenceOnSamples covers the tricky corners of both patterns.
func TestMatchesReferenceOnSamples(t *testing.T) {
	samples := []string{
		"", " ", "  ", "\n", "\r\n", " \n ", "a", "hello world", "Hello, World!!", "don't", "DON'T", "I'LL", "you're",
		"'s", "''s", "x's'd", "'ll've", " 'hello", "\thello", "\t\thello", "a  b   c", "a \n\n b", "trailing   ",
		"12345678", " 123", "1,234.56", "CamelCaseWord", "ABCdef", "abcDEF", "ǅungla", "ʰʰa", "naïve café", "e\u0301e\u0301",
		"\u0301abc", " \u0301", "über-Straße", "你好，世界", "华为Mate60的续航怎么样？", "日本語のテキスト", "한국어",
		"emoji 😀👍🏽 mix", "tabs\tand\vverticals\f", "nbsp\u00a0here", "ideographic\u3000space", "line\u2028sep",
		"path/to/file.go", "a//b", "x = {\"k\": [1, 2]}\n", "<|endoftext|>", "<|fim_prefix|>x", "\x85next", "\u200bzero",
		"ALLCAPS'S", "İstanbul", "ﬁnance", "Ⅻ roman", "٣٤٥ arabic digits", "x²³", "\xff\xfe broken \xc3",
		strings.Repeat(" ", 100) + "x", strings.Repeat("ab", 300), strings.Repeat("9", 50),
	}
	for _, s := range samples {
		checkAgainstReference(t, s)
	}
}

// TestMatchesReferenceOnSeedText compares on real mixed Chinese/English
// documents and code (testdata/sample.txt).
func TestMatchesReferenceOnSeedText(t *testing.T) {
	b, err := os.ReadFile("testdata/sample.txt")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.SplitAfter(string(b), "\n") {
		checkAgainstReference(t, line)
	}
	checkAgainstReference(t, string(b))
}

// TestPropMatchesReference draws strings from an alphabet of the characters
// the patterns treat differently.
func TestPropMatchesReference(t *testing.T) {
	alphabet := []rune("aAzZ'sStTrReEvVlLmMdD \t\n\r\v\f0189,./!?-_\"" +
		"\u00a0\u0085\u2028\u3000éÉǅʰ\u0301\u0308中文字ー한😀²٣ⅫİſK")
	rapid.Check(t, func(rt *rapid.T) {
		text := rapid.StringOfN(rapid.SampledFrom(alphabet), 0, 40, -1).Draw(rt, "text")
		checkAgainstReference(rt, text)
	})
}

// FuzzCountMatchesReference compares with tiktoken-go on arbitrary input.
func FuzzCountMatchesReference(f *testing.F) {
	for _, s := range []string{"hello world", "don't STOP", " \n\n x", "你好，世界", "e\u0301", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		checkAgainstReference(t, s)
	})
}

// TestPropHeapMergeMatchesScan checks the long-piece merge against the
// reference algorithm on pieces of every length.
func TestPropHeapMergeMatchesScan(t *testing.T) {
	alphabet := []rune("ab e中文字的到了模型上下文😀'\n")
	rapid.Check(t, func(rt *rapid.T) {
		enc := rapid.SampledFrom([]string{CL100kBase, O200kBase}).Draw(rt, "enc")
		piece := rapid.StringOfN(rapid.SampledFrom(alphabet), 1, 120, -1).Draw(rt, "piece")
		ranks := mustNew(rt, enc).ranks
		want := len(bpeParts(piece, ranks, nil)) - 1
		if len(piece) <= longPiece {
			piece += strings.Repeat(piece, longPiece/len(piece)+1)
			want = len(bpeParts(piece, ranks, nil)) - 1
		}
		if got := bpeCount(piece, ranks); got != want {
			rt.Fatalf("%s bpeCount(%q) = %d, scan says %d", enc, piece, got, want)
		}
	})
}
