package api_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/api"
	"github.com/ctxflow/ctxflow/workflows"
)

func (f *fakeClient) DescribeWorkflowExecution(ctx context.Context, workflowID, runID string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	if !f.record("DescribeWorkflowExecution", f.DescribeWorkflowExecutionFn) {
		return nil, errUnexpected
	}
	return f.DescribeWorkflowExecutionFn(ctx, workflowID, runID)
}

func (f *fakeClient) GetWorkflow(ctx context.Context, workflowID, runID string) client.WorkflowRun {
	if !f.record("GetWorkflow", f.GetWorkflowFn) {
		return run{get: func(context.Context, any) error { return errUnexpected }}
	}
	return f.GetWorkflowFn(ctx, workflowID, runID)
}

// run is a workflow run whose result comes from get.
type run struct {
	client.WorkflowRun
	id, runID string
	get       func(ctx context.Context, ptr any) error
}

func (r run) GetID() string                          { return r.id }
func (r run) GetRunID() string                       { return r.runID }
func (r run) Get(ctx context.Context, ptr any) error { return r.get(ctx, ptr) }

// result is a run's successful result.
func result(t *testing.T, v any) func(context.Context, any) error {
	return func(_ context.Context, ptr any) error {
		if ptr == nil {
			return nil
		}
		return encode(t, v).Get(ptr)
	}
}

// blocked is a run that does not end before the caller gives up.
func blocked(ctx context.Context, _ any) error {
	<-ctx.Done()
	return ctx.Err()
}

// failedWith is a run that failed as a workflow does: the activity's
// application error wrapped by the workflow's.
func failedWith(msg, typ string) func(context.Context, any) error {
	return func(context.Context, any) error {
		cause := temporal.NewNonRetryableApplicationError(msg, typ, nil)
		return temporal.NewApplicationErrorWithCause("prepare doc: activity error", "wrapError", cause)
	}
}

func docOptions(t *testing.T) api.Options {
	opts := options()
	opts.UploadDir = filepath.Join(t.TempDir(), "uploads")
	opts.IngestWaitTimeout = 200 * time.Millisecond
	return opts
}

// started records the ingestion workflows started by uploads.
type started struct {
	opts     client.StartWorkflowOptions
	workflow any
	in       workflows.IngestInput
}

func recordStarts(t *testing.T, f *fakeClient, get func(context.Context, any) error) *[]started {
	var got []started
	f.ExecuteWorkflowFn = func(ctx context.Context, opts client.StartWorkflowOptions, workflow any, args ...any) (client.WorkflowRun, error) {
		if len(args) != 1 {
			t.Fatalf("workflow args = %v", args)
		}
		in, _ := args[0].(workflows.IngestInput)
		got = append(got, started{opts, workflow, in})
		return run{id: opts.ID, runID: "run-1", get: get}, nil
	}
	return &got
}

// multipartBody builds a multipart form; each field is name, file name,
// content type (may be empty) and body.
func multipartBody(t *testing.T, fields ...[4]string) (string, string) {
	t.Helper()
	var b bytes.Buffer
	w := multipart.NewWriter(&b)
	for _, f := range fields {
		h := textproto.MIMEHeader{}
		cd := fmt.Sprintf(`form-data; name=%q`, f[0])
		if f[1] != "" {
			cd += fmt.Sprintf(`; filename=%q`, f[1])
		}
		h.Set("Content-Disposition", cd)
		if f[2] != "" {
			h.Set("Content-Type", f[2])
		}
		pw, err := w.CreatePart(h)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(pw, f[3]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.String(), w.FormDataContentType()
}

// send posts body with the headers given as pairs.
func send(h http.Handler, method, path, body string, header ...string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

type docAnswer struct {
	DocumentID string `json:"documentId"`
	WorkflowID string `json:"workflowId"`
	Status     string `json:"status"`
	StatusURL  string `json:"statusUrl"`
	SHA256     string `json:"sha256"`
	Chunks     int    `json:"chunks"`
	Batches    int    `json:"batches"`
	Done       int    `json:"done"`
	Stored     int    `json:"stored"`
	Bytes      int    `json:"bytes"`
	Error      string `json:"error"`
}

func sha(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func TestPostDocument(t *testing.T) {
	const md = "# Pricing\n\nThe Mate60 costs 5999 yuan.\n"
	const jsonl = `{"id":"p1","text":"Temporal keeps history.","title":"Temporal"}` + "\n" + `{"id":"p2","text":"华为Mate60的价格是5999元。"}` + "\n"
	pdfBody := "%PDF-1.4\n(the workers parse it)\n%%EOF\n"
	form := func(fields ...[4]string) (string, []string) {
		body, ct := multipartBody(t, fields...)
		return body, []string{"Content-Type", ct}
	}
	type tc struct {
		name, query, body string
		header            []string
		doc, source, ext  string
		content           string // the stored bytes (default body)
	}
	var cases []tc
	cases = append(cases,
		tc{name: "markdown with an id", query: "?id=pricing", body: md, header: []string{"Content-Type", "text/markdown; charset=utf-8"}, doc: "pricing", source: "pricing", ext: ".md"},
		tc{name: "text without a name", body: "plain words", header: []string{"Content-Type", "text/plain"}, doc: "doc-" + sha("plain words")[:16], source: "doc-" + sha("plain words")[:16], ext: ".txt"},
		tc{name: "html named by Content-Disposition", body: "<p>hi</p>", header: []string{"Content-Type", "text/html", "Content-Disposition", `attachment; filename="C:\\docs\\page.html"`}, doc: "page.html", source: "page.html", ext: ".html"},
		tc{name: "jsonl", query: "?id=faq&wait=false", body: jsonl, header: []string{"Content-Type", "application/x-ndjson"}, doc: "faq", source: "faq", ext: ".jsonl"},
		tc{name: "jsonl by its other name", query: "?id=faq", body: jsonl, header: []string{"Content-Type", "application/jsonl"}, doc: "faq", source: "faq", ext: ".jsonl"},
		tc{name: "raw pdf", query: "?id=manual", body: pdfBody, header: []string{"Content-Type", "application/pdf"}, doc: "manual", source: "manual", ext: ".pdf"},
	)
	body, hdr := form([4]string{"file", "guide.md", "application/octet-stream", md})
	cases = append(cases, tc{name: "multipart named file", body: body, header: hdr, doc: "guide.md", source: "guide.md", ext: ".md", content: md})
	body, hdr = form([4]string{"file", "报告 2024.PDF", "", pdfBody})
	h := sha256.Sum256([]byte("报告 2024.PDF"))
	cases = append(cases, tc{name: "multipart name made safe", body: body, header: hdr, doc: "2024.PDF-" + hex.EncodeToString(h[:4]), source: "报告 2024.PDF", ext: ".pdf", content: pdfBody})
	body, hdr = form([4]string{"file", "passages.ndjson", "", jsonl})
	cases = append(cases, tc{name: "multipart ndjson", query: "?id=corpus", body: body, header: hdr, doc: "corpus", source: "passages.ndjson", ext: ".jsonl", content: jsonl})
	body, hdr = form([4]string{"file", "notes", "text/markdown", md})
	cases = append(cases, tc{name: "multipart typed by its part", body: body, header: hdr, doc: "notes", source: "notes", ext: ".md", content: md})
	body, hdr = form([4]string{"file", "", "text/plain", "no name"})
	cases = append(cases, tc{name: "multipart without a file name", body: body, header: hdr, doc: "doc-" + sha("no name")[:16], source: "doc-" + sha("no name")[:16], ext: ".txt", content: "no name"})

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t)
			got := recordStarts(t, f, blocked)
			opts := docOptions(t)
			w := send(api.New(f, opts).Handler(), http.MethodPost, "/v1/documents"+tc.query, tc.body, tc.header...)
			if w.Code != http.StatusAccepted {
				t.Fatalf("status = %d, want 202; body %s", w.Code, w.Body)
			}
			content := tc.content
			if content == "" {
				content = tc.body
			}
			var a docAnswer
			decode(t, w, &a)
			want := docAnswer{DocumentID: tc.doc, WorkflowID: "ingest/" + tc.doc, Status: "running", StatusURL: "/v1/documents/" + tc.doc, SHA256: sha(content), Bytes: len(content)}
			if a != want {
				t.Errorf("answer = %+v\nwant     %+v", a, want)
			}
			if len(*got) != 1 {
				t.Fatalf("%d workflows started", len(*got))
			}
			s := (*got)[0]
			if s.opts.ID != "ingest/"+tc.doc || s.opts.TaskQueue != workflows.TaskQueue || s.workflow != workflows.IngestWorkflowName {
				t.Errorf("started %v as %q on %q", s.workflow, s.opts.ID, s.opts.TaskQueue)
			}
			if !s.opts.WorkflowExecutionErrorWhenAlreadyStarted {
				t.Error("an upload started without an error for a running workflow: the SDK would hand back the running one")
			}
			if s.opts.WorkflowIDConflictPolicy != enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL || s.opts.WorkflowIDReusePolicy != enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE {
				t.Errorf("policies %v, %v: want FAIL while one runs, ALLOW_DUPLICATE after", s.opts.WorkflowIDConflictPolicy, s.opts.WorkflowIDReusePolicy)
			}
			if !strings.Contains(s.opts.StaticSummary, tc.source) {
				t.Errorf("summary %q does not name %q", s.opts.StaticSummary, tc.source)
			}
			wantPath := filepath.Join(opts.UploadDir, "default", sha(content)+tc.ext) // the tenant's folder
			if s.in.DocumentID != tc.doc || s.in.Path != wantPath || s.in.Source != tc.source || !filepath.IsAbs(s.in.Path) {
				t.Errorf("input = %+v, want document %q, path %q, source %q", s.in, tc.doc, wantPath, tc.source)
			}
			if b, err := os.ReadFile(wantPath); err != nil || string(b) != content {
				t.Errorf("stored upload: %q, %v", b, err)
			}
			entries, _ := os.ReadDir(filepath.Dir(wantPath))
			if len(entries) != 1 {
				t.Errorf("upload directory holds %d files, want 1 (no temporary leftovers)", len(entries))
			}
		})
	}
}

func TestPostDocumentStoresContentOnce(t *testing.T) {
	f := newFake(t)
	got := recordStarts(t, f, blocked)
	opts := docOptions(t)
	h := api.New(f, opts).Handler()
	for _, id := range []string{"a", "b", "a"} {
		if w := send(h, http.MethodPost, "/v1/documents?id="+id, "same words", "Content-Type", "text/plain"); w.Code != http.StatusAccepted {
			t.Fatalf("status %d: %s", w.Code, w.Body)
		}
	}
	entries, _ := os.ReadDir(filepath.Join(opts.UploadDir, "default"))
	if len(entries) != 1 || len(*got) != 3 || (*got)[0].in.Path != (*got)[1].in.Path {
		t.Errorf("%d files for 3 uploads of the same bytes, starts %+v", len(entries), *got)
	}
}

func TestPostDocumentValidation(t *testing.T) {
	formBody := func(fields ...[4]string) (string, []string) {
		body, ct := multipartBody(t, fields...)
		return body, []string{"Content-Type", ct}
	}
	type tc struct {
		name, query, body string
		header            []string
		want              string
	}
	text := []string{"Content-Type", "text/plain"}
	cases := []tc{
		{name: "no Content-Type", body: "x", want: "Content-Type is required"},
		{name: "json is not a document", body: `{"a":1}`, header: []string{"Content-Type", "application/json"}, want: `unsupported Content-Type "application/json"`},
		{name: "octet stream", body: "x", header: []string{"Content-Type", "application/octet-stream"}, want: "unsupported Content-Type"},
		{name: "bad Content-Type", body: "x", header: []string{"Content-Type", "text/"}, want: "Content-Type"},
		{name: "latin-1", body: "caf\xe9", header: []string{"Content-Type", "text/plain; charset=iso-8859-1"}, want: "UTF-8"},
		{name: "not UTF-8", body: "caf\xe9", header: text, want: "not valid UTF-8"},
		{name: "html not UTF-8", body: "<p>caf\xe9</p>", header: []string{"Content-Type", "text/html"}, want: "not valid UTF-8"},
		{name: "empty", body: "", header: text, want: "empty"},
		{name: "blank", body: " \n\t ", header: text, want: "empty"},
		{name: "bad jsonl line", body: `{"id":"a","text":"x"}` + "\n" + `{"id":"b"}`, header: []string{"Content-Type", "application/x-ndjson"}, want: `line 2: passage "b" has no "text"`},
		{name: "jsonl not json", body: "id,text\na,b", header: []string{"Content-Type", "application/x-ndjson"}, want: "line 1"},
		{name: "not a pdf", body: "hello", header: []string{"Content-Type", "application/pdf"}, want: "not a PDF"},
		{name: "bad id", query: "?id=../etc", body: "x", header: text, want: "documentId"},
		{name: "empty id", query: "?id=", body: "x", header: text, want: "documentId"},
		{name: "id too long", query: "?id=" + strings.Repeat("d", 129), body: "x", header: text, want: "documentId"},
		{name: "unknown query parameter", query: "?name=x", body: "x", header: text, want: `unknown query parameter "name"`},
		{name: "bad wait", query: "?wait=soon", body: "x", header: text, want: "wait"},
		{name: "bad Content-Disposition", body: "x", header: []string{"Content-Type", "text/plain", "Content-Disposition", "attachment; filename"}, want: "Content-Disposition"},
		{name: "control characters in the file name", body: "x", header: []string{"Content-Type", "text/plain", "Content-Disposition", "attachment; filename=\"a\x01b.txt\""}, want: "control characters"},
	}
	body, hdr := formBody([4]string{"document", "a.md", "", "x"})
	cases = append(cases, tc{name: "multipart wrong field", body: body, header: hdr, want: `unexpected form field "document"`})
	body, hdr = formBody([4]string{"file", "a.md", "", "x"}, [4]string{"id", "", "", "doc"})
	cases = append(cases, tc{name: "multipart extra field", body: body, header: hdr, want: `unexpected form field "id"`})
	body, hdr = formBody([4]string{"file", "a.md", "", "x"}, [4]string{"file", "b.md", "", "y"})
	cases = append(cases, tc{name: "multipart two files", body: body, header: hdr, want: "more than one"})
	body, hdr = formBody()
	cases = append(cases, tc{name: "multipart no file", body: body, header: hdr, want: `no field "file"`})
	body, hdr = formBody([4]string{"file", "slides.pptx", "application/vnd.ms-powerpoint", "x"})
	cases = append(cases, tc{name: "multipart unsupported file", body: body, header: hdr, want: `unsupported document "slides.pptx"`})
	body, hdr = formBody([4]string{"file", "a.jsonl", "", `{"id":"a","text":"x"}` + "\n" + `{"id":"a","text":"y"}`})
	cases = append(cases, tc{name: "multipart duplicate passage", body: body, header: hdr, want: `line 2: passage id "a" repeats line 1`})
	cases = append(cases, tc{name: "multipart without a boundary", body: "x", header: []string{"Content-Type", "multipart/form-data"}, want: "multipart"})
	cases = append(cases, tc{name: "multipart broken", body: "--xyz\r\nnot a part", header: []string{"Content-Type", "multipart/form-data; boundary=xyz"}, want: "request body"})

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t)
			opts := docOptions(t)
			b := wantError(t, send(api.New(f, opts).Handler(), http.MethodPost, "/v1/documents"+tc.query, tc.body, tc.header...), http.StatusBadRequest, "invalid_argument")
			if !strings.Contains(b.Error.Message, tc.want) {
				t.Errorf("message %q does not mention %q", b.Error.Message, tc.want)
			}
			if len(f.called()) != 0 {
				t.Errorf("Temporal called: %v", f.called())
			}
			if entries, _ := os.ReadDir(opts.UploadDir); len(entries) != 0 {
				t.Errorf("a refused upload was stored: %v", entries)
			}
		})
	}
}

func TestPostDocumentBodyLimit(t *testing.T) {
	f := newFake(t)
	recordStarts(t, f, blocked)
	opts := docOptions(t)
	opts.MaxBodyBytes = 2048
	opts.MaxUploadBytes = 8192
	h := api.New(f, opts).Handler()
	big := strings.Repeat("a", 9000)

	// Uploads get their own, larger limit.
	if w := send(h, http.MethodPost, "/v1/documents", strings.Repeat("a", 5000), "Content-Type", "text/plain"); w.Code != http.StatusAccepted {
		t.Errorf("5000-byte upload: %d %s", w.Code, w.Body)
	}
	b := wantError(t, send(h, http.MethodPost, "/v1/documents", big, "Content-Type", "text/plain"), http.StatusRequestEntityTooLarge, "too_large")
	if !strings.Contains(b.Error.Message, "8192") {
		t.Errorf("message %q does not give the upload limit", b.Error.Message)
	}
	// Other routes keep theirs.
	wantError(t, do(h, http.MethodPost, "/v1/sessions/s1/turns", `{"question":"`+strings.Repeat("q", 3000)+`"}`), http.StatusRequestEntityTooLarge, "too_large")

	// Chunked (no Content-Length), raw and multipart: the limit applies while reading.
	mp, ct := multipartBody(t, [4]string{"file", "big.txt", "", big})
	for _, tc := range []struct{ body, ct string }{{big, "text/plain"}, {mp, ct}} {
		req := httptest.NewRequest(http.MethodPost, "/v1/documents", struct{ io.Reader }{strings.NewReader(tc.body)})
		req.ContentLength = -1
		req.TransferEncoding = []string{"chunked"}
		req.Header.Set("Content-Type", tc.ct)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		wantError(t, w, http.StatusRequestEntityTooLarge, "too_large")
	}
	if n := len(f.called()); n != 1 {
		t.Errorf("%d workflows started, want 1 (only the upload under the limit)", n)
	}
}

func TestPostDocumentUploadsOff(t *testing.T) {
	f := newFake(t)
	opts := docOptions(t)
	opts.UploadDir = ""
	b := wantError(t, send(api.New(f, opts).Handler(), http.MethodPost, "/v1/documents", "x", "Content-Type", "text/plain"), http.StatusServiceUnavailable, "unavailable")
	if !strings.Contains(b.Error.Message, "CTXFLOW_UPLOAD_DIR") {
		t.Errorf("message %q", b.Error.Message)
	}
}

func TestPostDocumentStartErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		err    error
		status int
		code   string
		want   string
	}{
		{"running", serviceerror.NewWorkflowExecutionAlreadyStarted("already started", "", "run-0"), http.StatusConflict, "conflict", "being ingested or deleted"},
		{"temporal down", serviceerror.NewUnavailable("frontend down"), http.StatusServiceUnavailable, "unavailable", "frontend down"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t)
			f.ExecuteWorkflowFn = func(context.Context, client.StartWorkflowOptions, any, ...any) (client.WorkflowRun, error) {
				return nil, tc.err
			}
			b := wantError(t, send(api.New(f, docOptions(t)).Handler(), http.MethodPost, "/v1/documents?id=d1", "x", "Content-Type", "text/plain"), tc.status, tc.code)
			if !strings.Contains(b.Error.Message, tc.want) {
				t.Errorf("message %q does not mention %q", b.Error.Message, tc.want)
			}
		})
	}
}

func TestPostDocumentWait(t *testing.T) {
	done := workflows.IngestProgress{DocumentID: "d1", Chunks: 7, Batches: 1, Done: 1, Stored: 7, Bytes: 5}
	for _, tc := range []struct {
		name    string
		get     func(context.Context, any) error
		status  int
		errCode string
		want    docAnswer
		msg     string
	}{
		{name: "completed", get: result(t, done), status: http.StatusOK,
			want: docAnswer{DocumentID: "d1", WorkflowID: "ingest/d1", Status: "completed", StatusURL: "/v1/documents/d1", SHA256: sha("hello"), Chunks: 7, Batches: 1, Done: 1, Stored: 7, Bytes: 5}},
		{name: "still running", get: blocked, status: http.StatusAccepted,
			want: docAnswer{DocumentID: "d1", WorkflowID: "ingest/d1", Status: "running", StatusURL: "/v1/documents/d1", SHA256: sha("hello"), Bytes: 5}},
		{name: "refused", get: failedWith("vector dimension mismatch: collection 384, vector 64", activities.CodeInvalidArgument), status: http.StatusBadRequest, errCode: "invalid_argument", msg: "dimension mismatch"},
		{name: "model down", get: failedWith("embed batch 0 of d1: connection refused", ""), status: http.StatusServiceUnavailable, errCode: "unavailable", msg: "connection refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t)
			recordStarts(t, f, tc.get)
			w := send(api.New(f, docOptions(t)).Handler(), http.MethodPost, "/v1/documents?id=d1&wait=true", "hello", "Content-Type", "text/plain")
			if tc.errCode != "" {
				b := wantError(t, w, tc.status, tc.errCode)
				if !strings.Contains(b.Error.Message, tc.msg) || strings.Contains(b.Error.Message, "activity error") {
					t.Errorf("message %q: want the activity's own message %q", b.Error.Message, tc.msg)
				}
				var body struct{ Document docAnswer }
				decode(t, w, &body)
				if body.Document.Status != "failed" || !strings.Contains(body.Document.Error, tc.msg) || body.Document.DocumentID != "d1" {
					t.Errorf("document in the error = %+v", body.Document)
				}
				return
			}
			if w.Code != tc.status {
				t.Fatalf("status = %d, want %d; body %s", w.Code, tc.status, w.Body)
			}
			var a docAnswer
			decode(t, w, &a)
			if a != tc.want {
				t.Errorf("answer = %+v\nwant     %+v", a, tc.want)
			}
		})
	}
}

func describe(typ string, status enumspb.WorkflowExecutionStatus) *workflowservice.DescribeWorkflowExecutionResponse {
	return &workflowservice.DescribeWorkflowExecutionResponse{WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{
		Execution: &commonpb.WorkflowExecution{WorkflowId: "ingest/d1", RunId: "run-7"},
		Type:      &commonpb.WorkflowType{Name: typ},
		Status:    status,
	}}
}

func TestGetDocument(t *testing.T) {
	progress := workflows.IngestProgress{DocumentID: "d1", Chunks: 40, Batches: 2, Done: 1, Stored: 32, Bytes: 9000}
	base := docAnswer{DocumentID: "d1", WorkflowID: "ingest/d1", StatusURL: "/v1/documents/d1"}
	with := func(a docAnswer, status string, p workflows.IngestProgress, errMsg string) docAnswer {
		a.Status, a.Error = status, errMsg
		a.Chunks, a.Batches, a.Done, a.Stored, a.Bytes = p.Chunks, p.Batches, p.Done, p.Stored, p.Bytes
		return a
	}
	for _, tc := range []struct {
		name     string
		desc     *workflowservice.DescribeWorkflowExecutionResponse
		descErr  error
		query    func() (converter.EncodedValue, error)
		get      func(context.Context, any) error
		status   int
		errCode  string
		want     docAnswer
		wantCall []string
	}{
		{name: "unknown", descErr: serviceerror.NewNotFound("workflow not found"), status: http.StatusNotFound, errCode: "not_found"},
		{name: "temporal down", descErr: serviceerror.NewUnavailable("down"), status: http.StatusServiceUnavailable, errCode: "unavailable"},
		{name: "running", desc: describe(workflows.IngestWorkflowName, enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING),
			query:  func() (converter.EncodedValue, error) { return encode(t, progress), nil },
			status: http.StatusOK, want: with(base, "running", progress, "")},
		{name: "running, no worker yet", desc: describe(workflows.IngestWorkflowName, enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING),
			query:  func() (converter.EncodedValue, error) { return nil, context.DeadlineExceeded },
			status: http.StatusOK, want: with(base, "running", workflows.IngestProgress{}, "")},
		{name: "completed", desc: describe(workflows.IngestWorkflowName, enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED),
			get: result(t, progress), status: http.StatusOK, want: with(base, "completed", progress, "")},
		{name: "failed", desc: describe(workflows.IngestWorkflowName, enumspb.WORKFLOW_EXECUTION_STATUS_FAILED),
			get:    failedWith("read document: line 4: no \"id\"", activities.CodeInvalidArgument),
			status: http.StatusOK, want: with(base, "failed", workflows.IngestProgress{}, "read document: line 4: no \"id\"")},
		{name: "terminated", desc: describe(workflows.IngestWorkflowName, enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED),
			get:    func(context.Context, any) error { return &temporal.TerminatedError{} },
			status: http.StatusOK, want: with(base, "failed", workflows.IngestProgress{}, "terminated")},
		{name: "being deleted", desc: describe(workflows.DeleteDocumentWorkflowName, enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING),
			status: http.StatusOK, want: with(base, "deleting", workflows.IngestProgress{}, "")},
		{name: "deleted", desc: describe(workflows.DeleteDocumentWorkflowName, enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED), status: http.StatusNotFound, errCode: "not_found"},
		{name: "delete failed", desc: describe(workflows.DeleteDocumentWorkflowName, enumspb.WORKFLOW_EXECUTION_STATUS_FAILED),
			get:    failedWith("delete chunks of d1: store closed", ""),
			status: http.StatusOK, want: with(base, "failed", workflows.IngestProgress{}, "delete: delete chunks of d1: store closed")},
		{name: "not a document workflow", desc: describe("SomethingElse", enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING), status: http.StatusNotFound, errCode: "not_found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t)
			f.DescribeWorkflowExecutionFn = func(_ context.Context, workflowID, runID string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
				if workflowID != "ingest/d1" || runID != "" {
					t.Errorf("describe %q/%q", workflowID, runID)
				}
				return tc.desc, tc.descErr
			}
			if tc.query != nil {
				f.QueryWorkflowFn = func(ctx context.Context, workflowID, runID, queryType string, _ ...any) (converter.EncodedValue, error) {
					if _, ok := ctx.Deadline(); !ok {
						t.Error("query without a deadline")
					}
					if workflowID != "ingest/d1" || runID != "run-7" || queryType != workflows.QueryProgress {
						t.Errorf("query %q on %q/%q", queryType, workflowID, runID)
					}
					return tc.query()
				}
			}
			if tc.get != nil {
				f.GetWorkflowFn = func(_ context.Context, workflowID, runID string) client.WorkflowRun {
					if workflowID != "ingest/d1" || runID != "run-7" {
						t.Errorf("get %q/%q", workflowID, runID)
					}
					return run{get: tc.get}
				}
			}
			w := do(server(f), http.MethodGet, "/v1/documents/d1", "")
			if tc.errCode != "" {
				wantError(t, w, tc.status, tc.errCode)
				return
			}
			if w.Code != tc.status {
				t.Fatalf("status = %d, want %d; body %s", w.Code, tc.status, w.Body)
			}
			var a docAnswer
			decode(t, w, &a)
			if a != tc.want {
				t.Errorf("answer = %+v\nwant     %+v", a, tc.want)
			}
		})
	}
	f := newFake(t)
	wantError(t, do(server(f), http.MethodGet, "/v1/documents/.hidden", ""), http.StatusBadRequest, "invalid_argument")
	if len(f.called()) != 0 {
		t.Errorf("Temporal called for a bad id: %v", f.called())
	}
}

func TestDeleteDocument(t *testing.T) {
	for _, tc := range []struct {
		name    string
		err     error
		get     func(context.Context, any) error
		status  int
		errCode string
	}{
		{name: "deleted", get: result(t, workflows.DeleteDocumentResult{DocumentID: "d1", Deleted: true}), status: http.StatusNoContent},
		{name: "slow", get: blocked, status: http.StatusAccepted},
		{name: "failed", get: failedWith("delete chunks of d1: store closed", ""), status: http.StatusServiceUnavailable, errCode: "unavailable"},
		{name: "being ingested", err: serviceerror.NewWorkflowExecutionAlreadyStarted("already started", "", "run-0"), status: http.StatusConflict, errCode: "conflict"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t)
			ingested(f, workflows.IngestWorkflowName, enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED)
			f.ExecuteWorkflowFn = func(ctx context.Context, opts client.StartWorkflowOptions, workflow any, args ...any) (client.WorkflowRun, error) {
				if !opts.WorkflowExecutionErrorWhenAlreadyStarted {
					t.Error("a delete started without an error for a running ingestion")
				}
				if opts.ID != "ingest/d1" || opts.TaskQueue != workflows.TaskQueue || workflow != workflows.DeleteDocumentWorkflowName {
					t.Errorf("started %v as %q on %q", workflow, opts.ID, opts.TaskQueue)
				}
				if opts.WorkflowIDConflictPolicy != enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL || opts.WorkflowIDReusePolicy != enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE {
					t.Errorf("policies %v, %v", opts.WorkflowIDConflictPolicy, opts.WorkflowIDReusePolicy)
				}
				if len(args) != 1 || args[0] != (workflows.DeleteDocumentInput{DocumentID: "d1"}) {
					t.Errorf("args = %v", args)
				}
				if tc.err != nil {
					return nil, tc.err
				}
				return run{id: opts.ID, get: tc.get}, nil
			}
			ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond) // bounds the slow case
			defer cancel()
			req := httptest.NewRequestWithContext(ctx, http.MethodDelete, "/v1/documents/d1", nil)
			w := httptest.NewRecorder()
			server(f).ServeHTTP(w, req)
			if tc.errCode != "" {
				wantError(t, w, tc.status, tc.errCode)
				return
			}
			if w.Code != tc.status {
				t.Fatalf("status = %d, want %d; body %s", w.Code, tc.status, w.Body)
			}
			if tc.status == http.StatusAccepted {
				var a docAnswer
				decode(t, w, &a)
				if a.Status != "deleting" || a.StatusURL != "/v1/documents/d1" {
					t.Errorf("answer = %+v", a)
				}
			}
		})
	}
	// An unknown document, and one deleted already, are 404: nothing starts.
	for _, typ := range []string{"", workflows.DeleteDocumentWorkflowName} {
		f := newFake(t)
		ingested(f, typ, enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED)
		wantError(t, do(server(f), http.MethodDelete, "/v1/documents/d1", ""), http.StatusNotFound, "not_found")
		for _, c := range f.called() {
			if c == "ExecuteWorkflow" {
				t.Errorf("deleting a missing document (latest workflow %q) started a deletion", typ)
			}
		}
	}
	f := newFake(t)
	wantError(t, do(server(f), http.MethodDelete, "/v1/documents/a%20b", ""), http.StatusBadRequest, "invalid_argument")
	wantError(t, do(server(f), http.MethodPut, "/v1/documents/d1", ""), http.StatusMethodNotAllowed, "invalid_argument")
	wantError(t, do(server(f), http.MethodGet, "/v1/documents", ""), http.StatusMethodNotAllowed, "invalid_argument")
	if len(f.called()) != 0 {
		t.Errorf("Temporal called: %v", f.called())
	}
}

// ingested answers DescribeWorkflowExecution for a document: its latest
// workflow is of type typ with status, or none when typ is "".
func ingested(f *fakeClient, typ string, status enumspb.WorkflowExecutionStatus) {
	f.DescribeWorkflowExecutionFn = func(_ context.Context, workflowID, _ string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
		if typ == "" {
			return nil, serviceerror.NewNotFound("workflow not found")
		}
		return &workflowservice.DescribeWorkflowExecutionResponse{WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{
			Execution: &commonpb.WorkflowExecution{WorkflowId: workflowID, RunId: "r1"},
			Type:      &commonpb.WorkflowType{Name: typ}, Status: status,
		}}, nil
	}
}

// The error type the API sees for a workflow failure is the activity's.
func TestDocumentErrorsUseTheRootCause(t *testing.T) {
	f := newFake(t)
	recordStarts(t, f, func(context.Context, any) error {
		inner := temporal.NewNonRetryableApplicationError("read document: line 9: invalid JSON", activities.CodeInvalidArgument, nil)
		return fmt.Errorf("workflow execution error: %w", temporal.NewApplicationErrorWithCause("prepare d1", "wrapError", errors.Join(inner)))
	})
	b := wantError(t, send(api.New(f, docOptions(t)).Handler(), http.MethodPost, "/v1/documents?id=d1&wait=1", "x", "Content-Type", "text/plain"), http.StatusBadRequest, "invalid_argument")
	if !regexp.MustCompile(`^ingestion of document d1 failed: read document: line 9: invalid JSON \(fix the request\)$`).MatchString(b.Error.Message) {
		t.Errorf("message %q", b.Error.Message)
	}
}
