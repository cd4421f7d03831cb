package workflows

import (
	"encoding/json"

	"go.temporal.io/sdk/workflow"

	"github.com/ctxflow/ctxflow/activities"
)

// StepsContextKey is the workflow.Context key under which the worker keeps
// the function that offers a turn's step events to the broker (a
// StepPublisher; see worker.New). Without one, steps reach streams through
// the turn query only.
type StepsContextKey struct{}

// StepPublisher publishes a delta on a broker topic. It must never block:
// the session's workflow code calls it.
type StepPublisher func(topic string, d activities.Delta)

// showStep tells the turn's streams, through the broker, that the step
// named next starts: first the end of the step before it (as the turn
// result holds it now, its status final), then the start. The turn query
// cannot answer while a workflow task runs, and a fast model's whole turn
// is one, so without this its steps reached a stream only with its end.
// It records nothing in the history and adds no workflow task; a replay
// publishes nothing. (The last step's end comes with the turn's result.)
func (s *session) showStep(ctx workflow.Context, res *TurnResult, next string) {
	publish, _ := ctx.Value(StepsContextKey{}).(StepPublisher)
	if publish == nil || res.TurnID == "" || workflow.IsReplaying(ctx) {
		return
	}
	topic := activities.TurnTopic(s.key, res.TurnID)
	if i := len(res.Steps) - 1; i >= 0 {
		if b, err := json.Marshal(res.Steps[i]); err == nil {
			publish(topic, activities.Delta{Step: &activities.StepDelta{Index: i, End: b}})
		}
	}
	publish(topic, activities.Delta{Step: &activities.StepDelta{Index: len(res.Steps), Name: next}})
}
