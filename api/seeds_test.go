package api_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/api"
	"github.com/ctxflow/ctxflow/convo"
	"github.com/ctxflow/ctxflow/workflows"
)

// seedQuery is seed 000's query example (§5.1), verbatim.
const seedQuery = `{
  "action": "query",
  "sessionId": "session-123",
  "question": "它的续航怎么样？",
  "llmModel": "qwen2.5:0.5b",
  "embeddingModel": "bge-m3:latest",
  "windowStrategy": "hybrid",
  "maxRounds": 10,
  "maxTokens": 4000,
  "enableQueryRewriting": true,
  "topK": 5,
  "similarityThreshold": 0.3
}`

// seedRAG is seed 003's request example, verbatim but for the query.
const seedRAG = `{
  "query": "华为Mate60的续航怎么样？",
  "topK": 5,
  "similarityThreshold": 0.3,
  "maxRewriteAttempts": 3,
  "gradePassThreshold": 0.6,
  "milvusConfig": {
    "address": "localhost:19530",
    "collectionName": "rag_documents"
  }
}`

// seedAnswer is an answer of a seed route: success, and the error fields.
type seedAnswer struct {
	Success   bool   `json:"success"`
	Error     string `json:"error"`
	Code      string `json:"code"`
	RequestID string `json:"requestId"`
}

// wantSeedError checks an error in the seeds' shape and returns its message.
func wantSeedError(t *testing.T, w *httptest.ResponseRecorder, status int, code string) string {
	t.Helper()
	var a seedAnswer
	decode(t, w, &a)
	if w.Code != status || a.Success || a.Code != code || a.Error == "" || a.RequestID != w.Header().Get("X-Request-ID") {
		t.Errorf("answer %d %s, want %d {success: false, error, code %q, requestId}", w.Code, w.Body, status, code)
	}
	return a.Error
}

type queryReply struct {
	seedAnswer
	Response       string           `json:"response"`
	RewrittenQuery string           `json:"rewrittenQuery"`
	RetrievedDocs  []activities.Doc `json:"retrievedDocs"`
	Workflow       struct {
		Steps []struct {
			Step      string         `json:"step"`
			Status    string         `json:"status"`
			StartTime int64          `json:"startTime"`
			EndTime   int64          `json:"endTime"`
			Duration  int64          `json:"duration"`
			Details   map[string]any `json:"details"`
			Error     string         `json:"error"`
		} `json:"steps"`
		TotalDuration int64 `json:"totalDuration"`
	} `json:"workflow"`
	SessionInfo struct {
		SessionID      string `json:"sessionId"`
		MessageCount   int    `json:"messageCount"`
		TotalTokens    int    `json:"totalTokens"`
		TruncatedCount int    `json:"truncatedCount"`
	} `json:"sessionInfo"`
}

// TestSeedQuery: seed 000's query is a waiting turn of the session; the
// per-turn options go to the turn, all of them to a session it starts,
// and the turn result comes back in seed 000's shape.
func TestSeedQuery(t *testing.T) {
	start := time.Date(2026, 1, 22, 10, 0, 0, 0, time.UTC)
	f := newFake(t)
	status := workflows.TurnCompleted
	got := recordUpdate(t, f, func(opts client.UpdateWithStartWorkflowOptions) (client.WorkflowUpdateHandle, error) {
		req := opts.UpdateOptions.Args[0].(workflows.TurnRequest)
		return handle{id: opts.UpdateOptions.UpdateID, val: encode(t, workflows.TurnResult{
			TurnID: req.TurnID, Status: status, Question: req.Question, Answer: "华为Mate60的续航表现非常出色", Error: "model down",
			RewrittenQuery: "华为Mate60的续航怎么样？", RetrievedDocs: []activities.Doc{{ID: "mate60#0", Score: 0.8, Source: "mate60.md"}},
			Steps: []workflows.Step{
				{Name: "load_context", Status: "ok", Start: start, DurationMS: 2, Details: map[string]any{"trimmedCount": 1}},
				{Name: "rewrite_query", Status: "degraded", Start: start.Add(2 * time.Millisecond), DurationMS: 30, Details: map[string]any{"error": "timeout"}},
				{Name: "corrective_rag", Status: "failed", Start: start.Add(32 * time.Millisecond), DurationMS: 5, Details: map[string]any{"error": "store down"}},
				{Name: "generate", Status: "skipped", Start: start.Add(37 * time.Millisecond)},
			},
			SessionInfo: workflows.SessionInfo{SessionID: "session-123", Messages: 4, TokensBefore: 856, TokensAfter: 700, TrimmedCount: 1, Health: workflows.HealthOK},
			ReceivedAt:  start.Add(-time.Millisecond), CompletedAt: start.Add(41 * time.Millisecond),
		})}, nil
	})
	h := server(f)

	w := do(h, http.MethodPost, "/api/context-management", seedQuery)
	var r queryReply
	decode(t, w, &r)
	if w.Code != http.StatusOK || !r.Success {
		t.Fatalf("query = %d %s", w.Code, w.Body)
	}
	if r.Response != "华为Mate60的续航表现非常出色" || r.RewrittenQuery != "华为Mate60的续航怎么样？" ||
		len(r.RetrievedDocs) != 1 || r.RetrievedDocs[0].Source != "mate60.md" || r.Workflow.TotalDuration != 42 {
		t.Errorf("answer = %s", w.Body)
	}
	if i := r.SessionInfo; i.SessionID != "session-123" || i.MessageCount != 4 || i.TotalTokens != 856 || i.TruncatedCount != 1 {
		t.Errorf("sessionInfo = %+v", i)
	}
	var steps []string
	for _, s := range r.Workflow.Steps {
		steps = append(steps, s.Step+" "+s.Status+" "+s.Error)
		if s.EndTime-s.StartTime != s.Duration || s.StartTime < start.UnixMilli() {
			t.Errorf("step %+v: times", s)
		}
	}
	want := []string{"load_context completed ", "rewrite_query completed timeout", "corrective_rag error store down", "generate skipped "}
	if !reflect.DeepEqual(steps, want) || r.Workflow.Steps[1].Details["degraded"] != true || r.Workflow.Steps[0].Details["trimmedCount"] != 1.0 {
		t.Errorf("steps = %q, want %q; %s", steps, want, w.Body)
	}

	// The turn: a waiting update of session-123 with the per-turn options.
	if len(*got) != 1 {
		t.Fatalf("%d updates", len(*got))
	}
	u := (*got)[0]
	req := u.UpdateOptions.Args[0].(workflows.TurnRequest)
	if u.UpdateOptions.UpdateName != workflows.UpdateTurn || req.Question != "它的续航怎么样？" || !strings.HasPrefix(req.TurnID, "turn-") {
		t.Errorf("update %q: %+v", u.UpdateOptions.UpdateName, req)
	}
	opts, err := workflows.ParseTurnOptions(req.Config)
	if err != nil || *opts.LLMModel != "qwen2.5:0.5b" || *opts.WindowStrategy != "hybrid" || *opts.MaxRounds != 10 || *opts.MaxTokens != 4000 ||
		!*opts.EnableQueryRewriting || *opts.TopK != 5 || *opts.SimilarityThreshold != 0.3 || opts.SearchMode != nil {
		t.Errorf("turn config %s: %v", req.Config, err)
	}
	op := u.StartWorkflowOperation.(*startOp)
	checkStart(t, op.opts, op.workflow, op.args[0].(workflows.SessionInput), "default", "session-123")

	// Session-only options go to the config of a session the query starts.
	do(h, http.MethodPost, "/api/context-management",
		`{"action":"query","sessionId":"s2","question":"hi","turnId":"q1","embeddingModel":"nomic-embed-text","summaryThreshold":2000,"enableSummarization":false,"maxRounds":5}`, "X-Tenant-ID", "acme")
	u = (*got)[1]
	var cfg workflows.SessionConfig
	in := u.StartWorkflowOperation.(*startOp).args[0].(workflows.SessionInput)
	if err := json.Unmarshal(in.Config, &cfg); err != nil || cfg.EmbeddingModel != "nomic-embed-text" || cfg.SummaryThreshold != 2000 ||
		cfg.EnableSummarization || cfg.MaxRounds != 5 || in.Tenant != "acme" {
		t.Errorf("session input %+v, config %+v", in, cfg)
	}
	if req := u.UpdateOptions.Args[0].(workflows.TurnRequest); req.TurnID != "q1" || string(req.Config) != `{"maxRounds":5}` {
		t.Errorf("turn = %+v", req)
	}

	// A failed turn: the seeds' error, with what the turn recorded.
	status = workflows.TurnFailed
	w = do(h, http.MethodPost, "/api/context-management", seedQuery)
	if msg := wantSeedError(t, w, http.StatusServiceUnavailable, activities.CodeUnavailable); !strings.Contains(msg, "model down") {
		t.Errorf("error %q does not say why", msg)
	}
	decode(t, w, &r)
	if len(r.Workflow.Steps) != 4 || r.SessionInfo.SessionID != "session-123" {
		t.Errorf("failed turn without its trace: %s", w.Body)
	}
}

// TestSeedRequestsRefused: bad requests are the seeds' 400s and reach no
// workflow.
func TestSeedRequestsRefused(t *testing.T) {
	for _, tc := range []struct{ name, method, path, body, want string }{
		{"no action", "POST", "/api/context-management", `{"sessionId":"s"}`, `action ""`},
		{"unknown action", "POST", "/api/context-management", `{"action":"chat"}`, `action "chat"`},
		{"unknown field", "POST", "/api/context-management", `{"action":"query","question":"q","temperature":1}`, `unknown field "temperature"`},
		{"no body", "POST", "/api/context-management", ``, "request body is empty"},
		{"empty question", "POST", "/api/context-management", `{"action":"query","sessionId":"s","question":"  "}`, "question is empty"},
		{"bad session id", "POST", "/api/context-management", `{"action":"query","sessionId":"a/b","question":"q"}`, "sessionId"},
		{"maxRounds 0", "POST", "/api/context-management", `{"action":"query","question":"q","maxRounds":0}`, "maxRounds"},
		{"bad strategy", "POST", "/api/context-management", `{"action":"create-session","windowStrategy":"fuzzy"}`, "fuzzy"},
		{"other collection", "POST", "/api/context-management", `{"action":"query","question":"q","milvusCollection":"docs"}`, `"docs" is not the knowledge base's collection "rag_documents"`},
		{"delete without id", "POST", "/api/context-management", `{"action":"delete-session"}`, "sessionId is missing"},
		{"compress without id", "POST", "/api/context-management", `{"action":"compress"}`, "sessionId is missing"},
		{"DELETE without id", "DELETE", "/api/context-management", ``, "sessionId is missing"},
		{"GET without action", "GET", "/api/context-management", ``, `action ""`},
		{"GET session without id", "GET", "/api/context-management?action=session", ``, "sessionId is missing"},
		{"bad list limit", "GET", "/api/context-management?action=sessions&limit=0", ``, "limit"},
		{"rag: empty query", "POST", "/api/self-corrective-rag", `{"query":""}`, "query is empty"},
		{"rag: unknown field", "POST", "/api/self-corrective-rag", `{"query":"q","topN":3}`, `unknown field "topN"`},
		{"rag: topK", "POST", "/api/self-corrective-rag", `{"query":"q","topK":0}`, "topK 0 out of range"},
		{"rag: other collection", "POST", "/api/self-corrective-rag", `{"query":"q","milvusConfig":{"address":"localhost:19530","collectionName":"docs"}}`,
			`milvusConfig.collectionName "docs" is not the knowledge base's collection "rag_documents"`},
		{"rag: milvusConfig field", "POST", "/api/self-corrective-rag", `{"query":"q","milvusConfig":{"token":"x"}}`, `milvusConfig: json: unknown field "token"`},
		{"rag: not an object", "POST", "/api/self-corrective-rag", `[1]`, "request body"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t) // any Temporal call fails the test
			msg := wantSeedError(t, do(server(f), tc.method, tc.path, tc.body), http.StatusBadRequest, activities.CodeInvalidArgument)
			if !strings.Contains(msg, tc.want) {
				t.Errorf("error %q lacks %q", msg, tc.want)
			}
		})
	}
}

// branchTranscripts serves a session's active branch.
type branchTranscripts struct{ fakeTranscripts }

func (b branchTranscripts) Branch(context.Context, activities.SessionKey, string) ([]convo.Message, error) {
	return b.msgs, nil
}

// TestSeedSessionActions: create-session, sessions, session, compress and
// delete-session run the /v1 routes' handlers and answer in seed 000's shape.
func TestSeedSessionActions(t *testing.T) {
	f := newFake(t)
	var started []workflows.SessionInput
	f.DescribeWorkflowExecutionFn = func(context.Context, string, string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
		return nil, serviceerror.NewNotFound("workflow not found")
	}
	f.ExecuteWorkflowFn = func(_ context.Context, opts client.StartWorkflowOptions, _ any, args ...any) (client.WorkflowRun, error) {
		started = append(started, args[0].(workflows.SessionInput))
		if opts.ID != "session/acme/user-001" {
			t.Errorf("started %q", opts.ID)
		}
		return nil, nil
	}
	h := server(f)
	w := do(h, http.MethodPost, "/api/context-management", `{"action":"create-session","sessionId":"user-001","title":"Mate60","maxRounds":5,"windowStrategy":"sliding_window","maxTokens":2000}`, "X-Tenant-ID", "acme")
	var created struct {
		seedAnswer
		SessionID string                  `json:"sessionId"`
		Config    workflows.SessionConfig `json:"config"`
	}
	decode(t, w, &created)
	if w.Code != http.StatusCreated || !created.Success || created.SessionID != "user-001" || created.Config.MaxRounds != 5 || created.Config.WindowStrategy != "sliding_window" {
		t.Errorf("create-session = %d %s", w.Code, w.Body)
	}
	var cfg workflows.SessionConfig
	if len(started) != 1 || json.Unmarshal(started[0].Config, &cfg) != nil || cfg != created.Config || started[0].Title != "Mate60" {
		t.Errorf("started %+v", started)
	}
	describing(t, f, workflows.StatusIdle)
	wantSeedError(t, do(h, http.MethodPost, "/api/context-management", `{"action":"create-session","sessionId":"user-001"}`, "X-Tenant-ID", "acme"), http.StatusConflict, activities.CodeConflict)

	// sessions: GET /v1/sessions's rows.
	f.ListWorkflowFn = func(_ context.Context, req *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error) {
		if !strings.Contains(req.GetQuery(), "CtxTenant = 'acme'") || !strings.Contains(req.GetQuery(), "CtxStatus = 'idle'") || req.GetPageSize() != 3 {
			t.Errorf("list %q, %d", req.GetQuery(), req.GetPageSize())
		}
		return &workflowservice.ListWorkflowExecutionsResponse{Executions: []*workflowpb.WorkflowExecutionInfo{{
			Execution: &commonpb.WorkflowExecution{WorkflowId: "session/acme/user-001"},
			SearchAttributes: &commonpb.SearchAttributes{IndexedFields: map[string]*commonpb.Payload{
				"CtxStatus": encode(t, "idle").p, "CtxTurns": encode(t, int64(2)).p,
			}},
		}}}, nil
	}
	w = do(h, http.MethodGet, "/api/context-management?action=sessions&status=idle&limit=3", "", "X-Tenant-ID", "acme")
	var list struct {
		seedAnswer
		Sessions []struct {
			SessionID string `json:"sessionId"`
			Turns     int    `json:"turns"`
		} `json:"sessions"`
	}
	decode(t, w, &list)
	if w.Code != http.StatusOK || !list.Success || len(list.Sessions) != 1 || list.Sessions[0].SessionID != "user-001" || list.Sessions[0].Turns != 2 {
		t.Errorf("sessions = %d %s", w.Code, w.Body)
	}

	// session: the state, and the messages of the recent turns (this
	// process reads no transcripts) or of the transcript.
	state := workflows.SessionState{SessionID: "user-001", Status: workflows.StatusIdle, Health: workflows.HealthOK, Turns: 1, Messages: 2,
		TokensBefore: 120, TrimmedCount: 0, ActiveLeaf: "t1.a", Config: workflows.DefaultSessionConfig(),
		Recent: []workflows.TurnResult{{TurnID: "t1", Status: workflows.TurnCompleted, Question: "介绍下华为Mate60", Answer: "旗舰手机", UserMessageID: "t1.u", AssistantMessageID: "t1.a"}}}
	f.QueryWorkflowFn = func(_ context.Context, workflowID, _, queryType string, _ ...any) (converter.EncodedValue, error) {
		if workflowID != "session/acme/user-001" {
			return nil, serviceerror.NewNotFound("workflow not found")
		}
		return encode(t, state), nil
	}
	type sessionReply struct {
		seedAnswer
		Session struct {
			SessionID      string          `json:"sessionId"`
			MessageCount   int             `json:"messageCount"`
			TotalTokens    int             `json:"totalTokens"`
			Messages       []convo.Message `json:"messages"`
			MessagesSource string          `json:"messagesSource"`
		} `json:"session"`
	}
	var s sessionReply
	w = do(h, http.MethodGet, "/api/context-management?action=session&sessionId=user-001", "", "X-Tenant-ID", "acme")
	decode(t, w, &s)
	if w.Code != http.StatusOK || !s.Success || s.Session.MessageCount != 2 || s.Session.TotalTokens != 120 || s.Session.MessagesSource != "recent turns" ||
		len(s.Session.Messages) != 2 || s.Session.Messages[0].Content != "介绍下华为Mate60" || s.Session.Messages[1].ParentID != "t1.u" {
		t.Errorf("session = %d %s", w.Code, w.Body)
	}
	wantSeedError(t, do(h, http.MethodGet, "/api/context-management?action=session&sessionId=nope", "", "X-Tenant-ID", "acme"), http.StatusNotFound, activities.CodeNotFound)
	opts := options()
	opts.Transcripts = branchTranscripts{fakeTranscripts{forked[:3]}}
	w = do(api.New(f, opts).Handler(), http.MethodGet, "/api/context-management?action=session&sessionId=user-001", "", "X-Tenant-ID", "acme")
	s = sessionReply{}
	decode(t, w, &s)
	if s.Session.MessagesSource != "transcript" || len(s.Session.Messages) != 3 || s.Session.Messages[2].Content != "second, edited" {
		t.Errorf("session from the transcript = %s", w.Body)
	}

	// compress: the compress signal, 202.
	var signals []string
	f.SignalWorkflowFn = func(_ context.Context, workflowID, _, name string, _ any) error {
		signals = append(signals, workflowID+" "+name)
		return nil
	}
	w = do(h, http.MethodPost, "/api/context-management", `{"action":"compress","sessionId":"user-001"}`, "X-Tenant-ID", "acme")
	if w.Code != http.StatusAccepted || !strings.Contains(w.Body.String(), `"success":true`) || !reflect.DeepEqual(signals, []string{"session/acme/user-001 compress"}) {
		t.Errorf("compress = %d %s, signals %v", w.Code, w.Body, signals)
	}

	// delete-session and DELETE ?sessionId=: the close update; 200 with a body.
	describing(t, f, workflows.StatusIdle, "gone")
	closes := recordUpdate(t, f, func(client.UpdateWithStartWorkflowOptions) (client.WorkflowUpdateHandle, error) { return handle{}, nil })
	for _, r := range []struct{ method, path, body string }{
		{http.MethodPost, "/api/context-management", `{"action":"delete-session","sessionId":"user-001"}`},
		{http.MethodDelete, "/api/context-management?sessionId=user-001", ""},
	} {
		w = do(h, r.method, r.path, r.body, "X-Tenant-ID", "acme")
		var d struct {
			seedAnswer
			SessionID string `json:"sessionId"`
			Deleted   bool   `json:"deleted"`
		}
		decode(t, w, &d)
		if w.Code != http.StatusOK || !d.Success || !d.Deleted || d.SessionID != "user-001" {
			t.Errorf("%s %s = %d %s", r.method, r.path, w.Code, w.Body)
		}
	}
	if len(*closes) != 2 || (*closes)[1].UpdateOptions.UpdateName != workflows.UpdateClose {
		t.Errorf("close updates = %+v", *closes)
	}
	wantSeedError(t, do(h, http.MethodDelete, "/api/context-management?sessionId=gone", ""), http.StatusNotFound, activities.CodeNotFound)
}

// TestSeedCorrective: seed 003's request runs the corrective workflow as
// POST /v1/rag/corrective does; milvusConfig naming the workers'
// collection is accepted, another is refused.
func TestSeedCorrective(t *testing.T) {
	var got []workflows.CorrectiveInput
	f := newFake(t)
	f.ExecuteWorkflowFn = func(_ context.Context, o client.StartWorkflowOptions, _ any, args ...any) (client.WorkflowRun, error) {
		in := args[0].(workflows.CorrectiveInput)
		got = append(got, in)
		if in.Query == "fail" {
			return run{id: o.ID, get: failedWith("collection has dimension 384", activities.CodeDimensionMismatch)}, nil
		}
		return run{id: o.ID, get: result(t, workflows.CorrectiveResult{Answer: "续航出色",
			Query:        workflows.QueryInfo{Original: in.Query, Final: in.Query},
			GraderResult: workflows.GraderResult{PassRate: 1, PassCount: 1, TotalCount: 1},
			Workflow:     workflows.WorkflowTrace{DecisionPath: []string{"retrieve", "grade", "generate"}, TotalDuration: 9}})}, nil
	}
	h := server(f)
	w := do(h, http.MethodPost, "/api/self-corrective-rag", seedRAG, "X-Tenant-ID", "acme")
	var r struct {
		seedAnswer
		workflows.CorrectiveResult
	}
	decode(t, w, &r)
	if w.Code != http.StatusOK || !r.Success || r.Answer != "续航出色" || r.Query.Original != "华为Mate60的续航怎么样？" || len(r.Workflow.DecisionPath) != 3 {
		t.Errorf("answer = %d %s", w.Code, w.Body)
	}
	for _, field := range []string{`"rewriteHistory"`, `"retrieval"`, `"filteredDocuments"`, `"graderResult"`, `"passRate"`, `"shouldRewrite"`, `"nodeExecutions"`, `"totalDuration"`, `"wasRewritten"`, `"rewriteCount"`} {
		if !strings.Contains(w.Body.String(), field) {
			t.Errorf("answer lacks seed 003's %s", field)
		}
	}
	d := workflows.DefaultSessionConfig()
	if len(got) != 1 || got[0].Tenant != "acme" || got[0].TopK != 5 || got[0].MaxRewriteAttempts != 3 || got[0].GradePassThreshold != 0.6 ||
		got[0].SimilarityThreshold != 0.3 || got[0].Model != d.LLMModel || !got[0].IncludeText {
		t.Errorf("workflow input = %+v", got)
	}
	w = do(h, http.MethodPost, "/api/self-corrective-rag", `{"query":"fail"}`)
	if msg := wantSeedError(t, w, http.StatusInternalServerError, activities.CodeDimensionMismatch); !strings.Contains(msg, "dimension 384") {
		t.Errorf("error %q", msg)
	}

	// The collection is the API's (CTXFLOW_COLLECTION).
	opts := options()
	opts.Collection = "kb"
	h = api.New(f, opts).Handler()
	if w := do(h, http.MethodPost, "/api/self-corrective-rag", `{"query":"q","milvusConfig":{"collectionName":"kb"}}`); w.Code != http.StatusOK {
		t.Errorf("collection kb = %d %s", w.Code, w.Body)
	}
	if msg := wantSeedError(t, do(h, http.MethodPost, "/api/self-corrective-rag", seedRAG), http.StatusBadRequest, activities.CodeInvalidArgument); !strings.Contains(msg, `"rag_documents" is not the knowledge base's collection "kb"`) {
		t.Errorf("error %q", msg)
	}
}

// TestSeedAPIKeys: the seed routes need the same keys as /v1 and act as
// the key's tenant.
func TestSeedAPIKeys(t *testing.T) {
	sum := sha256.Sum256([]byte("cfk_acme"))
	f := newFake(t)
	var gotID string
	f.QueryWorkflowFn = func(_ context.Context, workflowID, _, _ string, _ ...any) (converter.EncodedValue, error) {
		gotID = workflowID
		return encode(t, workflows.SessionState{SessionID: "s1", Status: workflows.StatusIdle}), nil
	}
	opts := options()
	opts.Keys = map[string]string{hex.EncodeToString(sum[:]): "acme"}
	h := api.New(f, opts).Handler()
	for _, path := range []string{"/api/context-management?action=session&sessionId=s1", "/api/self-corrective-rag"} {
		method := map[bool]string{true: http.MethodGet, false: http.MethodPost}[strings.Contains(path, "?")]
		wantSeedError(t, do(h, method, path, `{"query":"q"}`), http.StatusUnauthorized, activities.CodeUnauthenticated)
		wantSeedError(t, do(h, method, path, `{"query":"q"}`, "Authorization", "Bearer cfk_acme", "X-Tenant-ID", "beta"), http.StatusBadRequest, activities.CodeInvalidArgument)
	}
	w := do(h, http.MethodGet, "/api/context-management?action=session&sessionId=s1", "", "Authorization", "Bearer cfk_acme")
	if w.Code != http.StatusOK || gotID != "session/acme/s1" {
		t.Errorf("with the key: %d %s, workflow %q", w.Code, w.Body, gotID)
	}
}
