package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

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

// TestOneTurnFailureOneAnswer: a failed or rejected turn is answered with
// the same code by every route that runs a turn — the turn, the seeds'
// query, the stream and a branch — and the HTTP routes with the same
// status: its own code, or for a result without one, invalid_argument when
// the session refused it and unavailable when it failed.
func TestOneTurnFailureOneAnswer(t *testing.T) {
	results := []struct {
		name   string
		res    workflows.TurnResult
		status int
		code   string
	}{
		{"failed with a code", workflows.TurnResult{Status: workflows.TurnFailed, ErrorCode: activities.CodeModelPermanent}, http.StatusBadRequest, "model_permanent"},
		{"rejected with a code", workflows.TurnResult{Status: workflows.TurnRejected, ErrorCode: activities.CodeConflict}, http.StatusConflict, "conflict"},
		{"rejected without a code", workflows.TurnResult{Status: workflows.TurnRejected}, http.StatusBadRequest, "invalid_argument"},
		{"failed without a code", workflows.TurnResult{Status: workflows.TurnFailed}, http.StatusServiceUnavailable, "unavailable"},
	}
	answer := func(t *testing.T, f *fakeClient, res workflows.TurnResult) {
		recordUpdate(t, f, func(opts client.UpdateWithStartWorkflowOptions) (client.WorkflowUpdateHandle, error) {
			r := res
			r.TurnID, r.Error = opts.UpdateOptions.Args[0].(workflows.TurnRequest).TurnID, "the cause"
			return handle{id: opts.UpdateOptions.UpdateID, val: encode(t, r)}, nil
		})
	}
	routes := []struct {
		name string
		code func(t *testing.T, res workflows.TurnResult, status int) string
	}{
		{"turn", func(t *testing.T, res workflows.TurnResult, status int) string {
			f := newFake(t)
			answer(t, f, res)
			w := do(server(f), http.MethodPost, "/v1/sessions/s1/turns?wait=true", `{"question":"q","turnId":"t-1"}`)
			var b errorBody
			decode(t, w, &b)
			if w.Code != status {
				t.Errorf("status %d, want %d: %s", w.Code, status, w.Body)
			}
			return b.Error.Code
		}},
		{"seed query", func(t *testing.T, res workflows.TurnResult, status int) string {
			f := newFake(t)
			answer(t, f, res)
			w := do(server(f), http.MethodPost, "/api/context-management", seedQuery)
			var a seedAnswer
			decode(t, w, &a)
			if w.Code != status {
				t.Errorf("status %d, want %d: %s", w.Code, status, w.Body)
			}
			return a.Code
		}},
		{"stream", func(t *testing.T, res workflows.TurnResult, _ int) string {
			f := newFake(t)
			recordUpdate(t, f, submitted(t))
			f.QueryWorkflowFn = func(context.Context, string, string, string, ...any) (converter.EncodedValue, error) {
				r := res
				r.TurnID, r.Error = "t1", "the cause"
				return encode(t, r), nil
			}
			w := do(server(f), http.MethodPost, "/v1/sessions/s1/turns", `{"question":"q","turnId":"t1"}`, "Accept", "text/event-stream")
			for _, e := range events(t, w.Body.String()) {
				if e.name == "error" {
					var b errorBody
					if err := json.Unmarshal([]byte(e.data), &b); err != nil {
						t.Fatal(err)
					}
					return b.Error.Code
				}
			}
			t.Errorf("no error event: %s", w.Body)
			return ""
		}},
		{"branch", func(t *testing.T, res workflows.TurnResult, status int) string {
			f := newFake(t)
			answer(t, f, res)
			w := do(treeServer(f, forked, "t2.a"), http.MethodPost, "/v1/sessions/s1/branch", `{"fromMessageId":"t1.a"}`)
			var b errorBody
			decode(t, w, &b)
			if w.Code != status {
				t.Errorf("status %d, want %d: %s", w.Code, status, w.Body)
			}
			return b.Error.Code
		}},
	}
	for _, rs := range results {
		for _, r := range routes {
			t.Run(rs.name+"/"+r.name, func(t *testing.T) {
				if got := r.code(t, rs.res, rs.status); got != rs.code {
					t.Errorf("code %q, want %q", got, rs.code)
				}
			})
		}
	}
}
