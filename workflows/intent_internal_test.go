package workflows

import (
	"testing"

	"pgregory.net/rapid"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/convo"
)

// The properties of seed 002's intent history, for any history and any
// guess: the history holds at most IntentHistorySize intents, each
// confident; a confident guess stands and is the history's newest; a
// doubtful one leaves the history as it is and the last confident intent
// stands (qa without one); a failed classification is qa at 0.5 and
// leaves the history as it is. Leaving qa's route takes LeaveQAThreshold.
func TestIntentHistoryProperties(t *testing.T) {
	names := []string{convo.IntentQA, convo.IntentChitchat, convo.IntentTask, convo.IntentContinue, convo.IntentClarify}
	record := rapid.Custom(func(t *rapid.T) IntentRecord {
		return IntentRecord{Label: rapid.SampledFrom(names).Draw(t, "label"), Confidence: rapid.Float64Range(IntentFallbackThreshold, 1).Draw(t, "p")}
	})
	rapid.Check(t, func(t *rapid.T) {
		history := rapid.SliceOfN(record, 0, IntentHistorySize).Draw(t, "history")
		var guess *activities.IntentGuess
		if rapid.Bool().Draw(t, "classified") {
			guess = &activities.IntentGuess{Label: rapid.SampledFrom(names).Draw(t, "guess"), Confidence: rapid.Float64Range(0, 1).Draw(t, "confidence")}
		}
		before := append([]IntentRecord(nil), history...)
		it, next := decideIntent(history, guess)

		if len(next) > IntentHistorySize {
			t.Fatalf("history of %d", len(next))
		}
		for _, r := range next {
			if r.Confidence < IntentFallbackThreshold {
				t.Fatalf("doubtful intent %+v in the history", r)
			}
		}
		same := len(next) == len(before)
		for i := 0; same && i < len(next); i++ {
			same = next[i] == before[i]
		}
		switch {
		case guess == nil:
			if it.Label != convo.IntentQA || it.Confidence != 0.5 || !same {
				t.Fatalf("failed classification: %+v, history %v → %v", it, before, next)
			}
		case guess.Confidence >= IntentFallbackThreshold:
			if it.Label != guess.Label || it.FellBack || next[len(next)-1] != IntentRecord(*guess) {
				t.Fatalf("confident %+v: %+v, history %v", *guess, it, next)
			}
		default:
			want := convo.IntentQA
			if len(before) > 0 {
				want = before[len(before)-1].Label
			}
			if it.Label != want || !it.FellBack || !same {
				t.Fatalf("doubtful %+v after %v: %+v, history %v", *guess, before, it, next)
			}
		}
		it.Route = routeOf(it, activities.RouteQA, rapid.Bool().Draw(t, "paused"))
		if it.Route != activities.RouteQA && it.Route != RouteContinue && (it.FellBack || it.Confidence < LeaveQAThreshold) {
			t.Fatalf("left qa on a doubtful intent: %+v", it)
		}
	})
}

func TestClarifyingQuestion(t *testing.T) {
	for _, tc := range []struct{ q, topic, want string }{
		{"这个怎么办", "华为Mate60", "你想了解华为Mate60的哪一方面？比如价格、配置或用法。"},
		{"那个", "", "能具体说说你想问的是什么吗？"},
		{"what now?", "the Pixel 8", "Which aspect of the Pixel 8 do you mean: its price, its features, or how to use it?"},
		{"huh?", "", "Could you say a little more about what you need?"},
	} {
		if got := clarifyingQuestion(tc.q, tc.topic); got != tc.want {
			t.Errorf("clarifyingQuestion(%q, %q) = %q", tc.q, tc.topic, got)
		}
	}
}
