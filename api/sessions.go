package api

import (
	"bytes"
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/gin-gonic/gin"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/convo"
	"github.com/ctxflow/ctxflow/workflows"
)

const tenantHeader = "X-Tenant-ID"

// sessionRef is the tenant and id a request is about.
type sessionRef struct{ tenant, id string }

func (r sessionRef) workflowID() string { return workflows.SessionWorkflowID(r.tenant, r.id) }

func (r sessionRef) key() activities.SessionKey {
	return activities.SessionKey{Tenant: r.tenant, SessionID: r.id}
}

// tenant is the request's tenant: its API key's, or else the X-Tenant-ID
// header's (default "default").
func tenant(c *gin.Context) (string, error) {
	if t := c.GetString(keyTenant); t != "" {
		return t, nil
	}
	t := c.GetHeader(tenantHeader)
	if t == "" {
		return workflows.DefaultTenant, nil
	}
	if err := workflows.ValidateID("tenant", t); err != nil {
		return "", errInvalid("%s", err)
	}
	return t, nil
}

func sessionOf(c *gin.Context) (sessionRef, error) {
	t, err := tenant(c)
	if err != nil {
		return sessionRef{}, err
	}
	id := c.Param("id")
	if err := workflows.ValidateID("sessionId", id); err != nil {
		return sessionRef{}, errInvalid("%s", err)
	}
	return sessionRef{tenant: t, id: id}, nil
}

// turnOf returns the session and the turn id a /turns/{turnId} route names.
func turnOf(c *gin.Context) (sessionRef, string, error) {
	ref, err := sessionOf(c)
	if err != nil {
		return ref, "", err
	}
	turnID := c.Param("turnId")
	if err := workflows.ValidateID("turnId", turnID); err != nil {
		return ref, "", errInvalid("%s", err)
	}
	return ref, turnID, nil
}

// bindJSON decodes a JSON body strictly: unknown fields are errors, and so
// are bytes that are not UTF-8 (encoding/json would quietly turn them into
// U+FFFD).
func bindJSON(c *gin.Context, v any, optional bool) error {
	raw, err := io.ReadAll(c.Request.Body)
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return errTooLarge(tooBig.Limit)
	case err != nil:
		return errInvalid("request body: %v", err)
	case len(bytes.TrimSpace(raw)) == 0:
		if optional {
			return nil
		}
		return errInvalid("request body is empty")
	case !utf8.Valid(raw):
		return errInvalid("request body is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return errInvalid("request body: %v", err)
	}
	if len(bytes.TrimSpace(raw[dec.InputOffset():])) > 0 {
		return errInvalid("request body holds more than one JSON value")
	}
	return nil
}

// startOptions are the start options of the session's workflow
// ([workflows.SessionStartOptions]).
func (s *Server) startOptions(ref sessionRef, title string, cfg workflows.SessionConfig) client.StartWorkflowOptions {
	return workflows.SessionStartOptions(ref.tenant, ref.id, title, cfg)
}

func (s *Server) sessionInput(ref sessionRef, title string, cfg workflows.SessionConfig) (workflows.SessionInput, error) {
	raw, err := json.Marshal(cfg)
	if err != nil {
		return workflows.SessionInput{}, errInternal("encode config: %v", err)
	}
	limits := s.opts.Limits
	limits.ApproveTools = append(slices.Clone(s.opts.ApproveTools["*"]), s.opts.ApproveTools[ref.tenant]...)
	return workflows.SessionInput{Tenant: ref.tenant, SessionID: ref.id, Title: title, Config: raw, Limits: limits}, nil
}

type createSessionRequest struct {
	SessionID string          `json:"sessionId"`
	Title     string          `json:"title"`
	Config    json.RawMessage `json:"config"`
}

func (s *Server) createSession(c *gin.Context) {
	var req createSessionRequest
	if err := bindJSON(c, &req, true); err != nil {
		writeError(c, err)
		return
	}
	t, err := tenant(c)
	if err != nil {
		writeError(c, err)
		return
	}
	out, err := s.newSession(c.Request.Context(), t, req)
	if err != nil {
		writeError(c, err)
		return
	}
	c.JSON(http.StatusCreated, out)
}

// sessionCreated answers POST /v1/sessions.
type sessionCreated struct {
	SessionID string                  `json:"sessionId"`
	Config    workflows.SessionConfig `json:"config"`
}

// newSession starts a tenant's session as req asks (its id, title and
// config over the defaults); a session that exists and is not deleted is
// a conflict.
func (s *Server) newSession(ctx context.Context, t string, req createSessionRequest) (sessionCreated, error) {
	if req.SessionID == "" {
		req.SessionID = newID("s")
	}
	if err := workflows.ValidateID("sessionId", req.SessionID); err != nil {
		return sessionCreated{}, errInvalid("%s", err)
	}
	if len(req.Title) > 200 {
		return sessionCreated{}, errInvalid("title is %d bytes, over the 200-byte limit", len(req.Title))
	}
	cfg, err := s.opts.Defaults.Merge(req.Config)
	if err != nil {
		return sessionCreated{}, errInvalid("%s", err)
	}
	if err := s.fitsModel(ctx, cfg); err != nil {
		return sessionCreated{}, err
	}
	ref := sessionRef{tenant: t, id: req.SessionID}
	in, err := s.sessionInput(ref, req.Title, cfg)
	if err != nil {
		return sessionCreated{}, err
	}
	switch status, err := s.sessionStatus(ctx, ref); {
	case err != nil:
		return sessionCreated{}, err
	case status != "" && status != workflows.StatusDeleted:
		return sessionCreated{}, errConflict("session %s already exists: send its turns, or DELETE it first", ref.id)
	}
	opts := s.startOptions(ref, req.Title, cfg)
	opts.WorkflowIDConflictPolicy = enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL
	opts.WorkflowExecutionErrorWhenAlreadyStarted = true
	if _, err := s.c.ExecuteWorkflow(ctx, opts, workflows.SessionWorkflowName, in); err != nil {
		return sessionCreated{}, fromTemporal("session "+ref.id, err)
	}
	return sessionCreated{SessionID: ref.id, Config: cfg}, nil
}

// sessionSummary is one row of GET /v1/sessions.
type sessionSummary struct {
	SessionID string    `json:"sessionId"`
	Title     string    `json:"title,omitempty"`
	Status    string    `json:"status"`
	Turns     int64     `json:"turns"`
	UpdatedAt time.Time `json:"updatedAt"`
}

var validStatus = map[string]bool{
	workflows.StatusIdle: true, workflows.StatusRunning: true, workflows.StatusPaused: true, workflows.StatusClosed: true,
	workflows.TaskAwaiting: true,
}

func (s *Server) listSessions(c *gin.Context) {
	if page, ok := s.pageOf(c); ok {
		c.JSON(http.StatusOK, page)
	}
}

// pageOf lists the page of sessions the request asks for (its tenant, and
// status, limit and pageToken as in GET /v1/sessions); it writes the error
// and reports false when it cannot.
func (s *Server) pageOf(c *gin.Context) (sessionPage, bool) {
	t, err := tenant(c)
	if err != nil {
		writeError(c, err)
		return sessionPage{}, false
	}
	page, err := s.listPage(c.Request.Context(), t, listQuery(c))
	if err != nil {
		writeError(c, err)
		return sessionPage{}, false
	}
	return page, true
}

// sessionListQuery is what GET /v1/sessions filters and pages by: its
// query parameters status, limit and pageToken, as sent.
type sessionListQuery struct{ status, limit, pageToken string }

func listQuery(c *gin.Context) sessionListQuery {
	return sessionListQuery{status: c.Query("status"), limit: c.Query("limit"), pageToken: c.Query("pageToken")}
}

// sessionPage answers GET /v1/sessions: a page of the tenant's sessions
// and the token of the next page ("" after the last).
type sessionPage struct {
	Sessions      []sessionSummary `json:"sessions"`
	NextPageToken string           `json:"nextPageToken"`
}

// listPage lists a page of the tenant's live sessions.
func (s *Server) listPage(ctx context.Context, t string, q sessionListQuery) (sessionPage, error) {
	query := fmt.Sprintf("WorkflowType = '%s' AND CtxTenant = '%s' AND ExecutionStatus != 'ContinuedAsNew' AND CtxStatus != '%s'",
		workflows.SessionWorkflowName, t, workflows.StatusDeleted)
	if st := q.status; st != "" {
		if !validStatus[st] {
			return sessionPage{}, errInvalid("status %q: want idle, running, paused, awaiting_approval or closed", st)
		}
		query += fmt.Sprintf(" AND CtxStatus = '%s'", st)
	}
	limit := 50
	if l := q.limit; l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > 1000 {
			return sessionPage{}, errInvalid("limit %q: want an integer in [1, 1000]", l)
		}
		limit = n
	}
	var token []byte
	if pt := q.pageToken; pt != "" {
		var err error
		if token, err = s.decodeToken(query, pt); err != nil {
			return sessionPage{}, errInvalid("pageToken is not one this listing returned: %v", err)
		}
	}
	resp, err := s.c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
		Query: query, PageSize: int32(limit), NextPageToken: token,
	})
	if err != nil {
		return sessionPage{}, fromTemporal("list sessions", err)
	}
	out := make([]sessionSummary, 0, len(resp.GetExecutions()))
	seen := map[string]bool{}
	for _, ex := range resp.GetExecutions() {
		_, id, ok := workflows.ParseSessionWorkflowID(ex.GetExecution().GetWorkflowId())
		if !ok || seen[id] {
			continue // an older run of a revived session
		}
		seen[id] = true
		row := sessionSummary{SessionID: id}
		fields := ex.GetSearchAttributes().GetIndexedFields()
		dc := converter.GetDefaultDataConverter()
		for name, dst := range map[string]any{
			workflows.SAttrStatus.GetName(): &row.Status, workflows.SAttrTurns.GetName(): &row.Turns,
			workflows.SAttrUpdatedAt.GetName(): &row.UpdatedAt,
		} {
			if p := fields[name]; p != nil {
				if err := dc.FromPayload(p, dst); err != nil {
					s.log.Warn("decode search attribute", "session", id, "attribute", name, "error", err)
				}
			}
		}
		if f := ex.GetMemo().GetFields()["title"]; f != nil {
			_ = dc.FromPayload(f, &row.Title)
		}
		out = append(out, row)
	}
	return sessionPage{Sessions: out, NextPageToken: s.encodeToken(query, resp.GetNextPageToken())}, nil
}

// query runs a query on a session, with a deadline so that a session with
// no worker answers 503 instead of hanging.
func (s *Server) query(ctx context.Context, ref sessionRef, name string, out any, args ...any) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	v, err := s.queryWorkflow(ctx, ref.workflowID(), name, args...)
	if err != nil {
		return fromTemporal("session "+ref.id, err)
	}
	if err := v.Get(out); err != nil {
		return errInternal("decode %s of session %s: %v", name, ref.id, err)
	}
	return nil
}

// queryWorkflow runs a query on a workflow's current run. The server first
// offers it to the worker that holds the workflow (its sticky queue) and,
// when that one has not taken it after the sticky timeout (5 s: a worker
// gone, or one swamped), clears the stickiness and answers that the
// deadline passed: asked again within ctx, any worker answers.
func (s *Server) queryWorkflow(ctx context.Context, workflowID, name string, args ...any) (converter.EncodedValue, error) {
	v, err := s.c.QueryWorkflow(ctx, workflowID, "", name, args...)
	var late *serviceerror.DeadlineExceeded
	if errors.As(err, &late) && ctx.Err() == nil {
		s.log.Info("query again: the worker holding the workflow did not take it in time", "workflow", workflowID, "query", name)
		v, err = s.c.QueryWorkflow(ctx, workflowID, "", name, args...)
	}
	return v, err
}

func (s *Server) getSession(c *gin.Context) {
	ref, err := sessionOf(c)
	if err != nil {
		writeError(c, err)
		return
	}
	st, err := s.liveState(c.Request.Context(), ref)
	if err != nil {
		writeError(c, err)
		return
	}
	out := sessionView{SessionState: st, MessagesURL: "/v1/sessions/" + ref.id + "/messages"}
	if st.Summary != nil && s.opts.Transcripts != nil {
		m, ok, err := s.opts.Transcripts.Get(c.Request.Context(), ref.key(), st.Summary.ID)
		if err != nil {
			s.log.Warn("read summary", "session", ref.id, "error", err, "requestId", c.GetString("requestID"))
		} else if ok {
			out.SummaryText = m.Content
		}
	}
	c.JSON(http.StatusOK, out)
}

// liveState reads a session's state; a deleted session is not found.
func (s *Server) liveState(ctx context.Context, ref sessionRef) (workflows.SessionState, error) {
	var st workflows.SessionState
	if err := s.query(ctx, ref, workflows.QueryState, &st); err != nil {
		return st, err
	}
	if st.Status == workflows.StatusDeleted {
		return st, errNotFound("session %s was deleted", ref.id)
	}
	return st, nil
}

// sessionView is GET /v1/sessions/{id}: the session's state, the running
// summary's text (when this process can read transcripts) and where to
// read the messages.
type sessionView struct {
	workflows.SessionState
	SummaryText string `json:"summaryText,omitempty"`
	MessagesURL string `json:"messagesUrl"`
}

// getMessages answers GET /v1/sessions/{id}/messages?leaf=: the full
// transcript of a branch, root first (the display list); by default the
// active branch.
func (s *Server) getMessages(c *gin.Context) {
	ref, err := sessionOf(c)
	if err != nil {
		writeError(c, err)
		return
	}
	if s.opts.Transcripts == nil {
		writeError(c, errUnavailable("this API process cannot read transcripts: `ctxflow dev` can, and so can an API that shares the workers' transcript store"))
		return
	}
	st, err := s.liveState(c.Request.Context(), ref)
	if err != nil {
		writeError(c, err)
		return
	}
	leaf := st.ActiveLeaf
	if l, ok := c.GetQuery("leaf"); ok {
		if err := workflows.ValidateID("leaf", l); err != nil {
			writeError(c, errInvalid("%s", err))
			return
		}
		leaf = l
	}
	msgs := []convo.Message{}
	if leaf != "" {
		b, err := s.opts.Transcripts.Branch(c.Request.Context(), ref.key(), leaf)
		switch {
		case errors.Is(err, convo.ErrNotFound):
			writeError(c, errNotFound("session %s has no message %s", ref.id, leaf))
			return
		case err != nil:
			writeError(c, errUnavailable("read the transcript of session %s: %v", ref.id, err))
			return
		}
		msgs = b
	}
	c.JSON(http.StatusOK, gin.H{"sessionId": ref.id, "leaf": leaf, "activeLeaf": st.ActiveLeaf, "messages": msgs})
}

// sessionStatus is the CtxStatus of a session's latest run, "" when the
// session never existed.
func (s *Server) sessionStatus(ctx context.Context, ref sessionRef) (string, error) {
	desc, err := s.c.DescribeWorkflowExecution(ctx, ref.workflowID(), "")
	var notFound *serviceerror.NotFound
	switch {
	case errors.As(err, &notFound):
		return "", nil
	case err != nil:
		return "", fromTemporal("session "+ref.id, err)
	}
	status := workflows.StatusIdle
	if p := desc.GetWorkflowExecutionInfo().GetSearchAttributes().GetIndexedFields()[workflows.SAttrStatus.GetName()]; p != nil {
		if err := converter.GetDefaultDataConverter().FromPayload(p, &status); err != nil {
			return "", errInternal("decode status of session %s: %v", ref.id, err)
		}
	}
	return status, nil
}

// closeWait bounds how long DELETE waits for the session to be closed
// before it answers 202.
const closeWait = 30 * time.Second

func (s *Server) deleteSession(c *gin.Context) {
	ref, err := sessionOf(c)
	if err != nil {
		writeError(c, err)
		return
	}
	for k := range c.Request.URL.Query() {
		if k != "erase" {
			writeError(c, errInvalid("unknown query parameter %q: want erase", k))
			return
		}
	}
	erase, err := boolParam(c, "erase")
	if err != nil {
		writeError(c, err)
		return
	}
	if erase {
		s.eraseSession(c, ref)
		return
	}
	switch closed, err := s.removeSession(c.Request.Context(), ref); {
	case err != nil:
		writeError(c, err)
	case closed:
		c.Status(http.StatusNoContent)
	default:
		c.JSON(http.StatusAccepted, deleting(ref))
	}
}

// deleting is the answer to a deletion still under way after closeWait.
func deleting(ref sessionRef) gin.H { return gin.H{"sessionId": ref.id, "status": "deleting"} }

// removeSession closes a session and deletes its transcript: closed is
// false when it is still being closed after closeWait (it will be).
func (s *Server) removeSession(ctx context.Context, ref sessionRef) (closed bool, err error) {
	switch status, err := s.sessionStatus(ctx, ref); {
	case err != nil:
		return false, err
	case status == "":
		return false, errNotFound("session %s not found", ref.id)
	case status == workflows.StatusDeleted:
		return false, errNotFound("session %s was deleted", ref.id)
	}
	// A session whose run ended idle is revived to be closed: its
	// transcript is deleted by the workflow, like any other's.
	in, err := s.sessionInput(ref, "", s.opts.Defaults)
	if err != nil {
		return false, err
	}
	wctx, cancel := context.WithTimeout(ctx, closeWait)
	defer cancel()
	err = whileNotReady(wctx, func() error { // closing twice is closing once
		op := s.c.NewWithStartWorkflowOperation(s.startOptions(ref, "", s.opts.Defaults), workflows.SessionWorkflowName, in)
		h, err := s.c.UpdateWithStartWorkflow(wctx, client.UpdateWithStartWorkflowOptions{
			StartWorkflowOperation: op,
			UpdateOptions: client.UpdateWorkflowOptions{
				UpdateName: workflows.UpdateClose, Args: []any{workflows.CloseRequest{Delete: true}},
				WaitForStage: client.WorkflowUpdateStageCompleted,
			},
		})
		if err == nil {
			err = h.Get(wctx, nil)
		}
		return err
	})
	switch {
	case err == nil:
		return true, nil
	case wctx.Err() != nil && ctx.Err() == nil:
		return false, nil
	default:
		return false, fromTemporal("delete session "+ref.id, err)
	}
}

type turnRequest struct {
	Question string          `json:"question"`
	TurnID   string          `json:"turnId"`
	Config   json.RawMessage `json:"config"`
	// Busy: what the question does while a task of the session runs
	// (enqueue, steer, reject; "" is the session's busy option).
	Busy string `json:"busy"`
}

func (s *Server) postTurn(c *gin.Context) {
	ref, err := sessionOf(c)
	if err != nil {
		writeError(c, err)
		return
	}
	var body turnRequest
	if err := bindJSON(c, &body, false); err != nil {
		writeError(c, err)
		return
	}
	req := workflows.TurnRequest{TurnID: body.TurnID, Question: body.Question, Config: body.Config, Busy: body.Busy}
	if wantsStream(c) {
		s.streamTurn(c, ref, req)
		return
	}
	s.submitTurn(c, ref, req)
}

// submitTurn sends a turn (a question, a task, a continue) to the
// session: with ?wait=true it answers with the turn's result, else 202
// once the session queued it.
func (s *Server) submitTurn(c *gin.Context, ref sessionRef, req workflows.TurnRequest) {
	if req.TurnID == "" {
		req.TurnID = newID("turn")
	}
	if err := workflows.ValidateTurn(req, s.opts.Defaults, s.opts.Limits); err != nil {
		writeError(c, errInvalid("%s", err))
		return
	}
	wait, err := waitParam(c)
	if err != nil {
		writeError(c, err)
		return
	}
	in, err := s.sessionInput(ref, "", s.opts.Defaults)
	if err != nil {
		writeError(c, err)
		return
	}
	opts := s.startOptions(ref, "", s.opts.Defaults)
	if !wait {
		ctx, cancel := context.WithTimeout(c.Request.Context(), submitWait)
		defer cancel()
		res, err := s.sendTurn(ctx, ref, workflows.UpdateSubmit, req, opts, in)
		if err != nil {
			writeError(c, err)
			return
		}
		status := res.Status
		if status == "" {
			status = workflows.TurnQueued
		}
		out := gin.H{"sessionId": ref.id, "turnId": req.TurnID, "status": status}
		if req.Kind == workflows.KindTask {
			out["taskId"] = req.TurnID
		}
		c.JSON(http.StatusAccepted, out)
		return
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), s.opts.TurnWaitTimeout)
	defer cancel()
	res, err := s.sendTurn(ctx, ref, workflows.UpdateTurn, req, opts, in)
	if err != nil {
		writeError(c, err)
		return
	}
	writeTurn(c, res)
}

// submitWait bounds how long an asynchronous turn waits to be queued (a
// session with no worker to run it answers 503 rather than hang).
const submitWait = 30 * time.Second

// waitParam reads ?wait= strictly: true or false (absent is false).
func waitParam(c *gin.Context) (bool, error) { return boolParam(c, "wait") }

// boolParam reads a query parameter strictly: true or false (absent is
// false).
func boolParam(c *gin.Context, name string) (bool, error) {
	w, ok := c.GetQuery(name)
	if !ok {
		return false, nil
	}
	b, err := strconv.ParseBool(w)
	if err != nil {
		return false, errInvalid("%s %q: want true or false", name, convo.Clip(w, 20))
	}
	return b, nil
}

// sendTurn sends a turn as an update-with-start (update: UpdateTurn waits
// for the answer, UpdateSubmit only for the turn to be queued), so that the
// session validates it against its own config before anything is
// accepted. If the session already has the server's limit of in-flight
// updates, the turn is queued as a signal instead (and, for UpdateTurn, its
// result polled): a burst queues, it does not fail.
func (s *Server) sendTurn(ctx context.Context, ref sessionRef, update string, req workflows.TurnRequest, opts client.StartWorkflowOptions, in workflows.SessionInput) (workflows.TurnResult, error) {
	var res workflows.TurnResult
	err := whileNotReady(ctx, func() error {
		res = workflows.TurnResult{}
		op := s.c.NewWithStartWorkflowOperation(opts, workflows.SessionWorkflowName, in)
		h, err := s.c.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
			StartWorkflowOperation: op,
			UpdateOptions: client.UpdateWorkflowOptions{
				UpdateID: workflows.TurnUpdateID(update, req), UpdateName: update, Args: []any{req},
				WaitForStage: client.WorkflowUpdateStageCompleted,
			},
		})
		if err == nil {
			err = h.Get(ctx, &res)
		}
		return err
	})
	var exhausted *serviceerror.ResourceExhausted
	if errors.As(err, &exhausted) {
		s.log.Info("update limit reached, queueing turn as a signal", "session", ref.id, "turn", req.TurnID)
		if update == workflows.UpdateSubmit {
			_, err := s.c.SignalWithStartWorkflow(ctx, ref.workflowID(), workflows.SignalTurn, req, opts, workflows.SessionWorkflowName, in)
			if err != nil {
				return res, fromTemporal("session "+ref.id, err)
			}
			return workflows.TurnResult{TurnID: req.TurnID, Status: workflows.TurnQueued}, nil
		}
		return s.signalAndWait(ctx, ref, req, opts, in)
	}
	if err != nil {
		return res, fromTemporal("turn "+req.TurnID, err)
	}
	return res, nil
}

func (s *Server) signalAndWait(ctx context.Context, ref sessionRef, req workflows.TurnRequest, opts client.StartWorkflowOptions, in workflows.SessionInput) (workflows.TurnResult, error) {
	var res workflows.TurnResult
	if _, err := s.c.SignalWithStartWorkflow(ctx, ref.workflowID(), workflows.SignalTurn, req, opts, workflows.SessionWorkflowName, in); err != nil {
		return res, fromTemporal("session "+ref.id, err)
	}
	delay := 50 * time.Millisecond
	for {
		err := s.query(ctx, ref, workflows.QueryTurn, &res, req.TurnID)
		if err == nil && res.Done() {
			return res, nil
		}
		var ae *apiError
		if err != nil && (!errors.As(err, &ae) || ae.code != "not_found") {
			return res, err
		}
		select {
		case <-ctx.Done():
			return res, errUnavailable("turn %s did not finish in time; fetch it later from GET /v1/sessions/%s/turns/%s", req.TurnID, ref.id, req.TurnID)
		case <-time.After(delay):
		}
		delay = min(delay*2, time.Second)
	}
}

// writeTurn answers with a turn result: 200 when it completed, an error
// carrying the result when it failed or was rejected.
func writeTurn(c *gin.Context, res workflows.TurnResult) {
	switch res.Status {
	case workflows.TurnFailed, workflows.TurnRejected:
		e := failed(turnCode(res), "turn "+res.TurnID+" "+res.Status,
			fmt.Sprintf("%s; the question is saved, the session is %s", res.Error, res.SessionInfo.Health))
		e.extra = gin.H{"turn": res}
		writeError(c, e)
	default:
		c.JSON(http.StatusOK, res)
	}
}

func (s *Server) getTurn(c *gin.Context) {
	ref, turnID, err := turnOf(c)
	if err != nil {
		writeError(c, err)
		return
	}
	var res workflows.TurnResult
	if err := s.query(c.Request.Context(), ref, workflows.QueryTurn, &res, turnID); err != nil {
		writeError(c, err)
		return
	}
	c.JSON(http.StatusOK, res)
}

// continueTask resumes the session's paused task: a continue turn.
func (s *Server) continueTask(c *gin.Context) {
	ref, err := sessionOf(c)
	if err != nil {
		writeError(c, err)
		return
	}
	var body struct {
		TurnID string `json:"turnId"`
		// Guidance is what the task should do next, read before its next
		// step.
		Guidance string `json:"guidance"`
	}
	if err := bindJSON(c, &body, true); err != nil {
		writeError(c, err)
		return
	}
	s.submitTurn(c, ref, workflows.TurnRequest{TurnID: body.TurnID, Question: "continue", Kind: workflows.KindContinue, Guidance: body.Guidance})
}

// cancelTurnWait bounds how long a cancel waits for the turn to stop (its
// model call notices at its next heartbeat).
const cancelTurnWait = time.Minute

// cancelTurn answers POST /v1/sessions/{id}/turns/{turnId}/cancel: a
// queued turn is dropped, a running one stops (its model call cancelled,
// the partial answer kept as a cancelled message); 200 with the turn's
// result, 404 for an unknown turn, 409 for one that is done.
func (s *Server) cancelTurn(c *gin.Context) {
	ref, turnID, err := turnOf(c)
	if err != nil {
		writeError(c, err)
		return
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), cancelTurnWait)
	defer cancel()
	var res workflows.TurnResult
	err = whileNotReady(ctx, func() error {
		h, err := s.c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
			WorkflowID: ref.workflowID(), UpdateName: workflows.UpdateCancelTurn, Args: []any{turnID},
			WaitForStage: client.WorkflowUpdateStageCompleted,
		})
		if err == nil {
			err = h.Get(ctx, &res)
		}
		return err
	})
	if err != nil {
		writeError(c, fromTemporal("turn "+turnID, err))
		return
	}
	c.JSON(http.StatusOK, res)
}

func (s *Server) compress(c *gin.Context) {
	ref, err := sessionOf(c)
	if err != nil {
		writeError(c, err)
		return
	}
	if err := s.requestCompress(c.Request.Context(), ref); err != nil {
		writeError(c, err)
		return
	}
	c.JSON(http.StatusAccepted, compressing(ref))
}

// requestCompress asks the session to summarise when it is next idle.
func (s *Server) requestCompress(ctx context.Context, ref sessionRef) error {
	if err := s.c.SignalWorkflow(ctx, ref.workflowID(), "", workflows.SignalCompress, nil); err != nil {
		return fromTemporal("session "+ref.id, err)
	}
	return nil
}

// compressing is the answer to a compression requested.
func compressing(ref sessionRef) gin.H {
	return gin.H{"sessionId": ref.id, "status": "compression requested"}
}

func (s *Server) getSteps(c *gin.Context) {
	ref, err := sessionOf(c)
	if err != nil {
		writeError(c, err)
		return
	}
	var steps []workflows.TurnSteps
	if err := s.query(c.Request.Context(), ref, workflows.QuerySteps, &steps); err != nil {
		writeError(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"sessionId": ref.id, "turns": steps})
}

// encodeToken wraps Temporal's page token for the listing query with an
// HMAC under the server's secret (Options.TokenSecret): a token is good only
// for the listing that made it, and nobody without the secret can make one
// (a forged token would reach Temporal's visibility store).
func (s *Server) encodeToken(query string, token []byte) string {
	if len(token) == 0 {
		return ""
	}
	return base64.RawURLEncoding.EncodeToString(append(s.tokenMAC(query, token), token...))
}

func (s *Server) decodeToken(query, tok string) ([]byte, error) {
	b, err := base64.RawURLEncoding.DecodeString(tok)
	switch {
	case err != nil:
		return nil, errors.New("not base64url")
	case len(b) <= tokenMACSize || !hmac.Equal(b[:tokenMACSize], s.tokenMAC(query, b[tokenMACSize:])):
		return nil, errors.New("unknown token (it belongs to another listing, another deployment, or was altered)")
	}
	return b[tokenMACSize:], nil
}

const tokenMACSize = 16

func (s *Server) tokenMAC(query string, token []byte) []byte {
	h := hmac.New(sha256.New, s.opts.TokenSecret)
	h.Write([]byte(query))
	h.Write([]byte{0})
	h.Write(token)
	return h.Sum(nil)[:tokenMACSize]
}

// fitsModel refuses a configuration whose window and answer cannot fit the
// context its chat model is served with (Options.Models), rather than have
// the server cut its prompts at run time. A context that cannot be read
// (no server, an unknown model) is not checked here.
func (s *Server) fitsModel(ctx context.Context, cfg workflows.SessionConfig) error {
	if s.opts.Models == nil || cfg.MaxTokens <= 0 {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	n, err := s.opts.Models.ContextLength(cctx, cfg.LLMModel)
	if err != nil || n <= 0 {
		s.log.Debug("model context not checked", "model", cfg.LLMModel, "error", err)
		return nil
	}
	answer := cmp.Or(s.opts.Limits.LLMMaxTokens, workflows.DefaultLimits().LLMMaxTokens)
	if need := cfg.MaxTokens + answer; need > n {
		return errInvalid("the window (maxTokens %d) and the answer (LLM_MAX_TOKENS %d) need %d tokens, over the %d-token context %s is served with: lower maxTokens, or serve the model with a longer context (Ollama: CTXFLOW_OLLAMA_NUM_CTX, up to the model's own; an OpenAI-compatible server: its own setting, then CTXFLOW_OPENAI_CONTEXT_LENGTH)",
			cfg.MaxTokens, answer, need, n, cfg.LLMModel)
	}
	return nil
}
