package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/convo"
)

// Intent history (seed 002, component 1).
const (
	// IntentHistorySize is how many of the last intents the classifier
	// sees (INTENT_HISTORY_SIZE).
	IntentHistorySize = 5
	// IntentFallbackThreshold (INTENT_FALLBACK_THRESHOLD): below it the
	// last confident intent stands.
	IntentFallbackThreshold = 0.6
	// intentHistoryKept bounds the history the state keeps.
	intentHistoryKept = 32
	// LeaveQAThreshold is the confidence a turn needs to leave the qa
	// route for chitchat, a task or a clarifying question. On fifty
	// held-out utterances (lexical/testdata/intents.jsonl) the offline
	// classifier is right on 46; on the 39 it gives at least 0.7, on all.
	LeaveQAThreshold = 0.7
)

// Routes a turn can take besides the knowledge base's (RouteQA,
// RouteChat).
const (
	RouteTask     = "task"
	RouteContinue = "continue"
	RouteClarify  = "clarify"
)

// Intent is a turn's intent as the session decided it: the label and the
// classifier's confidence, whether the last confident intent stood in for
// a doubtful guess (FellBack), and the route the turn took.
type Intent struct {
	Label      string  `json:"label"`
	Confidence float64 `json:"confidence"`
	FellBack   bool    `json:"fellBack,omitempty"`
	Route      string  `json:"route,omitempty"`
}

// IntentRecord is one classification of the session's intent history, in
// the seed's shape.
type IntentRecord struct {
	Intent     string    `json:"intent"`
	Confidence float64   `json:"confidence"`
	Turn       int       `json:"turn"`
	Timestamp  time.Time `json:"timestamp"`
}

// decideIntent applies seed 002's rules to the classifier's guess for
// turn at now: the guess joins the history (its last intentHistoryKept
// kept); at or above IntentFallbackThreshold it stands, below it the most
// recent confident intent of the history stands (qa when there is none). A
// failed classification (nil) is qa at 0.5, and the history is left as it
// is.
func decideIntent(history []IntentRecord, guess *activities.IntentGuess, turn int, now time.Time) (Intent, []IntentRecord) {
	if guess == nil {
		return Intent{Label: convo.IntentQA, Confidence: 0.5}, history
	}
	it := Intent{Label: guess.Label, Confidence: guess.Confidence}
	if guess.Confidence < IntentFallbackThreshold {
		it.Label, it.FellBack = convo.IntentQA, true
		for i := len(history) - 1; i >= 0; i-- {
			if history[i].Confidence >= IntentFallbackThreshold {
				it.Label = history[i].Intent
				break
			}
		}
	}
	next := append(append([]IntentRecord(nil), history...),
		IntentRecord{Intent: guess.Label, Confidence: guess.Confidence, Turn: turn, Timestamp: now})
	if len(next) > intentHistoryKept {
		next = next[len(next)-intentHistoryKept:]
	}
	return it, next
}

// recentIntents are the labels the classifier sees: the history's last
// IntentHistorySize, oldest first.
func recentIntents(history []IntentRecord) []string {
	history = history[max(0, len(history)-IntentHistorySize):]
	out := make([]string, len(history))
	for i, r := range history {
		out[i] = r.Intent
	}
	return out
}

// routeOf is the route an intent takes, given the knowledge base's own
// (RouteQA, or RouteChat for small talk or an empty knowledge base) and
// whether a task is paused. Leaving that route takes a confident, fresh
// classification (LeaveQAThreshold, not a fallback); continue needs a
// fresh classification (IntentFallbackThreshold) and a paused task.
func routeOf(it Intent, kbRoute string, paused bool) string {
	sure := !it.FellBack && it.Confidence >= LeaveQAThreshold
	switch {
	case it.Label == convo.IntentContinue && paused && !it.FellBack:
		return RouteContinue
	case !sure:
		return kbRoute
	case it.Label == convo.IntentChitchat:
		return activities.RouteChat
	case it.Label == convo.IntentTask:
		return RouteTask
	case it.Label == convo.IntentClarify:
		return RouteClarify
	}
	return kbRoute
}

// classify decides the turn's intent and route (sessions recorded before
// intents existed replay without: every turn then has none), records them
// in the state and the result, and returns the route.
func (s *session) classify(ctx workflow.Context, lc activities.LoadContextResult, res *TurnResult) string {
	if !s.intents(ctx) {
		return lc.Route
	}
	it, history := decideIntent(s.st.Intents, lc.Intent, s.st.Turns+1, workflow.Now(ctx))
	s.st.Intents, s.st.LastIntent = history, it.Label
	it.Route = routeOf(it, lc.Route, s.continuable())
	res.Intent = &it
	if lc.Intent == nil {
		s.logger.Info("intent classifier gave nothing: qa at 0.5", "turn", res.TurnID)
	}
	return it.Route
}

// intents reports whether this run classifies intents (GetVersion: runs
// recorded before it do not, and replay as they ran).
func (s *session) intents(ctx workflow.Context) bool {
	return workflow.GetVersion(ctx, "intents", workflow.DefaultVersion, 1) >= 1
}

// clarifyingQuestion is the clarify route's answer: one question about
// what the user means, on the session's topic when it has one, in the
// language of the question.
func clarifyingQuestion(question, topic string) string {
	zh := convo.HasHan(question)
	switch {
	case zh && topic != "":
		return fmt.Sprintf("你想了解%s的哪一方面？比如价格、配置或用法。", topic)
	case zh:
		return "能具体说说你想问的是什么吗？"
	case topic != "":
		return fmt.Sprintf("Which aspect of %s do you mean: its price, its features, or how to use it?", topic)
	}
	return "Could you say a little more about what you need?"
}

// clarify is the clarify route: the answer is one question back, made
// here (deterministic, no model call).
func (s *session) clarify(ctx workflow.Context, req TurnRequest, res *TurnResult) activities.GenerateResult {
	q := clarifyingQuestion(req.Question, s.st.Topic)
	res.Steps = append(res.Steps, Step{Name: "clarify", Status: "ok", Start: workflow.Now(ctx),
		Details: map[string]any{"topic": s.st.Topic}})
	return activities.GenerateResult{Answer: q, Engine: "clarify"}
}
