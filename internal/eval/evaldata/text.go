package evaldata

import (
	"slices"
	"strings"
	"unicode"
)

// Tokens splits s into the units the scores count: each CJK character (Han,
// kana, Hangul) is a token; other text is split into words at spaces and
// CJK characters, each lower-cased and stripped of the punctuation and
// symbols at its ends ("Zappa's," is "zappa's", "U.S." is "u.s"). Nothing
// else is a token.
func Tokens(s string) []string {
	var out []string
	word := func(w string) {
		if w = strings.TrimFunc(w, notWordRune); w != "" {
			out = append(out, strings.ToLower(w))
		}
	}
	for _, field := range strings.Fields(s) {
		start := 0
		for i, r := range field {
			if !isCJK(r) {
				continue
			}
			word(field[start:i])
			out = append(out, string(r))
			start = i + len(string(r))
		}
		word(field[start:])
	}
	return out
}

// isCJK reports a character that is a token by itself.
func isCJK(r rune) bool {
	return unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul)
}

// notWordRune is what a word is stripped of at its ends.
func notWordRune(r rune) bool { return unicode.IsPunct(r) || unicode.IsSymbol(r) }

// TokenF1 is the F1 of got's tokens against want's, as multisets (SQuAD's
// token F1): 1 when both have none, 0 when only one has none.
func TokenF1(got, want string) float64 {
	g, w := Tokens(got), Tokens(want)
	if len(g) == 0 || len(w) == 0 {
		if len(g) == len(w) {
			return 1
		}
		return 0
	}
	counts := make(map[string]int, len(w))
	for _, t := range w {
		counts[t]++
	}
	common := 0
	for _, t := range g {
		if counts[t] > 0 {
			counts[t]--
			common++
		}
	}
	if common == 0 {
		return 0
	}
	precision, recall := float64(common)/float64(len(g)), float64(common)/float64(len(w))
	return 2 * precision * recall / (precision + recall)
}

// Same reports whether a and b are the same text up to spaces, punctuation
// and case: the same [Tokens].
func Same(a, b string) bool { return slices.Equal(Tokens(a), Tokens(b)) }
