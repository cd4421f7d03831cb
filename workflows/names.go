// Package workflows holds ctxflow's Temporal workflow code: deterministic,
// thin, no I/O and no vendor SDK but Temporal's. It also owns the names, IDs
// and message types that the API uses to talk to running sessions.
package workflows

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/convo"
)

// TaskQueue is the task queue every ctxflow worker polls.
const TaskQueue = "ctxflow"

// Names of the session workflow's handlers.
const (
	SessionWorkflowName = "SessionWorkflow"

	SignalTurn = "turn"
	// UpdateTurn queues a turn and completes with its result.
	UpdateTurn = "turn"
	// UpdateSubmit queues a turn and completes at once with its status.
	UpdateSubmit = "submit"
	// UpdateClose closes the session and completes once it is closed.
	UpdateClose    = "close"
	SignalContinue = "continue"
	UpdateContinue = "continue"
	SignalCompress = "compress"
	SignalClose    = "close"

	QueryState = "state"
	QuerySteps = "steps"
	QueryTurn  = "turn"
)

// TurnUpdateID is the update id of a turn sent with update (UpdateTurn or
// UpdateSubmit): the same turn with the same question is deduplicated by
// the server, while the same id with another question is a new update that
// the session refuses.
func TurnUpdateID(update string, req TurnRequest) string {
	return fmt.Sprintf("%s/%s/%08x", update, req.TurnID, hashQuestion(req.Question))
}

// DefaultTenant is used when a request names no tenant.
const DefaultTenant = activities.DefaultTenant

var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`)

// ValidateID checks a tenant, session or turn id: 1–128 characters of
// letters, digits and ". _ : -", starting with a letter or digit. The same
// ids name files in the transcript store, so nothing else is allowed.
func ValidateID(kind, id string) error {
	if !idPattern.MatchString(id) {
		return fmt.Errorf("%s %q is not valid: use 1-128 letters, digits, '.', '_', ':' or '-', starting with a letter or digit", kind, convo.Clip(id, 40))
	}
	return nil
}

// SessionWorkflowID is the workflow id of a session: session/<tenant>/<id>.
func SessionWorkflowID(tenant, sessionID string) string {
	return "session/" + tenant + "/" + sessionID
}

// ParseSessionWorkflowID is the inverse of [SessionWorkflowID].
func ParseSessionWorkflowID(workflowID string) (tenant, sessionID string, ok bool) {
	rest, found := strings.CutPrefix(workflowID, "session/")
	if !found {
		return "", "", false
	}
	tenant, sessionID, ok = strings.Cut(rest, "/")
	return tenant, sessionID, ok && tenant != "" && sessionID != ""
}
