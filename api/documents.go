package api

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/gin-gonic/gin"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/temporal"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/activities/ingest"
	"github.com/ctxflow/ctxflow/workflows"
)

// Document states reported by the documents routes.
const (
	DocRunning   = "running"   // being ingested
	DocCompleted = "completed" // ingested: its chunks are searchable
	DocFailed    = "failed"    // the last ingestion (or deletion) failed
	DocDeleting  = "deleting"  // being deleted
)

// documentStatus answers the documents routes: the ingestion's progress
// (documentId, chunks, batches, done, stored, bytes) and where it stands.
type documentStatus struct {
	workflows.IngestProgress
	WorkflowID string `json:"workflowId"`
	Status     string `json:"status"`
	StatusURL  string `json:"statusUrl"`
	// SHA256 is the uploaded bytes' hash (uploads only).
	SHA256 string `json:"sha256,omitempty"`
	Error  string `json:"error,omitempty"`
}

func newDocumentStatus(doc docRef, status string) documentStatus {
	return documentStatus{
		IngestProgress: workflows.IngestProgress{DocumentID: doc.id},
		WorkflowID:     doc.workflowID(), Status: status, StatusURL: "/v1/documents/" + doc.id,
	}
}

// docRef is a tenant's document: documents are per tenant, so the
// workflows and the store know it by its key ([workflows.DocumentKey]).
type docRef struct{ tenant, id string }

func (d docRef) key() string        { return workflows.DocumentKey(d.tenant, d.id) }
func (d docRef) workflowID() string { return workflows.IngestWorkflowID(d.key()) }

// progress is an ingestion's progress as the caller knows the document.
func (d docRef) progress(p workflows.IngestProgress) workflows.IngestProgress {
	p.DocumentID = d.id
	return p
}

// mediaTypes maps the accepted Content-Types of an upload to the extension
// the document is stored (and read) with.
var mediaTypes = map[string]string{
	"text/plain":              ".txt",
	"text/markdown":           ".md",
	"text/x-markdown":         ".md",
	"text/html":               ".html",
	"application/pdf":         ".pdf",
	"application/x-ndjson":    ".jsonl",
	"application/jsonl":       ".jsonl",
	"application/x-jsonlines": ".jsonl",
}

func acceptedTypes() string {
	types := make([]string, 0, len(mediaTypes))
	for t := range mediaTypes {
		types = append(types, t)
	}
	slices.Sort(types)
	return strings.Join(types, ", ")
}

// upload is a document received by POST /v1/documents.
type upload struct {
	name string // the client's file name, "" if none
	ext  string // how the workers read it: .txt .md .html .pdf .jsonl
	body []byte
	sum  [32]byte
}

// documentID reads and validates a document id from a path parameter.
func documentID(c *gin.Context) (docRef, error) {
	t, err := tenant(c)
	if err != nil {
		return docRef{}, err
	}
	id := c.Param("id")
	if err := workflows.ValidateID("documentId", id); err != nil {
		return docRef{}, errInvalid("%s", err)
	}
	return docRef{tenant: t, id: id}, nil
}

func (s *Server) postDocument(c *gin.Context) {
	t, err := tenant(c)
	if err != nil {
		writeError(c, err)
		return
	}
	if s.opts.UploadDir == "" {
		writeError(c, errUnavailable("document uploads are off: this API has no upload directory (CTXFLOW_UPLOAD_DIR)"))
		return
	}
	for k := range c.Request.URL.Query() {
		if k != "id" && k != "wait" {
			writeError(c, errInvalid("unknown query parameter %q: want id or wait", k))
			return
		}
	}
	wait, err := waitParam(c)
	if err != nil {
		writeError(c, err)
		return
	}
	doc, given := c.GetQuery("id")
	if given {
		if err := workflows.ValidateID("documentId", doc); err != nil {
			writeError(c, errInvalid("%s", err))
			return
		}
	}
	up, err := readUpload(c)
	if err != nil {
		writeError(c, err)
		return
	}
	up.sum = sha256.Sum256(up.body)
	if err := validateUpload(up); err != nil {
		writeError(c, err)
		return
	}
	if !given {
		doc = workflows.DocumentID(up.name, up.sum) // always a valid id
	}
	path, err := s.store(up, t)
	if err != nil {
		s.log.Error("store upload", "document", doc, "error", err, "requestId", c.GetString("requestID"))
		writeError(c, errInternal("the upload of %s could not be stored (the API's log says why, under request %s)", doc, c.GetString("requestID")))
		return
	}
	source := up.name
	if source == "" {
		source = doc
	}
	sum := hex.EncodeToString(up.sum[:])
	ref := docRef{tenant: t, id: doc}
	opts := workflows.DocumentStartOptions(ref.key(), "Ingest "+source,
		fmt.Sprintf("document `%s` of tenant `%s` uploaded as `%s`: %d bytes, sha256 `%s`", doc, t, source, len(up.body), sum[:16]))
	run, err := s.c.ExecuteWorkflow(c.Request.Context(), opts, workflows.IngestWorkflowName,
		workflows.IngestInput{DocumentID: ref.key(), Path: path, Source: source, Tenant: t})
	if err != nil {
		writeError(c, documentConflict(doc, err))
		return
	}
	st := newDocumentStatus(ref, DocRunning)
	st.SHA256, st.Bytes = sum, len(up.body)
	if !wait {
		c.JSON(http.StatusAccepted, st)
		return
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), s.opts.IngestWaitTimeout)
	defer cancel()
	var p workflows.IngestProgress
	err = run.Get(ctx, &p)
	switch {
	case err == nil:
		st.IngestProgress, st.Status = ref.progress(p), DocCompleted
		c.JSON(http.StatusOK, st)
	case ctx.Err() != nil:
		// Still running: the client may follow it at the status URL.
		c.JSON(http.StatusAccepted, st)
	default:
		writeError(c, ingestFailed(st, err))
	}
}

// documentConflict maps the error of starting a document's workflow: one
// already running under the id (an ingestion or a deletion) is a conflict.
func documentConflict(doc string, err error) error {
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &started) {
		return errConflict("document %s is being ingested or deleted: wait for it (GET /v1/documents/%s) and try again", doc, doc)
	}
	return fromTemporal("document "+doc, err)
}

// ingestFailed is the answer for a failed ingestion, with the document's
// status: the root cause's code decides the status (a refused document is
// 400, a model or store that failed after the retries 503, ...).
func ingestFailed(st documentStatus, err error) error {
	code, msg := activities.Cause(err)
	st.Status, st.Error = DocFailed, msg
	e := failed(cmp.Or(code, activities.CodeUnavailable), "ingestion of document "+st.DocumentID+" failed", msg)
	e.extra = gin.H{"document": st}
	return e
}

// readUpload reads the document of a request: a multipart form with the
// field "file", or the raw body with the document's Content-Type.
func readUpload(c *gin.Context) (upload, error) {
	ct := c.GetHeader("Content-Type")
	if ct == "" {
		return upload{}, errInvalid("Content-Type is required: send multipart/form-data with the field \"file\", or the document itself as one of %s", acceptedTypes())
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil {
		return upload{}, errInvalid("Content-Type %q: %v", ct, err)
	}
	if mt == "multipart/form-data" {
		return readMultipart(c)
	}
	ext, ok := mediaTypes[mt]
	if !ok {
		return upload{}, errInvalid("unsupported Content-Type %q: want multipart/form-data or one of %s", mt, acceptedTypes())
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") && !strings.EqualFold(cs, "us-ascii") {
		return upload{}, errInvalid("charset %q: documents must be UTF-8", cs)
	}
	var name string
	if cd := c.GetHeader("Content-Disposition"); cd != "" {
		_, p, err := mime.ParseMediaType(cd)
		if err != nil {
			return upload{}, errInvalid("Content-Disposition %q: %v", cd, err)
		}
		if name, err = fileName(p["filename"]); err != nil {
			return upload{}, err
		}
	}
	body, err := io.ReadAll(c.Request.Body)
	if err != nil {
		return upload{}, bodyError(err)
	}
	return upload{name: name, ext: ext, body: body}, nil
}

func readMultipart(c *gin.Context) (upload, error) {
	mr, err := c.Request.MultipartReader()
	if err != nil {
		return upload{}, errInvalid("multipart body: %v", err)
	}
	var (
		up    upload
		found bool
	)
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return upload{}, bodyError(err)
		}
		if part.FormName() != "file" {
			return upload{}, errInvalid("unexpected form field %q: send the document in the field \"file\" (the id goes in the query: ?id=)", part.FormName())
		}
		if found {
			return upload{}, errInvalid("more than one \"file\" field: upload one document a request")
		}
		found = true
		if up, err = readPart(part); err != nil {
			return upload{}, err
		}
	}
	if !found {
		return upload{}, errInvalid("multipart body has no field \"file\"")
	}
	return up, nil
}

func readPart(part *multipart.Part) (upload, error) {
	name, err := fileName(part.FileName())
	if err != nil {
		return upload{}, err
	}
	up := upload{name: name}
	if ext := strings.ToLower(filepath.Ext(name)); ingest.Supported(ext) {
		up.ext = ext
		if ext == ".ndjson" {
			up.ext = ".jsonl"
		}
	} else if ct := part.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err == nil {
			up.ext = mediaTypes[mt]
		}
	}
	if up.ext == "" {
		return upload{}, errInvalid("unsupported document %q (Content-Type %q): want a file named *%s, or one of %s",
			name, part.Header.Get("Content-Type"), strings.Join(ingest.Extensions, ", *"), acceptedTypes())
	}
	if up.body, err = io.ReadAll(part); err != nil {
		return upload{}, bodyError(err)
	}
	return up, nil
}

// bodyError maps an error reading the request body: over the limit is 413.
func bodyError(err error) error {
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return errTooLarge(tooBig.Limit)
	}
	return errInvalid("request body: %v", err)
}

// fileName checks a client's file name (base name only, any directories
// dropped).
func fileName(name string) (string, error) {
	if i := strings.LastIndexAny(name, `/\`); i >= 0 {
		name = name[i+1:]
	}
	switch {
	case !utf8.ValidString(name):
		return "", errInvalid("file name is not valid UTF-8")
	case len(name) > 255:
		return "", errInvalid("file name is %d bytes, over the 255-byte limit", len(name))
	case strings.ContainsFunc(name, unicode.IsControl):
		return "", errInvalid("file name %q holds control characters", name)
	}
	return name, nil
}

// validateUpload refuses what the workers would refuse, so that the client
// hears it now: an empty document, text that is not UTF-8, a JSONL line
// that is not a passage (named by its line number), a file that is not a
// PDF. PDFs are parsed only by the workers.
func validateUpload(up upload) error {
	if len(bytes.TrimSpace(up.body)) == 0 {
		return errInvalid("document is empty")
	}
	switch up.ext {
	case ".pdf":
		if !bytes.HasPrefix(up.body, []byte("%PDF-")) {
			return errInvalid("document is not a PDF (it does not start with %%PDF-)")
		}
		return nil
	case ".jsonl":
		if _, err := ingest.ParsePassages(up.body); err != nil {
			return errInvalid("JSONL document: %v", err)
		}
		return nil
	}
	if !utf8.Valid(up.body) {
		return errInvalid("document is not valid UTF-8")
	}
	return nil
}

// store writes an upload into a folder of the upload directory (a
// tenant's: <tenant>, or a session's: <tenant>/sessions/<id>, which
// erasing the tenant or the session removes) under the hash of its bytes
// (the same bytes are stored once a folder) and returns its absolute
// path, which the workers read: api and workers must see the directory at
// the same path.
func (s *Server) store(up upload, folder ...string) (string, error) {
	root, err := filepath.Abs(s.opts.UploadDir)
	if err != nil {
		return "", fmt.Errorf("upload directory: %w", err)
	}
	dir := filepath.Join(append([]string{root}, folder...)...)
	path := filepath.Join(dir, hex.EncodeToString(up.sum[:])+up.ext)
	if fi, err := os.Stat(path); err == nil && fi.Size() == int64(len(up.body)) {
		return path, nil
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return "", fmt.Errorf("create upload directory: %w", err)
	}
	f, err := os.CreateTemp(dir, ".upload-*")
	if err != nil {
		return "", fmt.Errorf("create upload file: %w", err)
	}
	defer os.Remove(f.Name()) // after the rename, a no-op
	_, err = f.Write(up.body)
	if err == nil {
		err = f.Chmod(0o640)
	}
	if err == nil {
		err = f.Sync() // the workers may read it after a crash of this process
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		return "", fmt.Errorf("write upload: %w", err)
	}
	return path, nil
}

func (s *Server) getDocument(c *gin.Context) {
	doc, err := documentID(c)
	if err != nil {
		writeError(c, err)
		return
	}
	ctx := c.Request.Context()
	wid := doc.workflowID()
	desc, err := s.c.DescribeWorkflowExecution(ctx, wid, "")
	var notFound *serviceerror.NotFound
	switch {
	case errors.As(err, &notFound):
		writeError(c, errNotFound("document %s not found", doc.id))
		return
	case err != nil:
		writeError(c, fromTemporal("document "+doc.id, err))
		return
	}
	info := desc.GetWorkflowExecutionInfo()
	runID := info.GetExecution().GetRunId()
	running := info.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
	st := newDocumentStatus(doc, DocRunning)
	switch info.GetType().GetName() {
	case workflows.IngestWorkflowName:
	case workflows.DeleteDocumentWorkflowName:
		switch {
		case running:
			st.Status = DocDeleting
			c.JSON(http.StatusOK, st)
		case info.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED:
			writeError(c, errNotFound("document %s was deleted", doc.id))
		default:
			st.Status, st.Error = DocFailed, "delete: "+s.failure(ctx, wid, runID)
			c.JSON(http.StatusOK, st)
		}
		return
	default:
		writeError(c, errNotFound("document %s not found (%s is a %s)", doc.id, wid, info.GetType().GetName()))
		return
	}
	if running {
		// Progress is best effort: a workflow no worker has picked up yet
		// cannot answer queries.
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		v, err := s.c.QueryWorkflow(qctx, wid, runID, workflows.QueryProgress)
		if err == nil {
			err = v.Get(&st.IngestProgress)
		}
		if err != nil {
			s.log.Warn("document progress query", "document", doc.key(), "error", err, "requestId", c.GetString("requestID"))
		}
		st.IngestProgress = doc.progress(st.IngestProgress)
		c.JSON(http.StatusOK, st)
		return
	}
	var p workflows.IngestProgress
	if info.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED {
		if err := s.c.GetWorkflow(ctx, wid, runID).Get(ctx, &p); err != nil {
			writeError(c, fromTemporal("document "+doc.id, err))
			return
		}
		st.IngestProgress, st.Status = doc.progress(p), DocCompleted
		c.JSON(http.StatusOK, st)
		return
	}
	st.Status, st.Error = DocFailed, s.failure(ctx, wid, runID)
	c.JSON(http.StatusOK, st)
}

// failure returns why a closed workflow run did not complete.
func (s *Server) failure(ctx context.Context, wid, runID string) string {
	err := s.c.GetWorkflow(ctx, wid, runID).Get(ctx, nil)
	if err == nil {
		return "unknown failure"
	}
	var te *temporal.TerminatedError
	var ce *temporal.CanceledError
	var to *temporal.TimeoutError
	switch {
	case errors.As(err, &te):
		return "terminated"
	case errors.As(err, &ce):
		return "canceled"
	case errors.As(err, &to):
		return "timed out"
	}
	_, msg := activities.Cause(err)
	return msg
}

// documentExists reports whether a document was ingested (or is being) and
// not deleted since: the latest workflow under its id is not a completed
// deletion.
func (s *Server) documentExists(ctx context.Context, doc docRef) (bool, error) {
	desc, err := s.c.DescribeWorkflowExecution(ctx, doc.workflowID(), "")
	var notFound *serviceerror.NotFound
	switch {
	case errors.As(err, &notFound):
		return false, nil
	case err != nil:
		return false, fromTemporal("document "+doc.id, err)
	}
	info := desc.GetWorkflowExecutionInfo()
	deleted := info.GetType().GetName() == workflows.DeleteDocumentWorkflowName &&
		info.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED
	return !deleted, nil
}

// deleteWait bounds how long DELETE waits for the deletion to finish
// before it answers 202.
const deleteWait = 30 * time.Second

func (s *Server) deleteDocument(c *gin.Context) {
	doc, err := documentID(c)
	if err != nil {
		writeError(c, err)
		return
	}
	switch exists, err := s.documentExists(c.Request.Context(), doc); {
	case err != nil:
		writeError(c, err)
		return
	case !exists:
		writeError(c, errNotFound("document %s not found (or already deleted)", doc.id))
		return
	}
	opts := workflows.DocumentStartOptions(doc.key(), "Delete document "+doc.id, "tenant `"+doc.tenant+"`")
	run, err := s.c.ExecuteWorkflow(c.Request.Context(), opts, workflows.DeleteDocumentWorkflowName, workflows.DeleteDocumentInput{DocumentID: doc.key()})
	if err != nil {
		writeError(c, documentConflict(doc.id, err))
		return
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), deleteWait)
	defer cancel()
	err = run.Get(ctx, nil)
	switch {
	case err == nil:
		c.Status(http.StatusNoContent)
	case ctx.Err() != nil:
		c.JSON(http.StatusAccepted, newDocumentStatus(doc, DocDeleting))
	default:
		code, msg := activities.Cause(err)
		writeError(c, failed(cmp.Or(code, activities.CodeUnavailable), "delete of document "+doc.id+" failed", msg))
	}
}
