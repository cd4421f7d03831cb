// Package workflows holds ctxflow's Temporal workflow code: deterministic,
// thin, no I/O and no vendor SDK but Temporal's. It also owns the names, IDs
// and message types that the API uses to talk to running sessions.
package workflows

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

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

// TaskWorkflowID is the workflow id of a session's task.
func TaskWorkflowID(tenant, sessionID, taskID string) string {
	return SessionWorkflowID(tenant, sessionID) + "/task/" + taskID
}

// QAWorkflowID is the workflow id of a qa turn's corrective loop, a
// child of the session (standalone ones: [CorrectiveWorkflowID]).
func QAWorkflowID(tenant, sessionID, turnID string) string {
	return SessionWorkflowID(tenant, sessionID) + "/rag/" + turnID
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

// SessionStartOptions are the start options of a session's workflow, for
// every route that may start one: the session's id, one run at a time (a
// request for a running session reaches that run), a summary and details
// for the Temporal UI, the title in the memo, and the search attributes
// the listing reads.
func SessionStartOptions(tenant, sessionID, title string, cfg SessionConfig) client.StartWorkflowOptions {
	summary := "Session " + sessionID
	if title != "" {
		summary += ": " + title
	}
	return client.StartWorkflowOptions{
		ID:                       SessionWorkflowID(tenant, sessionID),
		TaskQueue:                TaskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		StaticSummary:            summary,
		StaticDetails: fmt.Sprintf("tenant `%s` · model `%s` · window %s (%d rounds, %d tokens)",
			tenant, cfg.LLMModel, cfg.WindowStrategy, cfg.MaxRounds, cfg.MaxTokens),
		Memo: map[string]any{"title": title},
		TypedSearchAttributes: temporal.NewSearchAttributes(
			SAttrTenant.ValueSet(tenant),
			SAttrStatus.ValueSet(StatusIdle),
		),
	}
}

// IngestWorkflowID is the workflow id of a document: ingest/<doc>. Its
// ingestions and its deletion ([DeleteDocumentWorkflow]) share it, so that
// one document changes through one workflow at a time.
func IngestWorkflowID(documentID string) string { return "ingest/" + documentID }

// DocumentStartOptions are the start options of a document's workflows
// (ingestion or deletion), for the API and `ctxflow ingest` alike: one at a
// time per document, and an error (not the running workflow) when another
// runs, so that a write is never confirmed that did not happen.
func DocumentStartOptions(documentID, summary, details string) client.StartWorkflowOptions {
	return client.StartWorkflowOptions{
		ID:                                       IngestWorkflowID(documentID),
		TaskQueue:                                TaskQueue,
		WorkflowIDConflictPolicy:                 enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		WorkflowIDReusePolicy:                    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		StaticSummary:                            summary,
		StaticDetails:                            details,
	}
}

// CorrectiveWorkflowID is the workflow id of a corrective query that no
// session runs (POST /v1/rag/corrective): rag/<id>.
func CorrectiveWorkflowID(id string) string { return "rag/" + id }

// CorrectiveStartOptions are the start options of such a query: it may
// run for wait (the API's wait for its answer) and a minute more.
func CorrectiveStartOptions(id, query string, wait time.Duration) client.StartWorkflowOptions {
	return client.StartWorkflowOptions{
		ID: CorrectiveWorkflowID(id), TaskQueue: TaskQueue,
		WorkflowExecutionTimeout: wait + time.Minute,
		StaticSummary:            "Corrective RAG: " + convo.Clip(query, 80),
	}
}
