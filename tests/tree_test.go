package tests

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/ctxflow/ctxflow/convo"
	"github.com/ctxflow/ctxflow/tests/fakeollama"
	"github.com/ctxflow/ctxflow/workflows"
)

type treeShape struct {
	ActiveLeaf string `json:"activeLeaf"`
	Nodes      []struct {
		ID       string   `json:"id"`
		Children []string `json:"children"`
	} `json:"nodes"`
}

// shape reads a session's tree as "id[children]" lines.
func (s apiClient) shape(t *testing.T, session string) (string, []string) {
	t.Helper()
	var tr treeShape
	if _, err := s.do(t.Context(), http.MethodGet, "/v1/sessions/"+session+"/tree", nil, &tr); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range tr.Nodes {
		out = append(out, fmt.Sprintf("%s%v", n.ID, n.Children))
	}
	return tr.ActiveLeaf, out
}

// TestConversationTrees drives the tree routes of `ctxflow dev` over HTTP:
// branch, edit and fork with the tree checked exactly, a Chinese edit,
// and export → import → the next turn seen by the model exactly as in the
// original session.
func TestConversationTrees(t *testing.T) {
	model := fakeollama.New(fakeollama.Options{})
	fake := httptest.NewServer(model)
	defer fake.Close()
	dir := t.TempDir()
	httpPort := freePort(t)
	env := []string{
		fmt.Sprintf("CTXFLOW_HTTP_ADDR=127.0.0.1:%d", httpPort),
		fmt.Sprintf("CTXFLOW_UI_PORT=%d", freePort(t)),
		fmt.Sprintf("CTXFLOW_TEMPORAL_PORT=%d", freePort(t)),
		"CTXFLOW_DATA_DIR=" + dir,
		"OLLAMA_HOST=" + fake.URL,
	}
	api := apiClient{base: fmt.Sprintf("http://127.0.0.1:%d", httpPort)}
	startDev(t, env, api, filepath.Join(dir, "dev.log"))
	ctx := t.Context()
	turn := func(session, id, q string) {
		t.Helper()
		if res, _, err := api.turn(ctx, session, id, q); err != nil || res.Status != "completed" {
			t.Fatalf("turn %s/%s: %v %+v", session, id, err, res)
		}
	}
	for i, q := range []string{"first", "second", "third"} {
		turn("tree", fmt.Sprintf("t%d", i), q)
	}
	var moved struct{ ActiveLeaf string }
	if _, err := api.do(ctx, http.MethodPost, "/v1/sessions/tree/branch", map[string]string{"fromMessageId": "t0.a"}, &moved); err != nil || moved.ActiveLeaf != "t0.a" {
		t.Fatalf("branch: %v %+v", err, moved)
	}
	turn("tree", "t3", "fourth")
	if code, err := api.do(ctx, http.MethodPost, "/v1/sessions/tree/messages/t1.u/edit?wait=true", map[string]string{"content": "第二个问题，改过了", "turnId": "t4"}, nil); code != http.StatusOK {
		t.Fatalf("edit: %d %v", code, err)
	}
	leaf, got := api.shape(t, "tree")
	want := []string{"t0.u[t0.a]", "t0.a[t1.u t3.u t4.u]", "t1.u[t1.a]", "t1.a[t2.u]", "t2.u[t2.a]", "t2.a[]", "t3.u[t3.a]", "t3.a[]", "t4.u[t4.a]", "t4.a[]"}
	if leaf != "t4.a" || !reflect.DeepEqual(got, want) {
		t.Fatalf("tree: leaf %s\n got %v\nwant %v", leaf, got, want)
	}
	if last, _ := model.LastChat(); last.Messages[len(last.Messages)-1].Content != "第二个问题，改过了" || len(last.Messages) != 4 { // system, first, one, the edit
		t.Errorf("the edit's model view: %+v", last.Messages)
	}
	// Errors say what is wrong.
	for path, body := range map[string]map[string]string{
		"/v1/sessions/tree/branch":             {"fromMessageId": "nope"},
		"/v1/sessions/tree/messages/nope/edit": {"content": "x"},
		"/v1/sessions/tree/fork":               {"fromMessageId": "nope"},
	} {
		if code, _ := api.do(ctx, http.MethodPost, path+"?wait=true", body, nil); code != http.StatusNotFound {
			t.Errorf("POST %s with an unknown message = %d, want 404", path, code)
		}
	}
	if code, _ := api.do(ctx, http.MethodPost, "/v1/sessions/tree/messages/t0.a/edit?wait=true", map[string]string{"content": "x"}, nil); code != http.StatusBadRequest {
		t.Errorf("edit of an answer = %d, want 400", code)
	}

	// Fork at t1.a: the new session has that branch, and goes on from it.
	var forked struct {
		SessionID, ActiveLeaf string
		Turns, Messages       int
	}
	if _, err := api.do(ctx, http.MethodPost, "/v1/sessions/tree/fork", map[string]string{"fromMessageId": "t1.a", "sessionId": "fork"}, &forked); err != nil ||
		forked.SessionID != "fork" || forked.ActiveLeaf != "t1.a" || forked.Turns != 2 || forked.Messages != 4 {
		t.Fatalf("fork: %v %+v", err, forked)
	}
	if code, _ := api.do(ctx, http.MethodPost, "/v1/sessions/tree/fork", map[string]string{"fromMessageId": "t1.a", "sessionId": "fork"}, nil); code != http.StatusConflict {
		t.Errorf("a fork into an existing session = %d, want 409", code)
	}
	turn("fork", "f1", "after the fork")
	leaf, got = api.shape(t, "fork")
	if want := []string{"t0.u[t0.a]", "t0.a[t1.u]", "t1.u[t1.a]", "t1.a[f1.u]", "f1.u[f1.a]", "f1.a[]"}; leaf != "f1.a" || !reflect.DeepEqual(got, want) {
		t.Errorf("fork's tree: leaf %s %v, want %v", leaf, got, want)
	}
	if _, got := api.shape(t, "tree"); len(got) != 10 {
		t.Errorf("the fork changed its source: %v", got)
	}

	// Export, import as a new session: the next turn sees the same context.
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, api.base+"/v1/sessions/tree/export", nil)
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	jsonl, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Active-Leaf") != "t4.a" {
		t.Fatalf("export: %d %v", resp.StatusCode, resp.Header)
	}
	msgs, err := convo.DecodeJSONL(bytes.NewReader(jsonl))
	if err != nil || len(msgs) != 10 || msgs[len(msgs)-1].ID != "t4.a" {
		t.Fatalf("export: %v, %d messages", err, len(msgs))
	}
	req, _ = http.NewRequestWithContext(ctx, http.MethodPost, api.base+"/v1/sessions/import?sessionId=copy", bytes.NewReader(jsonl))
	req.Header.Set("Content-Type", "application/x-ndjson")
	resp, err = httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || !strings.Contains(string(body), `"activeLeaf":"t4.a"`) {
		t.Fatalf("import: %d %s", resp.StatusCode, body)
	}
	if _, got := api.shape(t, "copy"); !reflect.DeepEqual(got, want) {
		t.Errorf("imported tree %v, want %v", got, want)
	}
	turn("tree", "n1", "what did I ask?")
	orig, _ := model.LastChat()
	turn("copy", "n1", "what did I ask?")
	copied, _ := model.LastChat()
	if !reflect.DeepEqual(orig.Messages, copied.Messages) {
		t.Errorf("the imported session's view differs:\n%+v\n%+v", orig.Messages, copied.Messages)
	}
	// A bad line is named, and nothing is imported.
	req, _ = http.NewRequestWithContext(ctx, http.MethodPost, api.base+"/v1/sessions/import?sessionId=bad", strings.NewReader(string(jsonl)+"{\"id\": 3}\n"))
	resp, err = httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "line 11") {
		t.Errorf("import of a bad line: %d %s", resp.StatusCode, body)
	}
	if code, _ := api.do(ctx, http.MethodGet, "/v1/sessions/bad", nil, nil); code != http.StatusNotFound {
		t.Errorf("a refused import left a session: %d", code)
	}
}

// TestImportedMessagesAreCounted imports 60 messages of 420 characters in
// seed 004's shape (ids of their own, no token counts): the import reports
// its 30 answered turns, the next turn's window counts them (over the
// default 4,000-token budget: trimmed to it), and the transcript stores
// every count. (They counted 0: the budget never applied, and turns was 0.)
func TestImportedMessagesAreCounted(t *testing.T) {
	s := startStack(t, stackOptions{})
	s.startWorker()
	ctx := t.Context()
	var b bytes.Buffer
	parent := "null"
	for i := range 60 {
		role := []string{"user", "assistant"}[i%2]
		text := strings.Repeat(fmt.Sprintf("message %d says something long enough. ", i), 12)[:420]
		fmt.Fprintf(&b, `{"id": "m-%03d", "parentId": %s, "type": %q, "content": %q, "timestamp": %d}`+"\n", i, parent, role, text, 1_700_000_000_000+i)
		parent = fmt.Sprintf(`"m-%03d"`, i)
	}
	var imp struct {
		Messages int `json:"messages"`
		Turns    int `json:"turns"`
	}
	if code, err := s.do(ctx, http.MethodPost, "/v1/sessions/import?sessionId=imported", b.Bytes(), &imp); err != nil || code != http.StatusCreated {
		t.Fatalf("import: %d %v", code, err)
	}
	if imp.Messages != 60 || imp.Turns != 30 {
		t.Errorf("import answered %+v, want 60 messages and 30 turns", imp)
	}
	res, _, err := s.turn(ctx, "imported", "next", "and now?")
	if err != nil || res.Status != "completed" {
		t.Fatalf("turn: %v %+v", err, res)
	}
	load := res.Steps[0].Details
	before, after := num(load["tokensBefore"]), num(load["tokensAfter"])
	if max := float64(workflows.DefaultSessionConfig().MaxTokens); before < 4000 || after > max || num(load["trimmedCount"]) == 0 {
		t.Errorf("load step %v: want the imported history counted (over 4,000 tokens) and trimmed to %v", load, max)
	}
	// The export writes the stored counts (this API reads no transcripts:
	// the store's file is the export's source).
	f, err := os.Open(filepath.Join(s.dataDir, "transcripts", workflows.DefaultTenant, "imported.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	msgs, err := convo.DecodeJSONL(f)
	// The running summary's record may be there too: it is written after
	// the answer, which the caller does not wait for.
	msgs = slices.DeleteFunc(msgs, func(m convo.Message) bool { return m.Role == convo.RoleSummary })
	if err != nil || len(msgs) != 62 {
		t.Fatalf("stored transcript: %v, %d messages", err, len(msgs))
	}
	for _, m := range msgs {
		if m.Tokens < 50 && m.ID < "m-060" || m.Tokens <= 0 {
			t.Errorf("exported %s with %d tokens", m.ID, m.Tokens)
		}
	}
}
