package workflows

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/convo"
)

// Intent history (seed 002, component 1).
const (
	// IntentHistorySize is how many confident intents a session keeps
	// (INTENT_HISTORY_SIZE); the classifier sees them.
	IntentHistorySize = 5
	// IntentFallbackThreshold (INTENT_FALLBACK_THRESHOLD): below it the
	// last confident intent stands.
	IntentFallbackThreshold = 0.6
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

// IntentRecord is a confident intent of the session's history.
type IntentRecord struct {
	Label      string  `json:"label"`
	Confidence float64 `json:"confidence"`
}

// decideIntent applies seed 002's rules to the classifier's guess: at or
// above IntentFallbackThreshold it stands and joins the history (the last
// IntentHistorySize kept); below, the last confident intent stands (qa
// when there is none) and the history is left as it is; a failed
// classification (nil) is qa at 0.5, the history left as it is.
func decideIntent(history []IntentRecord, guess *activities.IntentGuess) (Intent, []IntentRecord) {
	switch {
	case guess == nil:
		return Intent{Label: convo.IntentQA, Confidence: 0.5}, history
	case guess.Confidence >= IntentFallbackThreshold:
		next := append(append([]IntentRecord(nil), history...), IntentRecord(*guess))
		if len(next) > IntentHistorySize {
			next = next[len(next)-IntentHistorySize:]
		}
		return Intent{Label: guess.Label, Confidence: guess.Confidence}, next
	}
	label := convo.IntentQA
	if len(history) > 0 {
		label = history[len(history)-1].Label
	}
	return Intent{Label: label, Confidence: guess.Confidence, FellBack: true}, history
}

// labels are the history's labels, oldest first.
func labels(history []IntentRecord) []string {
	out := make([]string, len(history))
	for i, r := range history {
		out[i] = r.Label
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
	it, history := decideIntent(s.st.Intents, lc.Intent)
	s.st.Intents = history
	if !it.FellBack {
		s.st.LastIntent = it.Label
	}
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
