// Package lexical holds the pure text heuristics ctxflow uses in every
// mode, with or without a model: the conversational rewriter (coreference,
// ellipsis and the conversation's topic), the lexical relevance grade that
// the corrective loop's relevance filter reads, small-talk detection,
// keyword and entity extraction for Chinese and English, sentence
// splitting and the hashed character-n-gram embedder. It imports the
// standard library, convo and a Chinese word segmenter (segment.go) only;
// the offline engine (activities/offline) is built on it.
package lexical

import (
	"strings"

	"github.com/ctxflow/ctxflow/convo"
)

// Labels start every answer of the offline engine.
const (
	LabelEN = labelEN
	LabelZH = labelZH
)

// Small-talk kinds ([SmallTalkKind]).
const (
	Hello  = greetHello
	Thanks = greetThanks
	Bye    = greetBye
)

// GradeSentence grades a sentence of a document already found to be on
// topic: [Grade] without the missing-entity cut ("Its phone number is ...").
func GradeSentence(query, sentence string) GradeResult { return grade(query, sentence, false) }

// Relevance is [Grade] as the relevance filter's port
// (activities.Relevance).
type Relevance struct{}

// Relevance reports whether document holds what query asks, with a score in
// [0, 1] and the reason.
func (Relevance) Relevance(query, document string) (bool, float64, string) {
	g := Grade(query, document)
	return g.Relevant, g.Score, g.Reason
}

// SmallTalk tells greetings, thanks, goodbyes and acknowledgements, which
// need no knowledge base (activities.SmallTalkDetector).
type SmallTalk struct{}

// IsSmallTalk reports whether text is only small talk.
func (SmallTalk) IsSmallTalk(text string) bool { return IsSmallTalk(text) }

// IsSmallTalk reports whether text is only greetings, thanks, goodbyes and
// acknowledgements.
func IsSmallTalk(text string) bool { return isSmallTalk(strings.TrimSpace(text)) }

// SmallTalkKind is [Hello], [Thanks] or [Bye] for small talk, else "".
func SmallTalkKind(text string) string { return smallTalkKind(text) }

// Keyword is a term of a query: an entity, an English word or a Chinese
// word, with its weight.
type Keyword struct {
	Text   string // lower case
	Weight float64
	Entity bool
}

// Keywords returns the query's terms, entities first.
func Keywords(query string) []Keyword { return exportKeywords(keywords(query)) }

// Aspects are the keywords no entity covers (what is asked about the
// topic).
func Aspects(query string) []Keyword { return exportKeywords(aspects(keywords(query))) }

func exportKeywords(kws []keyword) []Keyword {
	out := make([]Keyword, len(kws))
	for i, k := range kws {
		out[i] = Keyword{Text: k.text, Weight: k.weight, Entity: k.entity}
	}
	return out
}

// SalientEntities returns the product names, names and topic phrases of s,
// in order of appearance.
func SalientEntities(s string) []string {
	var out []string
	for _, e := range entities(s) {
		if e.kind == entProduct || e.kind == entName || e.kind == entTopic {
			out = append(out, e.text)
		}
	}
	return out
}

// Sentences splits text into sentences (Chinese and English punctuation).
func Sentences(text string) []string { return sentences(text) }

// IsChinese reports whether s is mostly Chinese.
func IsChinese(s string) bool { return isChinese(s) }

// HasDigit reports whether s holds a digit.
func HasDigit(s string) bool { return hasDigit(s) }

// ContainsAny reports whether s contains any of subs.
func ContainsAny(s string, subs []string) bool { return containsAny(s, subs) }

// TrimEndPunct splits the final punctuation off s.
func TrimEndPunct(s string) (body, tail string) { return trimEndPunct(s) }

// ClipRunes shortens s to at most n runes, with an ellipsis: the clip of
// text a reader sees, whose length is counted in characters whatever the
// script. ([convo.Clip] bounds bytes: payloads, prompts, traces.)
func ClipRunes(s string, n int) string { return clip(s, n) }

// Tokens counts s with tok (nil: [convo.EstimateTokens]).
func Tokens(tok convo.Tokenizer, s string) int { return tokens(tok, s) }

// FitTokens cuts s to fit budget tokens of tok.
func FitTokens(tok convo.Tokenizer, s string, budget int) string { return fitTokens(tok, s, budget) }

// StripLabel removes the offline engine's label from the start of an
// answer, so that it is not read as content.
func StripLabel(s string) string { return stripLabel(s) }

// StripCitations removes "[chunk-id]" references from an answer.
func StripCitations(s string) string { return citation.ReplaceAllString(s, "") }

// DefinitionSubject returns X of "what is X?" / "什么是X" / "X是什么", or "".
func DefinitionSubject(q string) string { return definitionSubject(q) }
