package openai

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/convo"
)

// errNoChoice reports an answer without a choice.
var errNoChoice = errors.New("answer has no choice")

// answer collects a chat answer, whole or streamed.
type answer struct {
	text       strings.Builder
	think      thinkFilter
	calls      []*callBuilder
	model      string
	finish     string
	finished   bool
	prompt     int
	completion int
}

// callBuilder collects a tool call, whose arguments may stream in pieces.
type callBuilder struct {
	index    int64
	id, name string
	args     strings.Builder
}

// complete reads a whole answer: its first choice.
func (a *answer) complete(resp *oai.ChatCompletion) error {
	if len(resp.Choices) == 0 {
		return errNoChoice
	}
	ch := resp.Choices[0]
	a.model = resp.Model
	a.text.WriteString(stripThinking(ch.Message.Content))
	a.text.WriteString(ch.Message.Refusal)
	for i, tc := range ch.Message.ToolCalls {
		if tc.Type != "" && tc.Type != "function" {
			continue // a custom tool, never offered
		}
		b := &callBuilder{index: int64(i), id: tc.ID, name: tc.Function.Name}
		b.args.WriteString(tc.Function.Arguments)
		a.calls = append(a.calls, b)
	}
	a.finish, a.finished = ch.FinishReason, true
	a.prompt, a.completion = int(resp.Usage.PromptTokens), int(resp.Usage.CompletionTokens)
	return nil
}

// stream reads a streamed answer, passing the visible text of each chunk to
// onDelta. The answer is complete when a chunk gave its finish reason; the
// usage comes in a last chunk without choices.
func (a *answer) stream(s *ssestream.Stream[oai.ChatCompletionChunk], onDelta func(string)) error {
	defer func() { _ = s.Close() }()
	emit := func(d string) {
		if d != "" {
			a.text.WriteString(d)
			onDelta(d)
		}
	}
	for s.Next() {
		chunk := s.Current()
		a.model = cmp.Or(chunk.Model, a.model)
		if u := chunk.Usage; u.PromptTokens > 0 || u.CompletionTokens > 0 {
			a.prompt, a.completion = int(u.PromptTokens), int(u.CompletionTokens)
		}
		for _, ch := range chunk.Choices {
			if ch.Index != 0 {
				continue // one answer was asked for
			}
			emit(a.think.write(ch.Delta.Content))
			emit(ch.Delta.Refusal)
			for _, tc := range ch.Delta.ToolCalls {
				a.addCall(tc)
			}
			if ch.FinishReason != "" {
				a.finish, a.finished = ch.FinishReason, true
			}
		}
	}
	if err := s.Err(); err != nil {
		return err
	}
	emit(a.think.flush())
	if !a.finished {
		return errIncomplete
	}
	return nil
}

// addCall adds a streamed piece of a tool call: the start of a call (an
// index not seen, or another id at the same index, as servers that send
// each call whole may do), or more of its arguments.
func (a *answer) addCall(d oai.ChatCompletionChunkChoiceDeltaToolCall) {
	var b *callBuilder
	for i := len(a.calls) - 1; i >= 0; i-- {
		if c := a.calls[i]; c.index == d.Index && (d.ID == "" || c.id == "" || c.id == d.ID) {
			b = c
			break
		}
	}
	if b == nil {
		b = &callBuilder{index: d.Index}
		a.calls = append(a.calls, b)
	}
	b.id = cmp.Or(b.id, d.ID)
	b.name = cmp.Or(b.name, d.Function.Name)
	b.args.WriteString(d.Function.Arguments)
}

// response is the collected answer; model is the one asked for, what
// describes the call for the log.
func (a *answer) response(log *slog.Logger, what, model string) activities.ChatResponse {
	var calls []convo.ToolCall
	for i, b := range a.calls {
		id := cmp.Or(b.id, fmt.Sprintf("call_%d", i))
		args, err := readArguments(b.args.String())
		if err != nil {
			log.Warn("tool call arguments are not a JSON object: passed on as text, for the tool to refuse",
				"call", what, "tool", b.name, "id", id, "error", err)
		}
		calls = append(calls, convo.ToolCall{ID: id, Name: b.name, Args: args})
	}
	return activities.ChatResponse{
		Content:          a.text.String(),
		Model:            cmp.Or(a.model, model),
		PromptTokens:     a.prompt,
		CompletionTokens: a.completion,
		ToolCalls:        calls,
		DoneReason:       a.finish,
	}
}

// readArguments reads a tool call's arguments, text the model wrote: a JSON
// object (compacted), {} for none, or an object the model encoded twice as
// a JSON string. Anything else is returned as a JSON string of the text,
// with an error saying why: a call's arguments stay valid JSON (the
// transcript stores them as such) that no tool takes as its arguments.
func readArguments(s string) (json.RawMessage, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "null" {
		return json.RawMessage("{}"), nil
	}
	if obj, ok := jsonObject(s); ok {
		return obj, nil
	}
	var inner string
	if json.Unmarshal([]byte(s), &inner) == nil {
		if obj, ok := jsonObject(strings.TrimSpace(inner)); ok {
			return obj, nil
		}
	}
	quoted, _ := json.Marshal(s)
	if !json.Valid([]byte(s)) {
		return quoted, fmt.Errorf("invalid JSON: %s", convo.Clip(s, 200))
	}
	return quoted, fmt.Errorf("not an object: %s", convo.Clip(s, 200))
}

// jsonObject returns s compacted when it is one JSON object.
func jsonObject(s string) (json.RawMessage, bool) {
	if !strings.HasPrefix(s, "{") || !json.Valid([]byte(s)) {
		return nil, false
	}
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(s)); err != nil {
		return nil, false
	}
	return b.Bytes(), true
}
