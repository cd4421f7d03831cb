package openai

import "strings"

// The tags around a reasoning model's thinking when the server leaves it in
// the answer's text (DeepSeek-R1, Qwen3 and their kin on servers that do not
// split it out into a reasoning field).
const (
	thinkOpen  = "<think>"
	thinkClose = "</think>"
)

// thinkFilter removes <think>…</think> blocks from an answer that arrives
// in pieces, as it streams: write returns the visible part of each piece,
// holding back a tail that may be the start of a tag, and flush what is
// held at the end. The white space after a block is dropped too, so the
// answer starts with its first word. An unclosed block hides the rest of
// the answer (a model cut off while thinking has answered nothing yet).
//
// Ollama's own API splits thinking from the answer (message.thinking), and
// the OpenAI-compatible servers that parse it send it in a separate field
// (reasoning_content or reasoning), which this adapter never reads; the
// filter is for the servers that do neither.
type thinkFilter struct {
	inside bool   // within a block
	trim   bool   // just after a block: leading white space is dropped
	held   string // a tail that may be the start of the next tag
}

// write returns the visible text of s, the answer's next piece.
func (f *thinkFilter) write(s string) string {
	s, f.held = f.held+s, ""
	var out strings.Builder
	for s != "" {
		tag := thinkOpen
		if f.inside {
			tag = thinkClose
		}
		if i := strings.Index(s, tag); i >= 0 {
			if !f.inside {
				f.emit(&out, s[:i])
			}
			s, f.inside = s[i+len(tag):], !f.inside
			f.trim = !f.inside
			continue
		}
		k := partialTag(s, tag)
		if !f.inside {
			f.emit(&out, s[:len(s)-k])
		}
		f.held = s[len(s)-k:]
		break
	}
	return out.String()
}

// flush returns the text held back at the end of the answer: it was not a
// tag after all.
func (f *thinkFilter) flush() string {
	held := f.held
	f.held = ""
	if f.inside {
		return ""
	}
	var out strings.Builder
	f.emit(&out, held)
	return out.String()
}

func (f *thinkFilter) emit(out *strings.Builder, s string) {
	if f.trim {
		s = strings.TrimLeft(s, " \t\r\n")
		if s == "" {
			return
		}
		f.trim = false
	}
	out.WriteString(s)
}

// partialTag returns the length of the longest suffix of s that is a proper
// prefix of tag.
func partialTag(s, tag string) int {
	for k := min(len(s), len(tag)-1); k > 0; k-- {
		if strings.HasSuffix(s, tag[:k]) {
			return k
		}
	}
	return 0
}

// stripThinking removes the <think>…</think> blocks of a whole answer.
func stripThinking(s string) string {
	var f thinkFilter
	return f.write(s) + f.flush()
}
