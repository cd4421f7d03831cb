package lexical

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// entKind is how an entity was recognised; stronger kinds weigh more when
// the rewriter picks a topic.
type entKind uint8

const (
	entPhrase      entKind = iota // a CJK noun phrase cut out at a function word
	entNameInitial                // one capitalised word starting a sentence
	entTopic                      // a CJK noun phrase asked about or standing alone: "你认识王科吗", "北京"
	entName                       // capitalised words: "Golden Wok", "Zappa"
	entProduct                    // letters with digits: "Mate60", "Pixel 8", "华为Mate60"
)

func (k entKind) weight() float64 {
	switch k {
	case entProduct:
		return 3
	case entName:
		return 2.2
	case entTopic:
		return 2
	case entNameInitial:
		return 1.2
	}
	return 1
}

// entity is a salient name or noun phrase of a text; pos is its byte offset.
type entity struct {
	text string
	kind entKind
	pos  int
}

// entities returns the named entities and salient noun phrases of s, in
// order of appearance: Latin+digit product tokens (with a Chinese brand
// written before them), capitalised multiword names, and CJK noun phrases
// in topic position (before a particle or predicate) or after a verb of
// wanting, knowing or buying.
func entities(s string) []entity {
	toks := scan(s)
	var out []entity
	sentenceStart := true
	for i := 0; i < len(toks); {
		t := toks[i]
		switch t.kind {
		case tokPunct:
			if strings.ContainsAny(t.text, ".!?。！？;；:：\n") {
				sentenceStart = true
			}
			i++
			continue
		case tokCJK:
			// A CJK run that directly precedes a product token is its brand,
			// handled with the token.
			if i+1 < len(toks) && toks[i+1].kind == tokWord && toks[i+1].start == t.end && isBrandedWord(s, toks[i+1]) {
				out = append(out, cjkPhrases(t.text[:len(t.text)-len(brandPrefix(t.text))], t.start)...)
				i++
				continue
			}
			run, at := t.text, t.start
			if i > 0 && toks[i-1].kind == tokWord && strings.TrimSpace(s[toks[i-1].end:t.start]) == "" && isNumber(toks[i-1].text) {
				// "5999元起", "14 张表", "4750毫安时": the unit belongs to the number.
				if u := zhUnit(run); u > 0 {
					run, at = run[u:], at+u
				} else if r, n := utf8.DecodeRuneInString(run); strings.ContainsRune(unitRunes, r) {
					run, at = run[n:], at+n
				}
			}
			phrases := cjkPhrases(run, at)
			if i+1 < len(toks) && toks[i+1].kind == tokWord && toks[i+1].start == t.end && isNumber(toks[i+1].text) {
				// "电池容量为4750毫安时": the run leads to a quantity; it is no
				// topic standing alone.
				for k := range phrases {
					if phrases[k].pos+len(phrases[k].text) == t.end {
						phrases[k].kind = entPhrase
						phrases[k].text = strings.TrimRight(phrases[k].text, "为是约达有共仅只到至")
					}
				}
			}
			out = append(out, phrases...)
			sentenceStart = false
			i++
			continue
		}
		j, e, ok := nameRun(s, toks, i, sentenceStart)
		if !ok && i > 0 && toks[i-1].kind == tokCJK && toks[i-1].end == t.start && isBrandedWord(s, t) {
			j, e, ok = i+1, entity{text: t.text, kind: entProduct, pos: t.start}, true
		}
		sentenceStart = false
		if !ok {
			i++
			continue
		}
		if i > 0 && toks[i-1].kind == tokCJK && toks[i-1].end == t.start && (e.kind == entProduct || isBrandedWord(s, t)) {
			if b := brandPrefix(toks[i-1].text); b != "" {
				e.text, e.pos = b+e.text, toks[i-1].end-len(b)
			}
		}
		if isNumber(e.text) {
			i = j // a number alone is no topic
			continue
		}
		out = append(out, e)
		i = j
	}
	return out
}

// unitRunes after a number make it a quantity, not a model number: "5999元".
const unitRunes = "个只元块年月日号点岁次分秒米斤克度人家条件张本台部辆间位倍天周级"

// zhUnits are units of more than one rune after a number, longest first
// where one starts another.
var zhUnits = []string{"毫安时", "毫安", "万像素", "像素", "英寸", "厘米", "毫米", "公里", "千米", "千克", "公斤", "小时", "分钟",
	"赫兹", "千瓦", "万元", "亿元", "万人", "亿人", "万", "亿", "瓦", "兆", "倍"}

// zhUnit returns the length of the unit run starts with, 0 for none.
func zhUnit(run string) int {
	for _, u := range zhUnits {
		if strings.HasPrefix(run, u) {
			return len(u)
		}
	}
	return 0
}

// isBrandedWord reports whether word token t, written right after a CJK
// run, is a product name or model number: "Mate60", or "14" in "小米14"
// (but not "5999" in "5999元").
func isBrandedWord(s string, t token) bool {
	if isProductWord(t.text) {
		return true
	}
	if !isNumber(t.text) || len(t.text) > 3 {
		return false // "4750毫安时": a quantity, not a model number
	}
	r, _ := utf8.DecodeRuneInString(s[t.end:])
	return !strings.ContainsRune(unitRunes, r) && r != '%' && r != '.'
}

// nameJoiners may join capitalised words into one name: "Mothers of
// Invention", "Zappa and the Mothers".
var nameJoiners = setOf("of the and de la le von van der den du da di del y &")

// notNames are capitalised words that do not name a topic: months, days,
// titles.
var notNames = setOf(`january february march april may june july august september october november december jan feb mar
apr jun jul aug sep sept oct nov dec monday tuesday wednesday thursday friday saturday sunday mr mrs ms dr st mt prof sir
list show find search explain describe compare summarize summarise continue retry`)

// compass words and nationality adjectives describe rather than name.
var compass = setOf("north south east west northern southern eastern western central centre center")

// allModifiers reports whether every word of a name is a compass word or a
// nationality adjective ("Italian", "Asian Oriental", "North American"):
// such names qualify a topic rather than being one.
func allModifiers(name string) bool {
	for _, w := range strings.Fields(name) {
		l := strings.ToLower(w)
		if compass[l] || l == "thai" || l == "french" || l == "welsh" || l == "dutch" || l == "greek" || l == "oriental" {
			continue
		}
		if len(l) > 4 && (strings.HasSuffix(l, "ian") || strings.HasSuffix(l, "ese") || strings.HasSuffix(l, "ish") || strings.HasSuffix(l, "can") || strings.HasSuffix(l, "ean")) {
			continue
		}
		return false
	}
	return true
}

// isOrdinal reports whether w is a number with an ordinal or unit suffix:
// "5th", "1990s", "7pm", "10km", "66W", "120Hz".
func isOrdinal(w string) bool {
	i := strings.IndexFunc(w, func(r rune) bool { return !unicode.IsDigit(r) })
	if i <= 0 {
		return false
	}
	switch strings.ToLower(w[i:]) {
	case "st", "nd", "rd", "th", "s", "'s", "am", "pm", "km", "m", "kg", "g", "mb", "gb", "cm", "mm", "k", "h", "min",
		"w", "kw", "mah", "hz", "khz", "mhz", "ghz", "tb", "mp", "nm", "ml", "v", "ms", "fps", "dpi", "ppi", "x":
		return true
	}
	return false
}

// isProductWord reports whether w mixes letters and digits ("Mate60",
// "9000s") or is camel-cased ("iPhone").
func isProductWord(w string) bool {
	if isOrdinal(w) || isQuantity(w) {
		return false
	}
	if hasDigit(w) && hasLetter(w) {
		return true
	}
	r, size := utf8.DecodeRuneInString(w)
	return unicode.IsLower(r) && strings.ContainsFunc(w[size:], unicode.IsUpper)
}

// isQuantity reports whether w is a number joined to its unit by a hyphen
// or a dot ("7-day", "18-to-49-year-old", "24-hour", "3.h", a postcode's
// part) or a code ([isCode]).
func isQuantity(w string) bool {
	i := strings.IndexFunc(w, func(r rune) bool { return !unicode.IsDigit(r) })
	return i > 0 && (w[i] == '-' || w[i] == '.') || isCode(w)
}

// isCode reports whether w is a code in capitals with letters on both sides
// of its digits, a postcode or a reference ("CB30DQ", "AB12CD").
func isCode(w string) bool {
	if len(w) < 5 || strings.ToUpper(w) != w {
		return false
	}
	first := strings.IndexFunc(w, unicode.IsDigit)
	last := strings.LastIndexFunc(w, unicode.IsDigit)
	return first > 0 && last >= 0 && last < len(w)-1 && !strings.ContainsAny(w, "-.'")
}

func isPossessive(w string) bool {
	return strings.HasSuffix(w, "'s") || strings.HasSuffix(w, "’s")
}

func isNumber(w string) bool {
	return w != "" && strings.IndexFunc(w, func(r rune) bool { return !unicode.IsDigit(r) && r != '.' }) < 0
}

func isCapitalised(w string) bool {
	r, _ := utf8.DecodeRuneInString(w)
	return unicode.IsUpper(r)
}

// nameish reports whether word w can start or continue a name.
func nameish(w string) bool {
	if isProductWord(w) {
		return true
	}
	l := strings.ToLower(w)
	return isCapitalised(w) && !stopwords[l] && !notNames[l] && !codeWords[w] && !isContraction(l)
}

// capitalsInside reports whether w has a capital letter after its first
// ("NodeSync", "VPC", "YouTube"): a name wherever it stands, not a word
// capitalised for starting a sentence.
func capitalsInside(w string) bool {
	_, n := utf8.DecodeRuneInString(w)
	return strings.ContainsFunc(w[n:], unicode.IsUpper)
}

// isContraction reports whether w is a pronoun or verb with a contracted
// ending ("we're", "they'll", "couldn't"), never a name.
func isContraction(w string) bool {
	w = strings.ReplaceAll(w, "’", "'")
	for _, end := range []string{"'re", "'m", "'ve", "'ll", "'d", "n't"} {
		if strings.HasSuffix(w, end) {
			return true
		}
	}
	return false
}

// codeWords are SQL's keywords as code writes them ("SELECT count(*)"): a
// query quoted in an answer names no topic.
var codeWords = setOf("SELECT FROM WHERE JOIN GROUP ORDER BY LIMIT COUNT INSERT UPDATE DELETE AS AND OR NOT NULL ON IN HAVING DISTINCT")

// nameRun reads the name starting at toks[i], if any: name-ish words,
// numbers after them and joiners between them. It returns the index after
// the name.
func nameRun(s string, toks []token, i int, sentenceStart bool) (next int, e entity, ok bool) {
	if toks[i].kind != tokWord || !nameish(toks[i].text) || sentenceStart && startsClause(toks, i) {
		return i, entity{}, false
	}
	last, product, words, joiners := i, isProductWord(toks[i].text), 1, 0
	for j := i + 1; j < len(toks) && toks[j].kind == tokWord; j++ {
		if isPossessive(toks[last].text) {
			break
		}
		w := toks[j].text
		if nameish(w) {
			last, words, joiners = j, words+1, 0
			product = product || isProductWord(w)
			continue
		}
		if isNumber(w) && j == last+1 && modelNumber(toks, j) {
			last, product = j, true
			continue
		}
		if nameJoiners[strings.ToLower(w)] && joiners < 2 {
			joiners++
			continue
		}
		break
	}
	text := s[toks[i].start:toks[last].end]
	if isPossessive(text) {
		text = strings.TrimSuffix(strings.TrimSuffix(text, "'s"), "’s")
	}
	kind := entName
	switch {
	case product:
		kind = entProduct
	case words == 1 && sentenceStart && !capitalsInside(toks[i].text), allModifiers(s[toks[i].start:toks[last].end]):
		kind = entNameInitial
	}
	return last + 1, entity{text: text, kind: kind, pos: toks[i].start}, true
}

// enUnits after a number make it a quantity ("Safeway 2 miles away"), not
// a model number ("Pixel 8").
var enUnits = setOf(`mile miles km kilometer kilometers kilometre kilometres meter meters metre metres feet foot minute minutes
min mins hour hours hr hrs day days week weeks month months year years people persons percent times dollars pounds euros kg
degrees stars seasons episodes`)

// modelNumber reports whether the number toks[j], after a name, is part of
// it ("Pixel 8", "iPhone 15 Pro", "Windows 2000") rather than a quantity
// ("Safeway 2 miles away"), a street number ("Grafton Hotel 619 Newmarket
// Road") or a phone number ("01223 566388").
func modelNumber(toks []token, j int) bool {
	digits := len(toks[j].text)
	if digits > 4 || strings.HasPrefix(toks[j].text, "0") && digits > 1 {
		return false
	}
	if j+1 >= len(toks) || toks[j+1].kind != tokWord {
		return true
	}
	next := toks[j+1].text
	if enUnits[strings.ToLower(next)] {
		return false
	}
	return digits < 3 || !nameish(next)
}

// enObjects after a sentence's first word make it a verb with its object
// ("Pick the quickest route", "Give me ..."), not a name.
var enObjects = setOf("the a an me my us our your his her their its them him this that these those some any")

// enClausePreps after a sentence's first word make it a gerund or an
// adverb opening a clause: "Speaking about", "Apart from".
var enClausePreps = setOf("about of to from back on with for in into at")

// startsClause reports whether the capitalised word toks[i], first of its
// sentence, is a verb with its object ("Pick the ..."), a sentence adverb
// ("Unfortunately Teavana ...") or a gerund opening a clause ("Speaking
// about ...") rather than a name.
func startsClause(toks []token, i int) bool {
	w := strings.ToLower(toks[i].text)
	if len(w) >= 6 && strings.HasSuffix(w, "ly") && !isProductWord(toks[i].text) {
		return true
	}
	if i+1 < len(toks) && toks[i+1].kind == tokWord && enClausePreps[strings.ToLower(toks[i+1].text)] &&
		(len(w) >= 6 && strings.HasSuffix(w, "ing") || w == "apart" || w == "according" || w == "due" || w == "back") {
		return true // "Speaking about ...", "Apart from ..."
	}
	if i+1 >= len(toks) || toks[i+1].kind != tokWord || toks[i+1].start == toks[i].end || !enObjects[strings.ToLower(toks[i+1].text)] {
		return false
	}
	// "Kermit the Frog": a name goes on after the article.
	return i+2 >= len(toks) || toks[i+2].kind != tokWord || !nameish(toks[i+2].text)
}

// cjkStrip are words dropped from the start of a CJK phrase: fillers,
// subjects and verbs of asking, knowing and wanting.
var cjkStrip = []string{
	"请问", "请", "你知道", "你认识", "你听说过", "听说过", "你看过", "你喜欢", "我喜欢", "你觉得", "我觉得", "觉得",
	"认识", "知道", "介绍一下", "介绍下", "介绍", "说说", "讲讲", "关于", "我想去", "我想吃", "我想买", "我想看",
	"我想要", "我想", "我要", "我买了", "我买到了", "买了", "那你", "那么", "还有", "搭载", "采用", "使用", "配备",
	"嗯嗯", "嗯", "哈哈哈", "哈哈", "呵呵", "哇", "诶", "哎呀", "哎", "嘤", "啊", "哦", "噢", "对啊", "对", "这是",
	"那是", "就是", "是", "这个", "那个", "这款", "那款", "这部", "那部", "你们", "我们", "你", "我", "给你", "给我",
	"今天", "明天", "昨天", "现在", "最近", "其实", "所以", "但是", "可是", "因为", "如果", "还是", "准备",
	// Commands: "告诉我华为的价格", "列出所有的表".
	"告诉我", "告诉", "帮我", "帮忙", "列出", "列一下", "查一下", "查查", "查询", "搜索", "搜一下", "显示", "找一下",
	"给我看", "看看", "所有的", "所有", "全部的", "全部",
}

// cjkBoundaryWords end a CJK phrase (a particle, a predicate or a question
// word follows the noun).
var cjkBoundaryWords = []string{
	"什么", "怎么", "多少", "为什么", "一共", "一下", "一起", "可以", "可能", "可是", "感觉", "觉得", "真的", "好吃",
	"好看", "好玩", "好像", "好不好", "应该", "已经", "现在", "今天", "明天", "昨天", "晚上", "一个", "一些", "一款",
	"一部", "哪里", "哪个", "如何", "还是", "比较", "非常", "特别", "最近",
}

// cjkBoundaryRunes are single runes that end a CJK phrase.
const cjkBoundaryRunes = "是吗呢吧啊呀嘛么了的也都就还很太不没会能要想说在有给让被把跟我你他她它这那哪谁啦哦嗯哈可怎着过啥咋咯哟呗哇嘿耶诶"

// cjkObjectVerbs introduce an object noun phrase: "我想吃海底捞".
var cjkObjectVerbs = []string{"想吃", "想去", "想买", "想看", "喜欢", "认识", "知道", "推荐", "关于", "介绍", "买", "吃", "去", "看", "玩", "喝", "用", "听", "养", "读"}

// cjkNotEntities are phrases that never name a topic.
var cjkNotEntities = setOf(`当然 必须 肯定 应该 可能 一定 其实 还是 就是 不是 没有 真的 所以 但是 然后 而且 嘻嘻 呵呵
不要 不会 不能 已经 非常 特别 比较 确实 今天 明天 昨天 现在 刚才 晚上 早上 中午 下午 上午 时候 东西 事情 问题 大家 自己 别人 什么 怎么
怎么样 这样 那样 这里 那里 哪里 一下 一点 有点 没有 不是 可以 知道 觉得 感觉 真的 好的 谢谢 你好 哈哈 嗯嗯 时间 价格
版本 配置 多少钱 之前 前面 上面 刚刚 一个 一些 一起 下一代 上一代`)

// measureRunes are classifiers after a numeral or demonstrative: "一罐".
const measureRunes = "个只罐瓶份本部台款家条件张杯碗首场次位块支双套辆间"

// cjkAskVerbs, stripped from the start of a phrase, make what follows the
// topic: "你认识王科吗".
var cjkAskVerbs = []string{"你知道", "你认识", "你听说过", "听说过", "你看过", "你喜欢", "我喜欢", "认识", "知道", "介绍一下", "介绍下", "介绍", "关于", "说说", "讲讲"}

// cjkTopicEnds end a phrase in topic position: a question particle or the
// copula ("华为Mate60是…").
const cjkTopicEnds = "吗呢是么"

// cjkPhrases extracts noun phrases from one CJK run at byte offset pos.
func cjkPhrases(run string, pos int) []entity {
	var out []entity
	add := func(p string, at int, kind entKind) {
		p, at = trimMeasures(p, at)
		n := utf8.RuneCountInString(p)
		if n < 2 || n > 8 || cjkNotEntities[p] {
			return
		}
		for _, d := range zhDetails {
			if p == d {
				return
			}
		}
		for _, e := range out {
			if e.text == p {
				return
			}
		}
		out = append(out, entity{text: p, kind: kind, pos: pos + at})
	}
	// Topic position: after fillers and asking verbs, before a particle.
	off := stripPrefixes(run)
	p := cutPhrase(run[off:])
	kind := entPhrase
	end := run[off+len(p):]
	r, _ := utf8.DecodeRuneInString(end)
	if end == "" || strings.ContainsRune(cjkTopicEnds, r) || containsAny(run[:off], cjkAskVerbs) {
		kind = entTopic
	}
	add(p, off, kind)
	// Object position: after the last verb of wanting or knowing.
	best := -1
	bestLen := 0
	for _, v := range cjkObjectVerbs {
		if k := strings.LastIndex(run, v); k >= 0 && k+len(v) > best+bestLen {
			best, bestLen = k, len(v)
		}
	}
	if best >= 0 {
		rest := run[best+bestLen:]
		skip := stripMeasure(rest)
		add(cutPhrase(rest[skip:]), best+bestLen+skip, entPhrase)
	}
	return out
}

// stripPrefixes returns how many bytes of fillers and asking verbs start s.
func stripPrefixes(s string) int {
	off := 0
	for {
		matched := ""
		for _, p := range cjkStrip {
			if strings.HasPrefix(s[off:], p) && len(p) > len(matched) {
				matched = p
			}
		}
		if matched == "" {
			return off
		}
		off += len(matched)
	}
}

// stripMeasure returns the length of a leading numeral or demonstrative with
// its classifier ("一罐", "这个", "两本").
func stripMeasure(s string) int {
	r, n := utf8.DecodeRuneInString(s)
	if n == 0 || !strings.ContainsRune("一二两三四五六七八九十几这那每某", r) {
		return 0
	}
	r2, n2 := utf8.DecodeRuneInString(s[n:])
	if n2 > 0 && strings.ContainsRune(measureRunes, r2) {
		return n + n2
	}
	return 0
}

// trimMeasures cuts the quantities off a phrase at byte offset at: a
// leading numeral or demonstrative with its classifier and a trailing
// numeral with its classifier ("每张表一条" → "表"), and a trailing
// localiser ("数据库里" → "数据库").
func trimMeasures(p string, at int) (string, int) {
	k := stripMeasure(p)
	p, at = p[k:], at+k
	r := []rune(p)
	if n := len(r); n >= 3 && strings.ContainsRune("里中内", r[n-1]) {
		r = r[:n-1] // "数据库里" → "数据库"
	}
	if n := len(r); n >= 2 && strings.ContainsRune(measureRunes, r[n-1]) && strings.ContainsRune("一二两三四五六七八九十几每某", r[n-2]) {
		r = r[:n-2]
	}
	return string(r), at
}

// cutPhrase returns the start of s up to the first boundary word or rune.
func cutPhrase(s string) string {
	end := len(s)
	for _, w := range cjkBoundaryWords {
		if k := strings.Index(s, w); k >= 0 && k < end {
			end = k
		}
	}
	for k, r := range s[:end] {
		if strings.ContainsRune(cjkBoundaryRunes, r) {
			end = k
			break
		}
	}
	return s[:end]
}

// brandPrefix returns the brand written before a product token: the CJK run
// after fillers and verbs, if at most 4 runes long, else its last 2 runes.
func brandPrefix(run string) string {
	rest := run[stripPrefixes(run):]
	rest = rest[stripMeasure(rest):]
	if i := strings.LastIndexAny(rest, "的是了在和与跟买用看"); i >= 0 {
		_, n := utf8.DecodeRuneInString(rest[i:])
		rest = rest[i+n:]
	}
	r := []rune(rest)
	if len(r) > 4 {
		r = r[len(r)-2:]
	}
	return string(r)
}
