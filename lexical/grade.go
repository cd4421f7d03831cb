package lexical

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// RelevanceThreshold is the score from which [Grade] calls a document
// relevant (when it also matches a keyword).
const RelevanceThreshold = 0.3

// GradeResult is a document's relevance to a query.
type GradeResult struct {
	// Relevant reports that the document may be used to answer.
	Relevant bool
	// Score is in [0, 1]; higher is more relevant.
	Score float64
	// Reason says why, fit for a step trace: the keywords matched and
	// missed, the n-gram overlap.
	Reason string
}

// keyword is a query term and its weight.
type keyword struct {
	text   string // lower case
	weight float64
	entity bool
}

// zhQuestionWords carry no topic: they are dropped from Chinese keywords
// (longest first where one contains another).
var zhQuestionWords = []string{"什么时候", "为什么", "怎么样", "是什么", "多少钱", "什么", "怎么", "多少", "多久", "多大", "多长",
	"时候", "哪里", "哪个", "哪些", "哪款", "哪种", "哪家", "哪部", "如何", "是否",
	"有没有", "是不是", "能不能", "可不可以", "请问", "告诉我", "一下", "介绍", "知道", "可以", "我们", "你们", "我", "你",
	"吗", "呢", "吧", "啊", "呀", "的", "了", "是", "有", "在", "和", "与", "及", "也", "都", "就", "还", "很", "请", "把",
	"被", "给", "对", "从", "这", "那", "它", "他", "她", "个", "些", "么", "要", "会", "能", "想"}

// keywords returns the query's terms: its entities (weight 2), its English
// content words and its Chinese content words ([zhKeywords]) (weight 1),
// lower case and without duplicates.
func keywords(q string) []keyword {
	var out []keyword
	seen := map[string]bool{}
	add := func(t string, w float64, ent bool) {
		t = strings.ToLower(strings.TrimSpace(t))
		if t == "" || seen[t] {
			return
		}
		seen[t] = true
		out = append(out, keyword{text: t, weight: w, entity: ent})
	}
	for _, e := range entities(q) {
		if e.kind == entProduct || e.kind == entName {
			add(e.text, 2, true)
		}
	}
	for _, t := range scan(q) {
		switch t.kind {
		case tokWord:
			w := strings.ToLower(t.text)
			if !stopwords[w] && (len(w) > 1 || isNumber(w)) {
				add(stem(w), 1, false)
			}
		case tokCJK:
			for _, f := range zhKeywords(t.text) {
				add(f, 1, false)
			}
		}
	}
	return out
}

// aspects drops the entities, and the words they are made of, from kws:
// what is left asks about the entity ("phone number", "价格"). With nothing
// left, kws is returned whole.
func aspects(kws []keyword) []keyword {
	var out []keyword
	for _, k := range kws {
		covered := k.entity
		for _, e := range kws {
			covered = covered || (e.entity && strings.Contains(e.text, k.text))
		}
		if !covered {
			out = append(out, k)
		}
	}
	if len(out) == 0 {
		return kws
	}
	return out
}

// zhFragments splits a CJK run at question and function words and returns
// the pieces of two runes or more.
func zhFragments(run string) []string {
	for _, w := range zhQuestionWords {
		run = strings.ReplaceAll(run, w, " ")
	}
	var out []string
	for _, f := range strings.Fields(run) {
		if utf8.RuneCountInString(f) >= 2 {
			out = append(out, f)
		}
	}
	return out
}

// Grade scores how relevant doc is to query, lexically: the weighted share
// of the query's keywords found in the document (entities count double; an
// English word matches its plural; a Chinese fragment matches in full or,
// for long ones, by half of its bigrams) and the share of the query's
// character bigrams (CJK) found in it. A query entity the document lacks
// (the topic) cuts the score by two thirds. Relevant is Score ≥
// [RelevanceThreshold] with at least one keyword matched.
//
// Grade is a pure function; an empty query or document is not relevant.
func Grade(query, doc string) GradeResult {
	return grade(query, doc, true)
}

// grade is Grade; topical false leaves out the missing-entity cut, for
// sentences of a document already found to be on topic ("Its phone number
// is ...").
func grade(query, doc string, topical bool) GradeResult {
	kws := keywords(query)
	if !topical {
		kws = aspects(kws)
	}
	if len(kws) == 0 || strings.TrimSpace(doc) == "" {
		return GradeResult{Reason: "no keywords to match"}
	}
	d := strings.ToLower(doc)
	dWords := map[string]bool{}
	for _, t := range scan(d) {
		if t.kind == tokWord {
			dWords[stem(t.text)] = true
		}
	}
	dGrams := bigrams(d)
	var total, got float64
	var matched []string
	missingEntity := ""
	for _, k := range kws {
		total += k.weight
		var ok bool
		if !isChinese(k.text) && !strings.Contains(k.text, " ") {
			// Whole words ("8" is not in "2018"), stemmed as the
			// document's are: an entity such as "widgets4ds" is there.
			ok = dWords[k.text] || dWords[stem(k.text)]
		} else {
			ok = strings.Contains(d, k.text) ||
				(utf8.RuneCountInString(k.text) >= 4 && coverage(bigrams(k.text), dGrams) >= 0.5)
		}
		switch {
		case ok:
			got += k.weight
			matched = append(matched, k.text)
		case k.entity && missingEntity == "":
			missingEntity = k.text
		}
	}
	kwScore := got / total
	score := kwScore
	qGrams := map[string]bool{}
	for _, k := range kws {
		for g := range bigrams(k.text) {
			qGrams[g] = true
		}
	}
	gramScore := -1.0
	if len(qGrams) > 0 {
		gramScore = coverage(qGrams, dGrams)
		score = 0.6*kwScore + 0.4*gramScore
	}
	if !topical {
		missingEntity = ""
	}
	if missingEntity != "" {
		score /= 3
	}
	res := GradeResult{Score: score, Relevant: score >= RelevanceThreshold && len(matched) > 0}
	var b strings.Builder
	fmt.Fprintf(&b, "matched %d of %d keywords", len(matched), len(kws))
	if len(matched) > 0 {
		fmt.Fprintf(&b, " (%s)", strings.Join(matched, ", "))
	}
	if gramScore >= 0 {
		fmt.Fprintf(&b, "; bigram overlap %.2f", gramScore)
	}
	if missingEntity != "" {
		fmt.Fprintf(&b, "; lacks %q", missingEntity)
	}
	fmt.Fprintf(&b, "; score %.2f", score)
	res.Reason = b.String()
	return res
}

// bigrams returns the set of adjacent CJK rune pairs of s.
func bigrams(s string) map[string]bool {
	out := map[string]bool{}
	for _, t := range scan(s) {
		if t.kind != tokCJK {
			continue
		}
		r := []rune(t.text)
		for i := 0; i+1 < len(r); i++ {
			out[string(r[i:i+2])] = true
		}
	}
	return out
}

// coverage is the share of q's items found in d.
func coverage(q, d map[string]bool) float64 {
	if len(q) == 0 {
		return 0
	}
	n := 0
	for g := range q {
		if d[g] {
			n++
		}
	}
	return float64(n) / float64(len(q))
}
