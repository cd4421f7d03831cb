package api_test

import (
	"context"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"go.temporal.io/sdk/client"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/workflows"
)

func TestPostCorrective(t *testing.T) {
	var got []workflows.CorrectiveInput
	var opts []client.StartWorkflowOptions
	f := newFake(t)
	f.ExecuteWorkflowFn = func(_ context.Context, o client.StartWorkflowOptions, workflow any, args ...any) (client.WorkflowRun, error) {
		if workflow != workflows.CorrectiveRAGWorkflowName || len(args) != 1 {
			t.Errorf("ExecuteWorkflow(%v, %v)", workflow, args)
		}
		in := args[0].(workflows.CorrectiveInput)
		got, opts = append(got, in), append(opts, o)
		return run{id: o.ID, get: result(t, workflows.CorrectiveResult{
			Answer:         "The Pixel 8 costs 699 dollars [a].",
			Query:          workflows.QueryInfo{Original: in.Query, Final: "pixel 8 price", WasRewritten: true, RewriteCount: 1},
			RewriteHistory: []workflows.RewriteRecord{{Attempt: 1, From: in.Query, RewrittenQuery: "pixel 8 price", RewriteReason: "keywords"}},
			GraderResult:   workflows.GraderResult{PassRate: 1, PassCount: 1, TotalCount: 1},
			Workflow:       workflows.WorkflowTrace{DecisionPath: []string{"retrieve", "generate"}, TotalDuration: 12},
		})}, nil
	}
	h := server(f)

	w := do(h, http.MethodPost, "/v1/rag/corrective", `{"query":"how much is it?","topK":3,"gradePassThreshold":0.8,"maxRewriteAttempts":0}`)
	if w.Code != http.StatusOK {
		t.Fatalf("status = %d; body %s", w.Code, w.Body)
	}
	var resp struct {
		Success bool `json:"success"`
		workflows.CorrectiveResult
	}
	decode(t, w, &resp)
	if !resp.Success || resp.Answer == "" || !resp.Query.WasRewritten || resp.Query.Final != "pixel 8 price" ||
		len(resp.RewriteHistory) != 1 || resp.GraderResult.PassRate != 1 || resp.Workflow.TotalDuration != 12 {
		t.Errorf("response = %s", w.Body)
	}
	for _, field := range []string{`"rewriteHistory"`, `"graderResult"`, `"passRate"`, `"shouldRewrite"`, `"nodeExecutions"`, `"decisionPath"`, `"totalDuration"`, `"wasRewritten"`, `"filteredDocuments"`} {
		if !strings.Contains(w.Body.String(), field) {
			t.Errorf("response lacks seed field %s: %s", field, w.Body)
		}
	}
	d := workflows.DefaultSessionConfig()
	want := workflows.CorrectiveInput{Query: "how much is it?", TopK: 3, SimilarityThreshold: d.SimilarityThreshold,
		MaxRewriteAttempts: 0, GradePassThreshold: 0.8, SearchMode: d.SearchMode, Model: d.LLMModel, IncludeText: true, Tenant: workflows.DefaultTenant,
		Limits: workflows.DefaultLimits(), FilterBinds: true}
	if len(got) != 1 || !reflect.DeepEqual(got[0], want) {
		t.Errorf("workflow input = %+v, want %+v", got, want)
	}
	if !strings.HasPrefix(opts[0].ID, "rag/") || opts[0].TaskQueue != workflows.TaskQueue || w.Header().Get("X-Workflow-ID") != opts[0].ID {
		t.Errorf("start options = %+v", opts[0])
	}

	// Defaults fill what the request leaves out.
	do(h, http.MethodPost, "/v1/rag/corrective", `{"query":"华为Mate60多少钱"}`)
	if len(got) != 2 || got[1].TopK != d.TopK || got[1].MaxRewriteAttempts != d.MaxRewriteAttempts || got[1].GradePassThreshold != d.GradePassThreshold {
		t.Errorf("defaults = %+v", got[1])
	}
}

func TestPostCorrectiveRejectsBadInput(t *testing.T) {
	tests := []struct{ name, body, want string }{
		{"empty query", `{"query":"  "}`, "query is empty"},
		{"no body", ``, "request body is empty"},
		{"unknown field", `{"query":"q","topN":3}`, `unknown field "topN"`},
		{"topK out of range", `{"query":"q","topK":0}`, "topK 0 out of range"},
		{"threshold out of range", `{"query":"q","gradePassThreshold":1.5}`, "gradePassThreshold 1.5 out of range"},
		{"bad search mode", `{"query":"q","searchMode":"fuzzy"}`, `searchMode "fuzzy"`},
		{"too many rewrites", `{"query":"q","maxRewriteAttempts":11}`, "maxRewriteAttempts 11 out of range"},
		{"milvus config", `{"query":"q","milvusConfig":{"address":"localhost:19530"}}`, "CTXFLOW_COLLECTION"},
		{"too long", `{"query":"` + strings.Repeat("a", workflows.DefaultMaxQuestionBytes+1) + `"}`, "over the 32768-byte limit"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t) // any workflow call fails the test
			w := do(server(f), http.MethodPost, "/v1/rag/corrective", tc.body)
			b := wantError(t, w, http.StatusBadRequest, "invalid_argument")
			if !strings.Contains(b.Error.Message, tc.want) {
				t.Errorf("message %q lacks %q", b.Error.Message, tc.want)
			}
		})
	}
}

func TestPostCorrectiveFailure(t *testing.T) {
	f := newFake(t)
	f.ExecuteWorkflowFn = func(_ context.Context, o client.StartWorkflowOptions, _ any, _ ...any) (client.WorkflowRun, error) {
		return run{id: o.ID, get: failedWith("collection has dimension 384 but no configured embedder matches", activities.CodeDimensionMismatch)}, nil
	}
	w := do(server(f), http.MethodPost, "/v1/rag/corrective", `{"query":"q"}`)
	if b := wantError(t, w, http.StatusInternalServerError, "dimension_mismatch"); !strings.Contains(b.Error.Message, "dimension 384") {
		t.Errorf("message %q", b.Error.Message)
	}
	f.ExecuteWorkflowFn = func(_ context.Context, o client.StartWorkflowOptions, _ any, _ ...any) (client.WorkflowRun, error) {
		return run{id: o.ID, get: failedWith(`model "nope" not found`, activities.CodeModelPermanent)}, nil
	}
	w = do(server(f), http.MethodPost, "/v1/rag/corrective", `{"query":"q","llmModel":"nope"}`)
	if b := wantError(t, w, http.StatusBadRequest, "model_permanent"); !strings.Contains(b.Error.Message, `model "nope" not found`) {
		t.Errorf("message %q", b.Error.Message)
	}
}
