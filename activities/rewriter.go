package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ctxflow/ctxflow/convo"
	"github.com/ctxflow/ctxflow/lexical"
)

// RewriteRequest is what a rewriter that asks a model reads besides the
// question and the window before it: the running summary of the turns
// folded out of the window and the session's tracked topic.
type RewriteRequest struct {
	// Model is the session's chat model; "" for the rewriter's own.
	Model    string
	Question string
	// History is the window before the question, oldest first.
	History []convo.Message
	// Summary is the running summary ("" for none).
	Summary string
	// Topic is the session's topic so far ("" for none).
	Topic string
}

// ContextRewriter is a [Rewriter] that also reads the running summary and
// the session's topic, and asks the session's model (seed 000 §3.2.2: the
// rewriter with topic tracking).
type ContextRewriter interface {
	Rewriter
	RewriteInContext(ctx context.Context, req RewriteRequest) (query, topic string, err error)
}

// ModelRewriter makes a follow-up stand alone with the chat model's
// structured output, {"rewritten", "topic"}, over the window, the running
// summary and the topic; when the model fails (an error, a timeout, no
// valid JSON after one correction, an answer that is no rewrite) the
// offline rewriter answers instead. It is the worker's rewriter whenever a
// real model serves.
type ModelRewriter struct {
	Model ChatModel
	// ModelName is asked when a request names no model (the worker's
	// default chat model).
	ModelName string
	// Fallback rewrites when the model cannot; nil leaves the question as
	// asked.
	Fallback Rewriter
	// Timeout bounds the model's answer (0: defaultRewriteTimeout): a slow
	// model costs the turn its model rewrite, not its retrieval.
	Timeout time.Duration
}

// defaultRewriteTimeout bounds a model rewrite.
const defaultRewriteTimeout = 20 * time.Second

// rewriterHistory bounds the messages of the window the model is shown,
// and rewriterMessageChars each of them.
const (
	rewriterHistory      = 12
	rewriterMessageChars = 1500
)

var questionRewriteSchema = json.RawMessage(`{"type":"object","properties":{` +
	`"rewritten":{"type":"string"},"topic":{"type":"string"}},"required":["rewritten","topic"],"additionalProperties":false}`)

const questionRewritePrompt = `You rewrite the user's latest question so that it can be understood without the conversation, for a search in a knowledge base. You do not answer it.
Rules:
1. Coreference: replace pronouns and demonstratives that refer to the conversation (it, they, this, that one, 它, 这个, 那款, 他们) by what they refer to.
2. Ellipsis: complete a question that leaves out its subject or object ("What about the price?", "屏幕呢？", "版本是多少呢？", "And the iPhone 15?") from the conversation; "X呢？" about another thing asks the previous question again about X.
3. Topic tracking: the topic is the entity the conversation is about (a product, a person, a place), e.g. "华为Mate60", or "华为Mate60的下一代" after a question about its next generation. Take it from what the user asked about and what the answers say about it, never from the assistant's own phrasing, labels or headings (e.g. "知识库摘录", "From the knowledge base", "(offline engine)", "## 价格"), from commands ("继续", "continue") or from numbers and units ("14 张表").
4. A question that already stands alone stays exactly as it is, word for word: a new subject, a greeting, a question that names what it asks about.
5. Keep the question's language, its own words and its meaning; add only what the conversation supplies. Never add facts from your own knowledge.
Answer with JSON only: {"rewritten": "the standalone question", "topic": "the conversation's topic after this question, or \"\" if there is none"}`

// Rewrite implements [Rewriter] with the rewriter's own model.
func (m ModelRewriter) Rewrite(ctx context.Context, question string, history []convo.Message) (string, string, error) {
	return m.RewriteInContext(ctx, RewriteRequest{Question: question, History: history})
}

// RewriteInContext implements [ContextRewriter]. Without a topic so far,
// the offline rewriter's is the model's hint.
func (m ModelRewriter) RewriteInContext(ctx context.Context, req RewriteRequest) (string, string, error) {
	if strings.TrimSpace(req.Question) == "" || len(req.History) == 0 && req.Summary == "" {
		return req.Question, req.Topic, nil
	}
	if req.Topic == "" && m.Fallback != nil {
		if _, topic, err := m.Fallback.Rewrite(ctx, req.Question, req.History); err == nil {
			req.Topic = topic
		}
	}
	q, topic, err := m.ask(ctx, req)
	if err == nil {
		return q, topic, nil
	}
	if ctx.Err() != nil {
		return "", "", ctx.Err()
	}
	logger(ctx).Warn("model rewrite failed: the offline rewriter answers", "error", err)
	if m.Fallback == nil {
		return req.Question, req.Topic, nil
	}
	return m.Fallback.Rewrite(ctx, req.Question, req.History)
}

// ask asks the model for the rewrite.
func (m ModelRewriter) ask(ctx context.Context, req RewriteRequest) (string, string, error) {
	model := req.Model
	if model == "" {
		model = m.ModelName
	}
	if m.Model == nil || model == "" {
		return "", "", errors.New("no model to rewrite with")
	}
	timeout := m.Timeout
	if timeout <= 0 {
		timeout = defaultRewriteTimeout
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var out struct {
		Rewritten string `json:"rewritten"`
		Topic     string `json:"topic"`
	}
	err := chatJSON(cctx, m.Model, model, questionRewritePrompt, rewriteInput(req), questionRewriteSchema, &out, func() error {
		return checkRewrite(req.Question, out.Rewritten, out.Topic)
	})
	if err != nil {
		return "", "", fmt.Errorf("rewrite with %s: %w", model, err)
	}
	rewritten := strings.TrimSpace(out.Rewritten)
	if rewritten == strings.TrimSpace(req.Question) {
		rewritten = req.Question // unchanged, as asked
	}
	return rewritten, strings.TrimSpace(out.Topic), nil
}

// checkRewrite refuses an answer that is no rewrite of question: empty, or
// so much longer that it answers rather than asks.
func checkRewrite(question, rewritten, topic string) error {
	r := strings.TrimSpace(rewritten)
	n, qn := utf8.RuneCountInString(r), utf8.RuneCountInString(strings.TrimSpace(question))
	switch {
	case r == "":
		return errors.New("rewritten is empty")
	case n > 2*qn+100:
		return fmt.Errorf("rewritten is %d characters for a question of %d: an answer, not a rewrite", n, qn)
	case utf8.RuneCountInString(topic) > 80:
		return fmt.Errorf("topic is %d characters: a sentence, not a topic", utf8.RuneCountInString(topic))
	}
	return nil
}

// rewriteInput is the user message of a rewrite: the summary, the topic so
// far, the window (the offline engine's labels and citation ids dropped,
// each message clipped) and the question.
func rewriteInput(req RewriteRequest) string {
	var b strings.Builder
	if s := strings.TrimSpace(req.Summary); s != "" {
		fmt.Fprintf(&b, "Summary of the earlier conversation:\n%s\n\n", convo.Clip(s, 3000))
	}
	topic := strings.TrimSpace(req.Topic)
	if topic == "" {
		topic = "(none yet)"
	}
	fmt.Fprintf(&b, "Topic so far: %s\n\nConversation, oldest first:\n", topic)
	history := req.History[max(0, len(req.History)-rewriterHistory):]
	for _, msg := range history {
		role := string(msg.Role)
		if msg.Role != convo.RoleUser && msg.Role != convo.RoleAssistant {
			continue
		}
		text := strings.TrimSpace(lexical.StripCitations(lexical.StripLabel(msg.Content)))
		if text == "" {
			continue
		}
		fmt.Fprintf(&b, "%s: %s\n", role, convo.Clip(text, rewriterMessageChars))
	}
	fmt.Fprintf(&b, "\nLatest question: %s", convo.Clip(strings.TrimSpace(req.Question), 4000))
	return b.String()
}
