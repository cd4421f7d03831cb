package workflows

import (
	"testing"

	"github.com/ctxflow/ctxflow/activities"
)

// TestEraseNamesMatch: the eraser finds a session's runs by the ids and
// type names this package gives them.
func TestEraseNamesMatch(t *testing.T) {
	if a, w := activities.SessionWorkflowID("acme", "s1"), SessionWorkflowID("acme", "s1"); a != w {
		t.Errorf("activities.SessionWorkflowID = %q, workflows' %q", a, w)
	}
	if IngestWorkflowID(DocumentKey("acme", "faq")) != "ingest/acme/faq" || IngestWorkflowID(DocumentKey(DefaultTenant, "faq")) != "ingest/faq" {
		t.Error("document workflow ids changed: the eraser looks for ingest/<tenant>/<id> and ingest/<id>")
	}
	if SessionWorkflowName != "SessionWorkflow" || IngestWorkflowName != "IngestWorkflow" || CorrectiveRAGWorkflowName != "CorrectiveRAGWorkflow" {
		t.Error("workflow type names changed: the eraser lists them by name")
	}
}
