package lexical

import (
	"context"
	"math"
	"regexp"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/ctxflow/ctxflow/convo"
)

// RewriteResult is what [Rewrite] made of a question.
type RewriteResult struct {
	// Query is the standalone question; the question itself, unchanged,
	// when no trigger fired or no topic could be added.
	Query string
	// Changed reports that Query differs from the question.
	Changed bool
	// Trigger names what called for a rewrite: "pronoun:它",
	// "ellipsis:刚才", "detail:price", "short"; "" when none fired. It is
	// set even when the rewrite was then not needed (the question already
	// names the topic) or not possible (no topic in the history).
	Trigger string
	// Topic is the conversation topic found in the history when a trigger
	// fired: the most salient recent entity, e.g. "华为Mate60".
	Topic string
}

// Rewrite turns a follow-up question into one that stands alone, from the
// conversation history (oldest first): it detects whether the question
// leans on the history (a pronoun such as 它/这个/they/it, an ellipsis
// marker such as 刚才/earlier, a detail follow-up such as 价格/price, or a
// very short question), finds the topic of the conversation (the most
// recent salient entity: "华为Mate60", "Pixel 8", "Golden Wok", a Chinese
// noun phrase) and substitutes it for the pronoun, or adds it to the
// question. Without a trigger, without a topic, or when the question already
// names the topic, the question is returned unchanged.
//
// Rewrite is a pure function of its arguments. Only the contents of user,
// assistant and system messages are read.
func Rewrite(question string, history []convo.Message) RewriteResult {
	return rewrite(question, history, maxAskAgain)
}

// maxAskAgain bounds how many earlier follow-ups a follow-up about another
// thing resolves ("iPhone 15呢？" after "Mate70呢？" after "华为Mate60的屏幕多大？").
const maxAskAgain = 3

func rewrite(question string, history []convo.Message, depth int) RewriteResult {
	res := RewriteResult{Query: question}
	q := strings.TrimSpace(question)
	if q == "" || isSmallTalk(q) {
		return res
	}
	if x := alternative(q); x != "" {
		// "iPhone 15呢？": the last question again, about another thing.
		if again := askAgain(x, history, depth); again != "" {
			res.Query, res.Changed, res.Trigger, res.Topic = again, again != question, "alternative", x
			if !res.Changed {
				res.Query = question
			}
			return res
		}
	}
	trig := detectTrigger(q)
	if trig.kind == trigNone {
		return res
	}
	res.Trigger = trig.name()
	if trig.kind == trigShort && answersQuestion(q, history) {
		return res
	}
	res.Topic = trackTopic(history)
	if res.Topic == "" || containsFold(q, res.Topic) || namesPartOf(q, res.Topic) {
		return res
	}
	if trig.kind == trigPronoun && antecedentBefore(q, trig.start) {
		return res
	}
	if trig.kind == trigDetail && !isChinese(q) {
		switch {
		case ownDetail(q, trig):
			return res // "how can I estimate my costs?": the user's own
		case !requests(q, trig.start):
			return res // "I don't care about the price range"
		case ownerNamed(q, trig):
			return res // "the address and phone number of the meghna"
		}
	}
	if trig.kind == trigDetail && theDetail(q, trig) {
		// "give me the address": whose address, the question does not say.
		if namesSomething(q) {
			return res
		}
	} else if trig.kind != trigPronoun && (selfContained(q, trig.kind == trigShort) || asksAbout(q)) {
		return res
	}
	res.Query = applyRewrite(q, trig, res.Topic)
	res.Changed = res.Query != question
	return res
}

// alternative returns X of a follow-up that asks the last question again
// about another thing or another time: "iPhone 15呢？", "那明天呢", "what
// about the iPhone 15?", "And tomorrow?"; "" when q is not one, or X is an
// aspect of the topic ("屏幕呢？", "what about the price?"), which the
// topic completes instead.
func alternative(q string) string {
	var x string
	if m := altZH.FindStringSubmatch(q); m != nil {
		x = strings.TrimSpace(m[1])
	} else if m := altEN.FindStringSubmatch(q); m != nil {
		x = strings.TrimSpace(m[1])
		if len(strings.Fields(x)) > 5 {
			return ""
		}
		x = stripArticle(x)
	}
	if x == "" || utf8.RuneCountInString(x) > 24 || findPronoun(x).kind != trigNone {
		return ""
	}
	if timeWord(x) != "" && timeWord(x) == strings.TrimSpace(x) || namedWhole(x) {
		return x
	}
	return ""
}

var (
	altZH = regexp.MustCompile(`^\s*(?:那么|那|还有|而)?\s*(\S.{0,23}?)\s*呢\s*[?？。!！]*\s*$`)
	altEN = regexp.MustCompile(`(?i)^\s*(?:(?:and|so|ok|okay|well)[, ]+)?(?:(?:what|how)\s+about|and)\s+(.+?)\s*[?？.!]*\s*$`)
)

// stripArticle drops a leading "the", "a" or "an".
func stripArticle(s string) string {
	for _, a := range []string{"the ", "a ", "an "} {
		if len(s) > len(a) && strings.EqualFold(s[:len(a)], a) {
			return strings.TrimSpace(s[len(a):])
		}
	}
	return s
}

// namedWhole reports whether s is one product or name and nothing else:
// "iPhone 15", "Golden Wok", "华为Mate60".
func namedWhole(s string) bool {
	es := entities(s)
	return len(es) == 1 && (es[0].kind == entProduct || es[0].kind == entName || es[0].kind == entNameInitial && !allModifiers(es[0].text)) &&
		strings.EqualFold(strings.TrimSpace(es[0].text), strings.TrimSpace(s))
}

// zhTimeWords and enTimeWords name a time a question may be asked again
// for: "明天呢".
var (
	zhTimeWords = []string{"今天", "明天", "后天", "昨天", "前天", "今年", "明年", "去年", "后年", "前年", "今晚", "明晚", "昨晚",
		"这周", "本周", "下周", "上周", "这个月", "下个月", "上个月", "周末", "早上", "上午", "中午", "下午", "晚上"}
	enTimeWords = setOf(`today tomorrow yesterday tonight weekend morning afternoon evening monday tuesday wednesday thursday
friday saturday sunday`)
)

// timeWord returns the first time word of s, "" for none.
func timeWord(s string) string {
	best, at := "", len(s)
	for _, w := range zhTimeWords {
		if k := strings.Index(s, w); k >= 0 && k < at {
			best, at = w, k
		}
	}
	for _, t := range scan(s) {
		if t.kind == tokWord && t.start < at && enTimeWords[strings.ToLower(t.text)] {
			return t.text
		}
	}
	return best
}

// askAgain returns the last question of the history asked again about x
// (a product, a name or a time), "" when it cannot be: no earlier
// question, or nothing in it that x stands in for. The earlier question is
// first made to stand alone itself.
func askAgain(x string, history []convo.Message, depth int) string {
	if depth <= 0 {
		return ""
	}
	i := len(history) - 1
	for i >= 0 && (history[i].Role != convo.RoleUser || isCommand(history[i].Content) || isSmallTalk(strings.TrimSpace(history[i].Content))) {
		i--
	}
	if i < 0 {
		return ""
	}
	p := strings.TrimSpace(history[i].Content)
	resolved := false
	if r := rewrite(p, history[:i], depth-1); r.Changed && (r.Trigger == "alternative" || strings.HasPrefix(r.Trigger, "pronoun:") ||
		strings.HasPrefix(r.Trigger, "detail:") && isChinese(p)) {
		// The earlier question resolved ("它的屏幕多大？" → "华为Mate60的屏幕多大？",
		// "屏幕呢？" → "华为Mate60的屏幕呢？"), not merely completed with a topic
		// in brackets.
		p, resolved = strings.TrimSpace(r.Query), true
	}
	if p == "" || !resolved && alternative(p) != "" || containsFold(p, x) {
		return ""
	}
	if timeWord(x) != "" {
		if old := timeWord(p); old != "" {
			return strings.Replace(p, old, x, 1)
		}
		return ""
	}
	for _, e := range entities(p) {
		if e.kind == entProduct || e.kind == entName {
			return p[:e.pos] + x + p[e.pos+len(e.text):]
		}
	}
	if t := findPronoun(p); t.kind == trigPronoun && !t.determiner {
		repl := x
		if t.possessive {
			repl = x + "'s"
		}
		return p[:t.start] + repl + p[t.end:]
	}
	return ""
}

type trigKind uint8

const (
	trigNone trigKind = iota
	trigPronoun
	trigEllipsis
	trigDetail
	trigShort
)

// trigger is a detected reason to rewrite; start and end delimit the word
// in the question (for pronouns: the word to replace).
type trigger struct {
	kind       trigKind
	word       string
	start, end int
	// determiner marks this/that/these/those before a noun ("that part").
	determiner bool
	// possessive marks its/their/his/her (en).
	possessive bool
	// toPlace marks a "there" after a verb of going ("go there"), which
	// becomes "to" the place.
	toPlace bool
}

// enMotion are words of going after which "there" is a place: "go there".
var enMotion = setOf("go get going getting drive driving head heading navigate navigating walk ride travel way route directions take me")

// enPlacePreps are prepositions after which "there" is a place: "for there".
var enPlacePreps = setOf("for from near around")

func (t trigger) name() string {
	switch t.kind {
	case trigPronoun:
		return "pronoun:" + t.word
	case trigEllipsis:
		return "ellipsis:" + t.word
	case trigDetail:
		return "detail:" + t.word
	case trigShort:
		return "short"
	}
	return ""
}

// Chinese trigger words, longest first where one contains another.
var (
	zhPronouns = []string{"它们", "他们", "她们", "这些", "那些", "这个", "那个", "这款", "那款", "这部", "那部", "这家", "那家", "那里", "那儿", "它", "他", "她"}
	// zhNotPronoun are words that contain a pronoun rune but are not one.
	zhNotPronoun = []string{"其他", "其它", "吉他", "他人", "他乡", "他妈", "她妈", "利他"}
	zhEllipsis   = []string{"前面", "上面", "刚才", "刚刚", "之前", "上述"}
	zhDetails    = []string{"多少钱", "版本", "价格", "配置", "售价", "参数", "型号", "颜色", "尺寸", "续航", "重量", "性能", "规格", "内存", "屏幕", "电池", "像素", "保修", "优缺点", "缺点", "优点", "评价", "地址", "电话", "营业时间", "发布时间", "上市时间"}
)

// English trigger words.
var (
	enPronouns   = setOf("it its they them their he him his she her this that these those")
	enPossessive = setOf("its their his")
	enEllipsis   = []string{"what about", "how about", "you mentioned", "you said", "the former", "the latter", "earlier", "previously", "previous", "mentioned"}
	enDetails    = []string{"how much", "price", "prices", "version", "versions", "cost", "costs", "specs", "specifications", "configuration", "size", "colour", "color", "weight", "battery", "warranty", "release date", "address", "phone number", "postcode", "temperature", "weather", "forecast"}
	// enBeforeDemonstrative are words after which this/that/those refer
	// back rather than join a clause ("about that", "is that").
	enBeforeDemonstrative = setOf("about of for with like on in at from to is was are were does did do by into than after before near what's")
	// enTimeNouns follow a temporal "this" ("this year"), which refers to
	// the present, not to the history.
	enTimeNouns = setOf("year week month morning afternoon evening night weekend time summer winter spring fall autumn season semester")
	// enHeadNouns after a demonstrative make it stand for the topic: "that
	// restaurant" is the restaurant talked about.
	enHeadNouns = setOf("restaurant venue place one shop store hotel song album movie film book band group team company product phone model show series game club school museum station")
	// enSubjects after "that" make it a conjunction ("said that he ...").
	enSubjects = setOf("i you he she we they it the a an there my your his her our their this these those")
)

// detectTrigger finds the first reason, by priority, why q may lean on the
// history: a pronoun, an ellipsis marker, a detail follow-up, shortness.
func detectTrigger(q string) trigger {
	q = blankSmallTalk(q)
	if t := findPronoun(q); t.kind != trigNone {
		return t
	}
	lower := strings.ToLower(q)
	if m := altEN.FindStringSubmatchIndex(q); m != nil && len(strings.Fields(q[m[2]:m[3]])) <= 5 && len(sentences(q)) == 1 {
		// "what about the price?": the topic's price.
		for _, w := range enDetails {
			if k := indexWord(lower[m[2]:m[3]], w); k >= 0 {
				k += m[2]
				return trigger{kind: trigDetail, word: w, start: k, end: k + len(w)}
			}
		}
		// "What about installation?", "How about Italian?": the question
		// turns to a thing it names itself ("a moderate one" names none).
		if x := strings.Fields(lower[m[2]:m[3]]); contentWords(q[m[2]:m[3]]) > 0 && !enQuestionWords[x[0]] && !slices.Contains(x, "one") && !slices.Contains(x, "ones") {
			return trigger{}
		}
	}
	for _, w := range zhEllipsis {
		if k := strings.Index(q, w); k >= 0 {
			return trigger{kind: trigEllipsis, word: w, start: k, end: k + len(w)}
		}
	}
	for _, w := range enEllipsis {
		if k := indexWord(lower, w); k >= 0 {
			return trigger{kind: trigEllipsis, word: w, start: k, end: k + len(w)}
		}
	}
	for _, w := range zhDetails {
		if k := strings.Index(q, w); k >= 0 {
			return trigger{kind: trigDetail, word: w, start: k, end: k + len(w)}
		}
	}
	for _, w := range enDetails {
		if k := indexWord(lower, w); k >= 0 {
			return trigger{kind: trigDetail, word: w, start: k, end: k + len(w)}
		}
	}
	if isShort(q) {
		return trigger{kind: trigShort}
	}
	return trigger{}
}

// blankSmallTalk replaces the sentences of q that are only small talk
// ("That sounds good.", "Thank you.") by spaces, keeping byte offsets.
func blankSmallTalk(q string) string {
	var b strings.Builder
	rest := q
	for _, sent := range sentences(q) {
		k := strings.Index(rest, sent)
		if k < 0 {
			return q
		}
		b.WriteString(rest[:k])
		if isSmallTalk(sent) || asksNothing(sent) {
			b.WriteString(strings.Repeat(" ", len(sent)))
		} else {
			b.WriteString(sent)
		}
		rest = rest[k+len(sent):]
	}
	b.WriteString(rest)
	return b.String()
}

// answersQuestion reports whether q, a short English fragment that asks
// nothing ("Centre please", "doesn't matter"), answers the question the
// last answer ended with ("What area would you like?"): it fills that
// question's gap, not the topic's.
func answersQuestion(q string, history []convo.Message) bool {
	if isChinese(q) || isQuestion(q) || len(history) == 0 {
		return false
	}
	last := history[len(history)-1]
	if last.Role != convo.RoleAssistant {
		return false
	}
	sents := sentences(strings.TrimSpace(last.Content))
	return len(sents) > 0 && isQuestion(sents[len(sents)-1])
}

// contentWords counts the English words of s that are not function words,
// pronouns or numbers.
func contentWords(s string) int {
	n := 0
	for _, t := range scan(s) {
		w := strings.ToLower(t.text)
		if t.kind == tokWord && !stopwords[w] && !enPronouns[w] && !isNumber(w) && len(w) > 2 {
			n++
		}
	}
	return n
}

// asksNothing reports whether an English sentence neither asks nor names
// anything: no question, and no word but function words, answers and
// acknowledgements ("Yes please.", "I don't know.", "That is all of the info
// that I needed.", "Of course!"). Nothing in it leans on the topic.
func asksNothing(sent string) bool {
	if isChinese(sent) || isQuestion(sent) {
		return false
	}
	words := 0
	for _, t := range scan(sent) {
		if t.kind == tokCJK {
			return false
		}
		if t.kind != tokWord {
			continue
		}
		w := strings.ToLower(t.text)
		if !stopwords[w] && !enPhatic[w] && !enAnswers[w] {
			return false
		}
		words++
	}
	return words > 0
}

// enAnswers are words of answers and acknowledgements besides enPhatic's.
var enAnswers = setOf("course ya yea takes took taken care done idea problem worries matter mind")

// enQuestionWords start a question.
var enQuestionWords = setOf(`what what's whats which who whom whose when where why how how's is are was were do does did can
could will would shall should may might have has had am isn't aren't wasn't weren't don't doesn't didn't can't couldn't won't wouldn't`)

// isQuestion reports whether sentence s asks: it ends with a question mark
// or starts with a question word or an auxiliary.
func isQuestion(s string) bool {
	body := strings.TrimSpace(s)
	if strings.HasSuffix(body, "?") || strings.HasSuffix(body, "？") {
		return true
	}
	for _, t := range scan(body) {
		return t.kind == tokWord && enQuestionWords[strings.ToLower(t.text)]
	}
	return false
}

// findPronoun finds the first pronoun of q that refers back.
func findPronoun(q string) trigger {
	best := trigger{start: len(q)}
	for _, p := range zhPronouns {
		for from := 0; from < len(q); {
			k := strings.Index(q[from:], p)
			if k < 0 {
				break
			}
			k += from
			from = k + len(p)
			if k >= best.start || insideAny(q, k, len(p), zhNotPronoun) {
				continue
			}
			best = trigger{kind: trigPronoun, word: p, start: k, end: k + len(p)}
			break
		}
	}
	toks := scan(q)
	for i, t := range toks {
		if t.start >= best.start {
			break
		}
		if t.kind != tokWord {
			continue
		}
		w := strings.ToLower(t.text)
		if w == "there" && i > 0 && toks[i-1].kind == tokWord {
			// "let's go there": the place talked about.
			if prev := strings.ToLower(toks[i-1].text); enMotion[prev] || enPlacePreps[prev] {
				return trigger{kind: trigPronoun, word: w, start: t.start, end: t.end, toPlace: enMotion[prev]}
			}
		}
		if !enPronouns[w] {
			continue
		}
		var prev, next string
		if i > 0 && toks[i-1].kind == tokWord {
			prev = strings.ToLower(toks[i-1].text)
		}
		if i+1 < len(toks) && toks[i+1].kind == tokWord {
			next = strings.ToLower(toks[i+1].text)
		}
		tr := trigger{kind: trigPronoun, word: w, start: t.start, end: t.end, possessive: enPossessive[w]}
		switch w {
		case "it":
			if expletiveIt(toks[i+1:]) {
				continue
			}
		case "this", "that", "these", "those":
			if w == "this" && enTimeNouns[next] {
				continue
			}
			if (w == "this" || w == "that") && reaction(toks[i+1:]) {
				continue
			}
			if w == "that" && prev != "" && !enBeforeDemonstrative[prev] {
				continue // "the one that ...", "said that ..."
			}
			if next != "" && enSubjects[next] {
				continue
			}
			tr.determiner = next != "" && !stopwords[next]
			if tr.determiner && enHeadNouns[stem(next)] {
				// "that restaurant" → the topic itself.
				tr.determiner, tr.end = false, toks[i+1].end
			}
		case "her":
			tr.possessive = next != "" && !stopwords[next]
		}
		return tr
	}
	if best.kind == trigNone {
		return trigger{}
	}
	return best
}

// enWeather words make "it" the weather: "is it raining?".
var enWeather = setOf("rain raining rainy snow snowing snowy drizzle drizzling sunny cloudy windy hot cold warm cool humid foggy dry hail hailing freezing weather temperature storm stormy")

// enImpersonal adjectives after "it is" make "it" impersonal: "is it
// possible to ...".
var enImpersonal = setOf("possible impossible necessary true false likely unlikely time easy hard difficult important okay ok worth better best safe dangerous legal illegal free")

// expletiveIt reports whether the words after "it" make it the weather or
// impersonal rather than a reference.
func expletiveIt(after []token) bool {
	for k := 0; k < len(after) && k < 3 && after[k].kind == tokWord; k++ {
		w := strings.ToLower(after[k].text)
		if enWeather[w] || (k > 0 && enImpersonal[w]) || k == 0 && enRaising[w] {
			return true
		}
		if k == 0 && enImpersonal[w] && len(after) > 1 && after[1].kind == tokWord && enClauseStarts[strings.ToLower(after[1].text)] {
			return true // "is it possible that ...", "it true that ..."
		}
		// "is it safer to invest ...", "how long does it take to get ...":
		// "it" stands for the clause that follows.
		if k > 0 && w == "to" && k+1 < len(after) && after[k+1].kind == tokWord && !stopwords[strings.ToLower(after[k+1].text)] &&
			extraposing(strings.ToLower(after[k-1].text)) {
			return true
		}
	}
	return false
}

// extraposing reports whether w, between "it" and "to", makes "it" stand
// for the clause after "to": an adjective of judgement or a comparative
// ("safer", "possible"), or a verb of cost ("take", "cost").
func extraposing(w string) bool {
	switch w {
	case "take", "takes", "took", "cost", "costs":
		return true
	}
	return enImpersonal[w] || len(w) > 4 && (strings.HasSuffix(w, "er") || strings.HasSuffix(w, "est")) && !enObjects[w]
}

// enClauseStarts start the clause an impersonal "it" stands for.
var enClauseStarts = setOf("that to if whether")

// enRaising verbs after "it" make it impersonal: "it seems that ...".
var enRaising = setOf("seems seemed appears appeared depends depended happens happened turns turned")

// enEvaluative words after "that is" make a reaction to the last answer
// ("That is too bad."), not a reference to the topic.
var enEvaluative = setOf(`bad good great nice ok okay fine cool sad awesome amazing interesting surprising surprised shocking
strange weird funny helpful useful correct right wrong true fair perfect terrible awful excellent wonderful unfortunate
shame pity impressive crazy insane enough`)

// reaction reports whether the words after this/that/it make it a reaction
// to what was said: "That is too bad", "that sounds great", "it's
// really surprising".
func reaction(after []token) bool {
	k := 0
	if k >= len(after) || after[k].kind != tokWord {
		return false
	}
	switch strings.ToLower(after[k].text) {
	case "is", "was", "sounds", "sounded", "seems", "looks", "feels":
	default:
		return false
	}
	for k++; k < len(after) && after[k].kind == tokWord; k++ {
		w := strings.ToLower(after[k].text)
		switch w {
		case "so", "too", "very", "really", "quite", "pretty", "not", "a", "an", "just", "kind", "of":
			continue
		}
		return enEvaluative[w]
	}
	return false
}

// frontedTopic reports whether q opens with a phrase that sets its own
// topic before byte offset k ("Speaking about vaccines, how are they
// made?", "Going back to primary source, can it be used ...").
func frontedTopic(q string, k int) bool {
	m := fronted.FindStringIndex(q)
	return m != nil && m[1] <= k && contentWords(q[:m[1]]) >= 1
}

var fronted = regexp.MustCompile(`(?i)^\s*(?:(?:speaking|talking|thinking)\s+(?:about|of)|going\s+back\s+to|back\s+to|regarding|concerning|as\s+for|as\s+to|about|with\s+regard\s+to)\s+[^,;:?]{2,60}?,`)

// insideAny reports whether q[k:k+n] lies inside one of the words.
func insideAny(q string, k, n int, words []string) bool {
	for _, w := range words {
		for from := max(0, k-len(w)+n); from <= k && from+len(w) <= len(q); from++ {
			if q[from:from+len(w)] == w {
				return true
			}
		}
	}
	return false
}

// indexWord returns the byte offset of phrase w in s (both lower case) as
// whole words, or -1.
func indexWord(s, w string) int {
	for from := 0; ; {
		k := strings.Index(s[from:], w)
		if k < 0 {
			return -1
		}
		k += from
		before, _ := utf8.DecodeLastRuneInString(s[:k])
		after, _ := utf8.DecodeRuneInString(s[k+len(w):])
		if (k == 0 || !isWordRune(before)) && (k+len(w) == len(s) || !isWordRune(after)) {
			return k
		}
		from = k + 1
	}
}

// isShort reports whether q is too short to carry its own subject: at most
// 5 CJK runes, or at most 3 words.
func isShort(q string) bool {
	cjk, words := scriptCounts(q)
	if cjk > 0 {
		return cjk+words <= 5
	}
	return words > 0 && words <= 3
}

// zhWhich is an interrogative determiner before a noun: "哪款手机", "哪些城市".
var zhWhich = regexp.MustCompile(`(哪款|哪个|哪些|哪种|哪台|哪部|哪家|哪一款|哪一个)\p{Han}{2}`)

// selfContained reports whether q names its own subject: a product or a
// name, a Chinese noun phrase of 3 or more runes (2 in a short question,
// where it is the whole question: "重庆"), a Latin word in Chinese text
// ("vivo"), or 2 or more English content words besides the trigger words.
func selfContained(q string, short bool) bool {
	minPhrase := 3
	if short {
		minPhrase = 2
	}
	for _, e := range entities(q) {
		switch e.kind {
		case entProduct, entName:
			return true
		case entPhrase, entTopic:
			if utf8.RuneCountInString(e.text) >= minPhrase && !containsAny(e.text, zhDetails) {
				return true
			}
		}
	}
	zh := isChinese(q)
	if zh && short && hasSubject(q) {
		return true
	}
	if zh && zhWhich.MatchString(q) {
		return true // "哪款手机可以打卫星电话？" asks which; it refers to nothing before
	}
	content := 0
	for _, t := range scan(q) {
		w := strings.ToLower(t.text)
		if t.kind != tokWord || stopwords[w] || isNumber(w) || containsAny(w, enDetails) {
			continue
		}
		if zh && len(w) >= 2 {
			return true
		}
		if len(w) > 2 {
			content++
		}
	}
	return content >= 2
}

// theDetail reports whether the English detail word of trig follows "the"
// and no "of ..." or "for ..." says whose it is: "the address", not "the
// address of Golden Wok".
func theDetail(q string, trig trigger) bool {
	if isChinese(q) {
		return false
	}
	before := strings.Fields(strings.ToLower(q[:trig.start]))
	return len(before) > 0 && before[len(before)-1] == "the" && !ownerNamed(q, trig)
}

// ownerNamed reports whether the English detail of trig, or the list of
// details it starts, is followed by "of" or "for" and its owner: "the
// address and phone number of the meghna".
func ownerNamed(q string, trig trigger) bool {
	toks := scan(q[trig.end:])
	for i, t := range toks {
		w := strings.ToLower(t.text)
		switch {
		case t.kind == tokWord && (w == "of" || w == "for"):
			return i+1 < len(toks) && namesOwner(toks[i+1:])
		case t.kind == tokPunct && w == ",":
		case t.kind == tokWord && (w == "and" || w == "or" || w == "the" || enDetailWords[w] || compoundTail.MatchString(" "+w)):
		default:
			return false
		}
	}
	return false
}

// namesOwner reports whether the words after "of" name the owner of a
// detail rather than refer back to it: not a pronoun, not "one" ("the first
// one", "one place"), not "the" with a head noun ("the restaurants", "the
// venue").
func namesOwner(toks []token) bool {
	if len(toks) == 0 || toks[0].kind == tokPunct {
		return false
	}
	first := strings.ToLower(toks[0].text)
	if enPronouns[first] {
		return false
	}
	for i, t := range toks {
		if t.kind != tokWord || i >= 5 {
			break
		}
		w := strings.ToLower(t.text)
		if w == "one" || w == "ones" || (first == "the" && i > 0 && enHeadNouns[stem(w)]) {
			return false
		}
	}
	return true
}

// enDetailWords are the words of enDetails' phrases ("phone", "number").
var enDetailWords = func() map[string]bool {
	m := map[string]bool{}
	for _, d := range enDetails {
		for _, w := range strings.Fields(d) {
			if !stopwords[w] {
				m[w], m[stem(w)] = true, true
			}
		}
	}
	return m
}()

// requests reports whether the sentence of q holding byte offset k asks
// for what it names at k, and does not set it aside: "I don't care about
// the price range", "The price range doesn't matter" ask for nothing.
func requests(q string, k int) bool {
	start := 0
	for _, sent := range sentences(q) {
		at := strings.Index(q[start:], sent)
		if at < 0 {
			return true
		}
		at += start
		if k < at+len(sent) {
			for i, t := range scan(sent) {
				w := strings.ToLower(t.text)
				if t.kind != tokWord || i == 0 && w == "no" {
					continue // "No, what is the phone number?": an answer first
				}
				// Before the detail any negation sets it aside; after it, a
				// negated verb ("doesn't matter"), not "a route with no traffic".
				if at+t.start < k && enNegations[w] || strings.HasSuffix(w, "n't") || w == "not" {
					return false
				}
			}
			return true
		}
		start = at + len(sent)
	}
	return true
}

// enNegations set aside what follows them.
var enNegations = setOf("not no never nor without")

// ownDetail reports whether the English detail word of trig belongs to
// the speaker or the listener: "my costs", "your address".
func ownDetail(q string, trig trigger) bool {
	before := strings.Fields(strings.ToLower(q[:trig.start]))
	if len(before) == 0 || isChinese(q) {
		return false
	}
	switch before[len(before)-1] {
	case "my", "our", "your":
		return true
	}
	return false
}

// namesPartOf reports whether q names the topic in part: a name of q is
// part of the topic ("this Deep Impact mission", topic "Deep Impact
// Extended Mission"; "da vinci pizzeria", topic "Da Vinci Pizzeria and Royal
// Spice").
func namesPartOf(q, topic string) bool {
	if isChinese(topic) {
		return false
	}
	for _, e := range entities(q) {
		if (e.kind == entProduct || e.kind == entName) && len(e.text) >= 4 && indexWord(strings.ToLower(topic), strings.ToLower(e.text)) >= 0 {
			return true
		}
	}
	return false
}

// namesSomething reports whether q holds a product or a name.
func namesSomething(q string) bool {
	for _, e := range entities(q) {
		if e.kind == entProduct || e.kind == entName {
			return true
		}
	}
	return false
}

// asksAbout reports whether q asks what, who, when or where something
// named by a bare noun phrase is ("What is universalism?", "Who is
// Namor?", "When was Brotherhood?"): it names its own subject. A phrase
// with an article ("What is the address?") asks for an attribute of the
// topic, and is not one.
func asksAbout(q string) bool {
	m := asksAboutEN.FindStringSubmatch(q)
	if m == nil {
		return false
	}
	words := strings.Fields(strings.ToLower(m[1]))
	if len(words) == 0 || len(words) > 4 {
		return false
	}
	for _, w := range words {
		w = strings.Trim(w, ".,;:!?\"'“”‘’()")
		if w == "" || stopwords[w] || enPronouns[w] || isNumber(w) || containsAny(w, enDetails) {
			return false
		}
	}
	return true
}

var asksAboutEN = regexp.MustCompile(`(?i)^\s*(?:what|who|when|where)(?:'s|’s|\s+is|\s+are|\s+was|\s+were)\s+(.+?)\s*[?？.!]*\s*$`)

// hasSubject reports whether a Chinese question starts, after fillers, with
// a personal subject and does not end on a verb that lacks its object:
// "你会转笔吗" stands alone, "我也想吃" does not.
func hasSubject(q string) bool {
	body, _ := trimEndPunct(q)
	body = strings.TrimLeft(body, "哎呀嗯哦啊诶哇那")
	if !strings.HasPrefix(body, "我") && !strings.HasPrefix(body, "你") {
		return false
	}
	core, _ := splitParticle(body)
	for _, v := range cjkObjectVerbs {
		if strings.HasSuffix(core, v) {
			return false
		}
	}
	return true
}

// antecedentBefore reports whether q names an entity before byte offset k,
// which a pronoun at k may refer to ("我和妹妹吵架了她让我滚").
func antecedentBefore(q string, k int) bool {
	for _, e := range entities(q[:k]) {
		if e.kind == entProduct || e.kind == entName {
			return true
		}
	}
	return earlierSentence(q, k) || frontedTopic(q, k)
}

// earlierSentence reports whether an English question holds, before the
// sentence with byte offset k, a sentence of its own with two content
// words or more, which a pronoun after it refers to ("... the same pay.
// Isn't it usually different?").
func earlierSentence(q string, k int) bool {
	if isChinese(q) {
		return false
	}
	start := 0
	for _, sent := range sentences(q) {
		at := strings.Index(q[start:], sent)
		if at < 0 {
			return false
		}
		at += start
		if at+len(sent) > k {
			return false
		}
		start = at + len(sent)
		if isSmallTalk(sent) {
			continue
		}
		if contentWords(sent) >= 2 {
			return true
		}
	}
	return false
}

func containsAny(s string, words []string) bool {
	for _, w := range words {
		if strings.Contains(s, w) {
			return true
		}
	}
	return false
}

// containsFold reports whether s contains sub, ignoring case.
func containsFold(s, sub string) bool {
	return strings.Contains(strings.ToLower(s), strings.ToLower(sub))
}

// zhRelations are nouns that make a new topic of the old one when a
// follow-up asks for them: "它的下一代" → "华为Mate60下一代".
var zhRelations = []string{"下一代", "上一代", "新一代", "前一代", "下一款", "升级版", "替代品", "竞品", "续作", "前作", "续集", "作者", "创始人", "母公司", "子公司"}

// trackTopic returns the topic of the conversation: the entity of the
// history with the best score, where a score weighs the entity's kind
// (product > name > phrase), the recency of the message (newer is better),
// its role (user before assistant before system), its position in the
// message (earlier is better) and how often the history repeats it. Ties go
// to the more recent, then the shorter text. When the last user message
// asked for a relation of the topic ("它的下一代"), the topic is extended
// with it. When the last user message asked what something is ("what is
// X?", "什么是X"), X is the topic.
func trackTopic(history []convo.Message) string {
	// A follow-up to "what is X?" is about X.
	for i := len(history) - 1; i >= 0; i-- {
		if history[i].Role == convo.RoleUser {
			if x := definedTopic(history[i].Content); x != "" {
				return x
			}
			break
		}
	}
	type scored struct {
		text   string
		score  float64
		recent int
	}
	texts := make([]string, 0, len(history))
	roles := make([]convo.Role, 0, len(history))
	for _, m := range history {
		if c := sourceText(m); c != "" {
			texts = append(texts, c)
			roles = append(roles, m.Role)
		}
	}
	best := map[string]*scored{}
	var order []string
	for i, text := range texts {
		age := len(texts) - 1 - i
		rec := math.Pow(0.8, float64(age))
		role := 1.0
		switch roles[i] {
		case convo.RoleUser:
			role = 1.3
		case convo.RoleSystem:
			role = 0.7
		}
		for _, e := range entities(text) {
			pos := 1 - 0.3*float64(e.pos)/float64(len(text))
			s := e.kind.weight() * rec * role * pos
			c, ok := best[e.text]
			if !ok {
				c = &scored{text: e.text}
				best[e.text] = c
				order = append(order, e.text)
			}
			if s > c.score {
				c.score = s
			}
			c.recent = i
		}
	}
	if len(order) == 0 {
		return ""
	}
	all := make([]*scored, 0, len(order))
	for _, k := range order {
		c := best[k]
		c.score += freqWeight * math.Log(float64(max(mentions(texts, c.text), 1)))
		all = append(all, c)
	}
	sort.SliceStable(all, func(i, j int) bool {
		a, b := all[i], all[j]
		if a.score != b.score {
			return a.score > b.score
		}
		if a.recent != b.recent {
			return a.recent > b.recent
		}
		return len(a.text) < len(b.text)
	})
	topic := all[0].text
	// A short form stands for the full name it is part of: "Zappa" for
	// "Frank Zappa", the best scored of them.
	if !isChinese(topic) {
		for _, c := range all[1:] {
			if len(c.text) > len(topic) && indexWord(c.text, topic) >= 0 {
				topic = c.text
				break
			}
		}
	}
	// A relation asked for in the last user message extends the topic.
	for i := len(texts) - 1; i >= 0; i-- {
		if roles[i] != convo.RoleUser {
			continue
		}
		for _, rel := range zhRelations {
			k := strings.Index(texts[i], rel)
			if k < 0 {
				continue
			}
			before := strings.TrimSuffix(texts[i][:k], "的")
			if strings.HasSuffix(before, topic) || hasPronounSuffix(before) {
				return topic + rel
			}
		}
		break
	}
	return topic
}

// definedTopic returns X of a user's "what is X?" / "什么是X" when X names
// something, else "": not an attribute asked for with an article ("What is
// the address?", "what's the forecast for the city"), nor a detail
// ("版本是什么"), nor a pronoun.
func definedTopic(q string) string {
	x := definitionSubject(q)
	if x == "" || utf8.RuneCountInString(x) > 40 || findPronoun(x).kind != trigNone {
		return ""
	}
	if containsAny(strings.ToLower(x), enDetails) || containsAny(x, zhDetails) || containsAny(x, zhRelations) {
		return ""
	}
	if whatIsThe.MatchString(q) && !named(x) {
		return ""
	}
	return x
}

var whatIsThe = regexp.MustCompile(`(?i)^\s*what(?:'s|’s|\s+is|\s+are|\s+was|\s+were)\s+the\s`)

// freqWeight weighs how often the history mentions an entity.
const freqWeight = 1.0

// mentions counts the texts that mention entity e: the whole of it or, for
// a name of several words, one of its main words ("Scott" for "Walter
// Scott").
func mentions(texts []string, e string) int {
	var heads []string
	if !isChinese(e) {
		for _, w := range strings.Fields(e) {
			if len(w) >= 3 && isCapitalised(w) && !nameJoiners[strings.ToLower(w)] {
				heads = append(heads, w)
			}
		}
		if len(heads) < 2 {
			heads = nil
		}
	}
	n := 0
	for _, t := range texts {
		if containsFold(t, e) {
			n++
			continue
		}
		for _, h := range heads {
			if indexWord(t, h) >= 0 {
				n++
				break
			}
		}
	}
	return n
}

func hasPronounSuffix(s string) bool {
	for _, p := range zhPronouns {
		if strings.HasSuffix(s, p) {
			return true
		}
	}
	return false
}

// applyRewrite puts topic into q as trig says.
func applyRewrite(q string, trig trigger, topic string) string {
	zh := isChinese(q)
	if trig.kind == trigPronoun {
		if zh || !trig.determiner {
			repl := topic
			switch {
			case trig.possessive:
				repl = topic + "'s"
			case trig.toPlace:
				repl = "to " + topic
			}
			return q[:trig.start] + repl + q[trig.end:]
		}
		// "that part of town": keep the words, name the topic.
		body, tail := trimEndPunct(q)
		return body + " (" + topic + ")" + tail
	}
	if zh {
		body, tail := trimEndPunct(q)
		if strings.HasPrefix(body, "我") || strings.HasPrefix(body, "你") {
			// "我也想吃" → "我也想吃龙虾": the topic is the object.
			core, particle := splitParticle(body)
			return core + topic + particle + tail
		}
		if trig.kind == trigDetail && trig.start == 0 {
			return topic + "的" + q
		}
		return topic + q
	}
	if trig.kind == trigDetail && trig.word != "how much" {
		if m := compoundTail.FindStringIndex(q[trig.end:]); m != nil {
			trig.end += m[1] // "the price range" → "the price range of ..."
		}
		rest := strings.TrimSpace(strings.ToLower(q[trig.end:]))
		if !strings.HasPrefix(rest, "of ") && !strings.HasPrefix(rest, "for ") {
			return q[:trig.end] + " of " + topic + q[trig.end:]
		}
	}
	body, tail := trimEndPunct(q)
	return body + " (" + topic + ")" + tail
}

// compoundTail is the noun that makes a compound of a detail word: "price
// range".
var compoundTail = regexp.MustCompile(`^\s+(?i:range|ranges|list|tag|tags)\b`)

// zhParticles end a Chinese sentence.
const zhParticles = "吗呢吧啊呀嘛么啦哦了"

// splitParticle splits the trailing sentence particles off s.
func splitParticle(s string) (core, particle string) {
	i := len(s)
	for i > 0 {
		r, n := utf8.DecodeLastRuneInString(s[:i])
		if !strings.ContainsRune(zhParticles, r) {
			break
		}
		i -= n
	}
	return s[:i], s[i:]
}

// Rewriter is [Rewrite] as the session's rewriter port
// (activities.Rewriter).
type Rewriter struct{}

// Rewrite returns the standalone question and the conversation's topic
// ("" when none was found).
func (Rewriter) Rewrite(ctx context.Context, question string, history []convo.Message) (query, topic string, err error) {
	if err := ctx.Err(); err != nil {
		return "", "", err
	}
	r := Rewrite(question, history)
	return r.Query, r.Topic, nil
}
