package api

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/convo"
	"github.com/ctxflow/ctxflow/workflows"
)

// The seeds' own endpoints: seed 000's /api/context-management (POST
// actions query, create-session, delete-session and compress; GET
// ?action=sessions and ?action=session&sessionId=; DELETE ?sessionId=) and
// seed 003's POST /api/self-corrective-rag, with the seeds' field names, so
// that their front ends can talk to ctxflow. Each action runs what its /v1
// route runs — the same handler, or for query the same turn update — under
// the same authentication and tenant; only the shapes differ. Answers are
// {"success": true, ...}; errors are {"success": false, "error": message}
// with the /v1 route's status, its code and the request id.

const jsonType = "application/json; charset=utf-8"

// seedRoutes registers the seeds' own endpoints (seed 000 /api/context-management, seed 003 /api/self-corrective-rag).
func (s *Server) seedRoutes(r *gin.Engine) {
	coll := s.opts.Collection
	g := r.Group("/api", seedErrors, s.admit, s.authenticate)
	g.POST("/context-management", func(c *gin.Context) { s.contextPost(c, coll) })
	g.GET("/context-management", s.contextGet)
	g.DELETE("/context-management", func(c *gin.Context) { s.seedDelete(c, c.Query("sessionId")) })
	g.POST("/self-corrective-rag", func(c *gin.Context) { s.seedCorrective(c, coll) })
}

// contextRequest is the body of POST /api/context-management: seed 000's
// action, session and question, and its options (§5.1 and §6.1).
type contextRequest struct {
	Action    string `json:"action"`
	SessionID string `json:"sessionId"`
	Question  string `json:"question"`
	// TurnID (ctxflow's) makes a query idempotent; Title names a new session.
	TurnID string `json:"turnId"`
	Title  string `json:"title"`

	LLMModel             *string  `json:"llmModel"`
	EmbeddingModel       *string  `json:"embeddingModel"`
	MilvusCollection     *string  `json:"milvusCollection"`
	WindowStrategy       *string  `json:"windowStrategy"`
	MaxRounds            *int     `json:"maxRounds"`
	MaxTokens            *int     `json:"maxTokens"`
	SummaryThreshold     *int     `json:"summaryThreshold"`
	PreserveSystemPrompt *bool    `json:"preserveSystemPrompt"`
	EnableQueryRewriting *bool    `json:"enableQueryRewriting"`
	EnableSummarization  *bool    `json:"enableSummarization"`
	MaxRetries           *int     `json:"maxRetries"`
	TopK                 *int     `json:"topK"`
	SimilarityThreshold  *float64 `json:"similarityThreshold"`
}

// turnOptions are the request's options a turn may override.
func (r contextRequest) turnOptions() workflows.TurnOptions {
	return workflows.TurnOptions{
		LLMModel: r.LLMModel, WindowStrategy: r.WindowStrategy, MaxRounds: r.MaxRounds, MaxTokens: r.MaxTokens,
		EnableQueryRewriting: r.EnableQueryRewriting, TopK: r.TopK, SimilarityThreshold: r.SimilarityThreshold,
	}
}

// sessionConfig is d with every option of the request, validated: the
// config of a session the request creates.
func (r contextRequest) sessionConfig(d workflows.SessionConfig) (workflows.SessionConfig, error) {
	setIf(&d.EmbeddingModel, r.EmbeddingModel)
	setIf(&d.SummaryThreshold, r.SummaryThreshold)
	setIf(&d.PreserveSystemPrompt, r.PreserveSystemPrompt)
	setIf(&d.EnableSummarization, r.EnableSummarization)
	setIf(&d.MaxRetries, r.MaxRetries)
	cfg, err := r.turnOptions().Apply(d)
	if err != nil {
		return cfg, errInvalid("%s", err)
	}
	return cfg, nil
}

func setIf[T any](dst, v *T) {
	if v != nil {
		*dst = *v
	}
}

// checkCollection refuses a collection other than the workers'.
func checkCollection(field, name, coll string) error {
	if name == "" || name == coll {
		return nil
	}
	return errInvalid("%s %q is not the knowledge base's collection %q: ctxflow searches the collection its workers are configured with (CTXFLOW_COLLECTION); leave it out or send %q",
		field, convo.Clip(name, 80), coll, coll)
}

func (s *Server) contextPost(c *gin.Context, coll string) {
	var req contextRequest
	if err := bindJSON(c, &req, false); err != nil {
		writeError(c, err)
		return
	}
	if req.MilvusCollection != nil {
		if err := checkCollection("milvusCollection", *req.MilvusCollection, coll); err != nil {
			writeError(c, err)
			return
		}
	}
	switch req.Action {
	case "query":
		s.seedQuery(c, req)
	case "create-session":
		s.seedCreate(c, req)
	case "delete-session":
		s.seedDelete(c, req.SessionID)
	case "compress":
		s.seedCompress(c, req.SessionID)
	default:
		writeError(c, errInvalid("action %q: want query, create-session, delete-session or compress", convo.Clip(req.Action, 40)))
	}
}

func (s *Server) contextGet(c *gin.Context) {
	switch a := c.Query("action"); a {
	case "sessions": // status, limit and pageToken as in GET /v1/sessions
		status, body := relay(c, s.listSessions, nil)
		answerRelayed(c, status, body, nil)
	case "session":
		s.seedSession(c, c.Query("sessionId"))
	default:
		writeError(c, errInvalid("action %q: want sessions or session", convo.Clip(a, 40)))
	}
}

// seedRef is the request's session, named by a seed field.
func seedRef(c *gin.Context, id string) (sessionRef, error) {
	t, err := tenant(c)
	if err != nil {
		return sessionRef{}, err
	}
	if id == "" {
		return sessionRef{}, errInvalid("sessionId is missing")
	}
	if err := workflows.ValidateID("sessionId", id); err != nil {
		return sessionRef{}, errInvalid("%s", err)
	}
	return sessionRef{tenant: t, id: id}, nil
}

// seedQuery is action query: a turn of the session, waited for (what POST
// /v1/sessions/{id}/turns?wait=true sends). A session the query starts
// gets the request's options as its config; the turn gets those a turn
// may override.
func (s *Server) seedQuery(c *gin.Context, req contextRequest) {
	if req.SessionID == "" {
		req.SessionID = newID("s")
	}
	ref, err := seedRef(c, req.SessionID)
	if err != nil {
		writeError(c, err)
		return
	}
	cfg, err := req.sessionConfig(s.opts.Defaults)
	if err != nil {
		writeError(c, err)
		return
	}
	turn := workflows.TurnRequest{TurnID: cmp.Or(req.TurnID, newID("turn")), Question: req.Question}
	if raw, err := json.Marshal(req.turnOptions()); err != nil {
		writeError(c, errInternal("encode turn options: %v", err))
		return
	} else if string(raw) != "{}" {
		turn.Config = raw
	}
	if err := workflows.ValidateTurn(turn, cfg, s.opts.Limits); err != nil {
		writeError(c, errInvalid("%s", err))
		return
	}
	in, err := s.sessionInput(ref, "", cfg)
	if err != nil {
		writeError(c, err)
		return
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), s.opts.TurnWaitTimeout)
	defer cancel()
	res, err := s.sendTurn(ctx, ref, workflows.UpdateTurn, turn, s.startOptions(ref, "", cfg), in)
	if err != nil {
		writeError(c, err)
		return
	}
	out := queryAnswer(res)
	if res.Status == workflows.TurnFailed || res.Status == workflows.TurnRejected {
		code := cmp.Or(res.ErrorCode, map[string]string{workflows.TurnFailed: activities.CodeUnavailable, workflows.TurnRejected: activities.CodeInvalidArgument}[res.Status])
		e := failed(code, "turn "+res.TurnID+" "+res.Status,
			fmt.Sprintf("%s; the question is saved, the session is %s", res.Error, res.SessionInfo.Health))
		e.extra = out
		writeError(c, e)
		return
	}
	out["success"] = true
	c.JSON(http.StatusOK, out)
}

// seedStep is seed 000's WorkflowStep.
type seedStep struct {
	Step      string         `json:"step"`
	Status    string         `json:"status"` // completed, skipped or error
	StartTime int64          `json:"startTime"`
	EndTime   int64          `json:"endTime"`
	Duration  int64          `json:"duration"`
	Details   map[string]any `json:"details,omitempty"`
	Error     string         `json:"error,omitempty"`
}

// queryAnswer is seed 000's query response (without success) from a turn
// result.
func queryAnswer(res workflows.TurnResult) gin.H {
	steps := make([]seedStep, 0, len(res.Steps))
	var total int64
	for _, st := range res.Steps {
		out := seedStep{Step: st.Name, Status: "completed", StartTime: st.Start.UnixMilli(),
			EndTime: st.Start.UnixMilli() + st.DurationMS, Duration: st.DurationMS, Details: st.Details}
		switch st.Status {
		case "skipped":
			out.Status = "skipped"
		case "failed":
			out.Status = "error"
		case "degraded": // it fell back, and the turn went on
			out.Details = map[string]any{"degraded": true}
			for k, v := range st.Details {
				out.Details[k] = v
			}
		}
		out.Error, _ = st.Details["error"].(string)
		steps = append(steps, out)
		total += st.DurationMS
	}
	if d := res.CompletedAt.Sub(res.ReceivedAt).Milliseconds(); !res.ReceivedAt.IsZero() && !res.CompletedAt.IsZero() && d >= 0 {
		total = d
	}
	docs := res.RetrievedDocs
	if docs == nil {
		docs = []workflows.Doc{}
	}
	info := res.SessionInfo
	return gin.H{
		"response":       res.Answer,
		"rewrittenQuery": cmp.Or(res.RewrittenQuery, res.Question),
		"retrievedDocs":  docs,
		"workflow":       gin.H{"steps": steps, "totalDuration": total},
		"sessionInfo": gin.H{"sessionId": info.SessionID, "messageCount": info.Messages, "totalTokens": info.TokensBefore,
			"truncatedCount": info.TrimmedCount, "health": info.Health},
		"turnId": res.TurnID,
		"engine": res.Engine,
	}
}

// seedCreate is action create-session: POST /v1/sessions with the
// request's options as the session's config.
func (s *Server) seedCreate(c *gin.Context, req contextRequest) {
	cfg, err := req.sessionConfig(s.opts.Defaults)
	if err != nil {
		writeError(c, err)
		return
	}
	status, body := relay(c, s.createSession, gin.H{"sessionId": req.SessionID, "title": req.Title, "config": cfg})
	answerRelayed(c, status, body, nil)
}

// seedDelete is action delete-session and DELETE ?sessionId=: DELETE
// /v1/sessions/{id}.
func (s *Server) seedDelete(c *gin.Context, id string) {
	if _, err := seedRef(c, id); err != nil {
		writeError(c, err)
		return
	}
	status, body := relay(c, s.deleteSession, nil, gin.Param{Key: "id", Value: id})
	answerRelayed(c, status, body, gin.H{"sessionId": id, "deleted": status == http.StatusNoContent})
}

// seedCompress is action compress: POST /v1/sessions/{id}/compress (the
// session summarises when it is next idle; the answer is 202).
func (s *Server) seedCompress(c *gin.Context, id string) {
	if _, err := seedRef(c, id); err != nil {
		writeError(c, err)
		return
	}
	status, body := relay(c, s.compress, nil, gin.Param{Key: "id", Value: id})
	answerRelayed(c, status, body, nil)
}

// seedSession is GET ?action=session: the session's state (GET
// /v1/sessions/{id}) with its messages — the active branch from the
// transcript when this process can read it, else the recent turns'.
func (s *Server) seedSession(c *gin.Context, id string) {
	ref, err := seedRef(c, id)
	if err != nil {
		writeError(c, err)
		return
	}
	ctx := c.Request.Context()
	st, err := s.liveState(ctx, ref)
	if err != nil {
		writeError(c, err)
		return
	}
	msgs, source, summary := []convo.Message{}, "recent turns", ""
	if tr := s.opts.Transcripts; tr != nil {
		if st.ActiveLeaf != "" {
			if msgs, err = tr.Branch(ctx, ref.key(), st.ActiveLeaf); err != nil {
				writeError(c, errUnavailable("read the transcript of session %s: %v", ref.id, err))
				return
			}
		}
		if st.Summary != nil {
			if m, ok, err := tr.Get(ctx, ref.key(), st.Summary.ID); err == nil && ok {
				summary = m.Content
			}
		}
		source = "transcript"
	} else {
		for _, r := range st.Recent {
			if r.Status != workflows.TurnCompleted || r.Answer == "" {
				continue
			}
			msgs = append(msgs,
				convo.Message{ID: r.UserMessageID, Role: convo.RoleUser, Content: r.Question, CreatedAt: r.ReceivedAt},
				convo.Message{ID: r.AssistantMessageID, ParentID: r.UserMessageID, Role: convo.RoleAssistant, Content: r.Answer, CreatedAt: r.CompletedAt})
		}
	}
	c.JSON(http.StatusOK, gin.H{"success": true, "session": gin.H{
		"sessionId": st.SessionID, "title": st.Title, "status": st.Status, "health": st.Health,
		"messageCount": st.Messages, "totalTokens": st.TokensBefore, "truncatedCount": st.TrimmedCount, "turns": st.Turns,
		"config": st.Config, "summary": summary, "messages": msgs, "messagesSource": source,
		"createdAt": st.CreatedAt, "updatedAt": st.UpdatedAt,
	}})
}

// milvusConfig is seed 003's milvusConfig: the store is the workers', so
// only a collection other than theirs matters (it is refused).
type milvusConfig struct {
	Address        string `json:"address"`
	CollectionName string `json:"collectionName"`
}

// seedCorrective is POST /api/self-corrective-rag: POST
// /v1/rag/corrective (whose answer is seed 003's), accepting milvusConfig.
func (s *Server) seedCorrective(c *gin.Context, coll string) {
	var body map[string]json.RawMessage
	if err := bindJSON(c, &body, false); err != nil {
		writeError(c, err)
		return
	}
	if raw, ok := body["milvusConfig"]; ok {
		delete(body, "milvusConfig")
		var mc milvusConfig
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&mc); err != nil {
			writeError(c, errInvalid("milvusConfig: %v", err))
			return
		}
		if err := checkCollection("milvusConfig.collectionName", mc.CollectionName, coll); err != nil {
			writeError(c, err)
			return
		}
	}
	status, out := relay(c, s.postCorrective, body)
	c.Data(status, jsonType, out)
}

// recorder keeps what a handler writes instead of sending it.
type recorder struct {
	gin.ResponseWriter
	status int
	body   bytes.Buffer
}

func (r *recorder) WriteHeader(code int)              { r.status = code }
func (r *recorder) WriteHeaderNow()                   {}
func (r *recorder) Write(b []byte) (int, error)       { return r.body.Write(b) }
func (r *recorder) WriteString(s string) (int, error) { return r.body.WriteString(s) }
func (r *recorder) Status() int                       { return r.status }
func (r *recorder) Size() int                         { return r.body.Len() }
func (r *recorder) Written() bool                     { return r.body.Len() > 0 }
func (r *recorder) Flush()                            {}
func (r *recorder) Unwrap() http.ResponseWriter       { return r.ResponseWriter }

// record makes c write into a new recorder until undo is called.
func record(c *gin.Context) (rec *recorder, undo func()) {
	rec = &recorder{ResponseWriter: c.Writer, status: http.StatusOK}
	c.Writer = rec
	return rec, func() { c.Writer = rec.ResponseWriter }
}

// relay runs a /v1 handler on the request with body (JSON; nil: none) and
// path parameters, and returns its status and body instead of sending them.
func relay(c *gin.Context, h gin.HandlerFunc, body any, params ...gin.Param) (int, []byte) {
	raw := []byte{}
	if body != nil {
		var err error
		if raw, err = json.Marshal(body); err != nil {
			return http.StatusInternalServerError, fmt.Appendf(nil, `{"error":{"code":%q,"message":"encode request: %s"}}`, activities.CodeInternal, err)
		}
	}
	c.Request.Body, c.Request.ContentLength = http.NoBody, int64(len(raw))
	if len(raw) > 0 {
		c.Request.Body = readCloser{bytes.NewReader(raw)}
	}
	c.Params = params
	rec, undo := record(c)
	defer undo()
	h(c)
	return rec.status, rec.body.Bytes()
}

type readCloser struct{ *bytes.Reader }

func (readCloser) Close() error { return nil }

// answerRelayed answers what a /v1 handler answered in the seeds' shape:
// an error as it is (seedErrors reshapes it), else its fields with extra
// and success true (a 204 becomes a 200 with a body).
func answerRelayed(c *gin.Context, status int, body []byte, extra gin.H) {
	if status >= http.StatusBadRequest {
		c.Data(status, jsonType, body)
		return
	}
	out := gin.H{}
	var fields map[string]json.RawMessage
	if len(bytes.TrimSpace(body)) > 0 {
		if err := json.Unmarshal(body, &fields); err != nil {
			writeError(c, errInternal("decode answer: %v", err))
			return
		}
	}
	for k, v := range fields {
		out[k] = v
	}
	for k, v := range extra {
		out[k] = v
	}
	out["success"] = true
	if status == http.StatusNoContent {
		status = http.StatusOK
	}
	c.JSON(status, out)
}

// seedErrors answers the seed routes' errors in the seeds' shape: ctxflow's
// {"error": {code, message, requestId}, ...} becomes {"success": false,
// "error": message, "code", "requestId", ...}, under the same status.
func seedErrors(c *gin.Context) {
	rec, undo := record(c)
	defer undo() // a panic reaches recoverJSON with the real writer
	c.Next()
	undo()
	body := rec.body.Bytes()
	if rec.status >= http.StatusBadRequest {
		body = seedError(body)
	}
	if len(body) == 0 {
		c.Status(rec.status)
		c.Writer.WriteHeaderNow()
		return
	}
	c.Data(rec.status, cmp.Or(rec.Header().Get("Content-Type"), jsonType), body)
}

func seedError(body []byte) []byte {
	var fields map[string]json.RawMessage
	var e struct {
		Code      string `json:"code"`
		Message   string `json:"message"`
		RequestID string `json:"requestId"`
	}
	if json.Unmarshal(body, &fields) != nil || json.Unmarshal(fields["error"], &e) != nil || e.Message == "" {
		return body
	}
	out := make(map[string]any, len(fields)+3)
	for k, v := range fields {
		out[k] = v
	}
	out["success"], out["error"], out["code"], out["requestId"] = false, e.Message, e.Code, e.RequestID
	b, err := json.Marshal(out)
	if err != nil {
		return body
	}
	return b
}
