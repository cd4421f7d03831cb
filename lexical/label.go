package lexical

import (
	"regexp"
	"strings"

	"github.com/ctxflow/ctxflow/convo"
)

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

// engineLabelled reports whether s starts with one of the offline engine's
// labels.
func engineLabelled(s string) bool {
	t := strings.TrimSpace(s)
	return strings.HasPrefix(t, labelEN) || strings.HasPrefix(t, labelZH)
}

var (
	// heading is a Markdown heading: a section's label, not a sentence.
	heading = regexp.MustCompile(`^#{1,6}(\s|$)`)
	// listMark starts a list item or a quote.
	listMark = regexp.MustCompile(`^(?:[-*+>•]|\d{1,3}[.)、])\s*`)
	// fieldLabel starts a line with a short label and a colon ("已完成：",
	// "Result: ", "屏幕：").
	fieldLabel = regexp.MustCompile(`^([^:：\n]{1,16}?)\s*[:：]\s*`)
)

// named reports whether s holds a product or a name ("华为Mate60", "Golden
// Wok"), which a label before a colon does not.
func named(s string) bool {
	for _, e := range entities(s) {
		if e.kind == entProduct || e.kind == entName {
			return true
		}
	}
	return false
}

// sourceText is the part of history message m that may name the
// conversation's topic, "" for none. A user's command ("继续", "continue",
// "/retry") names none. An answer loses its labels: the offline engine's
// label, citation ids, Markdown headings (section names) and lead-ins that
// end a line with a colon ("知识库摘录：", "From the knowledge base:"). An
// answer of the offline engine (it starts with its label) is its own
// template text but for the lines it quotes from the knowledge base, those
// with a citation: only these are read, so that the engine's own words
// ("以离线模式运行", "知识库摘录") never become a topic.
func sourceText(m convo.Message) string {
	s := strings.TrimSpace(m.Content)
	switch m.Role {
	case convo.RoleUser:
		if isCommand(s) {
			return ""
		}
	case convo.RoleAssistant, convo.RoleSystem:
	default:
		return ""
	}
	engine := engineLabelled(s)
	var keep []string
	for _, line := range strings.Split(stripLabel(s), "\n") {
		if engine && !citation.MatchString(line) {
			continue
		}
		line = strings.TrimSpace(citation.ReplaceAllString(line, ""))
		line = strings.TrimSpace(listMark.ReplaceAllString(line, ""))
		if m := fieldLabel.FindStringSubmatchIndex(line); m != nil && !named(line[:m[3]]) {
			line = strings.TrimSpace(line[m[1]:]) // "已完成：15 步" → "15 步"
		}
		if line == "" || heading.MatchString(line) || strings.HasSuffix(line, ":") || strings.HasSuffix(line, "：") {
			continue
		}
		keep = append(keep, line)
	}
	return strings.Join(keep, "\n")
}

// commands are what a user says to steer a task or the engine rather than to
// ask about something: never a topic.
var commands = setOf(`continue go on goon resume retry again stop cancel abort next more proceed start restart redo undo
继续 接着 接着来 继续吧 接着说 继续说 重试 再试 再试一次 重来 停 停止 暂停 取消 下一步 开始 恢复 重新开始`)

// isCommand reports whether s is only a command word ("继续", "go on",
// "Retry!") or a slash command ("/retry").
func isCommand(s string) bool {
	body, _ := trimEndPunct(strings.TrimSpace(s))
	if strings.HasPrefix(body, "/") {
		return true
	}
	body = strings.ToLower(strings.Join(strings.Fields(body), " "))
	return body != "" && (commands[body] || commands[strings.ReplaceAll(body, " ", "")])
}
