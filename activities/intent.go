package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/ctxflow/ctxflow/convo"
)

// ModelIntents is the intent classifier of a worker whose chat model is a
// real one: the model sees the labels with their descriptions and
// examples and the session's last intents, and answers {intent,
// confidence} in JSON (seed 002's IntentRecognitionNode).
type ModelIntents struct {
	Model  ChatModel
	Labels []convo.IntentLabel // nil: convo.DefaultIntents
}

const intentPrompt = `You classify the intent of the user's latest message in a conversation.
Answer with JSON only: {"intent": "<one of the labels>", "confidence": <0.0 to 1.0>}.
Use the recent intents of the conversation: a short follow-up usually keeps the intent before it.
The labels:
`

// Classify implements [IntentClassifier].
func (m ModelIntents) Classify(ctx context.Context, model, question string, recent []string) (string, float64, error) {
	labels := m.Labels
	if labels == nil {
		labels = convo.DefaultIntents
	}
	names := make([]string, len(labels))
	var system strings.Builder
	system.WriteString(intentPrompt)
	for i, l := range labels {
		names[i] = l.Label
		fmt.Fprintf(&system, "- %s: %s. Examples: %s\n", l.Label, l.Description, strings.Join(l.Examples[:min(4, len(l.Examples))], " | "))
	}
	user := fmt.Sprintf("Recent intents, oldest first: %s\nLatest message: %s", orNone(recent), convo.Clip(question, 2000))
	schema, _ := json.Marshal(map[string]any{
		"type": "object", "required": []string{"intent", "confidence"}, "additionalProperties": false,
		"properties": map[string]any{
			"intent":     map[string]any{"type": "string", "enum": names},
			"confidence": map[string]any{"type": "number", "minimum": 0, "maximum": 1},
		},
	})
	var out struct {
		Intent     string  `json:"intent"`
		Confidence float64 `json:"confidence"`
	}
	err := chatJSON(ctx, m.Model, model, system.String(), user, schema, &out, func() error {
		switch {
		case !slices.Contains(names, out.Intent):
			return fmt.Errorf("intent %q is not one of %v", out.Intent, names)
		case out.Confidence < 0 || out.Confidence > 1:
			return fmt.Errorf("confidence %v is not between 0 and 1", out.Confidence)
		}
		return nil
	})
	if err != nil {
		return "", 0, fmt.Errorf("classify intent with %s: %w", model, err)
	}
	return out.Intent, out.Confidence, nil
}

func orNone(xs []string) string {
	if len(xs) == 0 {
		return "(none)"
	}
	return strings.Join(xs, ", ")
}
