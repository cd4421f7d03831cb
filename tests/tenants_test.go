package tests

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ctxflow/ctxflow/workflows"
)

// upload posts a document as the client's tenant and waits for it.
func (s apiClient) upload(t *testing.T, id, text string) int {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, s.base+"/v1/documents?wait=true&id="+id, strings.NewReader(text))
	req.Header.Set("Content-Type", "text/markdown")
	req.Header.Set("Authorization", "Bearer "+s.key)
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	return resp.StatusCode
}

// retrieved is what a qa turn of the client's tenant retrieved.
func (s apiClient) retrieved(t *testing.T, session, turnID, q string) []string {
	t.Helper()
	res, _, err := s.turn(t.Context(), session, turnID, q)
	if err != nil || res.Status != workflows.TurnCompleted {
		t.Fatalf("turn %s: %v %+v", turnID, err, res)
	}
	var ids []string
	for _, d := range res.RetrievedDocs {
		ids = append(ids, d.Source)
	}
	if len(ids) == 0 { // why, should the caller have wanted some
		t.Logf("turn %s retrieved nothing: %+v", turnID, res.Steps)
	}
	return ids
}

// TestTenantsAreIsolated runs two tenants with API keys through every
// kind of route: another tenant's session, turn, task and document answer
// 404, lists and retrievals never show them, and writes of one never touch
// the other's.
func TestTenantsAreIsolated(t *testing.T) {
	key := func(k string) string { sum := sha256.Sum256([]byte(k)); return hex.EncodeToString(sum[:]) }
	s := startStack(t, stackOptions{
		extraEnv: []string{"CTXFLOW_MODEL_PROVIDER=offline"},
		keys:     map[string]string{key("cfk_a"): "acme", key("cfk_b"): "beta"},
	})
	s.startWorker()
	ctx := t.Context()
	a, b := apiClient{base: s.base, key: "cfk_a"}, apiClient{base: s.base, key: "cfk_b"}
	anon := apiClient{base: s.base}
	if code, _ := anon.do(ctx, http.MethodGet, "/v1/sessions", nil, nil); code != http.StatusUnauthorized {
		t.Errorf("no key = %d, want 401", code)
	}

	// Sessions: create, turn, read, list, delete.
	if code, err := a.do(ctx, http.MethodPost, "/v1/sessions", map[string]string{"sessionId": "s"}, nil); code != http.StatusCreated {
		t.Fatalf("create: %d %v", code, err)
	}
	if res, _, err := a.turn(ctx, "s", "t0", "hello"); err != nil || res.Status != workflows.TurnCompleted {
		t.Fatalf("turn: %v %+v", err, res)
	}
	for _, r := range []struct{ method, path string }{
		{http.MethodGet, "/v1/sessions/s"},
		{http.MethodGet, "/v1/sessions/s/turns/t0"},
		{http.MethodGet, "/v1/sessions/s/steps"},
		{http.MethodDelete, "/v1/sessions/s"},
		{http.MethodGet, "/v1/sessions/s/tasks/t0"},
		{http.MethodDelete, "/v1/sessions/s/tasks/t0"},
		{http.MethodPost, "/v1/sessions/s/compress"},
	} {
		if code, _ := b.do(ctx, r.method, r.path, nil, nil); code != http.StatusNotFound {
			t.Errorf("beta: %s %s = %d, want 404", r.method, r.path, code)
		}
	}
	var list struct {
		Sessions []struct{ SessionID string } `json:"sessions"`
	}
	if _, err := b.do(ctx, http.MethodGet, "/v1/sessions", nil, &list); err != nil || len(list.Sessions) != 0 {
		t.Errorf("beta lists %v (%v)", list.Sessions, err)
	}
	// beta's own session of the same id is another session.
	if res, _, err := b.turn(ctx, "s", "t0", "a different question"); err != nil || res.SessionInfo.Turns != 1 {
		t.Fatalf("beta's turn: %v %+v", err, res)
	}
	var st workflows.SessionState
	if _, err := a.do(ctx, http.MethodGet, "/v1/sessions/s", nil, &st); err != nil || st.Turns != 1 || st.Tenant != "acme" {
		t.Errorf("acme's session after beta's turn: %v %+v", err, st)
	}

	// Documents: acme's are acme's.
	const fact = "Quokka robots recharge their batteries every 12 hours at the docking bay."
	if code := a.upload(t, "kb", "# Quokka robots\n\n"+fact+"\n"); code != http.StatusOK {
		t.Fatalf("acme upload: %d", code)
	}
	for _, method := range []string{http.MethodGet, http.MethodDelete} {
		if code, _ := b.do(ctx, method, "/v1/documents/kb", nil, nil); code != http.StatusNotFound {
			t.Errorf("beta: %s /v1/documents/kb = %d, want 404", method, code)
		}
	}
	q := "How often do quokka robots recharge their batteries?"
	if got := b.retrieved(t, "qa", "q1", q); len(got) != 0 {
		t.Errorf("beta retrieved %v", got)
	}
	if got := a.retrieved(t, "qa", "q1", q); !slices.Contains(got, "kb") {
		t.Errorf("acme retrieved %v, want its kb", got)
	}
	var rag struct {
		Retrieval struct {
			Documents []struct{ Text string } `json:"documents"`
		} `json:"retrieval"`
	}
	if _, err := b.do(ctx, http.MethodPost, "/v1/rag/corrective", map[string]string{"query": q}, &rag); err != nil || len(rag.Retrieval.Documents) != 0 {
		t.Errorf("beta's corrective query found %d documents (%v)", len(rag.Retrieval.Documents), err)
	}
	// beta's document of the same id replaces nothing of acme's, and its
	// delete deletes only its own.
	if code := b.upload(t, "kb", "# Beta\n\nBeta's own notes about invoices.\n"); code != http.StatusOK {
		t.Fatalf("beta upload: %d", code)
	}
	if code, _ := b.do(ctx, http.MethodDelete, "/v1/documents/kb", nil, nil); code != http.StatusNoContent {
		t.Fatalf("beta delete: %d", code)
	}
	if got := a.retrieved(t, "qa", "q2", q); !slices.Contains(got, "kb") {
		t.Errorf("after beta's upload and delete acme retrieved %v", got)
	}
	var doc map[string]any
	if _, err := a.do(ctx, http.MethodGet, "/v1/documents/kb", nil, &doc); err != nil || doc["status"] != "completed" || doc["documentId"] != "kb" {
		t.Errorf("acme's document: %v %v", doc, err)
	}

	// `ctxflow ingest --tenant` writes into that tenant's knowledge base.
	dir := t.TempDir()
	notes := filepath.Join(dir, "notes.md")
	if err := os.WriteFile(notes, []byte("# Invoices\n\nBeta sends invoices on the first Monday of each month.\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, binary, "ingest", "--tenant", "beta", notes)
	cmd.Env = append(os.Environ(), s.env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ingest --tenant: %v\n%s", err, out)
	}
	iq := "When does Beta send invoices?"
	if got := b.retrieved(t, "qa", "q3", iq); !slices.Contains(got, "notes.md") {
		t.Errorf("beta retrieved %v, want notes.md", got)
	}
	if got := a.retrieved(t, "qa", "q3", iq); slices.Contains(got, "notes.md") {
		t.Errorf("acme retrieved beta's notes: %v", got)
	}
}
