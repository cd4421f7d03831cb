package activities_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/ctxflow/ctxflow/activities"
)

// scriptedChat answers each call with the next reply, recording requests.
type scriptedChat struct {
	replies []string
	err     error
	reqs    []activities.ChatRequest
}

func (m *scriptedChat) Chat(_ context.Context, req activities.ChatRequest, _ func(string)) (activities.ChatResponse, error) {
	m.reqs = append(m.reqs, req)
	if m.err != nil {
		return activities.ChatResponse{}, m.err
	}
	r := m.replies[0]
	m.replies = m.replies[1:]
	return activities.ChatResponse{Content: r}, nil
}

// The model classifier shows the labels and the recent intents, asks for
// the schema, and takes only a known label with a confidence in [0, 1]
// (one correction allowed); a model failure is an error.
func TestModelIntents(t *testing.T) {
	for _, tc := range []struct {
		name    string
		replies []string
		err     error
		label   string
		p       float64
		wantErr bool
	}{
		{name: "a label", replies: []string{`{"intent": "task", "confidence": 0.9}`}, label: "task", p: 0.9},
		{name: "fenced, after prose", replies: []string{"Sure:\n```json\n{\"intent\": \"qa\", \"confidence\": 0.7}\n```"}, label: "qa", p: 0.7},
		{name: "an unknown label, corrected", replies: []string{`{"intent": "shopping", "confidence": 0.9}`, `{"intent": "qa", "confidence": 0.4}`}, label: "qa", p: 0.4},
		{name: "out of range twice", replies: []string{`{"intent": "qa", "confidence": 7}`, `{"intent": "qa", "confidence": -1}`}, wantErr: true},
		{name: "the model fails", err: errors.New("connection refused"), wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &scriptedChat{replies: tc.replies, err: tc.err}
			label, p, err := activities.ModelIntents{Model: m}.Classify(t.Context(), "qwen2.5:0.5b", "统计每个国家的客户数量", []string{"qa", "chitchat"})
			if (err != nil) != tc.wantErr || label != tc.label || p != tc.p {
				t.Fatalf("Classify = %q, %v, %v", label, p, err)
			}
			req := m.reqs[0]
			if sys, user := req.Messages[0].Content, req.Messages[1].Content; !strings.Contains(sys, "- clarify: ") ||
				!strings.Contains(user, "Recent intents, oldest first: qa, chitchat") || !strings.Contains(user, "统计每个国家的客户数量") {
				t.Errorf("prompt:\n%s\n%s", sys, user)
			}
			if !strings.Contains(string(req.Format), `"enum":["qa","chitchat","task","continue","clarify"]`) || req.Model != "qwen2.5:0.5b" {
				t.Errorf("format %s, model %q", req.Format, req.Model)
			}
		})
	}
}
