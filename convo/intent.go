package convo

import "unicode"

// Intent labels of a turn (seed 002, component 1): the classifier's
// vocabulary and the session's.
const (
	IntentQA       = "qa"
	IntentChitchat = "chitchat"
	IntentTask     = "task"
	IntentContinue = "continue"
	IntentClarify  = "clarify"
)

// HasHan reports whether s has a Chinese character: the conversation's
// language is Chinese for the messages ctxflow writes itself.
func HasHan(s string) bool {
	for _, r := range s {
		if unicode.Is(unicode.Han, r) {
			return true
		}
	}
	return false
}
