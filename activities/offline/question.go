package offline

import (
	"regexp"
	"slices"
	"strings"
	"unicode"

	"github.com/ctxflow/ctxflow/lexical"
)

// question is what the answerer reads from a question: whom it asks about
// (entities), what it asks about them (aspects), the kinds of value that
// would answer it, and the subject of a definition question.
type question struct {
	text     string
	entities []string // lower case
	// aspects are the content words no entity covers, without the light
	// verbs ("支持", "have") that only frame the question; weights are
	// their weights among the passages that may answer (see weigh).
	aspects []string
	weights []float64
	// cues are the value kinds the aspects name, nil for none (see
	// kindOfCue; set with the weights).
	cues []*valueKind
	// wants are the kinds of value that answer it ("多少钱" → money).
	wants []valueKind
	// defined is X of "what is X?" / "什么是X", lower case, or "".
	defined string
}

// lightVerbs frame a question without saying what it asks about
// ("华为Mate60支持防水吗" asks about 防水): aspects only when nothing
// else is.
var lightVerbs = []string{
	"支持", "具备", "具有", "拥有", "提供", "采用", "配备", "带有", "包含", "包括", "使用", "有",
	"support", "have", "offer", "provide", "feature", "include", "come", "use", "contain",
}

// broadWords ask about an entity as a whole ("华为Mate60的配置",
// "the Pixel 8's specs"): no aspect in particular.
var broadWords = []string{
	"配置", "参数", "规格", "信息", "情况", "特点", "资料", "详情", "详细", "概况", "简介", "介绍",
	"spec", "specification", "detail", "information", "info", "overview", "feature",
}

// readQuestion analyses q.
func readQuestion(q string) question {
	out := question{text: q, wants: wantedKinds(q), defined: strings.ToLower(lexical.DefinitionSubject(q))}
	var framing []string
	for _, k := range lexical.Keywords(q) {
		if k.Entity {
			out.entities = append(out.entities, k.Text)
		}
	}
	for _, k := range lexical.Aspects(q) {
		switch {
		case k.Entity || slices.ContainsFunc(out.entities, func(e string) bool { return strings.Contains(e, k.Text) }):
		case oneOf(k.Text, lightVerbs), oneOf(k.Text, broadWords):
			framing = append(framing, k.Text)
		default:
			out.aspects = append(out.aspects, k.Text)
		}
	}
	if len(out.aspects) == 0 && len(out.wants) == 0 && len(out.entities) == 0 {
		out.aspects = framing // "它支持什么？": the verb is all there is
	}
	return out
}

// oneOf reports whether keyword k is one of words (or an English
// inflection of one).
func oneOf(k string, words []string) bool {
	return slices.ContainsFunc(words, func(v string) bool { return sameWord(k, v) })
}

// intro reports whether the question asks about its entities as a whole
// ("介绍下华为Mate60", "Tell me about the Pixel 8"): nothing asked about
// them in particular.
func (q question) intro() bool {
	return len(q.entities) > 0 && len(q.aspects) == 0 && len(q.wants) == 0
}

// valueKind is a kind of value a question asks for, told by its cues in
// the question and found by fits in a sentence.
type valueKind struct {
	name string
	cues []string // lower case
	fits func(lower string) bool
}

var (
	currency = []string{"元", "块钱", "¥", "￥", "$", "€", "£", "美元", "欧元", "英镑", "人民币", "售价", "价格", "定价",
		"dollar", "yuan", "euro", "pound", "usd", "eur", "rmb", "price", "cost"}
	dateMarks = []string{"年", "月", "日", "号", "year", "month", "day", "january", "february", "march", "april", "may",
		"june", "july", "august", "september", "october", "november", "december"}
	year      = regexp.MustCompile(`(^|[^0-9])(1[5-9]|20)[0-9]{2}([^0-9]|$)`)
	zhNumeral = regexp.MustCompile(`[一二两三四五六七八九十百千万]`)
)

// valueKinds are the kinds of value the answerer recognises, money first
// (a money question is a number question too).
var valueKinds = []valueKind{
	{name: "money", cues: []string{"多少钱", "价格", "售价", "价钱", "价位", "费用", "多贵", "how much", "price", "cost", "fee", "expensive", "cheap"},
		fits: func(s string) bool { return hasDigit(s) && lexical.ContainsAny(s, currency) }},
	{name: "time", cues: []string{"什么时候", "何时", "哪年", "哪一年", "几月", "几号", "哪天", "when", "what year", "which year", "what date", "what time"},
		fits: func(s string) bool { return hasDigit(s) && (lexical.ContainsAny(s, dateMarks) || year.MatchString(s)) }},
	{name: "number", cues: []string{"多少", "几", "多大", "多长", "多高", "多重", "多宽", "多厚", "多久", "多快",
		"how many", "how much", "how big", "how large", "how long", "how tall", "how heavy", "how old", "how fast", "number of"},
		fits: func(s string) bool { return hasDigit(s) || zhNumeral.MatchString(s) }},
}

// wantedKinds are the kinds of value q asks for, by their cues: money or
// a time when it asks for one ("多少钱" is a number too, but a price
// answers it), else a number.
func wantedKinds(q string) []valueKind {
	lower := strings.ToLower(q)
	var out []valueKind
	for _, k := range valueKinds {
		if k.name == "number" && len(out) > 0 {
			break
		}
		if slices.ContainsFunc(k.cues, func(c string) bool { return containsTerm(lower, c) }) {
			out = append(out, k)
		}
	}
	return out
}

// kindOfCue is the value kind whose cue aspect word a is ("价格", "price"),
// if any: a sentence holding such a value speaks of a even without the word
// ("售价5999元" answers 价格).
func kindOfCue(a string) (valueKind, bool) {
	for _, k := range valueKinds[:2] { // money and time; numbers are no aspect
		if slices.ContainsFunc(k.cues, func(c string) bool { return sameWord(a, c) }) {
			return k, true
		}
	}
	return valueKind{}, false
}

func hasDigit(s string) bool { return strings.ContainsFunc(s, unicode.IsDigit) }

// containsTerm reports whether lower (lower case) contains term as a term:
// a term that starts or ends with a Latin letter or digit must not
// continue a longer word there ("8" is not in "2018", "mate60" is in
// "华为mate60的").
func containsTerm(lower, term string) bool {
	if term == "" {
		return false
	}
	for from := 0; ; {
		i := strings.Index(lower[from:], term)
		if i < 0 {
			return false
		}
		i += from
		end := i + len(term)
		if boundary(lower, i, term, end) {
			return true
		}
		from = i + 1
	}
}

// boundary reports whether the match of term at lower[i:end] is a whole
// term (see containsTerm).
func boundary(lower string, i int, term string, end int) bool {
	if isWordByte(term[0]) && i > 0 && isWordByte(lower[i-1]) {
		return false
	}
	if isWordByte(term[len(term)-1]) && end < len(lower) && isWordByte(lower[end]) {
		return false
	}
	return true
}

func isWordByte(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9'
}

// sameWord reports whether words a and b are the same English word up to
// a plural or third-person ending, or the same string otherwise.
func sameWord(a, b string) bool {
	if a == b {
		return true
	}
	if len(a) > len(b) {
		a, b = b, a
	}
	if rest := b[len(a):]; (rest == "s" || rest == "es") && b[:len(a)] == a {
		return true
	}
	return iesY(a, b) || iesY(b, a)
}

// iesY reports whether plural ends in "ies" where word ends in "y", on
// the same stem ("stories", "story").
func iesY(plural, word string) bool {
	return strings.HasSuffix(plural, "ies") && strings.HasSuffix(word, "y") && plural[:len(plural)-3] == word[:len(word)-1]
}

// mentions reports whether lower (lower case) names term: as it is, for
// an English word in any of its plural forms, for an entity that mixes
// CJK and Latin ("华为mate60") also by its Latin part alone ("Mate60的下一代").
func mentions(lower, term string) bool {
	if containsTerm(lower, term) {
		return true
	}
	if isLatinWord(term) {
		for i := 0; i < len(lower); { // each run of Latin letters and digits
			if !isWordByte(lower[i]) {
				i++
				continue
			}
			j := i + 1
			for j < len(lower) && isWordByte(lower[j]) {
				j++
			}
			if sameWord(lower[i:j], term) {
				return true
			}
			i = j
		}
		return false
	}
	if core := latinCore(term); core != "" && core != term {
		return containsTerm(lower, core)
	}
	return false
}

// isLatinWord reports whether s is one word of Latin letters and digits.
func isLatinWord(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isWordByte(s[i]) {
			return false
		}
	}
	return s != ""
}

// latinCore is the Latin part of a name that mixes CJK and Latin
// ("华为mate60" → "mate60"), "" for other names.
func latinCore(name string) string {
	if !strings.ContainsFunc(name, func(r rune) bool { return unicode.Is(unicode.Han, r) }) {
		return ""
	}
	core := strings.TrimSpace(strings.Map(func(r rune) rune {
		if unicode.Is(unicode.Han, r) {
			return ' '
		}
		return r
	}, name))
	if !strings.ContainsFunc(core, func(r rune) bool { return r < unicode.MaxASCII && unicode.IsLetter(r) }) || strings.Contains(core, "  ") {
		return ""
	}
	return core
}
