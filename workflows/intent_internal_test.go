package workflows

import (
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/convo"
)

// Seed 002's properties of the intent history, for any history and any
// guess: (1) a classification adds exactly one entry, this turn's, to the
// history (until it holds intentHistoryKept); (2) the classifier sees the
// history's last IntentHistorySize intents, oldest first; (3) below the
// threshold, the most recent confident intent of the history stands (qa
// without one); a failed classification is qa at 0.5 and leaves the
// history as it is. And leaving qa's route takes LeaveQAThreshold.
func TestIntentHistoryProperties(t *testing.T) {
	names := []string{convo.IntentQA, convo.IntentChitchat, convo.IntentTask, convo.IntentContinue, convo.IntentClarify}
	now := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	record := rapid.Custom(func(t *rapid.T) IntentRecord {
		return IntentRecord{Intent: rapid.SampledFrom(names).Draw(t, "label"), Confidence: rapid.Float64Range(0, 1).Draw(t, "p")}
	})
	rapid.Check(t, func(t *rapid.T) {
		history := rapid.SliceOfN(record, 0, intentHistoryKept).Draw(t, "history")
		var guess *activities.IntentGuess
		if rapid.Bool().Draw(t, "classified") {
			guess = &activities.IntentGuess{Label: rapid.SampledFrom(names).Draw(t, "guess"), Confidence: rapid.Float64Range(0, 1).Draw(t, "confidence")}
		}
		before := slices.Clone(history)
		it, next := decideIntent(history, guess, 7, now)

		recent := recentIntents(before)
		if want := min(len(before), IntentHistorySize); len(recent) != want || (want > 0 && recent[want-1] != before[len(before)-1].Intent) {
			t.Fatalf("the classifier sees %v of %v", recent, before)
		}
		if guess == nil {
			if it.Label != convo.IntentQA || it.Confidence != 0.5 || !slices.Equal(next, before) {
				t.Fatalf("failed classification: %+v, history %v → %v", it, before, next)
			}
			return
		}
		added := IntentRecord{Intent: guess.Label, Confidence: guess.Confidence, Turn: 7, Timestamp: now}
		if next[len(next)-1] != added || len(next) != min(len(before)+1, intentHistoryKept) {
			t.Fatalf("history %d → %d, last %+v", len(before), len(next), next[len(next)-1])
		}
		want := guess.Label
		if guess.Confidence < IntentFallbackThreshold {
			want = convo.IntentQA
			for i := len(before) - 1; i >= 0; i-- {
				if before[i].Confidence >= IntentFallbackThreshold {
					want = before[i].Intent
					break
				}
			}
		}
		if it.Label != want || it.FellBack != (guess.Confidence < IntentFallbackThreshold) {
			t.Fatalf("guess %+v after %v: %+v, want %s", *guess, before, it, want)
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
