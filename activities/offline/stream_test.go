package offline

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/convo"
)

// The offline engine streams its answer a sentence at a time: a stream of
// an answer of several sentences has several tokens.
func TestSentencesOf(t *testing.T) {
	for in, want := range map[string][]string{
		"":                         {""},
		"One sentence":             {"One sentence"},
		"One. Two!  Three? ":       {"One.", " Two!", "  Three? "},
		"e.g. this stays. Then.":   {"e.g. this stays.", " Then."},
		"第一句。第二句！\n- item\n":       {"第一句。", "第二句！", "\n- item\n"},
		"Version 3.5 is out. Yes.": {"Version 3.5 is out.", " Yes."},
	} {
		if got := sentencesOf(in); !reflect.DeepEqual(got, want) {
			t.Errorf("sentencesOf(%q) = %q, want %q", in, got, want)
		}
	}
	rapid.Check(t, func(t *rapid.T) {
		s := rapid.StringMatching(`[A-Za-z0-9 .!?。！？\n"”]{0,80}`).Draw(t, "s")
		if got := strings.Join(sentencesOf(s), ""); got != s {
			t.Fatalf("the sentences of %q add up to %q", s, got)
		}
	})
	var deltas []string
	e := &Engine{}
	resp, err := e.Chat(context.Background(), activities.ChatRequest{Messages: []convo.ModelMessage{
		{Role: "system", Content: FormatDocuments([]Document{{ID: "d1", Text: "Temporal keeps workflows durable. Workers replay history after a crash. Activities retry on failure."}})},
		{Role: "user", Content: "How does Temporal keep workflows durable after a crash?"},
	}}, func(d string) { deltas = append(deltas, d) })
	if err != nil || len(deltas) < 2 || strings.Join(deltas, "") != resp.Content {
		t.Errorf("%v: %d deltas %q for %q", err, len(deltas), deltas, resp.Content)
	}
}
