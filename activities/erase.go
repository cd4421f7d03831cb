package activities

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
)

// Erasure (docs/operations.md, "Retention and erasure"): an erase removes
// for good what ctxflow keeps of a session, or of a whole tenant — the
// transcript with its summaries, the snapshot with the known facts, the
// workflow histories and their visibility rows (Temporal's
// DeleteWorkflowExecution, for the session's runs and its children: the
// corrective-RAG and task workflows), and for a tenant its documents: their
// chunks, their uploaded files and their ingestion histories. It runs on a
// worker, which owns the stores, as one activity ([Eraser.Erase]); the
// retention sweep ([Eraser.SweepRetention]) erases the sessions idle longer
// than their tenant's period. Each erase writes one audit log line.

// EraseRequest asks to erase a session of a tenant, or the whole tenant.
type EraseRequest struct {
	Tenant string `json:"tenant"`
	// SessionID is the session to erase; "" erases every session and
	// every document of the tenant.
	SessionID string `json:"sessionId,omitempty"`
	// Actor and RequestID say who asked (for the audit line): "api",
	// "cli:<user>", "retention".
	Actor     string `json:"actor"`
	RequestID string `json:"requestId,omitempty"`
}

// EraseCounts is what an erase removed (counts only: the audit line never
// holds content).
type EraseCounts struct {
	Sessions   int `json:"sessions"`
	Messages   int `json:"messages"`
	Executions int `json:"executions"` // workflow runs deleted from Temporal
	Documents  int `json:"documents"`
	Chunks     int `json:"chunks"`
	Blobs      int `json:"blobs"` // uploaded files removed
}

// Zero reports an erase that found nothing.
func (c EraseCounts) Zero() bool { return c == EraseCounts{} }

func (c *EraseCounts) add(d EraseCounts) {
	c.Sessions += d.Sessions
	c.Messages += d.Messages
	c.Executions += d.Executions
	c.Documents += d.Documents
	c.Chunks += d.Chunks
	c.Blobs += d.Blobs
}

// TenantEraser is a store that removes everything of one tenant at once
// (every transcript, every chunk), also what no workflow names any more.
type TenantEraser interface {
	EraseTenant(ctx context.Context, tenant string) error
}

// Scrubber is a store that keeps the bytes of deleted data in its files
// until it rewrites them (a log, a search index): Scrub rewrites them.
type Scrubber interface {
	Scrub(ctx context.Context) error
}

// StoredSession is a session a transcript store holds, and when it was
// last written.
type StoredSession struct {
	Key     SessionKey
	Updated time.Time
}

// SessionLister is a transcript store that can list its sessions (the
// retention sweep finds there the sessions Temporal no longer lists).
type SessionLister interface {
	StoredSessions(ctx context.Context) ([]StoredSession, error)
}

// SessionWorkflowID is the workflow id of a session (workflows.SessionWorkflowID).
func SessionWorkflowID(tenant, sessionID string) string {
	return "session/" + tenant + "/" + sessionID
}

// Workflow type names the eraser looks for (the workflows package's).
const (
	sessionWorkflowType    = "SessionWorkflow"
	ingestWorkflowType     = "IngestWorkflow"
	correctiveWorkflowType = "CorrectiveRAGWorkflow"
)

// Eraser erases sessions and tenants (see EraseRequest).
type Eraser struct {
	// Temporal deletes and lists the workflows; Namespace is its namespace.
	Temporal  client.Client
	Namespace string
	// Transcript holds the transcripts and snapshots; Vectors the chunks
	// (nil: none).
	Transcript TranscriptStore
	Vectors    VectorStore
	// UploadDir is where the API stores uploads (absolute): only files
	// below it are removed, never a file `ctxflow ingest` read elsewhere.
	UploadDir string
	// Caches are dropped by every erase (the summary cache holds summary
	// text, keyed by content).
	Caches []interface{ Clear() }
	// Retention is each tenant's retention period (SweepRetention).
	Retention Retention
	// Scrub runs after the deletions (nil: nothing): the embedded Temporal
	// server's database drops the deleted bytes from its write-ahead log.
	Scrub func(ctx context.Context) error
	// Logger writes the audit lines; default slog's.
	Logger *slog.Logger
	// Now is the clock (default time.Now); Wait bounds the wait for
	// Temporal to finish deleting (default 2 minutes).
	Now  func() time.Time
	Wait time.Duration
}

func (a *Eraser) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}

func (a *Eraser) logger() *slog.Logger {
	if a.Logger != nil {
		return a.Logger
	}
	return slog.Default()
}

// Erase erases what req names and writes the audit line.
func (a *Eraser) Erase(ctx context.Context, req EraseRequest) (EraseCounts, error) {
	if req.Tenant == "" {
		return EraseCounts{}, Permanent(CodeInvalidArgument, "erase: no tenant", nil)
	}
	defer keepAlive(ctx)()
	start := a.now()
	var (
		n   EraseCounts
		err error
	)
	if req.SessionID != "" {
		n, err = a.eraseSession(ctx, SessionKey{Tenant: req.Tenant, SessionID: req.SessionID})
	} else {
		n, err = a.eraseTenant(ctx, req.Tenant)
	}
	if err == nil {
		err = a.scrub(ctx, req.SessionID == "")
	}
	if err != nil {
		return n, fmt.Errorf("erase %s: %w", scope(req), err)
	}
	a.audit(req, n, start)
	return n, nil
}

func scope(req EraseRequest) string {
	if req.SessionID == "" {
		return "tenant " + req.Tenant
	}
	return "session " + req.Tenant + "/" + req.SessionID
}

// audit writes the erase's one audit line: who, what, when and how much,
// never what was erased.
func (a *Eraser) audit(req EraseRequest, n EraseCounts, start time.Time) {
	what := "session"
	if req.SessionID == "" {
		what = "tenant"
	}
	a.logger().Info("erase", "audit", "erase", "scope", what, "tenant", req.Tenant, "session", req.SessionID,
		"actor", req.Actor, "requestId", req.RequestID, "at", start.UTC().Format(time.RFC3339Nano),
		"took", a.now().Sub(start).Round(time.Millisecond).String(),
		"sessions", n.Sessions, "messages", n.Messages, "executions", n.Executions,
		"documents", n.Documents, "chunks", n.Chunks, "blobs", n.Blobs)
}

// eraseSession erases one session: its workflow runs and children, then
// its transcript and snapshot.
func (a *Eraser) eraseSession(ctx context.Context, k SessionKey) (EraseCounts, error) {
	var n EraseCounts
	wid := SessionWorkflowID(k.Tenant, k.SessionID)
	q := fmt.Sprintf("WorkflowId = '%s' OR WorkflowId STARTS_WITH '%s/'", wid, wid)
	// The session's transcript and its tasks' (TaskKey), named by the
	// task workflows and by the store.
	keys := map[SessionKey]bool{k: true}
	runs, err := a.list(ctx, q)
	if err != nil {
		return n, err
	}
	for _, r := range runs {
		if task, ok := strings.CutPrefix(r.GetExecution().GetWorkflowId(), wid+"/task/"); ok && task != "" {
			keys[TaskKey(k, task)] = true
		}
	}
	if l, ok := a.Transcript.(SessionLister); ok {
		stored, err := l.StoredSessions(ctx)
		if err != nil {
			return n, fmt.Errorf("list stored sessions: %w", err)
		}
		for _, s := range stored {
			if s.Key.Tenant == k.Tenant && strings.HasPrefix(s.Key.SessionID, k.SessionID+":task:") {
				keys[s.Key] = true
			}
		}
	}
	msgs := 0
	for key := range keys {
		m, err := a.Transcript.Len(ctx, key)
		if err != nil {
			return n, fmt.Errorf("count the messages of %s: %w", key, err)
		}
		msgs += m
	}
	// The runs first, so that nothing writes to the transcripts after
	// they are gone; then the transcripts.
	execs, err := DeleteWorkflows(ctx, a.Temporal, a.Namespace, q, []string{wid}, a.Wait)
	n.Executions = execs
	if err != nil {
		return n, err
	}
	for key := range keys {
		if err := a.Transcript.Delete(ctx, key); err != nil {
			return n, fmt.Errorf("delete the transcript of %s: %w", key, err)
		}
	}
	n.Messages = msgs
	// Its imported transcripts (POST /v1/sessions/import).
	if a.UploadDir != "" {
		blobs, err := removeDir(filepath.Join(filepath.Clean(a.UploadDir), k.Tenant, "sessions", k.SessionID))
		n.Blobs = blobs
		if err != nil {
			return n, err
		}
	}
	if msgs > 0 || execs > 0 || n.Blobs > 0 {
		n.Sessions = 1
	}
	a.clearCaches()
	return n, nil
}

// removeDir removes a folder and returns how many files it held.
func removeDir(dir string) (int, error) {
	n := 0
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			n++
		}
		return err
	})
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("uploads %s: %w", dir, err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return 0, fmt.Errorf("remove uploads %s: %w", dir, err)
	}
	return n, nil
}

// startInput is what the eraser reads of a workflow's input.
type startInput struct {
	DocumentID string `json:"documentId"`
	Path       string `json:"path"`
	Tenant     string `json:"tenant"`
}

// eraseTenant erases every session and document of a tenant.
func (a *Eraser) eraseTenant(ctx context.Context, t string) (EraseCounts, error) {
	var n EraseCounts
	// Sessions: those Temporal lists and those the store holds.
	sessions, transcripts := map[string]bool{}, map[string]bool{}
	runs, err := a.list(ctx, fmt.Sprintf("WorkflowId STARTS_WITH 'session/%s/'", t))
	if err != nil {
		return n, err
	}
	for _, r := range runs {
		wid := r.GetExecution().GetWorkflowId()
		if tt, id, ok := parseSessionWorkflowID(wid); ok && tt == t {
			sessions[id], transcripts[id] = true, true
		} else if task, ok := strings.CutPrefix(wid, "session/"+t+"/"); ok {
			if id, taskID, ok := strings.Cut(task, "/task/"); ok && !strings.Contains(id, "/") {
				sessions[id], transcripts[TaskKey(SessionKey{Tenant: t, SessionID: id}, taskID).SessionID] = true, true
			}
		}
	}
	if l, ok := a.Transcript.(SessionLister); ok {
		stored, err := l.StoredSessions(ctx)
		if err != nil {
			return n, fmt.Errorf("list stored sessions: %w", err)
		}
		for _, s := range stored {
			if s.Key.Tenant == t {
				transcripts[s.Key.SessionID] = true
				sessions[sessionOfKey(s.Key.SessionID)] = true
			}
		}
	}
	for id := range transcripts {
		m, err := a.Transcript.Len(ctx, SessionKey{Tenant: t, SessionID: id})
		if err != nil {
			return n, fmt.Errorf("count the messages of %s/%s: %w", t, id, err)
		}
		n.Messages += m
	}
	n.Sessions = len(sessions)

	// Documents: their ingestion and deletion runs name their keys and
	// files.
	docRuns, err := a.list(ctx, documentQuery(t))
	if err != nil {
		return n, err
	}
	docs, paths := map[string]bool{}, map[string]bool{}
	var docIDs []string
	for _, r := range docRuns {
		wid := r.GetExecution().GetWorkflowId()
		if !ownDocument(t, wid) {
			continue
		}
		docIDs = append(docIDs, wid)
		docs[strings.TrimPrefix(wid, "ingest/")] = true
		var in startInput
		if err := a.input(ctx, r.GetExecution(), &in); err != nil {
			return n, err
		}
		if in.Path != "" {
			paths[in.Path] = true
		}
	}
	n.Documents = len(docs)
	// Corrective queries asked outside a session (POST /v1/rag/corrective).
	var ragIDs []string
	ragRuns, err := a.list(ctx, fmt.Sprintf("WorkflowType = '%s' AND WorkflowId STARTS_WITH 'rag/'", correctiveWorkflowType))
	if err != nil {
		return n, err
	}
	for _, r := range ragRuns {
		var in startInput
		if err := a.input(ctx, r.GetExecution(), &in); err != nil {
			return n, err
		}
		if TenantOf(in.Tenant) == t {
			ragIDs = append(ragIDs, r.GetExecution().GetWorkflowId())
		}
	}

	// The runs first (nothing writes after), then the stores.
	execs, err := DeleteWorkflows(ctx, a.Temporal, a.Namespace, fmt.Sprintf("WorkflowId STARTS_WITH 'session/%s/'", t), nil, a.Wait)
	n.Executions += execs
	if err != nil {
		return n, err
	}
	for _, ids := range [][]string{docIDs, ragIDs} {
		for chunk := range slices.Chunk(uniq(ids), 100) {
			execs, err := DeleteWorkflows(ctx, a.Temporal, a.Namespace, "WorkflowId IN ('"+strings.Join(chunk, "', '")+"')", chunk, a.Wait)
			n.Executions += execs
			if err != nil {
				return n, err
			}
		}
	}
	if te, ok := a.Transcript.(TenantEraser); ok {
		if err := te.EraseTenant(ctx, t); err != nil {
			return n, fmt.Errorf("erase the transcripts of tenant %s: %w", t, err)
		}
	}
	for id := range transcripts { // a store without EraseTenant, and the memory of one with it
		if err := a.Transcript.Delete(ctx, SessionKey{Tenant: t, SessionID: id}); err != nil {
			return n, fmt.Errorf("delete the transcript of %s/%s: %w", t, id, err)
		}
	}
	if a.Vectors != nil {
		before, err := a.Vectors.Info(ctx)
		if err != nil {
			return n, fmt.Errorf("vector store: %w", err)
		}
		for doc := range docs {
			if err := a.Vectors.DeleteDocument(ctx, doc); err != nil {
				return n, fmt.Errorf("delete the chunks of %s: %w", doc, err)
			}
		}
		if te, ok := a.Vectors.(TenantEraser); ok { // chunks whose document's runs are gone
			if err := te.EraseTenant(ctx, t); err != nil {
				return n, fmt.Errorf("erase the chunks of tenant %s: %w", t, err)
			}
		}
		after, err := a.Vectors.Info(ctx)
		if err != nil {
			return n, fmt.Errorf("vector store: %w", err)
		}
		n.Chunks = max(before.Count-after.Count, 0)
	}
	blobs, err := a.removeBlobs(ctx, t, paths)
	n.Blobs = blobs
	if err != nil {
		return n, err
	}
	a.clearCaches()
	return n, nil
}

// documentQuery lists the document runs that may be the tenant's: the
// default tenant's keys are bare ids (ingest/<id>), the others'
// <tenant>/<id> (workflows.DocumentKey).
func documentQuery(t string) string {
	if t == DefaultTenant {
		return "WorkflowId STARTS_WITH 'ingest/'"
	}
	return fmt.Sprintf("WorkflowId STARTS_WITH 'ingest/%s/'", t)
}

// ownDocument reports that a document workflow id is the tenant's.
func ownDocument(t, wid string) bool {
	key, ok := strings.CutPrefix(wid, "ingest/")
	if !ok {
		return false
	}
	tt, _, found := strings.Cut(key, "/")
	if !found {
		tt = DefaultTenant
	}
	return tt == t
}

// removeBlobs removes the tenant's uploads: its folder of the upload
// directory, and the files its documents name at the directory's root
// (stored before uploads had a folder per tenant) unless another
// tenant's document names the same file (the same bytes are stored once).
func (a *Eraser) removeBlobs(ctx context.Context, t string, paths map[string]bool) (int, error) {
	if a.UploadDir == "" {
		return 0, nil
	}
	root := filepath.Clean(a.UploadDir)
	removed := 0
	var legacy []string
	for p := range paths {
		p = filepath.Clean(p)
		switch filepath.Dir(p) {
		case filepath.Join(root, t): // removed with the folder below
		case root:
			legacy = append(legacy, p)
		}
	}
	if len(legacy) > 0 {
		shared, err := a.pathsOfOthers(ctx, t)
		if err != nil {
			return 0, err
		}
		for _, p := range legacy {
			if shared[p] {
				continue
			}
			switch err := os.Remove(p); {
			case err == nil:
				removed++
			case !errors.Is(err, fs.ErrNotExist):
				return removed, fmt.Errorf("remove upload: %w", err)
			}
		}
	}
	n, err := removeDir(filepath.Join(root, t))
	return removed + n, err
}

// pathsOfOthers is the set of files other tenants' ingestions name.
func (a *Eraser) pathsOfOthers(ctx context.Context, t string) (map[string]bool, error) {
	runs, err := a.list(ctx, fmt.Sprintf("WorkflowType = '%s'", ingestWorkflowType))
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, r := range runs {
		if ownDocument(t, r.GetExecution().GetWorkflowId()) {
			continue
		}
		var in startInput
		if err := a.input(ctx, r.GetExecution(), &in); err != nil {
			return nil, err
		}
		out[filepath.Clean(in.Path)] = true
	}
	return out, nil
}

func (a *Eraser) clearCaches() {
	for _, c := range a.Caches {
		c.Clear()
	}
}

// scrub makes the stores drop the bytes of what was deleted: the
// transcript store, the vector store (tenant erases only: sessions write
// no chunks) and Scrub.
func (a *Eraser) scrub(ctx context.Context, vectors bool) error {
	if s, ok := a.Transcript.(Scrubber); ok {
		if err := s.Scrub(ctx); err != nil {
			return fmt.Errorf("scrub the transcript store: %w", err)
		}
	}
	if s, ok := a.Vectors.(Scrubber); ok && vectors {
		if err := s.Scrub(ctx); err != nil {
			return fmt.Errorf("scrub the vector store: %w", err)
		}
	}
	if a.Scrub != nil {
		if err := a.Scrub(ctx); err != nil {
			return fmt.Errorf("scrub: %w", err)
		}
	}
	return nil
}

// list returns every run, open or closed, that a visibility query matches.
func (a *Eraser) list(ctx context.Context, query string) ([]*workflowpb.WorkflowExecutionInfo, error) {
	var (
		out   []*workflowpb.WorkflowExecutionInfo
		token []byte
	)
	for {
		resp, err := a.Temporal.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: a.Namespace, Query: query, PageSize: 1000, NextPageToken: token,
		})
		if err != nil {
			return nil, fmt.Errorf("list workflows (%s): %w", query, err)
		}
		out = append(out, resp.GetExecutions()...)
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return out, nil
		}
	}
}

// input decodes a run's input (the first argument of its start event).
func (a *Eraser) input(ctx context.Context, ex interface {
	GetWorkflowId() string
	GetRunId() string
}, out any) error {
	it := a.Temporal.GetWorkflowHistory(ctx, ex.GetWorkflowId(), ex.GetRunId(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	if !it.HasNext() {
		return nil
	}
	ev, err := it.Next()
	var notFound *serviceerror.NotFound
	if errors.As(err, &notFound) {
		return nil // deleted meanwhile
	}
	if err != nil {
		return fmt.Errorf("read the input of %s: %w", ex.GetWorkflowId(), err)
	}
	ps := ev.GetWorkflowExecutionStartedEventAttributes().GetInput().GetPayloads()
	if len(ps) == 0 {
		return nil
	}
	if err := converter.GetDefaultDataConverter().FromPayload(ps[0], out); err != nil {
		return fmt.Errorf("decode the input of %s: %w", ex.GetWorkflowId(), err)
	}
	return nil
}

// DeleteWorkflows deletes every run, open or closed, that a visibility
// query lists (the server terminates a running one first) and waits, at
// most wait (0: 2 minutes), until the server has finished: deletion is
// asynchronous, so it asks again until the query lists nothing and each
// workflow id seen, and each of also, is not found. It returns the runs it
// deleted.
func DeleteWorkflows(ctx context.Context, c client.Client, namespace, query string, also []string, wait time.Duration) (int, error) {
	if wait <= 0 {
		wait = 2 * time.Minute
	}
	deadline := time.Now().Add(wait)
	deleted := map[string]bool{}
	wids := map[string]bool{}
	for _, w := range also {
		wids[w] = true
	}
	lister := &Eraser{Temporal: c, Namespace: namespace}
	for {
		runs, err := lister.list(ctx, query)
		if err != nil {
			return len(deleted), err
		}
		for _, r := range runs {
			if err := deleteRun(ctx, c, namespace, r.GetExecution().GetWorkflowId(), r.GetExecution().GetRunId(), deleted); err != nil {
				return len(deleted), err
			}
			wids[r.GetExecution().GetWorkflowId()] = true
		}
		done := len(runs) == 0
		for w := range wids { // a run the visibility store does not list (yet, or any more)
			desc, err := c.DescribeWorkflowExecution(ctx, w, "")
			var notFound *serviceerror.NotFound
			switch {
			case errors.As(err, &notFound):
				continue
			case err != nil:
				return len(deleted), fmt.Errorf("describe %s: %w", w, err)
			}
			done = false
			if err := deleteRun(ctx, c, namespace, w, desc.GetWorkflowExecutionInfo().GetExecution().GetRunId(), deleted); err != nil {
				return len(deleted), err
			}
		}
		if done {
			return len(deleted), nil
		}
		slog.Debug("erase: waiting for temporal to delete", "query", query, "listed", len(runs), "deleted", len(deleted), "waited", wait-time.Until(deadline))
		if activity.IsActivity(ctx) {
			activity.RecordHeartbeat(ctx, len(deleted))
		}
		if time.Now().After(deadline) {
			return len(deleted), fmt.Errorf("temporal still holds workflows of %q after %s", query, wait)
		}
		select {
		case <-ctx.Done():
			return len(deleted), ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// deleteRun asks the server to delete one run (again, while it is still
// there: deletion is asynchronous).
func deleteRun(ctx context.Context, c client.Client, namespace, wid, runID string, deleted map[string]bool) error {
	_, err := c.WorkflowService().DeleteWorkflowExecution(ctx, &workflowservice.DeleteWorkflowExecutionRequest{
		Namespace:         namespace,
		WorkflowExecution: &commonpb.WorkflowExecution{WorkflowId: wid, RunId: runID},
	})
	var notFound *serviceerror.NotFound
	if err != nil && !errors.As(err, &notFound) {
		return fmt.Errorf("delete workflow %s: %w", wid, err)
	}
	if err == nil {
		deleted[wid+"\x00"+runID] = true
	}
	return nil
}

// sessionOfKey is the session of a transcript key: a task's (TaskKey) is
// its session's.
func sessionOfKey(id string) string {
	s, _, _ := strings.Cut(id, ":task:")
	return s
}

// parseSessionWorkflowID is workflows.ParseSessionWorkflowID.
func parseSessionWorkflowID(wid string) (tenant, sessionID string, ok bool) {
	rest, found := strings.CutPrefix(wid, "session/")
	if !found {
		return "", "", false
	}
	tenant, sessionID, ok = strings.Cut(rest, "/")
	return tenant, sessionID, ok && tenant != "" && sessionID != "" && !strings.Contains(sessionID, "/")
}

func uniq(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return slices.Compact(s)
}
