package offline

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/convo"
	"github.com/ctxflow/ctxflow/lexical"
)

// ModelName is the model name of every [Engine] answer.
const ModelName = "offline"

// Engine is the offline [activities.ChatModel]: no weights, no network,
// deterministic. Chat reads the request the way the session pipeline
// builds it:
//
//   - a summariser prompt ([convo.SummaryPrompt]: a system message that
//     starts "You maintain the running summary of a conversation") is
//     answered with an extractive summary ([Summarize]) of its new messages
//     and existing summary, within the token budget the prompt states;
//   - any other request is answered for its last user message: the
//     question is made standalone with [Rewrite] over the earlier messages
//     (and the running summary), then answered with [Answer] from the
//     documents found in system and tool messages (see [FormatDocuments]):
//     a greeting template, quoted sentences with their sources, or an
//     honest "nothing on this" that names the rewritten question.
//
// Every response has Model [ModelName], and every answer (not summaries,
// which feed the next prompt) starts with a label saying that the offline
// engine made it. The zero value is ready to use and safe for concurrent
// use.
type Engine struct {
	// Tokenizer counts summary budgets and response tokens; nil means
	// [convo.EstimateTokens].
	Tokenizer convo.Tokenizer
	// Embedder embeds texts for [Engine.Embed]; the zero value embeds in
	// [lexical.DefaultDim] dimensions.
	Embedder lexical.Embedder
}

var (
	_ activities.ChatModel = (*Engine)(nil)
	_ activities.Embedder  = (*Engine)(nil)
)

// summaryPromptStart is how convo.SummaryPrompt's system message starts.
const summaryPromptStart = "You maintain the running summary of a conversation"

// Chat answers req as described on [Engine]. onDelta, if non-nil, gets the
// answer a sentence at a time (see sentencesOf). A request without messages,
// without a user message (outside a summary prompt) or asking for a JSON
// format is a permanent [activities.ModelError]; a done ctx returns its
// error.
func (e *Engine) Chat(ctx context.Context, req activities.ChatRequest, onDelta func(delta string)) (activities.ChatResponse, error) {
	if err := ctx.Err(); err != nil {
		return activities.ChatResponse{}, err
	}
	if len(req.Messages) == 0 {
		return activities.ChatResponse{}, &activities.ModelError{Message: "offline engine: request without messages"}
	}
	if len(req.Format) > 0 {
		return activities.ChatResponse{}, &activities.ModelError{Message: "offline engine: structured (JSON) answers are not supported"}
	}
	var content string
	if isSummaryPrompt(req.Messages) {
		content = e.summary(req.Messages)
	} else {
		var err error
		if content, err = e.reply(req.Messages); err != nil {
			return activities.ChatResponse{}, err
		}
	}
	if onDelta != nil {
		for _, f := range sentencesOf(content) {
			onDelta(f)
		}
	}
	prompt := convo.ReplyPrimingTokens
	for _, m := range req.Messages {
		prompt += lexical.Tokens(e.Tokenizer, m.Content) + convo.MessageOverheadTokens
	}
	return activities.ChatResponse{
		Content:          content,
		Model:            ModelName,
		PromptTokens:     prompt,
		CompletionTokens: lexical.Tokens(e.Tokenizer, content),
	}, nil
}

// sentencesOf cuts an answer into the fragments Chat streams: its sentences
// ([lexical.Sentences]), each with the spaces before it, the last with
// what follows it, so that they add up to the answer.
func sentencesOf(answer string) []string {
	var out []string
	at := 0
	for _, s := range lexical.Sentences(answer) {
		i := strings.Index(answer[at:], s)
		if i < 0 {
			break
		}
		out = append(out, answer[at:at+i+len(s)])
		at += i + len(s)
	}
	switch {
	case len(out) == 0:
		return []string{answer}
	case at < len(answer):
		out[len(out)-1] += answer[at:]
	}
	return out
}

// Embed implements [activities.Embedder]: one vector per text, in order,
// from e.Embedder; model is ignored. A done ctx returns its error.
func (e *Engine) Embed(ctx context.Context, model string, texts []string) ([][]float32, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return e.Embedder.Embed(texts), nil
}

func isSummaryPrompt(msgs []convo.ModelMessage) bool {
	return msgs[0].Role == string(convo.RoleSystem) && strings.HasPrefix(strings.TrimSpace(msgs[0].Content), summaryPromptStart)
}

var budgetRE = regexp.MustCompile(`at most (\d+) tokens`)

// noSummary stands in for a summary when nothing was worth keeping: an
// empty summary would be refused as a failure.
const (
	noSummaryEN = "Nothing worth keeping yet."
	noSummaryZH = "暂无需要保留的要点。"
)

// summary answers a convo.SummaryPrompt.
func (e *Engine) summary(msgs []convo.ModelMessage) string {
	budget := 0
	if m := budgetRE.FindStringSubmatch(msgs[0].Content); m != nil {
		budget, _ = strconv.Atoi(m[1])
	}
	var body strings.Builder
	for _, m := range msgs[1:] {
		body.WriteString(m.Content)
		body.WriteString("\n")
	}
	prev, items := parseSummaryPrompt(body.String())
	out := summarize(prev, items, budget, e.Tokenizer)
	if strings.TrimSpace(out) != "" {
		return out
	}
	none := noSummaryEN
	if lexical.IsChinese(body.String()) {
		none = noSummaryZH
	}
	if budget > 0 {
		if fit := lexical.FitTokens(e.Tokenizer, none, budget); fit != "" {
			return fit
		}
	}
	return none
}

// parseSummaryPrompt reads the user part of a convo.SummaryPrompt: the
// existing summary and the "[role] content" lines of the new messages (a
// line without a role marker continues the message before it).
func parseSummaryPrompt(s string) (prev string, items []item) {
	rest := s
	if k := strings.Index(rest, "Existing summary:"); k >= 0 {
		rest = rest[k+len("Existing summary:"):]
	}
	newPart := ""
	if k := strings.Index(rest, "New messages:"); k >= 0 {
		prev, newPart = rest[:k], rest[k+len("New messages:"):]
	} else {
		newPart = rest
	}
	if prev = strings.TrimSpace(prev); prev == "(none)" {
		prev = ""
	}
	for _, line := range strings.Split(newPart, "\n") {
		if it, ok := parseMessageLine(line); ok {
			items = append(items, it)
		} else if len(items) > 0 && strings.TrimSpace(line) != "" {
			items[len(items)-1].text += "\n" + line
		}
	}
	return prev, items
}

// parseMessageLine reads "[user] ...", "[tool call] ...", "[tool result
// name] ...".
func parseMessageLine(line string) (item, bool) {
	if !strings.HasPrefix(line, "[") {
		return item{}, false
	}
	end := strings.Index(line, "] ")
	if end < 0 {
		if !strings.HasSuffix(line, "]") {
			return item{}, false
		}
		end = len(line) - 1
	}
	tag, text := line[1:end], ""
	if end+2 <= len(line) {
		text = line[end+2:]
	}
	switch {
	case tag == "user":
		return item{role: convo.RoleUser, text: text}, true
	case tag == "assistant":
		return item{role: convo.RoleAssistant, text: lexical.StripLabel(text)}, true
	case tag == "system":
		return item{role: convo.RoleSystem, text: text}, true
	case tag == "tool call":
		return item{role: convo.RoleToolCall, text: text}, true
	case strings.HasPrefix(tag, "tool result"):
		return item{role: convo.RoleToolResult, tool: strings.TrimSpace(strings.TrimPrefix(tag, "tool result")), text: text}, true
	}
	return item{}, false
}

// summaryPrefix is how convo.SummaryMessage introduces the running summary.
const summaryPrefix = "Summary of the earlier conversation:"

// reply answers the last user message of msgs.
func (e *Engine) reply(msgs []convo.ModelMessage) (string, error) {
	last := -1
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == string(convo.RoleUser) {
			last = i
			break
		}
	}
	if last < 0 {
		return "", &activities.ModelError{Message: "offline engine: request without a user message"}
	}
	var history []convo.Message
	var docs []Document
	searched := false // the knowledge base was searched and had nothing
	for i, m := range msgs {
		switch m.Role {
		case string(convo.RoleSystem):
			if strings.HasPrefix(strings.TrimSpace(m.Content), activities.NothingRelevant) {
				searched = true
				continue
			}
			if body, ok := strings.CutPrefix(strings.TrimSpace(m.Content), summaryPrefix); ok {
				history = append(history, convo.Message{Role: convo.RoleSystem, Content: body})
				continue
			}
			docs = append(docs, parseDocuments(m.Content)...)
		case "tool":
			found := parseDocuments(m.Content)
			if len(found) == 0 && strings.TrimSpace(m.Content) != "" {
				id := m.ToolName
				if id == "" {
					id = fmt.Sprintf("tool-%d", i)
				}
				found = []Document{{ID: id, Text: m.Content}}
			}
			docs = append(docs, found...)
		case string(convo.RoleUser), string(convo.RoleAssistant):
			if i < last {
				history = append(history, convo.Message{Role: convo.Role(m.Role), Content: m.Content})
			}
		}
	}
	q := lexical.Rewrite(msgs[last].Content, history).Query
	zh := chineseConversation(msgs[last].Content, history)
	if searched && len(docs) == 0 && !lexical.IsSmallTalk(strings.TrimSpace(q)) {
		return nothingFound(strings.TrimSpace(q), zh).Text, nil
	}
	return AnswerIn(q, docs, zh).Text, nil
}

// chineseConversation reports whether to answer question in Chinese: when
// it is mostly Chinese, or when it mixes a Latin name with Chinese words
// and no English function word ("iPhone 15呢？"): then the user's last
// message before it decides, Chinese if there was none.
func chineseConversation(question string, history []convo.Message) bool {
	switch {
	case lexical.IsChinese(question):
		return true
	case !strings.ContainsFunc(question, func(r rune) bool { return unicode.Is(unicode.Han, r) }):
		return false
	case slices.ContainsFunc(strings.FieldsFunc(strings.ToLower(question), notLatin), func(w string) bool { return englishFunctionWords[w] }):
		return false
	}
	for i := len(history) - 1; i >= 0; i-- {
		if history[i].Role == convo.RoleUser {
			return lexical.IsChinese(history[i].Content)
		}
	}
	return true
}

// englishFunctionWords tell an English question that names something in
// Chinese ("What is 华为Mate60?") from a Chinese one naming something in
// Latin letters.
var englishFunctionWords = map[string]bool{
	"what": true, "which": true, "who": true, "when": true, "where": true, "why": true, "how": true,
	"is": true, "are": true, "was": true, "does": true, "do": true, "did": true, "can": true,
	"the": true, "a": true, "an": true, "of": true, "about": true, "and": true, "or": true, "it": true, "its": true,
	"tell": true, "me": true, "for": true, "with": true, "in": true, "on": true,
}

func notLatin(r rune) bool { return r > unicode.MaxASCII || !unicode.IsLetter(r) }

// docLine starts a document: "[id] text" or "[id]: text".
var docLine = regexp.MustCompile(`^\[([^\]\s]{1,200})\]:?(?:\s+(.*))?$`)

// FormatDocuments writes docs in the form [Engine] reads from a system or
// tool message: one block per document, starting "[id] " on a new line.
// A document's text may span lines, but none of its lines may itself start
// like a block ("[x] ").
func FormatDocuments(docs []Document) string {
	var b strings.Builder
	for i, d := range docs {
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "[%s] %s", d.ID, strings.TrimSpace(d.Text))
	}
	return b.String()
}

// parseDocuments reads the "[id] text" blocks of s (see FormatDocuments);
// text before the first block is not a document.
func parseDocuments(s string) []Document {
	var out []Document
	for _, line := range strings.Split(s, "\n") {
		if m := docLine.FindStringSubmatch(strings.TrimSpace(line)); m != nil {
			out = append(out, Document{ID: m[1], Text: m[2]})
			continue
		}
		if len(out) > 0 {
			out[len(out)-1].Text += "\n" + line
		}
	}
	for i := range out {
		out[i].Text = strings.TrimSpace(out[i].Text)
	}
	return out
}
