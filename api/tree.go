package api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"github.com/ctxflow/ctxflow/convo"
	"github.com/ctxflow/ctxflow/workflows"
)

// Conversation trees over HTTP (seed 004): the tree's shape, moving the
// active leaf, editing a question, forking a session, and JSONL export and
// import. Moves, edits and seeds are turns of the session (they queue
// behind the turns before them); reads need an API process that can read
// transcripts.

// treeNode is a message in GET .../tree: its place, role and the start of
// its content.
type treeNode struct {
	ID       string     `json:"id"`
	ParentID string     `json:"parentId,omitempty"`
	Role     convo.Role `json:"role"`
	Preview  string     `json:"preview"`
	Children []string   `json:"children"`
}

// transcripts returns the transcript reader, or the error that says this
// process has none.
func (s *Server) transcripts() (Transcripts, error) {
	if s.opts.Transcripts == nil {
		return nil, errUnavailable("this API process cannot read transcripts: `ctxflow dev` can, and so can an API that shares the workers' transcript store")
	}
	return s.opts.Transcripts, nil
}

// getTree answers GET /v1/sessions/{id}/tree: every message with its
// children, in the order they were added, and the active leaf.
func (s *Server) getTree(c *gin.Context) {
	msgs, st, ref, ok := s.allMessages(c)
	if !ok {
		return
	}
	nodes := make([]treeNode, len(msgs))
	at := make(map[string]int, len(msgs))
	var roots []string
	for i, m := range msgs {
		nodes[i] = treeNode{ID: m.ID, ParentID: m.ParentID, Role: m.Role, Preview: preview(m), Children: []string{}}
		at[m.ID] = i
		if p, ok := at[m.ParentID]; ok {
			nodes[p].Children = append(nodes[p].Children, m.ID)
		} else {
			roots = append(roots, m.ID)
		}
	}
	c.JSON(http.StatusOK, gin.H{"sessionId": ref.id, "activeLeaf": st.ActiveLeaf, "roots": orEmpty(roots), "nodes": nodes})
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// preview is the start of a message's content (a tool call's name).
func preview(m convo.Message) string {
	text := m.Content
	if m.ToolCall != nil && text == "" {
		text = m.ToolCall.Name
	}
	const n = 80
	if len(text) <= n {
		return text
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(text[cut]) {
		cut--
	}
	return text[:cut] + "…"
}

// allMessages reads a live session's state and every message of its
// transcript; it writes the error and reports false when it cannot.
func (s *Server) allMessages(c *gin.Context) ([]convo.Message, workflows.SessionState, sessionRef, bool) {
	ref, err := sessionOf(c)
	if err != nil {
		writeError(c, err)
		return nil, workflows.SessionState{}, ref, false
	}
	tr, err := s.transcripts()
	if err != nil {
		writeError(c, err)
		return nil, workflows.SessionState{}, ref, false
	}
	st, err := s.liveState(c.Request.Context(), ref)
	if err != nil {
		writeError(c, err)
		return nil, st, ref, false
	}
	msgs, err := tr.All(c.Request.Context(), ref.key())
	if err != nil {
		writeError(c, errUnavailable("read the transcript of session %s: %v", ref.id, err))
		return nil, st, ref, false
	}
	return msgs, st, ref, true
}

// treeOp runs a branch or seed turn and waits for it; it writes the error
// and reports false when it failed.
func (s *Server) treeOp(c *gin.Context, ref sessionRef, req workflows.TurnRequest) (workflows.TurnResult, bool) {
	if err := workflows.ValidateTurn(req, s.opts.Defaults, s.opts.Limits); err != nil {
		writeError(c, errInvalid("%s", err))
		return workflows.TurnResult{}, false
	}
	in, err := s.sessionInput(ref, "", s.opts.Defaults)
	if err != nil {
		writeError(c, err)
		return workflows.TurnResult{}, false
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), s.opts.TurnWaitTimeout)
	defer cancel()
	res, err := s.sendTurn(ctx, ref, workflows.UpdateTurn, req, s.startOptions(ref, "", s.opts.Defaults), in)
	if err == nil && res.Status != workflows.TurnCompleted {
		err = errCode(turnCode(res), "%s", res.Error)
	}
	if err != nil {
		writeError(c, err)
		return res, false
	}
	return res, true
}

type branchRequest struct {
	FromMessageID string `json:"fromMessageId"`
	// TurnID makes a retried request idempotent.
	TurnID string `json:"turnId"`
}

func (r *branchRequest) turnID(prefix string) string {
	if r.TurnID == "" {
		r.TurnID = newID(prefix)
	}
	return r.TurnID
}

// postBranch answers POST /v1/sessions/{id}/branch {"fromMessageId"}: the
// next turn appends below that message; the other branches stay.
func (s *Server) postBranch(c *gin.Context) {
	ref, err := sessionOf(c)
	if err != nil {
		writeError(c, err)
		return
	}
	var body branchRequest
	if err := bindJSON(c, &body, false); err != nil {
		writeError(c, err)
		return
	}
	if _, err := s.liveState(c.Request.Context(), ref); err != nil { // a branch never creates a session
		writeError(c, err)
		return
	}
	res, ok := s.treeOp(c, ref, workflows.TurnRequest{TurnID: body.turnID("branch"), Question: "branch to " + body.FromMessageID,
		Kind: workflows.KindBranch, Target: body.FromMessageID})
	if ok {
		c.JSON(http.StatusOK, gin.H{"sessionId": ref.id, "activeLeaf": res.ActiveLeaf})
	}
}

// postEdit answers POST /v1/sessions/{id}/messages/{messageId}/edit
// {"content"}: the question again in place of that user message, as a new
// sibling with its answer (a turn: ?wait= as for turns).
func (s *Server) postEdit(c *gin.Context) {
	ref, err := sessionOf(c)
	if err != nil {
		writeError(c, err)
		return
	}
	var body struct {
		Content string `json:"content"`
		turnRequest
	}
	if err := bindJSON(c, &body, false); err != nil {
		writeError(c, err)
		return
	}
	if body.Question != "" {
		writeError(c, errInvalid("an edit carries its new text in \"content\""))
		return
	}
	id := c.Param("messageId")
	if err := workflows.ValidateID("messageId", id); err != nil {
		writeError(c, errInvalid("%s", err))
		return
	}
	if _, err := s.liveState(c.Request.Context(), ref); err != nil {
		writeError(c, err)
		return
	}
	if !s.knownMessage(c, ref, id) {
		return
	}
	s.submitTurn(c, ref, workflows.TurnRequest{TurnID: body.TurnID, Question: body.Content, Config: body.Config, EditOf: id})
}

// postFork answers POST /v1/sessions/{id}/fork {"fromMessageId",
// "sessionId"?}: a new session (of the same tenant) whose transcript is
// this one's branch up to that message.
func (s *Server) postFork(c *gin.Context) {
	ref, err := sessionOf(c)
	if err != nil {
		writeError(c, err)
		return
	}
	var body struct {
		branchRequest
		SessionID string `json:"sessionId"`
	}
	if err := bindJSON(c, &body, false); err != nil {
		writeError(c, err)
		return
	}
	if body.SessionID == "" {
		body.SessionID = newID("session")
	}
	if err := workflows.ValidateID("sessionId", body.SessionID); err != nil {
		writeError(c, errInvalid("%s", err))
		return
	}
	if _, err := s.liveState(c.Request.Context(), ref); err != nil {
		writeError(c, err)
		return
	}
	if !s.knownMessage(c, ref, body.FromMessageID) { // before the new session starts
		return
	}
	src := ref.key()
	dst := sessionRef{tenant: ref.tenant, id: body.SessionID}
	res, ok := s.treeOp(c, dst, workflows.TurnRequest{TurnID: body.turnID("fork"), Question: "fork " + ref.id + " at " + body.FromMessageID,
		Kind: workflows.KindImport, Import: &workflows.TranscriptImport{From: &src, Through: body.FromMessageID}})
	if ok {
		c.JSON(http.StatusCreated, gin.H{"sessionId": dst.id, "forkedFrom": ref.id, "activeLeaf": res.ActiveLeaf,
			"turns": res.SessionInfo.Turns, "messages": res.SessionInfo.Messages})
	}
}

// knownMessage answers 404 and reports false for a message the session
// does not hold, where this process reads the transcripts; elsewhere the
// session's own turn refuses it. So an edit with ?wait=false is refused at
// once, and a fork from an unknown message leaves no empty session.
func (s *Server) knownMessage(c *gin.Context, ref sessionRef, id string) bool {
	tr, err := s.transcripts()
	if err != nil || workflows.ValidateID("messageId", id) != nil {
		return true
	}
	if _, ok, err := tr.Get(c.Request.Context(), ref.key(), id); err == nil && !ok {
		writeError(c, errNotFound("session %s has no message %q", ref.id, id))
		return false
	}
	return true
}

// exportOrder is the order of an export: parents before children, and at
// each message the child toward the active leaf last, so that the active
// leaf is the last line unless the leaf has children of its own.
func exportOrder(msgs []convo.Message, activeLeaf string) []convo.Message {
	children := map[string][]int{}
	onPath := map[string]bool{}
	byID := make(map[string]int, len(msgs))
	for i, m := range msgs {
		byID[m.ID] = i
		children[m.ParentID] = append(children[m.ParentID], i)
	}
	for id := activeLeaf; id != ""; {
		onPath[id] = true
		i, ok := byID[id]
		if !ok {
			break
		}
		id = msgs[i].ParentID
	}
	out := make([]convo.Message, 0, len(msgs))
	var visit func(parent string)
	visit = func(parent string) {
		kids := children[parent]
		last := -1
		for _, k := range kids {
			if onPath[msgs[k].ID] {
				last = k
				continue
			}
			out = append(out, msgs[k])
			visit(msgs[k].ID)
		}
		if last >= 0 {
			out = append(out, msgs[last])
			visit(msgs[last].ID)
		}
	}
	visit("")
	return out
}

// getExport answers GET /v1/sessions/{id}/export: the whole transcript as
// JSONL (seed 004 entries: messages, tool calls and results, summary
// records), streamed; X-Active-Leaf names the active leaf.
func (s *Server) getExport(c *gin.Context) {
	msgs, st, ref, ok := s.allMessages(c)
	if !ok {
		return
	}
	c.Header("Content-Type", "application/x-ndjson")
	c.Header("Content-Disposition", fmt.Sprintf("attachment; filename=%q", ref.id+".jsonl"))
	c.Header("X-Active-Leaf", st.ActiveLeaf)
	c.Status(http.StatusOK)
	if err := convo.EncodeJSONL(c.Writer, exportOrder(msgs, st.ActiveLeaf)); err != nil {
		// a message the store took but cannot encode, or a client gone: the stream ends short
		s.log.Warn("export ended short", "session", ref.id, "error", err)
	}
}

// postImport answers POST /v1/sessions/import?sessionId=&leaf=: a JSONL
// transcript (as export writes it) becomes a new session, all or nothing:
// every line is checked first (a bad one is named by its number), then the
// session is seeded with all of it.
func (s *Server) postImport(c *gin.Context) {
	t, err := tenant(c)
	if err != nil {
		writeError(c, err)
		return
	}
	if s.opts.UploadDir == "" {
		writeError(c, errUnavailable("imports are off: this API has no upload directory (CTXFLOW_UPLOAD_DIR)"))
		return
	}
	id := c.Query("sessionId")
	if id == "" {
		id = newID("session")
	}
	if err := workflows.ValidateID("sessionId", id); err != nil {
		writeError(c, errInvalid("%s", err))
		return
	}
	leaf := c.Query("leaf")
	if leaf != "" {
		if err := workflows.ValidateID("leaf", leaf); err != nil {
			writeError(c, errInvalid("%s", err))
			return
		}
	}
	body, err := io.ReadAll(c.Request.Body)
	if err != nil {
		writeError(c, bodyError(err))
		return
	}
	msgs, err := checkImport(body, leaf)
	if err != nil {
		writeError(c, err)
		return
	}
	sum := sha256.Sum256(body)
	path, err := s.store(upload{body: body, sum: sum, ext: ".jsonl"}, t, "sessions", id)
	if err != nil {
		writeError(c, errUnavailable("%v", err))
		return
	}
	ref := sessionRef{tenant: t, id: id}
	res, ok := s.treeOp(c, ref, workflows.TurnRequest{TurnID: newID("import"), Question: "import " + id,
		Kind: workflows.KindImport, Import: &workflows.TranscriptImport{Path: path, SHA256: fmt.Sprintf("%x", sum), Leaf: leaf}})
	if ok {
		c.JSON(http.StatusCreated, gin.H{"sessionId": id, "activeLeaf": res.ActiveLeaf, "messages": len(msgs), "turns": res.SessionInfo.Turns})
	}
}

// checkImport decodes and checks an import as the session's store will
// take it, before anything is written: JSONL entries forming a tree in
// which each parent comes before its children (and every rule of a
// transcript holds), ids a session can address, content without NUL or
// control characters but tab and line breaks, the leaf among them. The
// entries' token counts are not trusted: the seed counts them again.
func checkImport(body []byte, leaf string) ([]convo.Message, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, errInvalid("the transcript is empty")
	}
	msgs, err := convo.DecodeJSONL(bytes.NewReader(body))
	if err != nil {
		return nil, errInvalid("transcript: %v", err)
	}
	found := leaf == ""
	tree := convo.NewTree()
	for i, m := range msgs {
		if err := workflows.ValidateID("message id", m.ID); err != nil {
			return nil, errInvalid("transcript: entry %d: %v", i+1, err)
		}
		if r, _, ok := workflows.ControlChar(m.Content); ok {
			return nil, errInvalid("transcript: entry %d (%s): its content holds the control character %U", i+1, m.ID, r)
		}
		m.Tokens = 0
		if err := tree.Append(m); err != nil {
			return nil, errInvalid("transcript: entry %d: %v (a message comes after its parent)", i+1, err)
		}
		found = found || m.ID == leaf
	}
	if !found {
		return nil, errInvalid("leaf %q is not in the transcript", leaf)
	}
	return msgs, nil
}
