package activities

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/ctxflow/ctxflow/convo"
)

// ModelGrader grades documents with a chat model's structured output
// (seed 003's grader prompt).
type ModelGrader struct{ Model ChatModel }

// ModelReformulator rewrites failed queries with a chat model's structured
// output (seed 003's rewrite prompt).
type ModelReformulator struct{ Model ChatModel }

var (
	gradeSchema = json.RawMessage(`{"type":"object","properties":{` +
		`"is_relevant":{"type":"boolean"},"confidence":{"type":"number","minimum":0,"maximum":1},` +
		`"reasoning":{"type":"string"}},"required":["is_relevant","confidence","reasoning"]}`)
	rewriteSchema = json.RawMessage(`{"type":"object","properties":{` +
		`"rewritten_query":{"type":"string"},"rewrite_reason":{"type":"string"},` +
		`"keywords":{"type":"array","items":{"type":"string"}}},"required":["rewritten_query","rewrite_reason","keywords"]}`)
)

const gradePrompt = `You are an expert at judging whether a document is relevant to a question.
Decide whether the document contains the information needed to answer the user's question. You do not answer the question.
Criteria: 1. Does the document contain information directly related to the question? 2. Is it enough to answer the question in part or in full? 3. Does it match the question's core intent?
Answer with JSON only: {"is_relevant": true or false, "confidence": 0.0 to 1.0, "reasoning": "why"}`

const rewritePrompt = `The user's query did not retrieve good results from the knowledge base. Analyse why and write a better search query.
Strategies: 1. add specific qualifiers to a query that is too broad; 2. use more general terms for one that is too narrow; 3. use synonyms or related concepts; 4. split a compound question into a simpler one; 5. keep the core intent and change the wording.
Do not repeat a query that was already tried. Answer with JSON only: {"rewritten_query": "the new query", "rewrite_reason": "why", "keywords": ["keyword", ...]}`

// Grade implements [Grader].
func (g ModelGrader) Grade(ctx context.Context, model, query, document string) (Grade, error) {
	user := fmt.Sprintf("Question: %s\n\nDocument:\n%s", query, convo.Clip(document, 6000))
	var out Grade
	err := chatJSON(ctx, g.Model, model, gradePrompt, user, gradeSchema, &out, func() error {
		if strings.TrimSpace(out.Reasoning) == "" {
			return errors.New("reasoning is empty")
		}
		return nil
	})
	return out, err
}

// Reformulate implements [Reformulator].
func (r ModelReformulator) Reformulate(ctx context.Context, model string, req ReformulateRequest) (Reformulation, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "Original question: %s\nCurrent query: %s\n\nFailed retrieval results:\n", req.Original, req.Current)
	if len(req.Failed) == 0 {
		b.WriteString("(nothing was retrieved)\n")
	}
	for i, f := range req.Failed {
		fmt.Fprintf(&b, "%d. %s\n", i+1, convo.Clip(strings.TrimSpace(f), 500))
	}
	b.WriteString("\nEarlier rewrites:\n")
	if len(req.History) == 0 {
		b.WriteString("(none)\n")
	}
	for _, h := range req.History {
		fmt.Fprintf(&b, "- %q (%s)\n", h.RewrittenQuery, h.RewriteReason)
	}
	var out Reformulation
	err := chatJSON(ctx, r.Model, model, rewritePrompt, b.String(), rewriteSchema, &out, func() error {
		if strings.TrimSpace(out.RewrittenQuery) == "" {
			return errors.New("rewritten_query is empty")
		}
		return nil
	})
	return out, err
}

// jsonAttempts bounds the calls of one structured step: the first answer
// and one correction after a json_parse_error observation.
const jsonAttempts = 2

// jsonMaxTokens caps a structured answer: a verdict or a query is short,
// and a model that rambles is cut off and corrected rather than waited for.
const jsonMaxTokens = 512

// chatJSON asks model for a JSON answer in schema and decodes it into out.
// A model without native structured output may wrap the JSON in prose or a
// fence: [convo.ExtractJSON] finds and repairs it. When that still fails,
// the raw answer and a typed json_parse_error observation (seed 001 §1) go
// back to the model, which gets one chance to correct itself; a parse error
// alone is never a permanent failure.
func chatJSON(ctx context.Context, m ChatModel, model, system, user string, schema json.RawMessage, out any, check func() error) error {
	msgs := []convo.ModelMessage{
		{Role: string(convo.RoleSystem), Content: system},
		{Role: string(convo.RoleUser), Content: user},
	}
	var lastErr error
	for range jsonAttempts {
		resp, err := m.Chat(ctx, ChatRequest{Model: model, Messages: msgs, Format: schema, Options: ModelOptions{NumPredict: jsonMaxTokens}}, nil)
		if err != nil {
			return err
		}
		if lastErr = decodeJSONAnswer(resp.Content, out, check); lastErr == nil {
			return nil
		}
		msgs = append(msgs,
			convo.ModelMessage{Role: string(convo.RoleAssistant), Content: resp.Content},
			convo.ModelMessage{Role: string(convo.RoleUser), Content: convo.ParseErrorObservation(resp.Content, string(schema), lastErr, 2000)})
	}
	return fmt.Errorf("%w: %w", errNoJSON, lastErr)
}

// decodeJSONAnswer extracts the JSON of answer into out (unknown fields
// refused, so a wrong shape is caught) and checks it. out is zeroed first:
// nothing of an earlier answer, refused or decoded half-way, stays in it.
func decodeJSONAnswer(answer string, out any, check func() error) error {
	reflect.ValueOf(out).Elem().SetZero()
	raw, err := convo.ExtractJSON(answer)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(out); err != nil {
		return fmt.Errorf("decode %s: %w", convo.Clip(string(raw), 200), err)
	}
	return check()
}
