package tiktoken

import "unicode"

// The pre-tokenizers below split text exactly as the encodings' regular
// expressions do under regexp2 (the engine tiktoken-go uses): alternatives
// tried in order at each position, greedy quantifiers with backtracking,
// \s = unicode.IsSpace, \p{..} = Go's Unicode tables, (?i) = unicode.ToLower.
// They are checked against tiktoken-go itself by differential tests
// (TestPiecesMatchReference, FuzzCountMatchesReference).

// cl100k_base:
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
func splitCL100k(r []rune, emit func(a, b int)) {
	n := len(r)
	for i := 0; i < n; {
		var end int
		switch {
		case r[i] == '\'' && contraction(r, i) > i:
			end = contraction(r, i)
		case isPrefix(r[i]) && i+1 < n && unicode.IsLetter(r[i+1]):
			end = runOf(r, i+1, unicode.IsLetter)
		case unicode.IsLetter(r[i]):
			end = runOf(r, i, unicode.IsLetter)
		case unicode.IsNumber(r[i]):
			end = numbers(r, i)
		default:
			end = punctOrSpace(r, i, false)
		}
		emit(i, end)
		i = end
	}
}

// o200k_base:
//
//	[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//	|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//	|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
func splitO200k(r []rune, emit func(a, b int)) {
	n := len(r)
	for i := 0; i < n; {
		end, ok := o200kWord(r, i)
		switch {
		case ok:
		case unicode.IsNumber(r[i]):
			end = numbers(r, i)
		default:
			end = punctOrSpace(r, i, true)
		}
		emit(i, end)
		i = end
	}
}

// o200kWord tries the two word alternatives of o200k_base at i.
func o200kWord(r []rune, i int) (int, bool) {
	n := len(r)
	starts := [2]int{i + 1, i} // with the optional prefix first (greedy), then without
	first := 1
	if isPrefix(r[i]) {
		first = 0
	}
	// Alternative 1: P? A* B+ C?
	for _, j := range starts[first:] {
		k := runOf(r, j, isUpperish)
		for a := k; a >= j; a-- { // backtrack A* until B+ can match
			if a < n && isLowerish(r[a]) {
				return contraction(r, runOf(r, a, isLowerish)), true
			}
		}
	}
	// Alternative 2: P? A+ B* C?
	for _, j := range starts[first:] {
		if k := runOf(r, j, isUpperish); k > j {
			return contraction(r, runOf(r, k, isLowerish)), true
		}
	}
	return 0, false
}

// punctOrSpace matches the last four alternatives, shared by both encodings:
//
//	' ?[^\s\p{L}\p{N}]+[\r\n]*' ('[\r\n/]*' with slash), '\s*[\r\n]+', '\s+(?!\S)', '\s+'.
func punctOrSpace(r []rune, i int, slash bool) int {
	n := len(r)
	j := i
	if r[i] == ' ' && i+1 < n && isPunct(r[i+1]) {
		j = i + 1
	}
	if isPunct(r[j]) {
		end := runOf(r, j, isPunct)
		for end < n && (r[end] == '\r' || r[end] == '\n' || (slash && r[end] == '/')) {
			end++
		}
		return end
	}
	// r[i] is whitespace here: every rune is a letter, mark, number,
	// punctuation (as defined by isPunct) or space, and the other cases were
	// handled by the callers.
	end := runOf(r, i, unicode.IsSpace)
	for k := end - 1; k >= i; k-- { // \s*[\r\n]+ ends after the last newline
		if r[k] == '\r' || r[k] == '\n' {
			return k + 1
		}
	}
	if end < n && end-1 > i { // \s+(?!\S) leaves the last space for the next word
		return end - 1
	}
	return end
}

// contraction matches (?i:'s|'t|'re|'ve|'m|'ll|'d) at i and returns its end,
// or i when there is none.
func contraction(r []rune, i int) int {
	if i+1 >= len(r) || r[i] != '\'' {
		return i
	}
	second := func(want rune) bool { return i+2 < len(r) && unicode.ToLower(r[i+2]) == want }
	switch unicode.ToLower(r[i+1]) {
	case 's', 't', 'm', 'd':
		return i + 2
	case 'r', 'v':
		if second('e') {
			return i + 3
		}
	case 'l':
		if second('l') {
			return i + 3
		}
	}
	return i
}

// numbers matches \p{N}{1,3}.
func numbers(r []rune, i int) int {
	end := i
	for end < len(r) && end-i < 3 && unicode.IsNumber(r[end]) {
		end++
	}
	return end
}

func runOf(r []rune, i int, in func(rune) bool) int {
	for i < len(r) && in(r[i]) {
		i++
	}
	return i
}

// isPrefix is [^\r\n\p{L}\p{N}].
func isPrefix(c rune) bool {
	return c != '\r' && c != '\n' && !unicode.IsLetter(c) && !unicode.IsNumber(c)
}

// isPunct is [^\s\p{L}\p{N}].
func isPunct(c rune) bool {
	return !unicode.IsSpace(c) && !unicode.IsLetter(c) && !unicode.IsNumber(c)
}

// isUpperish is [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}].
func isUpperish(c rune) bool {
	if c < 0x80 {
		return 'A' <= c && c <= 'Z'
	}
	return unicode.In(c, unicode.Lu, unicode.Lt, unicode.Lm, unicode.Lo, unicode.M)
}

// isLowerish is [\p{Ll}\p{Lm}\p{Lo}\p{M}].
func isLowerish(c rune) bool {
	if c < 0x80 {
		return 'a' <= c && c <= 'z'
	}
	return unicode.In(c, unicode.Ll, unicode.Lm, unicode.Lo, unicode.M)
}
