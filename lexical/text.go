package lexical

import (
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/ctxflow/ctxflow/convo"
)

// isCJK reports whether r is written without spaces between words: Han,
// kana or Hangul.
func isCJK(r rune) bool {
	switch {
	case r < 0x1100: // below Hangul Jamo: Latin, Greek, Cyrillic, ...
		return false
	case r >= 0x4E00 && r <= 0x9FFF, r >= 0x3040 && r <= 0x30FF, r >= 0xAC00 && r <= 0xD7A3: // the common blocks
		return true
	}
	return unicode.Is(unicode.Han, r) || unicode.In(r, unicode.Hiragana, unicode.Katakana, unicode.Hangul)
}

// isWordRune reports whether r belongs to a space-separated word.
func isWordRune(r rune) bool {
	return !isCJK(r) && (unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r))
}

type tokKind uint8

const (
	tokWord  tokKind = iota // letters and digits of a space-separated script
	tokCJK                  // a run of CJK runes
	tokPunct                // any other visible rune
)

// token is a piece of text; start and end are byte offsets.
type token struct {
	text       string
	kind       tokKind
	start, end int
}

// joiners may sit inside a word when a letter or digit follows: "don't",
// "Wi-Fi", "3.5", "U.S".
func isJoiner(r rune) bool { return r == '\'' || r == '’' || r == '-' || r == '.' || r == '_' }

// scan splits s into words, CJK runs and punctuation; spaces separate tokens
// and are dropped.
func scan(s string) []token {
	var out []token
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case unicode.IsSpace(r):
			i += size
		case isCJK(r):
			j := i + size
			for j < len(s) {
				r2, n := utf8.DecodeRuneInString(s[j:])
				if !isCJK(r2) {
					break
				}
				j += n
			}
			out = append(out, token{s[i:j], tokCJK, i, j})
			i = j
		case isWordRune(r):
			j := i + size
			for j < len(s) {
				r2, n := utf8.DecodeRuneInString(s[j:])
				if isWordRune(r2) {
					j += n
					continue
				}
				if isJoiner(r2) && j+n < len(s) {
					if r3, _ := utf8.DecodeRuneInString(s[j+n:]); isWordRune(r3) {
						j += n
						continue
					}
				}
				break
			}
			out = append(out, token{s[i:j], tokWord, i, j})
			i = j
		default:
			out = append(out, token{s[i : i+size], tokPunct, i, i + size})
			i += size
		}
	}
	return out
}

// isChinese reports whether s is mainly written in CJK: at least as many CJK
// runes as space-separated words.
func isChinese(s string) bool {
	cjk, words := scriptCounts(s)
	return cjk > 0 && cjk >= words
}

// abbreviations end with a dot that does not end a sentence.
var abbreviations = map[string]bool{
	"mr": true, "mrs": true, "ms": true, "dr": true, "st": true, "ave": true, "vs": true, "etc": true,
	"e.g": true, "i.e": true, "no": true, "jr": true, "sr": true, "prof": true, "inc": true, "ltd": true,
}

// sentences splits s into trimmed sentences: after 。！？；… ! ? ; and new
// lines, and after a dot followed by a space or the end, unless it ends a
// known abbreviation.
func sentences(s string) []string {
	var out []string
	add := func(x string) {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	start := 0
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		end := -1
		switch r {
		case '。', '！', '？', '；', '!', '?', ';', '\n', '…':
			end = i + size
		case '.':
			next := i + size
			if next >= len(s) {
				end = next
				break
			}
			if r2, _ := utf8.DecodeRuneInString(s[next:]); unicode.IsSpace(r2) || isCJK(r2) {
				w := lastWord(s[start:i])
				if !abbreviations[strings.ToLower(w)] && !(len(w) == 1 && unicode.IsUpper(rune(w[0]))) {
					end = next
				}
			}
		}
		i += size
		if end < 0 {
			continue
		}
		// Keep closing quotes and repeated marks with their sentence (not
		// across a line break).
		for i < len(s) && r != '\n' {
			r2, n := utf8.DecodeRuneInString(s[i:])
			if !strings.ContainsRune(`"'”’」』)）!?！？。.…`, r2) {
				break
			}
			i += n
		}
		add(s[start:i])
		start = i
	}
	add(s[start:])
	return out
}

// lastWord returns the word characters (and inner dots) at the end of s.
func lastWord(s string) string {
	i := len(s)
	for i > 0 {
		r, size := utf8.DecodeLastRuneInString(s[:i])
		if !isWordRune(r) && r != '.' {
			break
		}
		i -= size
	}
	return strings.Trim(s[i:], ".")
}

// trimEndPunct splits s into its body and its trailing punctuation and
// spaces.
func trimEndPunct(s string) (body, tail string) {
	i := len(s)
	for i > 0 {
		r, size := utf8.DecodeLastRuneInString(s[:i])
		if !unicode.IsPunct(r) && !unicode.IsSpace(r) && !unicode.IsSymbol(r) {
			break
		}
		i -= size
	}
	return s[:i], s[i:]
}

// hasDigit reports whether s contains a decimal digit.
func hasDigit(s string) bool {
	return strings.ContainsFunc(s, unicode.IsDigit)
}

// hasLetter reports whether s contains a letter that is not CJK.
func hasLetter(s string) bool {
	return strings.ContainsFunc(s, func(r rune) bool { return unicode.IsLetter(r) && !isCJK(r) })
}

// tokens counts s with tok, or estimates it when tok is nil.
func tokens(tok convo.Tokenizer, s string) int {
	if tok == nil {
		return convo.EstimateTokens(s)
	}
	return tok.Count(s)
}

// fitTokens returns the longest rune prefix of s with at most budget tokens.
func fitTokens(tok convo.Tokenizer, s string, budget int) string {
	if tokens(tok, s) <= budget {
		return s
	}
	r := []rune(s)
	lo, hi := 0, len(r)-1 // r[:lo] fits; the answer is at most hi
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if tokens(tok, string(r[:mid])) <= budget {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return string(r[:lo])
}

// clip shortens s to at most n runes, marking a cut with an ellipsis.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return strings.TrimSpace(string(r[:n-1])) + "…"
}

// stem folds an English word (lower case) to a crude stem, so that
// "restaurants", "restaurant" and "prices", "price" match.
func stem(w string) string {
	switch {
	case len(w) > 4 && strings.HasSuffix(w, "ies"):
		return w[:len(w)-3] + "y"
	case len(w) > 4 && (strings.HasSuffix(w, "ches") || strings.HasSuffix(w, "shes") || strings.HasSuffix(w, "xes")):
		return w[:len(w)-2]
	case len(w) > 3 && strings.HasSuffix(w, "'s"), len(w) > 3 && strings.HasSuffix(w, "’s"):
		return strings.TrimSuffix(strings.TrimSuffix(w, "'s"), "’s")
	case len(w) > 3 && strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss") && !strings.HasSuffix(w, "us") && !strings.HasSuffix(w, "is"):
		return w[:len(w)-1]
	}
	return w
}

// stopwords are English function words: never keywords, never names alone.
var stopwords = setOf(`a an the and or but if then so than as of to in on at by for with from about into onto over under
between through during before after above below up down out off again further once here there when where why how what which
who whom whose this that these those am is are was were be been being have has had having do does did doing will would shall
should can could may might must i me my mine myself we us our ours you your yours he him his she her hers it its they them their
theirs what's it's that's there's i'm i'd i'll you're don't doesn't didn't isn't aren't wasn't can't won't not no nor yes
very too also just only any some all both each few more most other such own same one ones anything something everything
nothing please tell give show let like want need know think get got make go going gonna ok okay well hi hello hey thanks thank
sure really much many lot lots still even ever now tell me say said else way thing things kind sort`)

// setOf builds a set from space-separated words.
func setOf(words string) map[string]bool {
	m := make(map[string]bool)
	for _, w := range strings.Fields(words) {
		m[w] = true
	}
	return m
}

// scriptCounts returns the CJK runes and the space-separated words of s.
func scriptCounts(s string) (cjk, words int) {
	for _, t := range scan(s) {
		switch t.kind {
		case tokCJK:
			cjk += utf8.RuneCountInString(t.text)
		case tokWord:
			words++
		}
	}
	return cjk, words
}

// citation is a "[chunk-id]" reference in an answer.
var citation = regexp.MustCompile(`\[[^\]\s]{1,200}\]`)

// definitionSubject returns X of "what is X?" / "什么是X" / "X是什么", or "".
func definitionSubject(q string) string {
	if m := whatIsEN.FindStringSubmatch(q); m != nil {
		return strings.TrimSpace(m[1])
	}
	if m := whatIsZH.FindStringSubmatch(q); m != nil {
		return strings.TrimSpace(m[1] + m[2])
	}
	return ""
}

var (
	whatIsEN = regexp.MustCompile(`(?i)^\s*what(?:'s| is| are)\s+(?:an?\s+|the\s+)?(.+?)\s*[?？.!]*\s*$`)
	whatIsZH = regexp.MustCompile(`^\s*(?:什么是(.+?)|(.+?)是什么)\s*[?？。！]*\s*$`)
)
