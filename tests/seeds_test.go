package tests

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// The seeds' example payloads, verbatim: seed 000 §5.1 and seed 003's
// request.
const (
	seed000Query = `{
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
	seed003Request = `{
  "query": "用户问题",
  "topK": 5,
  "similarityThreshold": 0.3,
  "maxRewriteAttempts": 3,
  "gradePassThreshold": 0.6,
  "milvusConfig": {
    "address": "localhost:19530",
    "collectionName": "rag_documents"
  }
}`
)

const mate60Doc = `# 华为Mate60

华为Mate60是华为于2023年发布的旗舰手机，搭载麒麟9000s芯片，支持卫星通话。

华为Mate60的续航表现出色：电池容量为4750毫安时，支持66W有线快充和50W无线快充，正常使用可以坚持一整天。

华为Mate60售价5999元起。
`

// seedReply holds the fields of the seeds' answers that the test reads.
type seedReply struct {
	Success        bool   `json:"success"`
	Error          string `json:"error"`
	Code           string `json:"code"`
	SessionID      string `json:"sessionId"`
	Response       string `json:"response"`
	RewrittenQuery string `json:"rewrittenQuery"`
	RetrievedDocs  []struct {
		ID     string  `json:"id"`
		Score  float64 `json:"score"`
		Source string  `json:"source"`
	} `json:"retrievedDocs"`
	Workflow struct {
		Steps []struct {
			Step     string `json:"step"`
			Status   string `json:"status"`
			Duration int64  `json:"duration"`
		} `json:"steps"`
		TotalDuration int64    `json:"totalDuration"`
		DecisionPath  []string `json:"decisionPath"`
		Nodes         []any    `json:"nodeExecutions"`
	} `json:"workflow"`
	SessionInfo struct {
		SessionID      string `json:"sessionId"`
		MessageCount   int    `json:"messageCount"`
		TotalTokens    int    `json:"totalTokens"`
		TruncatedCount *int   `json:"truncatedCount"`
	} `json:"sessionInfo"`
	Sessions []struct {
		SessionID string `json:"sessionId"`
	} `json:"sessions"`
	Session struct {
		MessageCount int `json:"messageCount"`
		Messages     []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
	} `json:"session"`
	// seed 003
	Answer string `json:"answer"`
	Query  struct {
		Original     string `json:"original"`
		Final        string `json:"final"`
		WasRewritten *bool  `json:"wasRewritten"`
		RewriteCount *int   `json:"rewriteCount"`
	} `json:"query"`
	RewriteHistory []any `json:"rewriteHistory"`
	Retrieval      struct {
		TotalDocuments    int `json:"totalDocuments"`
		FilteredDocuments int `json:"filteredDocuments"`
		Documents         []struct {
			Text   string `json:"text"`
			Source string `json:"source"`
		} `json:"documents"`
	} `json:"retrieval"`
	GraderResult *struct {
		PassRate   float64 `json:"passRate"`
		TotalCount int     `json:"totalCount"`
	} `json:"graderResult"`
}

// TestSeedEndpoints points seed 000's and seed 003's front-end requests
// at a real stack: their example payloads, verbatim, answered with their
// response fields, from the same sessions and knowledge base as /v1.
func TestSeedEndpoints(t *testing.T) {
	s := startStack(t, stackOptions{extraEnv: []string{"CTXFLOW_MODEL_PROVIDER=offline"}})
	s.startWorker()
	ctx := t.Context()
	if code := s.upload(t, "mate60", mate60Doc); code != http.StatusOK {
		t.Fatalf("upload: %d\n%s", code, s.workerLogs())
	}
	post := func(path string, body any) (int, seedReply) {
		t.Helper()
		var r seedReply
		code, err := s.do(ctx, http.MethodPost, path, body, &r)
		if err != nil && r.Error == "" {
			t.Fatalf("POST %s: %v", path, err)
		}
		return code, r
	}
	get := func(path string) (int, seedReply) {
		t.Helper()
		var r seedReply
		code, err := s.do(ctx, http.MethodGet, path, nil, &r)
		if err != nil && r.Error == "" {
			t.Fatalf("GET %s: %v", path, err)
		}
		return code, r
	}

	// create-session, then the conversation: a first question in the
	// seed's shape, and the seed's own follow-up.
	if code, r := post("/api/context-management", map[string]any{"action": "create-session", "sessionId": "session-123", "maxRounds": 10}); code != http.StatusCreated || !r.Success || r.SessionID != "session-123" {
		t.Fatalf("create-session: %d %+v", code, r)
	}
	var first map[string]any
	if err := json.Unmarshal([]byte(seed000Query), &first); err != nil {
		t.Fatal(err)
	}
	first["question"] = "介绍下华为Mate60"
	start := time.Now()
	code, r := post("/api/context-management", first)
	t.Logf("介绍下华为Mate60 → %d %q (%v)", code, r.Response, time.Since(start).Round(time.Millisecond))
	if code != http.StatusOK || !r.Success || r.Response == "" || len(r.RetrievedDocs) == 0 {
		t.Fatalf("first query: %d %+v\n%s", code, r, s.workerLogs())
	}
	code, r = post("/api/context-management", json.RawMessage(seed000Query))
	t.Logf("它的续航怎么样？ → %d rewritten %q, answer %q, docs %+v, steps %+v, totalDuration %d, sessionInfo %+v",
		code, r.RewrittenQuery, r.Response, r.RetrievedDocs, r.Workflow.Steps, r.Workflow.TotalDuration, r.SessionInfo)
	if code != http.StatusOK || !r.Success {
		t.Fatalf("seed query: %d %+v", code, r)
	}
	if !strings.Contains(r.RewrittenQuery, "Mate60") || !strings.Contains(r.Response, "续航") || !strings.Contains(r.Response, "4750") {
		t.Errorf("the follow-up was not made standalone and answered: %q → %q", r.RewrittenQuery, r.Response)
	}
	if len(r.RetrievedDocs) == 0 || r.RetrievedDocs[0].Source != "mate60" {
		t.Errorf("retrievedDocs = %+v", r.RetrievedDocs)
	}
	var steps []string
	for _, st := range r.Workflow.Steps {
		steps = append(steps, st.Step)
		if st.Status != "completed" {
			t.Errorf("step %+v", st)
		}
	}
	for _, want := range []string{"load_context", "rewrite_query", "corrective_rag", "save"} {
		if !slices.Contains(steps, want) {
			t.Errorf("steps %v lack %s", steps, want)
		}
	}
	if i := r.SessionInfo; i.SessionID != "session-123" || i.MessageCount != 4 || i.TotalTokens == 0 || i.TruncatedCount == nil || r.Workflow.TotalDuration <= 0 {
		t.Errorf("sessionInfo %+v, totalDuration %d", i, r.Workflow.TotalDuration)
	}
	if code, r := post("/api/context-management", map[string]any{"action": "query", "sessionId": "session-123", "question": " "}); code != http.StatusBadRequest || r.Success || !strings.Contains(r.Error, "question is empty") {
		t.Errorf("empty question: %d %+v", code, r)
	}

	// sessions, session, compress.
	deadline := time.Now().Add(10 * time.Second) // the listing is eventually consistent
	for {
		code, r = get("/api/context-management?action=sessions")
		if code == http.StatusOK && r.Success && slices.ContainsFunc(r.Sessions, func(x struct {
			SessionID string `json:"sessionId"`
		}) bool {
			return x.SessionID == "session-123"
		}) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sessions: %d %+v", code, r)
		}
		time.Sleep(200 * time.Millisecond)
	}
	code, r = get("/api/context-management?action=session&sessionId=session-123")
	if code != http.StatusOK || !r.Success || r.Session.MessageCount != 4 || len(r.Session.Messages) != 4 || r.Session.Messages[2].Content != "它的续航怎么样？" {
		t.Errorf("session: %d %+v", code, r.Session)
	}
	if code, r := post("/api/context-management", map[string]any{"action": "compress", "sessionId": "session-123"}); code != http.StatusAccepted || !r.Success {
		t.Errorf("compress: %d %+v", code, r)
	}

	// Seed 003: its example, and a question the knowledge base answers.
	code, r = post("/api/self-corrective-rag", json.RawMessage(seed003Request))
	t.Logf("用户问题 → %d %q, path %v, grader %+v", code, r.Answer, r.Workflow.DecisionPath, r.GraderResult)
	if code != http.StatusOK || !r.Success || r.Answer == "" || r.Query.Original != "用户问题" || r.Query.WasRewritten == nil ||
		r.RewriteHistory == nil || r.GraderResult == nil || len(r.Workflow.DecisionPath) == 0 || len(r.Workflow.Nodes) == 0 {
		t.Errorf("seed 003's example: %d %+v", code, r)
	}
	var rag map[string]any
	if err := json.Unmarshal([]byte(seed003Request), &rag); err != nil {
		t.Fatal(err)
	}
	rag["query"] = "华为Mate60的续航怎么样？"
	code, r = post("/api/self-corrective-rag", rag)
	t.Logf("华为Mate60的续航怎么样？ → %d %q, path %v, retrieval %d/%d", code, r.Answer, r.Workflow.DecisionPath, r.Retrieval.FilteredDocuments, r.Retrieval.TotalDocuments)
	if code != http.StatusOK || !r.Success || !strings.Contains(r.Answer, "4750") || r.Retrieval.FilteredDocuments == 0 ||
		len(r.Retrieval.Documents) == 0 || r.Retrieval.Documents[0].Text == "" || r.GraderResult.TotalCount == 0 {
		t.Errorf("corrective: %d %+v", code, r)
	}
	rag["milvusConfig"] = map[string]any{"address": "localhost:19530", "collectionName": "other_docs"}
	if code, r := post("/api/self-corrective-rag", rag); code != http.StatusBadRequest || r.Success || !strings.Contains(r.Error, `"other_docs" is not the knowledge base's collection "rag_documents"`) {
		t.Errorf("another collection: %d %+v", code, r)
	}

	// DELETE ?sessionId=: gone afterwards.
	var del seedReply
	if code, err := s.do(ctx, http.MethodDelete, "/api/context-management?sessionId=session-123", nil, &del); code != http.StatusOK || !del.Success {
		t.Errorf("delete: %d %v %+v", code, err, del)
	}
	if code, r := get("/api/context-management?action=session&sessionId=session-123"); code != http.StatusNotFound || r.Success || r.Code != "not_found" {
		t.Errorf("deleted session: %d %+v", code, r)
	}
}
