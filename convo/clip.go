package convo

import "unicode/utf8"

// Clip shortens s to at most n bytes, cut where a character starts (never
// inside one), and marks a cut with "…". It is the one clip of the
// module, for summaries, traces, error messages and prompts alike.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return RunePrefix(s, n) + "…"
}

// RunePrefix is the longest prefix of s of at most n bytes that ends where
// a character starts: s cut to n bytes without a broken character.
func RunePrefix(s string, n int) string {
	if len(s) <= n {
		return s
	}
	n = max(n, 0)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
