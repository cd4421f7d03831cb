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
// that their front ends can talk to ctxflow. Each action calls the
// functions its /v1 route calls (newSession, listPage, removeSession,
// requestCompress, liveState, corrective, or for query the same turn
// update) under the same authentication and tenant, and shapes their
// result its own way. Answers are {"success": true, ...}; errors are
// {"success": false, "error": message} with the /v1 route's status, its
// code and the request id (writeError shapes them: seedShape marks these
// routes).

// keySeedShape marks a request to a seed's route in its context.
const keySeedShape = "seedShape"

// seedShape marks the request as one to a seed's route, so that
// writeError answers its errors in the seeds' shape ([seedErrorBody]).
func seedShape(c *gin.Context) { c.Set(keySeedShape, true) }

// seedErrorBody is an error in the seeds' shape: {"success": false,
// "error": message, "code", "requestId"} with the error's extra fields.
func seedErrorBody(ae *apiError, requestID string) gin.H {
	body := gin.H{}
	for k, v := range ae.extra {
		body[k] = v
	}
	body["success"], body["error"], body["code"], body["requestId"] = false, ae.msg, ae.code, requestID
	return body
}

// succeeded is a seed's answer: body's fields and success true.
func succeeded(body gin.H) gin.H {
	body["success"] = true
	return body
}

// seedRoutes registers the seeds' own endpoints (seed 000 /api/context-management, seed 003 /api/self-corrective-rag).
func (s *Server) seedRoutes(r *gin.Engine) {
	coll := s.opts.Collection
	g := r.Group("/api", seedShape, s.admit, s.authenticate)
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
		s.seedSessions(c)
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
		e := failed(turnCode(res), "turn "+res.TurnID+" "+res.Status,
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
		docs = []activities.Doc{}
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

// seedSessions is GET ?action=sessions: GET /v1/sessions.
func (s *Server) seedSessions(c *gin.Context) {
	if page, ok := s.pageOf(c); ok {
		c.JSON(http.StatusOK, succeeded(gin.H{"sessions": page.Sessions, "nextPageToken": page.NextPageToken}))
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
	raw, err := json.Marshal(cfg)
	if err != nil {
		writeError(c, errInternal("encode config: %v", err))
		return
	}
	t, err := tenant(c)
	if err != nil {
		writeError(c, err)
		return
	}
	out, err := s.newSession(c.Request.Context(), t, createSessionRequest{SessionID: req.SessionID, Title: req.Title, Config: raw})
	if err != nil {
		writeError(c, err)
		return
	}
	c.JSON(http.StatusCreated, succeeded(gin.H{"sessionId": out.SessionID, "config": out.Config}))
}

// seedDelete is action delete-session and DELETE ?sessionId=: DELETE
// /v1/sessions/{id}, answered 200 with deleted true (202 with deleted
// false while it is still being closed).
func (s *Server) seedDelete(c *gin.Context, id string) {
	ref, err := seedRef(c, id)
	if err != nil {
		writeError(c, err)
		return
	}
	switch closed, err := s.removeSession(c.Request.Context(), ref); {
	case err != nil:
		writeError(c, err)
	case closed:
		c.JSON(http.StatusOK, succeeded(gin.H{"sessionId": ref.id, "deleted": true}))
	default:
		out := deleting(ref)
		out["deleted"] = false
		c.JSON(http.StatusAccepted, succeeded(out))
	}
}

// seedCompress is action compress: POST /v1/sessions/{id}/compress (the
// session summarises when it is next idle; the answer is 202).
func (s *Server) seedCompress(c *gin.Context, id string) {
	ref, err := seedRef(c, id)
	if err != nil {
		writeError(c, err)
		return
	}
	if err := s.requestCompress(c.Request.Context(), ref); err != nil {
		writeError(c, err)
		return
	}
	c.JSON(http.StatusAccepted, succeeded(compressing(ref)))
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
// /v1/rag/corrective (whose answer is seed 003's), accepting milvusConfig
// when it names the workers' collection.
func (s *Server) seedCorrective(c *gin.Context, coll string) {
	var body correctiveRequest
	if err := bindJSON(c, &body, false); err != nil {
		writeError(c, err)
		return
	}
	if raw := body.MilvusConfig; raw != nil {
		body.MilvusConfig = nil
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
	t, err := tenant(c)
	if err != nil {
		writeError(c, err)
		return
	}
	s.answerCorrective(c, t, body)
}
