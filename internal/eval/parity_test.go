package eval

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/activities/offline"
	"github.com/ctxflow/ctxflow/activities/tiktoken"
	"github.com/ctxflow/ctxflow/activities/transcript"
	"github.com/ctxflow/ctxflow/lexical"
	"github.com/ctxflow/ctxflow/workflows"
)

// The eval measures what a qa turn runs: one case's question, asked as a
// session's first turn over the same store, retrieves the same documents
// in the same order as the eval ranks them.
func TestEvalRanksAsAQATurn(t *testing.T) {
	set := loadMTRAG(t)
	c := set.Gold[0]
	want, err := set.Ranked(t.Context(), c.Question, activities.SearchHybrid, 5)
	if err != nil || len(want) == 0 {
		t.Fatalf("eval ranking: %v, %v", want, err)
	}

	tok, err := tiktoken.New("cl100k_base")
	if err != nil {
		t.Fatal(err)
	}
	store, err := transcript.Open(transcript.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	engine := &offline.Engine{Tokenizer: tok}
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(workflows.SessionWorkflow, workflow.RegisterOptions{Name: workflows.SessionWorkflowName})
	env.RegisterWorkflowWithOptions(workflows.CorrectiveRAGWorkflow, workflow.RegisterOptions{Name: workflows.CorrectiveRAGWorkflowName})
	env.RegisterActivity(&activities.Session{
		Transcript: store, Model: engine, Tokenizer: tok, Engine: offline.ModelName,
		Knowledge: set.Store(), SmallTalk: lexical.SmallTalk{}, Rewriter: lexical.Rewriter{},
	})
	env.RegisterActivity(set.RAG())
	var res workflows.TurnResult
	env.RegisterDelayedCallback(func() {
		req := workflows.TurnRequest{TurnID: "t1", Question: c.Question, Config: json.RawMessage(`{"gradePassThreshold": 0}`)}
		env.UpdateWorkflow(workflows.UpdateTurn, "t1", &testsuite.TestUpdateCallback{
			OnAccept: func() {}, OnReject: func(err error) { t.Errorf("turn rejected: %v", err) },
			OnComplete: func(v any, err error) {
				if err != nil {
					t.Errorf("turn: %v", err)
				}
				res, _ = v.(workflows.TurnResult)
			},
		}, req)
	}, time.Second)
	env.ExecuteWorkflow(workflows.SessionWorkflowName, workflows.SessionInput{Tenant: workflows.DefaultTenant, SessionID: "parity", Limits: workflows.Limits{IdleTTL: time.Hour}})

	i := slices.IndexFunc(res.Steps, func(s workflows.Step) bool { return s.Name == "corrective_rag" })
	if res.Status != workflows.TurnCompleted || i < 0 {
		t.Fatalf("turn = %+v", res)
	}
	var filter, got []string // "<id> kept|dropped: <reason>", in retrieval order
	raw, _ := json.Marshal(res.Steps[i].Details["relevanceFilter"])
	if err := json.Unmarshal(raw, &filter); err != nil {
		t.Fatalf("relevance filter details %s: %v", raw, err)
	}
	for _, line := range filter {
		id, _, _ := strings.Cut(line, " ")
		got = append(got, id)
	}
	if !slices.Equal(got, want) {
		t.Errorf("the qa turn retrieved %v, the eval ranks %v", got, want)
	}
}
