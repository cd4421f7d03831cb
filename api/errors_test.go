package api_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/api"
	"github.com/ctxflow/ctxflow/workflows"
)

// TestOneFailureOneStatus: every route that runs a workflow answers the
// same failure with the same status and code, and a message that says what
// failed and what to do.
func TestOneFailureOneStatus(t *testing.T) {
	failures := []struct {
		code   string // "" is a failure without a code: what retries did not fix
		status int
		want   string // the code answered
		hint   string
	}{
		{activities.CodeInvalidArgument, http.StatusBadRequest, "invalid_argument", "fix the request"},
		{activities.CodeModelPermanent, http.StatusBadRequest, "model_permanent", "choose another model"},
		{activities.CodeDimensionMismatch, http.StatusInternalServerError, "dimension_mismatch", "retrying does not help"},
		{activities.CodeDocumentChanged, http.StatusConflict, "document_changed", "upload the document again"},
		{"", http.StatusServiceUnavailable, "unavailable", "try again later"},
	}
	routes := []struct {
		name string
		send func(t *testing.T, f *fakeClient, code string) *httptest.ResponseRecorder
	}{
		{"turn", func(t *testing.T, f *fakeClient, code string) *httptest.ResponseRecorder {
			recordUpdate(t, f, func(opts client.UpdateWithStartWorkflowOptions) (client.WorkflowUpdateHandle, error) {
				res := workflows.TurnResult{TurnID: "t-1", Status: workflows.TurnFailed, Error: "the cause", ErrorCode: activities.CodeOf(failedWith("the cause", code)(context.Background(), nil))}
				return handle{val: encode(t, res)}, nil
			})
			return do(server(f), http.MethodPost, "/v1/sessions/s1/turns?wait=true", `{"question":"q","turnId":"t-1"}`)
		}},
		{"corrective", func(t *testing.T, f *fakeClient, code string) *httptest.ResponseRecorder {
			f.ExecuteWorkflowFn = func(_ context.Context, o client.StartWorkflowOptions, _ any, _ ...any) (client.WorkflowRun, error) {
				return run{id: o.ID, get: failedWith("the cause", code)}, nil
			}
			return do(server(f), http.MethodPost, "/v1/rag/corrective", `{"query":"q"}`)
		}},
		{"upload", func(t *testing.T, f *fakeClient, code string) *httptest.ResponseRecorder {
			recordStarts(t, f, failedWith("the cause", code))
			return send(api.New(f, docOptions(t)).Handler(), http.MethodPost, "/v1/documents?id=d1&wait=true", "hello", "Content-Type", "text/plain")
		}},
		{"delete document", func(t *testing.T, f *fakeClient, code string) *httptest.ResponseRecorder {
			ingested(f, workflows.IngestWorkflowName, enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED)
			f.ExecuteWorkflowFn = func(_ context.Context, o client.StartWorkflowOptions, _ any, _ ...any) (client.WorkflowRun, error) {
				return run{id: o.ID, get: failedWith("the cause", code)}, nil
			}
			return do(server(f), http.MethodDelete, "/v1/documents/d1", "")
		}},
	}
	for _, fl := range failures {
		for _, r := range routes {
			t.Run(r.name+"/"+fl.want, func(t *testing.T) {
				b := wantError(t, r.send(t, newFake(t), fl.code), fl.status, fl.want)
				if !strings.Contains(b.Error.Message, "the cause") || !strings.Contains(b.Error.Message, fl.hint) {
					t.Errorf("message %q: want the cause and %q", b.Error.Message, fl.hint)
				}
			})
		}
	}
}
