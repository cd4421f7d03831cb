package lexical

import "strings"

// Labels start every answer of the offline engine.
const (
	labelEN = "(offline engine)"
	labelZH = "（离线引擎）"
)

// stripLabel removes the offline engine's label from the start of an
// answer found in the history, so that it is not read as content.
func stripLabel(s string) string {
	t := strings.TrimSpace(s)
	for _, l := range []string{labelEN, labelZH} {
		if rest, ok := strings.CutPrefix(t, l); ok {
			return strings.TrimSpace(rest)
		}
	}
	return s
}
