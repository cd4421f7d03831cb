package offline

import (
	"sort"
	"strings"
	"unicode"

	"github.com/ctxflow/ctxflow/convo"
	"github.com/ctxflow/ctxflow/lexical"
)

// Summarize folds msgs (oldest first) into the running summary prev ("" for
// none), extractively, in at most budget tokens counted with tok (nil means
// [convo.EstimateTokens]; budget ≤ 0 means the default summary budget).
//
// It keeps whole sentences, most salient first: those with numbers or ids,
// named entities, decisions and preferences, then the user's other requests
// and questions and tool results, then the rest; greetings, thanks and
// repeats are dropped. Sentences of prev rank above new ones of the same
// salience, so the facts already kept stay. The kept sentences are written
// in their original order, one line per message, headed by who said it
// ("User: ...", "用户：..." for a Chinese conversation). If not even the
// best sentence fits, its longest prefix that fits is returned. The result
// is "" only when there is nothing to keep.
//
// Summarize is a pure function of its arguments.
func Summarize(prev string, msgs []convo.Message, budget int, tok convo.Tokenizer) string {
	var items []item
	names := map[string]string{}
	for i := range msgs {
		m := &msgs[i]
		switch m.Role {
		case convo.RoleUser, convo.RoleAssistant, convo.RoleSystem:
			items = append(items, item{role: m.Role, text: lexical.StripLabel(m.Content)})
		case convo.RoleToolCall:
			text := m.Content
			if m.ToolCall != nil {
				names[m.ToolCall.ID] = m.ToolCall.Name
				text = strings.TrimSpace(m.ToolCall.Name + "(" + string(m.ToolCall.Args) + ") " + m.Content)
			}
			items = append(items, item{role: m.Role, text: text})
		case convo.RoleToolResult:
			items = append(items, item{role: m.Role, tool: names[m.ToolCallID], text: m.Content})
		}
	}
	return summarize(prev, items, budget, tok)
}

// item is one message to fold: its role, its tool's name for a tool result,
// and its text.
type item struct {
	role convo.Role
	tool string
	text string
}

// unit is a sentence that may be kept.
type unit struct {
	group int // the line it is written on
	text  string
	score float64
	order int
}

// Words that mark a decision or a preference.
var (
	decisionWords = []string{"decide", "decided", "decision", "choose", "chose", "chosen", "go with", "will take", "i'll take",
		"confirm", "confirmed", "agreed", "agree", "booked", "book ", "ordered", "order", "reserved", "reservation", "settled",
		"conclusion", "result", "决定", "选择", "选了", "确认", "就要", "就买", "下单", "订单", "预订", "预约", "定了", "结论", "同意", "结果"}
	preferenceWords = []string{"prefer", "like", "love", "want", "need", "don't", "do not", "dislike", "hate", "rather",
		"favourite", "favorite", "budget", "allergic", "must", "only", "never", "always", "喜欢", "偏好", "更想", "想要", "需要",
		"不要", "不想", "希望", "最好", "讨厌", "预算", "只要", "必须", "过敏", "习惯"}
)

// boilerplate are an assistant's offers of help: never worth keeping.
var boilerplate = []string{"how can i help", "how may i help", "what can i do for you", "anything else", "is there anything else",
	"有什么可以帮你", "有什么可以帮您", "有什么需要帮", "还有什么需要", "还有其他问题"}

// nonAnswers are the engine's own answers that it has none: they only
// quote the question, which the summary has from the user.
var nonAnswers = []string{strings.ToLower(cannotAnswerEN), cannotAnswerZH, strings.ToLower(nothingOnEN), nothingOnZH}

// memoryWords ask that something be remembered: what follows matters later.
var memoryWords = []string{"remember", "don't forget", "do not forget", "keep in mind", "note that", "记住", "记得", "别忘了", "别忘记"}

// salience scores a sentence said in role: higher is kept first; below 0 is
// never kept.
func salience(s string, role convo.Role) float64 {
	l := strings.ToLower(s)
	if lexical.IsSmallTalk(s) || lexical.ContainsAny(l, boilerplate) || lexical.ContainsAny(l, nonAnswers) {
		return -1
	}
	sc := 0.0
	if lexical.ContainsAny(l, memoryWords) {
		sc += 3
	}
	if lexical.HasDigit(s) {
		sc += 3
	}
	if len(lexical.SalientEntities(s)) > 0 {
		sc += 3
	}
	if lexical.ContainsAny(l, decisionWords) {
		sc += 3
	}
	if lexical.ContainsAny(l, preferenceWords) {
		sc += 3
	}
	switch role {
	case convo.RoleUser:
		sc++
		if strings.ContainsAny(s, "?？") {
			sc++ // an open question
		}
	case convo.RoleToolResult:
		sc++
	case convo.RoleToolCall:
		sc -= 2 // its result carries the facts
	}
	return sc
}

// prevBonus ranks the existing summary's sentences above new ones.
const prevBonus = 2

func summarize(prev string, items []item, budget int, tok convo.Tokenizer) string {
	if budget <= 0 {
		budget = convo.DefaultSummaryConfig().MaxTokens
	}
	var all strings.Builder
	all.WriteString(prev)
	for _, it := range items {
		all.WriteString(it.text)
	}
	zh := lexical.IsChinese(all.String())
	var heads []string // one per group
	var units []unit
	seen := map[string]bool{}
	addUnit := func(group int, s string, score float64) {
		key := normalize(s)
		if key == "" || seen[key] || score < 0 {
			return
		}
		seen[key] = true
		units = append(units, unit{group: group, text: s, score: score, order: len(units)})
	}
	for _, line := range strings.Split(prev, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		head, body := splitHead(line)
		heads = append(heads, head)
		for _, s := range lexical.Sentences(body) {
			role := convo.RoleAssistant
			if strings.HasPrefix(head, "User") || strings.HasPrefix(head, "用户") {
				role = convo.RoleUser
			}
			addUnit(len(heads)-1, s, salience(s, role)+prevBonus)
		}
	}
	for _, it := range items {
		heads = append(heads, headOf(it, zh))
		for _, s := range lexical.Sentences(it.text) {
			addUnit(len(heads)-1, s, salience(s, it.role))
		}
	}
	if len(units) == 0 {
		return ""
	}
	rank := make([]int, len(units))
	for i := range rank {
		rank[i] = i
	}
	sort.SliceStable(rank, func(a, b int) bool {
		ua, ub := units[rank[a]], units[rank[b]]
		if ua.score != ub.score {
			return ua.score > ub.score
		}
		return ua.order > ub.order // newer first
	})
	keep := make([]bool, len(units))
	kept := 0
	for _, i := range rank {
		keep[i] = true
		if lexical.Tokens(tok, render(heads, units, keep, zh)) > budget {
			keep[i] = false
			continue
		}
		kept++
	}
	if kept == 0 {
		keep[rank[0]] = true
		return lexical.FitTokens(tok, render(heads, units, keep, zh), budget)
	}
	return render(heads, units, keep, zh)
}

// render writes the kept units, one line per group, in order.
func render(heads []string, units []unit, keep []bool, zh bool) string {
	var b strings.Builder
	group, prevText := -1, ""
	for i, u := range units {
		if !keep[i] {
			continue
		}
		if u.group != group {
			if group >= 0 {
				b.WriteByte('\n')
			}
			group = u.group
			b.WriteString(heads[group])
		} else if !zh || !endsSentence(prevText) {
			b.WriteByte(' ')
		}
		b.WriteString(u.text)
		prevText = u.text
	}
	return b.String()
}

// endsSentence reports whether s ends with sentence punctuation, so that a
// Chinese sentence may follow without a space.
func endsSentence(s string) bool {
	_, tail := lexical.TrimEndPunct(s)
	return strings.TrimSpace(tail) != ""
}

// headOf is the line head of an item: who said it.
func headOf(it item, zh bool) string {
	switch {
	case it.role == convo.RoleUser && zh:
		return "用户："
	case it.role == convo.RoleUser:
		return "User: "
	case it.role == convo.RoleAssistant && zh:
		return "助手："
	case it.role == convo.RoleAssistant:
		return "Assistant: "
	case it.role == convo.RoleToolCall && zh:
		return "工具调用："
	case it.role == convo.RoleToolCall:
		return "Tool call: "
	case it.role == convo.RoleToolResult && zh:
		return "工具" + it.tool + "结果："
	case it.role == convo.RoleToolResult && it.tool != "":
		return "Tool " + it.tool + ": "
	case it.role == convo.RoleToolResult:
		return "Tool result: "
	case zh:
		return "系统："
	}
	return "System: "
}

// splitHead splits a summary line into its head ("User: ") and the rest;
// a line without a known head has an empty one.
func splitHead(line string) (head, body string) {
	for _, sep := range []string{": ", "："} {
		k := strings.Index(line, sep)
		if k <= 0 || k > 40 {
			continue
		}
		h := line[:k]
		for _, known := range []string{"User", "Assistant", "Tool", "System", "用户", "助手", "工具", "系统"} {
			if strings.HasPrefix(h, known) {
				return line[:k+len(sep)], line[k+len(sep):]
			}
		}
	}
	return "", line
}

// normalize is the comparison key of a sentence: lower case letters and
// digits only.
func normalize(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			return unicode.ToLower(r)
		}
		return -1
	}, s)
}
