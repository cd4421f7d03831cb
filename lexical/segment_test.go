package lexical

import (
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode"
	"unicode/utf8"

	"pgregory.net/rapid"
)

func keywordTexts(q string) []string {
	var out []string
	for _, k := range Keywords(q) {
		out = append(out, k.Text)
	}
	return out
}

func TestChineseKeywords(t *testing.T) {
	for _, tc := range []struct {
		query     string
		want, not []string
	}{
		// Unsegmented, these were 哪款手机 and 打卫星电话, which no passage
		// saying 支持卫星通话 contains.
		{"哪款手机可以打卫星电话？", []string{"手机", "卫星", "电话"}, []string{"哪款手机", "打卫星电话", "哪款", "可以", "打"}},
		{"哪款手机的电池最大？", []string{"手机", "电池"}, []string{"哪款手机", "电池最大", "的"}},
		{"华为Mate60支持卫星通话吗", []string{"华为mate60", "支持", "卫星", "通话"}, []string{"吗", "卫星通话吗"}},
		// A word the dictionary lacks is the run of characters it cut.
		{"有能测血氧的手表吗？", []string{"测血氧", "手表"}, []string{"有能", "的"}},
		{"它的续航怎么样", []string{"续航"}, []string{"它", "怎么样"}},
		// Function words (pronouns, numerals, adverbs) and question words.
		{"华为的耳机一次能听多久？", []string{"华为", "耳机"}, []string{"一次", "多久"}},
		{"苹果手机什么时候换成Type-C接口的？", []string{"type-c", "苹果", "手机", "接口"}, []string{"什么", "时候", "什么时候"}},
		// Text that is not Chinese keeps its words.
		{"How much does the Pixel 8 cost?", []string{"pixel 8", "pixel", "8", "cost"}, []string{"how", "much"}},
		{"서울 날씨는 어때요", []string{"서울", "날씨는", "어때요"}, nil},
		{"東京タワーの高さはどのくらいですか", []string{"東京タワーの高さはどのくらいですか"}, nil},
	} {
		got := keywordTexts(tc.query)
		for _, w := range tc.want {
			if !slices.Contains(got, w) {
				t.Errorf("%s: keywords %q lack %q", tc.query, got, w)
			}
		}
		for _, w := range tc.not {
			if slices.Contains(got, w) {
				t.Errorf("%s: keywords %q hold %q", tc.query, got, w)
			}
		}
	}
}

func TestGradeMatchesChineseWords(t *testing.T) {
	for _, tc := range []struct {
		query, doc string
		relevant   bool
	}{
		{"哪款手机可以打卫星电话？", "华为Mate60是华为的旗舰手机，支持卫星通话。", true},
		{"哪款手机的电池最大？", "华为Mate60内置5000毫安时电池，支持66W有线快充。", true},
		{"有能测血氧的手表吗？", "这款智能手表可以监测心率和血氧饱和度。", true},
		{"哪款手机可以打卫星电话？", "今天北京天气晴朗，适合出游。", false},
		{"哪款手机的电池最大？", "杭州有西湖、灵隐寺和千岛湖。", false},
	} {
		if g := Grade(tc.query, tc.doc); g.Relevant != tc.relevant {
			t.Errorf("Grade(%s, %s): relevant %v, want %v (%s)", tc.query, tc.doc, g.Relevant, tc.relevant, g.Reason)
		}
	}
}

// genHan draws a run of Han characters: common ones of product questions,
// and any of the CJK Unified Ideographs block.
func genHan() *rapid.Generator[string] {
	common := []rune("哪款手机可以打卫星电话的电池最大华为支持通话屏幕刷新率更高价格多少钱续航怎么样测血氧手表充一次能用久是了吗呢")
	return rapid.Custom(func(t *rapid.T) string {
		rs := rapid.SliceOfN(rapid.OneOf(rapid.SampledFrom(common), rapid.RuneFrom(nil, unicode.Han)), 1, 40).Draw(t, "runes")
		return string(rs)
	})
}

func TestChineseWordsKeepText(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		run := genHan().Draw(t, "run")
		words := ChineseWords(run)
		if strings.Join(words, "") != run {
			t.Fatalf("words %q of %q do not join to it", words, run)
		}
		for _, w := range words {
			if w == "" {
				t.Fatalf("an empty word in %q", words)
			}
		}
		if ChineseWords(run+"a") != nil {
			t.Fatalf("words of a run that is not all Han")
		}
	})
}

func TestChineseKeywordsProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		q := genHan().Draw(t, "run") + rapid.SampledFrom([]string{"", "？", "吗？", "。"}).Draw(t, "end")
		for _, k := range Keywords(q) {
			switch {
			case !strings.Contains(q, k.Text):
				t.Fatalf("keyword %q is not in %q", k.Text, q)
			case utf8.RuneCountInString(k.Text) < 2:
				t.Fatalf("keyword %q of %q is one character", k.Text, q)
			case zhStopWords[k.Text]:
				t.Fatalf("keyword %q of %q is a question word", k.Text, q)
			}
		}
	})
}

// TestChineseWordsConcurrent: the shared segmenter serves goroutines at
// once (make unit runs it under the race detector).
func TestChineseWordsConcurrent(t *testing.T) {
	const run = "哪款手机可以打卫星电话"
	want := ChineseWords(run)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 50 {
				if got := ChineseWords(run); !slices.Equal(got, want) {
					t.Errorf("ChineseWords(%s) = %q, then %q", run, want, got)
					return
				}
			}
		})
	}
	wg.Wait()
}

// BenchmarkChineseWords measures the segmenter's speed, the dictionary
// loaded.
func BenchmarkChineseWords(b *testing.B) {
	run := strings.Repeat("华为是一款旗舰手机搭载麒麟芯片支持卫星通话电池容量为五千毫安时支持有线快充和无线快充屏幕刷新率最高", 20)
	ChineseWords(run)
	b.SetBytes(int64(len(run)))
	for b.Loop() {
		ChineseWords(run)
	}
}

// BenchmarkLoadSegmenter measures what loading the dictionary costs once
// per process: its time (ns/op), and the heap it keeps (MB-heap).
func BenchmarkLoadSegmenter(b *testing.B) {
	var heap float64
	for b.Loop() {
		before := heapAlloc()
		seg := loadSegmenter()
		heap = float64(heapAlloc()-before) / 1e6
		runtime.KeepAlive(seg)
	}
	b.ReportMetric(heap, "MB-heap")
}

// heapAlloc is the live heap after a collection.
func heapAlloc() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
