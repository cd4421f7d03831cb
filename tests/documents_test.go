package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/activities/ingest/ingesttest"
	"github.com/ctxflow/ctxflow/activities/vecstore"
	"github.com/ctxflow/ctxflow/api"
	"github.com/ctxflow/ctxflow/workflows"
)

// documentAnswer is the body of the documents routes.
type documentAnswer struct {
	DocumentID string `json:"documentId"`
	WorkflowID string `json:"workflowId"`
	Status     string `json:"status"`
	StatusURL  string `json:"statusUrl"`
	Chunks     int    `json:"chunks"`
	Batches    int    `json:"batches"`
	Done       int    `json:"done"`
	Stored     int    `json:"stored"`
	Bytes      int    `json:"bytes"`
	Error      string `json:"error"`
}

// TestDocumentsAPI uploads documents over HTTP to a `ctxflow worker`
// process (JSONL passages raw, a PDF as a multipart form), asks about them,
// re-uploads, refuses a bad file, and deletes a document.
func TestDocumentsAPI(t *testing.T) {
	s := startStack(t, stackOptions{extraEnv: []string{"CTXFLOW_MODEL_PROVIDER=offline"}})
	s.startWorker()
	// The worker reads uploads by the path the API gives: here both see
	// the same directory.
	docs := httptest.NewServer(api.New(s.client, api.Options{
		Defaults: workflows.DefaultSessionConfig(), UploadDir: filepath.Join(s.dataDir, "uploads"), Logger: quietLogger(),
	}).Handler())
	t.Cleanup(docs.Close)
	ctx := t.Context()

	send := func(method, path, contentType string, body []byte) (int, []byte) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, method, docs.URL+path, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		resp, err := httpClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, data
	}
	ingested := func(code int, data []byte) documentAnswer {
		t.Helper()
		var a documentAnswer
		if err := json.Unmarshal(data, &a); err != nil || code != http.StatusOK || a.Status != "completed" || a.Stored == 0 || a.Stored != a.Chunks {
			t.Fatalf("upload: %d %s (%v)\n%s", code, data, err, s.workerLogs())
		}
		return a
	}

	passages := `{"id": "flurb-1", "title": "Flurbania traffic code", "url": "https://example.org/flurbania", "text": "In Flurbania, drivers must stop for quokkas at every zebra crossing."}` + "\n" +
		`{"id": "flurb-2", "text": "弗卢巴尼亚的首都是格伦多，人口约两百万。"}` + "\n"
	faq := ingested(send(http.MethodPost, "/v1/documents?id=faq&wait=true", "application/x-ndjson", []byte(passages)))
	if faq.Chunks != 2 || faq.DocumentID != "faq" || faq.WorkflowID != "ingest/faq" {
		t.Errorf("faq = %+v", faq)
	}

	var form bytes.Buffer
	mw := multipart.NewWriter(&form)
	fw, err := mw.CreateFormFile("file", "manual.pdf")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = fw.Write(ingesttest.PDF([][]string{{"Quokka robot manual."}, {"Recharge the quokka robot battery every twelve hours."}}))
	_ = mw.Close()
	manual := ingested(send(http.MethodPost, "/v1/documents?wait=true", mw.FormDataContentType(), form.Bytes()))
	if manual.DocumentID != "manual.pdf" {
		t.Errorf("manual = %+v", manual)
	}

	// A session finds both, citing where they came from.
	for i, tc := range []struct{ q, source, idPrefix string }{
		{"Who must drivers stop for at zebra crossings in Flurbania?", "faq", "flurb-1#0-"},
		{"How often should the quokka robot battery be recharged?", "manual.pdf", "manual.pdf#0-"},
	} {
		res, _, err := s.turn(ctx, "docs", fmt.Sprintf("t%d", i), tc.q)
		if err != nil {
			t.Fatalf("%q: %v\n%s", tc.q, err, s.workerLogs())
		}
		if !slices.ContainsFunc(res.RetrievedDocs, func(d activities.Doc) bool {
			return d.Source == tc.source && strings.HasPrefix(d.ID, tc.idPrefix)
		}) {
			t.Errorf("%q: retrieved %+v, want %s from %s", tc.q, res.RetrievedDocs, tc.idPrefix, tc.source)
		}
	}

	// Status; re-uploading replaces (same chunks, not doubled).
	code, data := send(http.MethodGet, "/v1/documents/faq", "", nil)
	if got := ingested(code, data); got.Chunks != 2 || got.Done != got.Batches {
		t.Errorf("GET faq = %+v", got)
	}
	if again := ingested(send(http.MethodPost, "/v1/documents?id=faq&wait=true", "application/x-ndjson", []byte(passages))); again.Chunks != 2 {
		t.Errorf("re-upload = %+v", again)
	}

	// A bad line is refused before anything starts.
	code, data = send(http.MethodPost, "/v1/documents?id=bad", "application/x-ndjson", []byte(passages+`{"id": "flurb-3"}`+"\n"))
	if code != http.StatusBadRequest || !strings.Contains(string(data), `line 3: passage \"flurb-3\" has no \"text\"`) {
		t.Errorf("bad JSONL: %d %s", code, data)
	}
	if code, _ := send(http.MethodGet, "/v1/documents/bad", "", nil); code != http.StatusNotFound {
		t.Errorf("GET of a refused document: %d", code)
	}

	// Delete: gone from the status and from retrieval.
	if code, data := send(http.MethodDelete, "/v1/documents/faq", "", nil); code != http.StatusNoContent {
		t.Fatalf("DELETE faq: %d %s\n%s", code, data, s.workerLogs())
	}
	if code, data := send(http.MethodGet, "/v1/documents/faq", "", nil); code != http.StatusNotFound {
		t.Errorf("GET of a deleted document: %d %s", code, data)
	}
	res, _, err := s.turn(ctx, "docs", "t9", "Who must drivers stop for at zebra crossings in Flurbania?")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range res.RetrievedDocs {
		if d.Source == "faq" {
			t.Errorf("deleted document retrieved: %+v", d)
		}
	}
	// Deleted documents may be uploaded again.
	ingested(send(http.MethodPost, "/v1/documents?id=faq&wait=true", "application/x-ndjson", []byte(passages)))
}

// syntheticPassages is a JSONL corpus of n passages (about 1 KB each) for
// ingestion tests that need many batches.
func syntheticPassages(n int) []byte {
	var b bytes.Buffer
	topics := []string{"quokka robots", "Flurbania traffic", "battery care", "华为Mate60", "durable workflows"}
	for i := range n {
		topic := topics[i%len(topics)]
		text := strings.Repeat(fmt.Sprintf("Passage %d is about %s and fact number %d of the corpus. ", i, topic, i*7), 12)
		fmt.Fprintf(&b, `{"id": "p%05d", "title": "%s %d", "text": %q}`+"\n", i, topic, i, text)
	}
	return b.Bytes()
}

// TestIngestSurvivesWorkerKill kills the worker three times in the middle
// of a large ingestion (SIGKILL, so possibly mid-write): every restarted
// worker opens the store, the workflow resumes at its batch, and the store
// ends with every chunk exactly once.
func TestIngestSurvivesWorkerKill(t *testing.T) {
	s := startStack(t, stackOptions{extraEnv: []string{"CTXFLOW_MODEL_PROVIDER=offline"}})
	s.startWorker()
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	path := filepath.Join(s.dataDir, "corpus.jsonl")
	if err := os.WriteFile(path, syntheticPassages(2500), 0o600); err != nil {
		t.Fatal(err)
	}
	run, err := s.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: workflows.IngestWorkflowID("corpus"), TaskQueue: workflows.TaskQueue,
	}, workflows.IngestWorkflowName, workflows.IngestInput{DocumentID: "corpus", Path: path, BatchSize: 16})
	if err != nil {
		t.Fatal(err)
	}
	progress := func() workflows.IngestProgress {
		var p workflows.IngestProgress
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if v, err := s.client.QueryWorkflow(qctx, run.GetID(), run.GetRunID(), workflows.QueryProgress); err == nil {
			_ = v.Get(&p)
		}
		return p
	}
	var kills []workflows.IngestProgress
	for _, at := range []int{10, 40, 80} {
		deadline := time.Now().Add(time.Minute)
		p := progress()
		for ; p.Done < at; p = progress() {
			if time.Now().After(deadline) {
				t.Fatalf("no progress to batch %d: %+v\n%s", at, p, s.workerLogs())
			}
			time.Sleep(20 * time.Millisecond)
		}
		s.killWorker()
		kills = append(kills, p)
		s.startWorker()
	}
	start := time.Now()
	var res workflows.IngestProgress
	if err := run.Get(ctx, &res); err != nil {
		t.Fatalf("ingestion: %v\n%s", err, s.workerLogs())
	}
	t.Logf("killed at batches %d, %d, %d of %d; finished %s after the last kill: %+v",
		kills[0].Done, kills[1].Done, kills[2].Done, kills[0].Batches, time.Since(start).Round(time.Millisecond), res)
	if kills[2].Done >= kills[2].Batches || res.Done != res.Batches || res.Stored != res.Chunks || res.Chunks < 2500 {
		t.Fatalf("killed at %+v, result %+v", kills, res)
	}
	s.killWorker() // release the store
	store, err := vecstore.Open(vecstore.Options{Dir: filepath.Join(s.dataDir, "vectors"), Collection: "rag_documents"})
	if err != nil {
		t.Fatalf("the store does not open after the kills: %v", err)
	}
	defer store.Close()
	info, err := store.Info(ctx)
	if err != nil || info.Count != res.Chunks {
		t.Fatalf("store holds %d chunks (%v), want %d", info.Count, err, res.Chunks)
	}
}
