package tests

import (
	"bytes"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/activities/vecstore"
	"github.com/ctxflow/ctxflow/internal/pgtest"
	"github.com/ctxflow/ctxflow/workflows"
)

// TestEraseLeavesNoTrace plants unique markers in a session (its questions,
// so its transcript, running summary, search attributes and histories; a
// corrective-RAG child and an agent task child), in a document of the same
// tenant, in another session of that tenant and in another tenant; erases
// the session (DELETE ?erase=true), then the tenant (`ctxflow erase
// --tenant`); and checks after each that no route, no Temporal execution,
// history or visibility row, no store and no byte of any file in the data
// dir (the embedded Temporal server's SQLite database and its WAL, the
// transcripts, the vector store, the uploads, the worker's log) holds what
// was erased, while everything else is still there.
//
// With the PostgreSQL transcript store (subtest postgres) the database is
// searched too, every row of every table as text (a dump's content): it
// holds no row of what was erased. (Its files may keep the bytes until
// VACUUM: docs/operations.md.)
func TestEraseLeavesNoTrace(t *testing.T) {
	t.Run("file", func(t *testing.T) { testErase(t, "") })
	t.Run("postgres", func(t *testing.T) { testErase(t, pgtest.Database(t)) })
}

func testErase(t *testing.T, databaseURL string) {
	key := func(k string) string { sum := sha256.Sum256([]byte(k)); return hex.EncodeToString(sum[:]) }
	env := []string{"CTXFLOW_MODEL_PROVIDER=offline", "CTXFLOW_LOG_LEVEL=info"}
	if databaseURL != "" {
		env = append(env, "CTXFLOW_TRANSCRIPT_STORE=postgres", "DATABASE_URL="+databaseURL)
	}
	s := startStack(t, stackOptions{extraEnv: env, keys: map[string]string{key("cfk_e"): "era", key("cfk_k"): "keep"}})
	s.startWorker()
	// holding is where a marker is: files of the data dir, and rows of
	// the database.
	holding := func(marker string) []string {
		return append(s.filesHolding(t, marker), rowsHolding(t, databaseURL, marker)...)
	}
	ctx := t.Context()
	era, keep := apiClient{base: s.base, key: "cfk_e"}, apiClient{base: s.base, key: "cfk_k"}
	u := strconv.FormatInt(time.Now().UnixNano(), 36)
	var (
		inSession = "zorblax" + u    // the erased session's questions
		inDoc     = "quibbledoc" + u // the erased tenant's document
		inOther   = "otherses" + u   // the erased tenant's other session
		inKeep    = "keeptenant" + u // the other tenant's session and document
	)

	// era's document, and a session that retrieves it, chats, is
	// summarised and runs a task.
	if code := era.upload(t, "notes", "# Quokka robots\n\nQuokka robots recharge their batteries every 12 hours at the docking bay. Serial "+inDoc+".\n"); code != http.StatusOK {
		t.Fatalf("era upload: %d", code)
	}
	if got := era.retrieved(t, "s1", "q1", "How often do quokka robots recharge their batteries?"); !slices.Contains(got, "notes") {
		t.Fatalf("the qa turn retrieved %v, want notes", got)
	}
	for i, q := range []string{"My code name is " + inSession + ", remember it.", "What is the weather like where " + inSession + " lives?", "Thanks " + inSession + "!"} {
		if res, _, err := era.turn(ctx, "s1", fmt.Sprintf("c%d", i), q); err != nil || res.Status != workflows.TurnCompleted {
			t.Fatalf("turn %d: %v %+v", i, err, res)
		}
	}
	if code, err := era.do(ctx, http.MethodPost, "/v1/sessions/s1/compress", nil, nil); code != http.StatusAccepted {
		t.Fatalf("compress: %d %v", code, err)
	}
	var st workflows.SessionState
	for deadline := time.Now().Add(time.Minute); st.Summary == nil; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no summary after compress: %+v", st)
		}
		if _, err := era.do(ctx, http.MethodGet, "/v1/sessions/s1", nil, &st); err != nil {
			t.Fatal(err)
		}
	}
	var task taskReply
	if code, err := era.do(ctx, http.MethodPost, "/v1/sessions/s1/tasks?wait=true",
		map[string]any{"goal": "How many orders did " + inSession + " place?", "taskId": "k1", "config": map[string]any{"maxSteps": 2}}, &task); code != http.StatusOK {
		t.Fatalf("task: %d %v", code, err)
	}
	if res, _, err := era.turn(ctx, "s2", "o1", "Hello from "+inOther); err != nil || res.Status != workflows.TurnCompleted {
		t.Fatalf("era s2: %v %+v", err, res)
	}
	// The other tenant: a session of the same id and a document of the same id.
	if res, _, err := keep.turn(ctx, "s1", "k1", "Hello from "+inKeep); err != nil || res.Status != workflows.TurnCompleted {
		t.Fatalf("keep s1: %v %+v", err, res)
	}
	if code := keep.upload(t, "notes", "# Keep notes\n\nThe "+inKeep+" widget is blue.\n"); code != http.StatusOK {
		t.Fatalf("keep upload: %d", code)
	}
	runs := s.runs(t, "WorkflowId = 'session/era/s1' OR WorkflowId STARTS_WITH 'session/era/s1/'")
	if len(runs) < 3 { // the session, its corrective-RAG child, its task
		t.Fatalf("session/era/s1 has %d runs before the erase, want its children too: %v", len(runs), runs)
	}
	for _, m := range []string{inSession, inDoc, inOther, inKeep} {
		if files := holding(m); len(files) == 0 {
			t.Fatalf("no file holds %q before the erase: the search would prove nothing", m)
		}
	}

	// 1. Erase the session.
	start := time.Now()
	if code, err := era.do(ctx, http.MethodDelete, "/v1/sessions/s1?erase=true", nil, nil); code != http.StatusNoContent {
		t.Fatalf("erase s1: %d %v", code, err)
	}
	t.Logf("session erased in %s (%d runs)", time.Since(start).Round(time.Millisecond), len(runs))
	for _, path := range []string{"/v1/sessions/s1", "/v1/sessions/s1/turns/q1", "/v1/sessions/s1/steps", "/v1/sessions/s1/tasks/k1"} {
		if code, _ := era.do(ctx, http.MethodGet, path, nil, nil); code != http.StatusNotFound {
			t.Errorf("GET %s after the erase = %d, want 404", path, code)
		}
	}
	if code, _ := era.do(ctx, http.MethodDelete, "/v1/sessions/s1?erase=true", nil, nil); code != http.StatusNotFound {
		t.Errorf("erasing it again = %d, want 404", code)
	}
	if code, _ := era.do(ctx, http.MethodDelete, "/v1/sessions/s1?erase=maybe", nil, nil); code != http.StatusBadRequest {
		t.Errorf("?erase=maybe = %d, want 400", code)
	}
	s.gone(t, "session/era/s1", "WorkflowId = 'session/era/s1' OR WorkflowId STARTS_WITH 'session/era/s1/'")
	s.noneListed(t, "WorkflowId STARTS_WITH 'erase/'") // the erase's own run
	if got := s.listed(t, era); !slices.Equal(got, []string{"s2"}) {
		t.Errorf("era lists %v after the erase, want [s2]", got)
	}
	if files := holding(inSession); len(files) > 0 {
		t.Errorf("after the session's erase, files still hold its marker: %v", files)
	}
	for _, m := range []string{inDoc, inOther, inKeep} {
		if files := holding(m); len(files) == 0 {
			t.Errorf("erasing era/s1 removed %q, which is not its", m)
		}
	}
	if code, _ := keep.do(ctx, http.MethodGet, "/v1/sessions/s1", nil, nil); code != http.StatusOK {
		t.Errorf("keep's s1 after era's was erased: %d", code)
	}

	// 2. Erase the tenant, with the command.
	cmd := exec.CommandContext(ctx, binary, "erase", "--tenant", "era")
	cmd.Env = append(os.Environ(), s.env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("ctxflow erase: %v\n%s", err, out)
	}
	t.Logf("ctxflow erase --tenant era: %s", bytes.TrimSpace(out))
	if !strings.Contains(string(out), "erased tenant era: 1 sessions") || !strings.Contains(string(out), "1 documents") || strings.Contains(string(out), " 0 chunks") || strings.Contains(string(out), " 0 uploads") {
		t.Errorf("ctxflow erase printed %q, want 1 session, 1 document, its chunks and its upload", out)
	}
	for _, path := range []string{"/v1/sessions/s2", "/v1/documents/notes"} {
		if code, _ := era.do(ctx, http.MethodGet, path, nil, nil); code != http.StatusNotFound {
			t.Errorf("GET %s after the tenant's erase = %d, want 404", path, code)
		}
	}
	if got := s.listed(t, era); len(got) != 0 {
		t.Errorf("era lists %v after its erase", got)
	}
	s.gone(t, "session/era/s2", "WorkflowId STARTS_WITH 'session/era/'")
	s.gone(t, "ingest/era/notes", "WorkflowId STARTS_WITH 'ingest/era/'")
	s.noneListed(t, "WorkflowId STARTS_WITH 'erase/'")
	s.noneListed(t, "CtxTenant = 'era'") // no search attribute of the tenant's is left
	for _, m := range []string{inSession, inDoc, inOther} {
		if files := holding(m); len(files) > 0 {
			t.Errorf("after the tenant's erase, files still hold %q: %v", m, files)
		}
	}
	if files := holding(inKeep); len(files) == 0 {
		t.Errorf("erasing era removed keep's data")
	}
	var doc map[string]any
	if _, err := keep.do(ctx, http.MethodGet, "/v1/documents/notes", nil, &doc); err != nil || doc["status"] != "completed" {
		t.Errorf("keep's document after era's erase: %v %v", doc, err)
	}
	if got := keep.retrieved(t, "s9", "k9", "What colour is the "+inKeep+" widget?"); !slices.Contains(got, "notes") {
		t.Errorf("keep retrieves %v after era's erase, want its notes", got)
	}
	for _, dir := range []string{"uploads/era", "transcripts/era"} {
		if _, err := os.Stat(filepath.Join(s.dataDir, dir)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s is still there (%v)", dir, err)
		}
	}
	if got := era.retrieved(t, "new", "n1", "How often do quokka robots recharge their batteries?"); len(got) != 0 {
		t.Errorf("era retrieves %v after its erase", got)
	}

	// The stores themselves: the vector store has no chunk of era's, the
	// audit lines are in the worker's log (counts, never content).
	s.stopWorker()
	vs, err := vecstore.Open(vecstore.Options{Dir: filepath.Join(s.dataDir, "vectors"), Collection: "rag_documents"})
	if err != nil {
		t.Fatal(err)
	}
	defer vs.Close()
	for tenant, want := range map[string]bool{"era": false, "keep": true} {
		hits, err := vs.Search(ctx, activities.SearchRequest{Text: "quokka robots batteries widget blue " + inDoc + " " + inKeep, Mode: activities.SearchKeyword, TopK: 50, Filter: map[string]string{activities.MetaTenant: tenant}})
		if err != nil || (len(hits) > 0) != want {
			t.Errorf("vector store: %d chunks of tenant %s (%v), want some: %v", len(hits), tenant, err, want)
		}
	}
	var audit []string
	for _, f := range s.filesHolding(t, "audit=erase") {
		b, _ := os.ReadFile(f)
		for line := range strings.Lines(string(b)) {
			if strings.Contains(line, "audit=erase") {
				audit = append(audit, strings.TrimSpace(line))
			}
		}
	}
	if len(audit) != 3 || !strings.Contains(audit[0], "scope=session") || !strings.Contains(audit[0], "session=s1") || !strings.Contains(audit[0], "actor=api") ||
		!strings.Contains(audit[1], "sessions=0 messages=0 executions=0") || // the second erase found nothing
		!strings.Contains(audit[2], "scope=tenant") || !strings.Contains(audit[2], "actor=cli") {
		t.Errorf("audit lines:\n%s\nwant one for each erase: the session's (by the API, twice) and the tenant's (by the command)", strings.Join(audit, "\n"))
	}
	for _, l := range audit {
		t.Logf("audit: %s", l)
	}
}

// runs lists the workflow runs a visibility query matches.
func (s *stack) runs(t *testing.T, query string) []string {
	t.Helper()
	resp, err := s.client.ListWorkflow(t.Context(), &workflowservice.ListWorkflowExecutionsRequest{Query: query, PageSize: 1000})
	if err != nil {
		t.Fatalf("list %s: %v", query, err)
	}
	var out []string
	for _, e := range resp.GetExecutions() {
		out = append(out, e.GetExecution().GetWorkflowId())
	}
	return out
}

// noneListed waits (a little: visibility is asynchronous) until the query
// lists no run.
func (s *stack) noneListed(t *testing.T, query string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		got := s.runs(t, query)
		if len(got) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("%s still lists %v", query, got)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// gone checks that Temporal no longer knows a workflow id (its execution
// and history are deleted) and that the query lists nothing.
func (s *stack) gone(t *testing.T, wid, query string) {
	t.Helper()
	_, err := s.client.DescribeWorkflowExecution(t.Context(), wid, "")
	var notFound *serviceerror.NotFound
	if !errors.As(err, &notFound) {
		t.Errorf("describe %s after the erase: %v, want not found", wid, err)
	}
	it := s.client.GetWorkflowHistory(t.Context(), wid, "", false, 0)
	if it.HasNext() {
		if _, err := it.Next(); !errors.As(err, &notFound) {
			t.Errorf("history of %s after the erase: %v, want not found", wid, err)
		}
	}
	s.noneListed(t, query)
}

// listed is the ids of the sessions GET /v1/sessions lists for a client.
func (s *stack) listed(t *testing.T, c apiClient) []string {
	t.Helper()
	var list struct {
		Sessions []struct{ SessionID string } `json:"sessions"`
	}
	if _, err := c.do(t.Context(), http.MethodGet, "/v1/sessions", nil, &list); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range list.Sessions {
		ids = append(ids, r.SessionID)
	}
	slices.Sort(ids)
	return ids
}

// filesHolding is every file under the data dir whose bytes hold marker.
func (s *stack) filesHolding(t *testing.T, marker string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(s.dataDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed while we walked
			}
			return err
		}
		if d.IsDir() {
			return nil
		}
		// Read by another process: a descriptor of a SQLite file opened
		// and closed in this one, the embedded server's, would drop the
		// server's POSIX locks on it, and a worker's connection could then
		// delete the write-ahead log under the server.
		b, err := exec.Command("cat", path).Output()
		if _, statErr := os.Stat(path); errors.Is(statErr, fs.ErrNotExist) {
			return nil // removed while we read
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", path, err)
		}
		if bytes.Contains(b, []byte(marker)) {
			out = append(out, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRetentionSweep: with CTXFLOW_RETENTION the worker schedules the
// sweep; a sweep (here triggered at once) erases the sessions idle longer
// than their tenant's period, with their transcripts and runs, and no
// other: not a younger session, not another tenant's.
func TestRetentionSweep(t *testing.T) {
	s := startStack(t, stackOptions{extraEnv: []string{"CTXFLOW_MODEL_PROVIDER=offline", "CTXFLOW_LOG_LEVEL=info", "CTXFLOW_RETENTION=old=5s;*=0"}})
	s.startWorker()
	ctx := t.Context()
	old, other := apiClient{base: s.base, tenant: "old"}, apiClient{base: s.base, tenant: "other"}
	for _, c := range []apiClient{old, other} {
		if res, _, err := c.turn(ctx, "idle", "t1", "Hello, I will be quiet now."); err != nil || res.Status != workflows.TurnCompleted {
			t.Fatalf("%s: %v %+v", c.tenant, err, res)
		}
	}
	time.Sleep(6 * time.Second)
	if res, _, err := old.turn(ctx, "busy", "t1", "Hello, I am still here."); err != nil || res.Status != workflows.TurnCompleted {
		t.Fatalf("old/busy: %v %+v", err, res)
	}
	// The schedule the worker created; a sweep now instead of in an hour.
	h := s.client.ScheduleClient().GetHandle(ctx, workflows.RetentionScheduleID)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if _, err := h.Describe(ctx); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("no retention schedule: %v", err)
		}
	}
	if err := h.Trigger(ctx, client.ScheduleTriggerOptions{}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		if runs := s.runs(t, "WorkflowType = '"+workflows.RetentionWorkflowName+"' AND ExecutionStatus = 'Completed'"); len(runs) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sweep did not complete: %v", s.runs(t, "WorkflowType = '"+workflows.RetentionWorkflowName+"'"))
		}
	}
	s.gone(t, "session/old/idle", "WorkflowId = 'session/old/idle' OR WorkflowId STARTS_WITH 'session/old/idle/'")
	if _, err := os.Stat(filepath.Join(s.dataDir, "transcripts", "old", "idle.jsonl")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("old/idle's transcript after the sweep: %v", err)
	}
	for _, c := range []struct {
		api apiClient
		id  string
	}{{old, "busy"}, {other, "idle"}} {
		if code, err := c.api.do(ctx, http.MethodGet, "/v1/sessions/"+c.id, nil, nil); code != http.StatusOK {
			t.Errorf("%s/%s after the sweep: %d %v", c.api.tenant, c.id, code, err)
		}
	}
	if lines := s.filesHolding(t, "actor=retention"); len(lines) == 0 {
		t.Error("no audit line of the sweep")
	}
}

// rowsHolding is every row, as text, of every table of the database at
// url ("": none) that holds marker.
func rowsHolding(t *testing.T, url, marker string) []string {
	t.Helper()
	if url == "" {
		return nil
	}
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.QueryContext(t.Context(), "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'")
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, name)
	}
	rows.Close()
	if len(tables) == 0 {
		t.Fatal("the database has no tables: the search would prove nothing")
	}
	var out []string
	for _, table := range tables {
		// bytea as escaped text would hide the marker: decode it too.
		r, err := db.QueryContext(t.Context(), fmt.Sprintf(`SELECT t::text FROM %q t`, table))
		if err != nil {
			t.Fatal(err)
		}
		for r.Next() {
			var row string
			if err := r.Scan(&row); err != nil {
				t.Fatal(err)
			}
			if strings.Contains(row, marker) || strings.Contains(row, hex.EncodeToString([]byte(marker))) {
				out = append(out, table+": "+convoClip(row))
			}
		}
		r.Close()
	}
	return out
}

func convoClip(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}
