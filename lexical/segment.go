package lexical

import (
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/go-ego/gse"
)

// Chinese text has no spaces between words: a run of Han characters is cut
// into words by gse (github.com/go-ego/gse, Apache-2.0, pure Go), whose
// simplified-Chinese dictionary (jieba's, with frequencies and parts of
// speech) is embedded in the binary. Keywords ([Keywords], [Grade]) and the
// embedded store's keyword index (activities/vecstore) use the same
// segmenter.

// zhMinFreq is the least frequency of the dictionary words loaded: the
// 140,000 words seen 5 times or more of its 350,000. The rarer ones are
// mostly compounds of commoner words (卫星电话 is 卫星 and 电话) and cost
// two thirds of the load: 0.4 s and 50 MB of heap instead of 1.2 s and
// 135 MB, measured by BenchmarkLoadSegmenter.
const zhMinFreq = 5

// zhSegmenter is the shared segmenter, loaded once, when the first Han text
// is cut: a process that reads no Chinese never loads it.
var zhSegmenter = sync.OnceValue(loadSegmenter)

// LoadSegmenter loads the Chinese dictionary now, once per process: a
// worker does it at start-up, so that its first Chinese question does not
// wait for it (0.4-0.8 s) while other turns wait for the CPU it takes.
func LoadSegmenter() { zhSegmenter() }

// loadSegmenter loads the segmenter's dictionary; nil if it fails (the
// dictionary is embedded, so it does not), and Han text is then cut into
// single characters.
func loadSegmenter() *gse.Segmenter {
	seg := &gse.Segmenter{MinTokenFreq: zhMinFreq, NotLoadHMM: true, SkipLog: true}
	if err := seg.LoadDictEmbed("zh_s"); err != nil || seg.Dict == nil {
		return nil
	}
	return seg
}

// zhWord is a word of a run of Han characters.
type zhWord struct {
	text string
	// function marks a word the dictionary tags as a pronoun, numeral,
	// classifier, conjunction, adverb, preposition, particle or
	// interjection (这样, 一次, 可以, 非常, 的): no keyword.
	function bool
}

// zhFunctionTags are the dictionary's part-of-speech tags of function
// words: pronoun, numeral, classifier, conjunction, adverb, preposition,
// particles, modal particle, interjection, onomatopoeia, and the
// morphemes 很, 会 and 给 are tagged with.
var zhFunctionTags = setOf("r m mq q c d p u uj ul uz ug uv ud y e o zg")

// ChineseWords returns the words of run, a run of Han characters, in order:
// joined, they are run. A character the dictionary has no word for is a
// word of its own. It returns nil when run is not all Han.
func ChineseWords(run string) []string {
	if run == "" || !isHan(run) {
		return nil
	}
	words := segmentHan(run, false)
	out := make([]string, len(words))
	for i, w := range words {
		out[i] = w.text
	}
	return out
}

// segmentHan cuts run, all Han, into words. With search, each word is
// preceded by the dictionary words of two characters or more inside it
// (卫星电话: 卫星, 电话, 卫星电话), so that a query's compound matches a
// document's parts.
func segmentHan(run string, search bool) []zhWord {
	seg := zhSegmenter()
	if seg == nil {
		return runeWords(run)
	}
	segs := seg.Segment([]byte(run))
	out := make([]zhWord, 0, len(segs))
	end := 0
	for _, s := range segs {
		if s.Start() != end || s.End() > len(run) {
			return runeWords(run) // not a cut of run: never seen, but never lose text
		}
		end = s.End()
		if search {
			out = appendInner(out, run[s.Start():s.End()], s.Token())
		}
		out = append(out, zhWord{text: run[s.Start():s.End()], function: zhFunctionTags[s.Token().Pos()]})
	}
	if end != len(run) {
		return runeWords(run)
	}
	return out
}

// appendInner appends the dictionary words of two characters or more
// inside word (text, token t), innermost first.
func appendInner(out []zhWord, text string, t *gse.Token) []zhWord {
	for _, sub := range t.Segments() {
		inner := text[sub.Start():sub.End()]
		if utf8.RuneCountInString(inner) < 2 {
			continue
		}
		out = appendInner(out, inner, sub.Token())
		out = append(out, zhWord{text: inner, function: zhFunctionTags[sub.Token().Pos()]})
	}
	return out
}

// runeWords cuts s into single characters.
func runeWords(s string) []zhWord {
	out := make([]zhWord, 0, utf8.RuneCountInString(s))
	for _, r := range s {
		out = append(out, zhWord{text: string(r)})
	}
	return out
}

// isHan reports whether s is all Han characters.
func isHan(s string) bool {
	for _, r := range s {
		if !unicode.Is(unicode.Han, r) {
			return false
		}
	}
	return true
}

// zhKeywords returns the content words of a CJK run: its segmented words
// of two characters or more (and the words inside them) that are neither
// function words nor question words, and, where the dictionary knows no
// word, the run of single characters it cut (血氧 in 测血氧). A run that is
// not all Han (Japanese, Korean) is cut at question and function words
// instead ([zhFragments]).
func zhKeywords(run string) []string {
	if !isHan(run) {
		return zhFragments(run)
	}
	var out []string
	var unknown strings.Builder // single characters in a row
	flush := func() {
		if utf8.RuneCountInString(unknown.String()) >= 2 {
			out = append(out, unknown.String())
		}
		unknown.Reset()
	}
	for _, w := range segmentHan(run, true) {
		switch {
		case w.function || zhStopWords[w.text]:
			flush()
		case utf8.RuneCountInString(w.text) == 1:
			unknown.WriteString(w.text)
		default:
			flush()
			out = append(out, w.text)
		}
	}
	flush()
	return out
}

// zhStopWords are [zhQuestionWords] as a set.
var zhStopWords = func() map[string]bool {
	m := make(map[string]bool, len(zhQuestionWords))
	for _, w := range zhQuestionWords {
		m[w] = true
	}
	return m
}()
