package vecstore

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/analysis/lang/cjk"
	"github.com/blevesearch/bleve/v2/index/scorch"
	"github.com/blevesearch/bleve/v2/mapping"
	"pgregory.net/rapid"

	"github.com/ctxflow/ctxflow/activities"
)

// analyze returns the tokens the named analyzer makes of text.
func analyze(name, text string) analysis.TokenStream {
	return newMapping().AnalyzerNamed(name).Analyze([]byte(text))
}

func terms(ts analysis.TokenStream) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = string(t.Term)
	}
	return out
}

func TestAnalyzerTerms(t *testing.T) {
	for _, tc := range []struct {
		text      string
		want, not []string
	}{
		// The words of three characters or more beside the bigrams: a
		// question's 卫星电话 still meets a chunk's 卫星通话 on 卫星.
		{"华为Mate60支持卫星通话，处理器是麒麟9000S", []string{"华为", "mate60", "支持", "卫星", "星通", "通话", "处理器", "处理", "麒麟", "9000s"}, []string{"卫星通话"}},
		{"哪款手机可以打卫星电话？", []string{"手机", "卫星", "电话"}, []string{"？"}},
		{"The Pixel 8 costs $699", []string{"the", "pixel", "8", "costs", "699"}, nil},
	} {
		got := terms(analyze(analyzerName, tc.text))
		for _, w := range tc.want {
			if !slices.Contains(got, w) {
				t.Errorf("%s: terms %q lack %q", tc.text, got, w)
			}
		}
		for _, w := range tc.not {
			if slices.Contains(got, w) {
				t.Errorf("%s: terms %q hold %q", tc.text, got, w)
			}
		}
	}
}

// genMixed draws text of Chinese, English, numbers, kana, Hangul, spaces
// and punctuation; its Han characters are the CJK Unified Ideographs of
// Unicode 1.1 (bleve's tokenizer drops some of later versions, before any
// filter).
func genMixed() *rapid.Generator[string] {
	parts := []string{"华为", "Mate60", "支持", "卫星通话", "处理器", "刷新率", "的", "，", "。", " ", "iPhone 15", "价格",
		"5999元", "東京タワー", "ｶﾀｶﾅ", "서울 날씨", "Ｐｉｘｅｌ", "don't", "Wi-Fi", "3.5", "\n", "麒麟9000S", "吗？"}
	return rapid.Custom(func(t *rapid.T) string {
		ps := rapid.SliceOfN(rapid.OneOf(rapid.SampledFrom(parts), rapid.StringOfN(rapid.RuneFrom(nil, cjkUnified), 1, 6, -1)), 0, 12).Draw(t, "parts")
		return strings.Join(ps, "")
	})
}

// TestAnalyzerProperties: the analyzer loses no letter, digit or Han
// character (each is inside a term's span), gives a Han word the text it
// spans, and adds only words to bleve's "cjk" analyzer: text without Han
// is analysed as before.
func TestAnalyzerProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		text := genMixed().Draw(t, "text")
		ours := analyze(analyzerName, text)
		covered := make([]bool, len(text))
		for _, tok := range ours {
			for i := tok.Start; i < tok.End; i++ {
				covered[i] = true
			}
			if tok.Type == analysis.Ideographic && utf8Han(text[tok.Start:tok.End]) && string(tok.Term) != text[tok.Start:tok.End] {
				t.Fatalf("term %q spans %q", tok.Term, text[tok.Start:tok.End])
			}
		}
		for i, r := range text {
			if (unicode.IsLetter(r) || unicode.IsDigit(r)) && !covered[i] {
				t.Fatalf("%q at %d of %q is in no term of %q", r, i, text, terms(ours))
			}
		}
		old := terms(analyze(cjk.AnalyzerName, text))
		got := terms(ours)
		for _, w := range old {
			if !slices.Contains(got, w) {
				t.Fatalf("%q: term %q of the cjk analyzer is missing from %q", text, w, got)
			}
		}
		if !strings.ContainsFunc(text, func(r rune) bool { return unicode.Is(unicode.Han, r) }) && !slices.Equal(got, old) {
			t.Fatalf("%q without Han: %q, the cjk analyzer %q", text, got, old)
		}
	})
}

// cjkUnified is the CJK Unified Ideographs of Unicode 1.1.
var cjkUnified = &unicode.RangeTable{R16: []unicode.Range16{{Lo: 0x4E00, Hi: 0x9FA5, Stride: 1}}}

func utf8Han(s string) bool {
	return s != "" && !strings.ContainsFunc(s, func(r rune) bool { return !unicode.Is(unicode.Han, r) })
}

func TestKeywordSearchChineseParaphrase(t *testing.T) {
	ctx := context.Background()
	s := openT(t, Options{Dimension: 2})
	chunks := []activities.Chunk{
		{ID: "mate60", Text: "华为Mate60是华为的旗舰手机，支持卫星通话，在没有信号的地方也能打电话。", Vector: []float32{1, 0}},
		{ID: "battery", Text: "小米14内置4610毫安时电池，支持90W有线快充。", Vector: []float32{0, 1}},
		{ID: "weather", Text: "今天北京天气晴朗，适合出游。", Vector: []float32{1, 1}},
	}
	if err := s.Upsert(ctx, chunks); err != nil {
		t.Fatal(err)
	}
	for q, want := range map[string]string{"哪款手机可以打卫星电话？": "mate60", "哪款手机的电池最大？": "battery"} {
		hits, err := s.Search(ctx, activities.SearchRequest{Mode: activities.SearchKeyword, Text: q, TopK: 3})
		if err != nil {
			t.Fatal(err)
		}
		if len(hits) == 0 || hits[0].Chunk.ID != want {
			t.Errorf("%s: hits %v, want %s first", q, hitIDs(hits), want)
		}
	}
}

// TestOpenRebuildsAnOldAnalysis: a keyword index analysed with bleve's
// "cjk" analyzer (before the segmenter) is rebuilt at Open, so that the
// questions, analysed by the mapping's analyzer, meet the chunks' terms.
func TestOpenRebuildsAnOldAnalysis(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(Options{Dir: dir, Collection: "kb", NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	chunk := activities.Chunk{ID: "a", DocumentID: "d", Text: "处理器是麒麟9000S", Vector: []float32{1, 0}}
	if err := s.Upsert(ctx, []activities.Chunk{chunk}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	textDir := filepath.Join(dir, "kb", "text")
	writeOldIndex(t, textDir, chunk)

	s = openT(t, Options{Dir: dir, Collection: "kb", NoSync: true})
	if got := textAnalyzer(s.text); got != analyzerName {
		t.Fatalf("reopened index analysed by %q, want %q", got, analyzerName)
	}
	hits, err := s.Search(ctx, activities.SearchRequest{Mode: activities.SearchKeyword, Text: "处理器", TopK: 1})
	if err != nil || len(hits) != 1 {
		t.Fatalf("search after the rebuild: %v, %v", hitIDs(hits), err)
	}
}

// writeOldIndex replaces the keyword index in dir by one of chunk analysed
// with bleve's "cjk" analyzer, as an earlier version wrote it.
func writeOldIndex(t *testing.T, dir string, chunk activities.Chunk) {
	t.Helper()
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	m := newMapping().(*mapping.IndexMappingImpl)
	m.DefaultAnalyzer = cjk.AnalyzerName
	m.DefaultMapping.Properties[fieldText].Fields[0].Analyzer = cjk.AnalyzerName
	idx, err := bleve.NewUsing(dir, m, scorch.Name, scorch.Name, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := idx.Index(chunk.ID, textDoc(chunk.Text, chunk.Metadata)); err != nil {
		t.Fatal(err)
	}
	if got := textAnalyzer(idx); got != cjk.AnalyzerName {
		t.Fatalf("old index analysed by %q", got)
	}
	if err := idx.Close(); err != nil {
		t.Fatal(err)
	}
}
