package offline

import "strings"

// wordTok is a fake tokenizer: one token per space-separated field.
type wordTok struct{}

func (wordTok) Count(s string) int { return len(strings.Fields(s)) }
