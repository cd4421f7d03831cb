package activities_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/ctxflow/ctxflow/activities"
)

// scriptedModel answers with its replies in order (the last one repeats)
// and records the requests.
type scriptedModel struct {
	replies []string
	err     error
	reqs    []activities.ChatRequest
}

func (m *scriptedModel) Chat(_ context.Context, req activities.ChatRequest, _ func(string)) (activities.ChatResponse, error) {
	m.reqs = append(m.reqs, req)
	if m.err != nil {
		return activities.ChatResponse{}, m.err
	}
	return activities.ChatResponse{Content: m.replies[min(len(m.reqs)-1, len(m.replies)-1)]}, nil
}

func TestModelGraderStructuredOutput(t *testing.T) {
	const valid = `{"is_relevant": true, "confidence": 0.8, "reasoning": "names the price"}`
	tests := []struct {
		name    string
		replies []string
		calls   int
		want    activities.Grade
		wantErr string
	}{
		{"plain JSON", []string{valid}, 1, activities.Grade{IsRelevant: true, Confidence: 0.8, Reasoning: "names the price"}, ""},
		{"fenced and chatty", []string{"Sure! Here you go:\n```json\n" + valid + "\n```\nHope it helps."}, 1,
			activities.Grade{IsRelevant: true, Confidence: 0.8, Reasoning: "names the price"}, ""},
		{"trailing comma repaired", []string{`{"is_relevant": false, "confidence": 0.9, "reasoning": "off topic",}`}, 1,
			activities.Grade{Confidence: 0.9, Reasoning: "off topic"}, ""},
		{"corrected after a parse error", []string{"I think it is relevant.", valid}, 2,
			activities.Grade{IsRelevant: true, Confidence: 0.8, Reasoning: "names the price"}, ""},
		{"wrong shape corrected", []string{`{"relevant": "yes"}`, valid}, 2,
			activities.Grade{IsRelevant: true, Confidence: 0.8, Reasoning: "names the price"}, ""},
		{"never valid", []string{"no idea", "still no idea"}, 2, activities.Grade{}, "no valid JSON after a correction attempt"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := &scriptedModel{replies: tc.replies}
			got, err := activities.ModelGrader{Model: m}.Grade(context.Background(), "qwen", "Pixel 8 price?", "The Pixel 8 costs 699 dollars.")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || activities.IsPermanent(err) {
					t.Fatalf("error = %v, want a transient %q", err, tc.wantErr)
				}
			} else if err != nil || got != tc.want {
				t.Fatalf("Grade = %+v, %v; want %+v", got, err, tc.want)
			}
			if len(m.reqs) != tc.calls {
				t.Fatalf("%d model calls, want %d", len(m.reqs), tc.calls)
			}
			for _, r := range m.reqs {
				if !json.Valid(r.Format) || !strings.Contains(string(r.Format), "is_relevant") || r.Model != "qwen" {
					t.Errorf("request format %s model %q", r.Format, r.Model)
				}
			}
			if tc.calls == 2 {
				// The correction call shows the raw answer and a typed
				// json_parse_error observation with the expected format.
				msgs := m.reqs[1].Messages
				raw, obs := msgs[len(msgs)-2], msgs[len(msgs)-1]
				var o struct{ Type, Raw, Expected string }
				if raw.Role != "assistant" || raw.Content != tc.replies[0] || json.Unmarshal([]byte(obs.Content), &o) != nil ||
					o.Type != "json_parse_error" || o.Raw != tc.replies[0] || !strings.Contains(o.Expected, "confidence") {
					t.Errorf("correction messages = %+v / %+v", raw, obs)
				}
			}
		})
	}
}

func TestModelGraderKeepsPermanentErrors(t *testing.T) {
	m := &scriptedModel{err: &activities.ModelError{StatusCode: 404, Message: `model "x" not found`}}
	_, err := activities.ModelGrader{Model: m}.Grade(context.Background(), "x", "q", "d")
	if !activities.IsPermanent(err) || len(m.reqs) != 1 {
		t.Fatalf("error = %v after %d calls, want the permanent model error at once", err, len(m.reqs))
	}
}

func TestModelReformulator(t *testing.T) {
	m := &scriptedModel{replies: []string{`{"rewritten_query": "Pixel 8 price in dollars", "rewrite_reason": "more specific", "keywords": ["Pixel 8", "price"]}`}}
	got, err := activities.ModelReformulator{Model: m}.Reformulate(context.Background(), "qwen", activities.ReformulateRequest{
		Original: "how much is it", Current: "how much is it", Failed: []string{"The weather is mild."},
		History: []activities.Reformulation{{RewrittenQuery: "price", RewriteReason: "shorter"}},
	})
	if err != nil || got.RewrittenQuery != "Pixel 8 price in dollars" || len(got.Keywords) != 2 {
		t.Fatalf("Reformulate = %+v, %v", got, err)
	}
	prompt := m.reqs[0].Messages[1].Content
	for _, want := range []string{"Original question: how much is it", "The weather is mild.", `"price" (shorter)`} {
		if !strings.Contains(prompt, want) {
			t.Errorf("prompt lacks %q:\n%s", want, prompt)
		}
	}
}
