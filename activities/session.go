package activities

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/ctxflow/ctxflow/convo"
)

// Session holds the ports the session pipeline's activities use. Its methods
// are registered as activities; workflows call them through a nil *Session.
type Session struct {
	Transcript TranscriptStore
	Model      ChatModel
	Tokenizer  convo.Tokenizer
	// SummaryCache reuses summaries of identical branch prefixes; may be nil.
	SummaryCache convo.SummaryCache
	// Knowledge decides a turn's route: with documents in it, a question
	// goes to the corrective loop; nil routes every turn to chat.
	Knowledge VectorStore
	// Rewriter makes follow-ups stand alone before retrieval; may be nil.
	Rewriter Rewriter
	// SmallTalk tells greetings and thanks, which skip retrieval; may be nil.
	SmallTalk SmallTalkDetector
	// Intents classifies a turn's question (qa, chitchat, task, continue,
	// clarify); may be nil.
	Intents IntentClassifier
	// Engine names the model provider in turn results ("ollama", "offline").
	Engine string
	// Broker streams answers as they are written; may be nil.
	Broker Broker
}

// UserMessageID and AssistantMessageID name a turn's messages in the
// transcript: deterministic, so that retries and repeats of the same turn
// find what the first attempt stored.
func UserMessageID(turnID string) string { return turnID + ".u" }

// AssistantMessageID: see [UserMessageID].
func AssistantMessageID(turnID string) string { return turnID + ".a" }

// LoadContextInput asks for the model view of a new turn.
type LoadContextInput struct {
	Session      SessionKey         `json:"session"`
	TurnID       string             `json:"turnId"`
	Question     string             `json:"question"`
	ParentID     string             `json:"parentId,omitempty"`
	Window       convo.WindowConfig `json:"window"`
	SystemPrompt string             `json:"systemPrompt,omitempty"`
	ReceivedAt   time.Time          `json:"receivedAt"`
	// SummaryID names the running summary's record ("" for none).
	SummaryID string `json:"summaryId,omitempty"`
	// Fallback > 0 means the summariser failed: keep only the last
	// Fallback messages (degraded) instead of summary + window.
	Fallback int `json:"fallback,omitempty"`
	// Route asks which route the turn takes (see LoadContextResult.Route).
	Route bool `json:"route,omitempty"`
	// ClassifyIntent asks for the question's intent (LoadContextResult.Intent)
	// given the session's recent intents, oldest first.
	ClassifyIntent bool     `json:"classifyIntent,omitempty"`
	RecentIntents  []string `json:"recentIntents,omitempty"`
	// Model is the session's chat model (a classifier may ask it).
	Model string `json:"model,omitempty"`
	// Linear asks for the question to hang below a leaf: if ParentID has
	// grown since the session's state last saw it, the turns that grew
	// there come back as LoadContextResult.Lost instead. Off for an edit or
	// the first turn after a move, which branch on purpose.
	Linear bool `json:"linear,omitempty"`
	// Continues is the id of the cancelled answer the question asks to
	// continue ("" for none): the model view then shows that answer.
	Continues string `json:"continues,omitempty"`
}

// LostTurn is a turn stored by a workflow task that was lost after its
// local activities ran — its question, and its answer when it got one —
// or, with Summary set, a summary record stored below the session's leaf
// by a summarize whose result the session never got.
type LostTurn struct {
	TurnID        string      `json:"turnId,omitempty"`
	Question      string      `json:"question,omitempty"`
	UserMessageID string      `json:"userMessageId,omitempty"`
	ReceivedAt    time.Time   `json:"receivedAt,omitzero"`
	AnswerID      string      `json:"answerId,omitempty"`
	Answer        string      `json:"answer,omitempty"`
	Summary       *SummaryRef `json:"summary,omitempty"`
}

// Routes of a turn.
const (
	// RouteChat answers from the conversation alone: small talk, or no
	// knowledge base to search.
	RouteChat = "chat"
	// RouteQA answers from the knowledge base through the corrective loop.
	RouteQA = "qa"
)

// LoadContextResult names the messages of the model view, not their bodies.
type LoadContextResult struct {
	UserMessageID string   `json:"userMessageId"`
	WindowIDs     []string `json:"windowIds"`
	TokensBefore  int      `json:"tokensBefore"`
	TokensAfter   int      `json:"tokensAfter"`
	TrimmedCount  int      `json:"trimmedCount"`
	Messages      int      `json:"messages"`
	// SummaryUsed reports that the running summary is part of the view.
	SummaryUsed bool `json:"summaryUsed,omitempty"`
	// Degraded reports a fallback truncation instead of a summary.
	Degraded bool `json:"degraded,omitempty"`
	// AnswerID and Answer are set when the transcript already holds this
	// turn's answer (a repeat): the caller must not generate again.
	AnswerID string `json:"answerId,omitempty"`
	Answer   string `json:"answer,omitempty"`
	// AnswerFollows reports, with AnswerID, that the stored question hangs
	// where this call asked (ParentID): the answer is this very turn's,
	// stored by an execution whose workflow task was lost with its worker.
	AnswerFollows bool `json:"answerFollows,omitempty"`
	// Lost, with Linear, is what grew below ParentID without the session
	// knowing, in order: a workflow task ran its turns' local activities
	// and was lost (a speculative task of an update is dropped without a
	// trace, a timed-out one is failed), or ran on beside its successor,
	// and the turns came again in another order. Nothing else is done then:
	// the question is not stored, so that it does not hang beside them.
	// Messages is the transcript's length.
	Lost []LostTurn `json:"lost,omitempty"`
	// Route is RouteQA when asked for, the knowledge base has documents and
	// the question is not small talk; else RouteChat. Empty when not asked.
	Route string `json:"route,omitempty"`
	// RouteReason says why, for the step trace.
	RouteReason string `json:"routeReason,omitempty"`
	// Intent is the classifier's guess when asked for; nil when there is
	// no classifier.
	Intent *IntentGuess `json:"intent,omitempty"`
}

// LoadContext stores the user's message (first, so it is never lost) and
// trims the branch it ends to the token budget.
func (a *Session) LoadContext(ctx context.Context, in LoadContextInput) (LoadContextResult, error) {
	user := convo.Message{
		ID:        UserMessageID(in.TurnID),
		ParentID:  in.ParentID,
		Role:      convo.RoleUser,
		Content:   in.Question,
		CreatedAt: in.ReceivedAt,
		Meta:      map[string]string{"turnId": in.TurnID},
	}
	if in.Continues != "" {
		user.Meta[convo.MetaContinues] = in.Continues
	}
	user.Tokens = convo.MessageTokens(a.Tokenizer, user)
	add := a.Transcript.Append
	if in.Linear {
		add = a.Transcript.AppendLeaf
	}
	stored, existed, err := add(ctx, in.Session, user)
	if in.Linear && (errors.Is(err, convo.ErrNotLeaf) || err == nil && existed && stored.ParentID != in.ParentID) {
		lost, lerr := a.lostTurns(ctx, in.Session, in.ParentID)
		if lerr != nil {
			return LoadContextResult{}, fmt.Errorf("load context of %s turn %s: %w", in.Session, in.TurnID, lerr)
		}
		if len(lost) > 0 {
			n, lerr := a.Transcript.Len(ctx, in.Session)
			return LoadContextResult{Lost: lost, Messages: n}, lerr
		}
		if err != nil { // nothing there to take over: the question branches off
			stored, _, err = a.Transcript.Append(ctx, in.Session, user)
		}
	}
	if err != nil {
		return LoadContextResult{}, fmt.Errorf("load context of %s turn %s: %w", in.Session, in.TurnID, err)
	}
	res := LoadContextResult{UserMessageID: stored.ID}
	if ans, ok, err := a.Transcript.Get(ctx, in.Session, AssistantMessageID(in.TurnID)); err != nil {
		return res, fmt.Errorf("load context of %s turn %s: %w", in.Session, in.TurnID, err)
	} else if ok {
		res.AnswerID, res.Answer = ans.ID, ans.Content
		res.AnswerFollows = stored.ParentID == in.ParentID && ans.ParentID == stored.ID
	}

	window := in.Window
	sys := 0
	if in.SystemPrompt != "" {
		sys = convo.MessageTokens(a.Tokenizer, convo.Message{Role: convo.RoleSystem, Content: in.SystemPrompt})
		window.Reserve = sys
	}
	sum, err := a.summary(ctx, in.Session, in.SummaryID)
	if err != nil {
		return res, err
	}
	view, err := a.Transcript.Assemble(ctx, in.Session, stored.ID, window, sum, in.Fallback)
	if err != nil {
		return res, Permanent(CodeInvalidArgument, fmt.Sprintf("trim context of %s turn %s", in.Session, in.TurnID), err)
	}
	res.WindowIDs = make([]string, len(view.Messages))
	for i, m := range view.Messages {
		res.WindowIDs[i] = m.ID
	}
	res.TokensBefore, res.TokensAfter, res.TrimmedCount = view.TokensBefore+sys, view.TokensAfter+sys, view.TrimmedCount
	res.SummaryUsed, res.Degraded = view.Summary != "", view.Degraded
	if res.Messages, err = a.Transcript.Len(ctx, in.Session); err != nil {
		return res, fmt.Errorf("count messages of %s: %w", in.Session, err)
	}
	if in.Route {
		res.Route, res.RouteReason = a.route(ctx, in.Question)
	}
	if in.ClassifyIntent && a.Intents != nil && res.AnswerID == "" { // a repeat is answered already
		res.Intent = a.classify(ctx, in)
	}
	return res, nil
}

// classifyTimeout bounds a classification, well inside LoadContext's own
// timeout: a slow model costs the turn its intent, not its context.
const classifyTimeout = 5 * time.Second

// classify asks the intent classifier; a failure (logged) is no guess,
// which the session takes as qa at 0.5 (seed 002).
func (a *Session) classify(ctx context.Context, in LoadContextInput) *IntentGuess {
	cctx, cancel := context.WithTimeout(ctx, classifyTimeout)
	defer cancel()
	label, p, err := a.Intents.Classify(cctx, in.Model, in.Question, in.RecentIntents)
	if err != nil {
		logger(ctx).Warn("intent classification failed: the turn is qa at 0.5", "session", in.Session, "turn", in.TurnID, "error", err)
		return nil
	}
	return &IntentGuess{Label: label, Confidence: p}
}

// lostTurns reads what grew below a message as turns (and summary
// records) to take over, in order; it stops at anything else.
func (a *Session) lostTurns(ctx context.Context, k SessionKey, parent string) ([]LostTurn, error) {
	grown, err := a.Transcript.Grown(ctx, k, parent)
	if err != nil {
		return nil, err
	}
	var lost []LostTurn
	for i := 0; i < len(grown); i++ {
		m := grown[i]
		id := m.Meta["turnId"]
		switch {
		case m.Role == convo.RoleSummary:
			st, err := convo.SummaryFromRecord(m)
			if err != nil {
				return lost, nil
			}
			lost = append(lost, LostTurn{Summary: &SummaryRef{ID: m.ID, Folded: st.Folded, Tokens: st.Tokens}})
		case m.Role == convo.RoleUser && id != "" && m.ID == UserMessageID(id):
			t := LostTurn{TurnID: id, Question: m.Content, UserMessageID: m.ID, ReceivedAt: m.CreatedAt}
			if i+1 < len(grown) && grown[i+1].ID == AssistantMessageID(id) {
				i++
				t.AnswerID, t.Answer = grown[i].ID, grown[i].Content
			}
			lost = append(lost, t)
			if t.AnswerID == "" {
				return lost, nil
			}
		default:
			return lost, nil
		}
	}
	return lost, nil
}

// route picks a turn's route. An unreadable knowledge base routes to qa:
// the corrective loop's retrieval reports the error in the trace.
func (a *Session) route(ctx context.Context, question string) (string, string) {
	switch {
	case a.SmallTalk != nil && a.SmallTalk.IsSmallTalk(question):
		return RouteChat, "small talk"
	case a.Knowledge == nil:
		return RouteChat, "no knowledge base configured"
	}
	// A store that hangs must not hold the turn: the corrective loop's own
	// retrieval reports the failure.
	ictx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	info, err := a.Knowledge.Info(ictx)
	switch {
	case err != nil:
		return RouteQA, "knowledge base info failed: " + err.Error()
	case info.Count == 0:
		return RouteChat, "knowledge base is empty"
	}
	return RouteQA, fmt.Sprintf("knowledge base has %d chunks", info.Count)
}

// RewriteQuestionInput asks for a turn's question made standalone.
type RewriteQuestionInput struct {
	Session   SessionKey `json:"session"`
	TurnID    string     `json:"turnId"`
	WindowIDs []string   `json:"windowIds"`
	// Model, SummaryID and Topic are what a rewriter that asks a model
	// reads besides the window ([ContextRewriter]): the session's chat
	// model, its running summary's record ("" for none) and its topic so
	// far.
	Model     string `json:"model,omitempty"`
	SummaryID string `json:"summaryId,omitempty"`
	Topic     string `json:"topic,omitempty"`
}

// RewriteQuestionResult is the standalone question and the conversation's
// topic when the rewriter found one.
type RewriteQuestionResult struct {
	Question  string `json:"question"`
	Rewritten bool   `json:"rewritten,omitempty"`
	Topic     string `json:"topic,omitempty"`
}

// RewriteQuestion makes the turn's question (the window's last message)
// stand alone from the conversation before it, for retrieval.
func (a *Session) RewriteQuestion(ctx context.Context, in RewriteQuestionInput) (RewriteQuestionResult, error) {
	defer keepAlive(ctx)()
	msgs, err := a.Transcript.Messages(ctx, in.Session, in.WindowIDs)
	if err != nil {
		return RewriteQuestionResult{}, fmt.Errorf("rewrite question of %s turn %s: %w", in.Session, in.TurnID, err)
	}
	if len(msgs) == 0 {
		return RewriteQuestionResult{}, Permanent(CodeInvalidArgument, fmt.Sprintf("rewrite question of %s turn %s: empty window", in.Session, in.TurnID), nil)
	}
	q := msgs[len(msgs)-1].Content
	res := RewriteQuestionResult{Question: q}
	if a.Rewriter == nil || len(msgs) == 1 {
		return res, nil
	}
	out, topic, err := a.rewrite(ctx, in, q, msgs[:len(msgs)-1])
	res.Topic = topic
	if err != nil {
		return res, fmt.Errorf("rewrite question of %s turn %s: %w", in.Session, in.TurnID, err)
	}
	res.Question, res.Rewritten = out, out != q
	return res, nil
}

// rewrite asks the rewriter; one that reads the summary and the topic
// ([ContextRewriter]) gets them.
func (a *Session) rewrite(ctx context.Context, in RewriteQuestionInput, q string, history []convo.Message) (string, string, error) {
	cr, ok := a.Rewriter.(ContextRewriter)
	if !ok {
		return a.Rewriter.Rewrite(ctx, q, history)
	}
	sum, err := a.summary(ctx, in.Session, in.SummaryID)
	if err != nil {
		return "", "", err
	}
	return cr.RewriteInContext(ctx, RewriteRequest{Model: in.Model, Question: q, History: history, Summary: sum.Text, Topic: in.Topic})
}

// GenerateInput asks the chat model for an answer over a window of messages.
type GenerateInput struct {
	Session      SessionKey `json:"session"`
	TurnID       string     `json:"turnId"`
	WindowIDs    []string   `json:"windowIds"`
	SystemPrompt string     `json:"systemPrompt,omitempty"`
	// SummaryID names the running summary's record when the view uses it.
	SummaryID string       `json:"summaryId,omitempty"`
	Model     string       `json:"model"`
	Options   ModelOptions `json:"options"`
	// UseDocs shows Docs (the corrective loop's graded documents; none
	// means nothing relevant was found).
	UseDocs bool  `json:"useDocs,omitempty"`
	Docs    []Doc `json:"docs,omitempty"`
	// Attempts bounds the attempts that end in the model's own failure
	// (0: only the retry policy bounds them). The workflow's policy allows
	// more, so that attempts cut short by a lost worker (heartbeat
	// timeouts, which never reach this code) do not use up the model's.
	Attempts int `json:"attempts,omitempty"`
}

// stream publishes a turn's answer deltas on the broker (nil without one).
func (a *Session) stream(ctx context.Context, s SessionKey, turnID string) func(string) {
	if a.Broker == nil {
		return nil
	}
	topic, call := TurnTopic(s, turnID), 1+int(rand.Int32N(math.MaxInt32-1)) // never 0: "none yet" to a stream
	return func(text string) {
		if err := a.Broker.Publish(ctx, topic, Delta{Call: call, Text: text}); err != nil {
			logger(ctx).Debug("stream delta", "topic", topic, "error", err)
		}
	}
}

// GenerateResult is the model's answer. It is the one body that must enter
// history: the caller is waiting for it.
type GenerateResult struct {
	Answer           string `json:"answer"`
	Model            string `json:"model"`
	Engine           string `json:"engine"`
	PromptTokens     int    `json:"promptTokens,omitempty"`
	CompletionTokens int    `json:"completionTokens,omitempty"`
	// CountedTokens is ctxflow's count of the same prompt
	// ([convo.RequestTokens]): with PromptTokens, the model's calibration.
	CountedTokens int `json:"countedTokens,omitempty"`
	// Docs are the chunks shown to the model; RetrievalError says why
	// there are none when retrieval failed (the answer goes on without).
	Docs           []Doc  `json:"docs,omitempty"`
	RetrievalError string `json:"retrievalError,omitempty"`
	// RewrittenQuery is the standalone question when rewriting changed it.
	RewrittenQuery string `json:"rewrittenQuery,omitempty"`
}

// Generate loads the window's messages from the transcript and asks the chat
// model for the next assistant message. Permanent model errors (unknown
// model, bad request) fail without retries.
func (a *Session) Generate(ctx context.Context, in GenerateInput) (GenerateResult, error) {
	msgs, err := a.Transcript.Messages(ctx, in.Session, in.WindowIDs)
	if err != nil {
		return GenerateResult{}, fmt.Errorf("generate for %s turn %s: %w", in.Session, in.TurnID, err)
	}
	view, err := convo.ToModelMessages(msgs)
	if err != nil {
		return GenerateResult{}, Permanent(CodeInvalidArgument, fmt.Sprintf("generate for %s turn %s: build model view", in.Session, in.TurnID), err)
	}
	var head []convo.ModelMessage
	if in.SystemPrompt != "" {
		head = append(head, convo.ModelMessage{Role: string(convo.RoleSystem), Content: in.SystemPrompt})
	}
	if in.SummaryID != "" {
		sum, err := a.summary(ctx, in.Session, in.SummaryID)
		if err != nil {
			return GenerateResult{}, err
		}
		head = append(head, convo.ModelMessage{Role: string(convo.RoleSystem), Content: convo.SummaryMessage(sum.Text).Content})
	}
	var res GenerateResult
	if in.UseDocs {
		head = append(head, convo.ModelMessage{Role: string(convo.RoleSystem), Content: DocumentsMessage(in.Docs)})
	}
	view = append(head, view...)
	defer keepAlive(ctx)()
	// What the model wrote so far is the answer of a cancelled turn (a
	// streamed call only: one without a broker is not streamed).
	var written strings.Builder
	stream := a.stream(ctx, in.Session, in.TurnID)
	if publish := stream; publish != nil {
		stream = func(delta string) { written.WriteString(delta); publish(delta) }
	}
	resp, err := a.Model.Chat(ctx, ChatRequest{Model: in.Model, Messages: view, Options: in.Options}, stream)
	if err != nil && ctx.Err() == context.Canceled {
		// The turn was cancelled: what the model wrote is its answer.
		return GenerateResult{}, temporal.NewCanceledError(written.String())
	}
	if err != nil {
		return GenerateResult{}, lastAttempt(ctx, in.Attempts, modelFailure(fmt.Sprintf("generate for %s turn %s with %s", in.Session, in.TurnID, in.Model), err))
	}
	answer := strings.TrimSpace(resp.Content)
	if answer == "" {
		return GenerateResult{}, fmt.Errorf("generate for %s turn %s: %s returned an empty answer", in.Session, in.TurnID, in.Model)
	}
	model := resp.Model
	if model == "" {
		model = in.Model
	}
	res.Answer, res.Model, res.Engine = answer, model, cmp.Or(resp.Engine, a.Engine)
	res.PromptTokens, res.CompletionTokens = resp.PromptTokens, resp.CompletionTokens
	res.CountedTokens = convo.RequestTokens(a.Tokenizer, view)
	return res, nil
}

// SaveAnswerInput stores a turn's answer.
type SaveAnswerInput struct {
	Session   SessionKey `json:"session"`
	TurnID    string     `json:"turnId"`
	ParentID  string     `json:"parentId"`
	Answer    string     `json:"answer"`
	Model     string     `json:"model,omitempty"`
	Engine    string     `json:"engine,omitempty"`
	CreatedAt time.Time  `json:"createdAt"`
	// Window, SummaryConfig and SummaryID let SaveAnswer tell whether the
	// running summary should fold more history now; a zero SummaryConfig
	// (summarisation off) never asks.
	Window        convo.WindowConfig  `json:"window"`
	SummaryConfig convo.SummaryConfig `json:"summaryConfig"`
	SummaryID     string              `json:"summaryId,omitempty"`
	// Cancelled marks the answer of a cancelled turn: kept for display,
	// left out of the model's view (convo.MetaStatus).
	Cancelled bool `json:"cancelled,omitempty"`
}

// SaveAnswerResult names the stored answer.
type SaveAnswerResult struct {
	MessageID string `json:"messageId"`
	Tokens    int    `json:"tokens"`
	Messages  int    `json:"messages"`
	// SummaryDue reports that the history is over the summary threshold.
	SummaryDue bool `json:"summaryDue,omitempty"`
}

// SaveAnswer appends the assistant message of a turn (idempotent by turn).
func (a *Session) SaveAnswer(ctx context.Context, in SaveAnswerInput) (SaveAnswerResult, error) {
	m := convo.Message{
		ID:        AssistantMessageID(in.TurnID),
		ParentID:  in.ParentID,
		Role:      convo.RoleAssistant,
		Content:   in.Answer,
		CreatedAt: in.CreatedAt,
		Meta:      map[string]string{"turnId": in.TurnID, "model": in.Model, "engine": in.Engine},
	}
	if in.Cancelled {
		m.Meta[convo.MetaStatus] = convo.StatusCancelled
	}
	m.Tokens = convo.MessageTokens(a.Tokenizer, m)
	stored, _, err := a.Transcript.Append(ctx, in.Session, m)
	if err != nil {
		return SaveAnswerResult{}, fmt.Errorf("save answer of %s turn %s: %w", in.Session, in.TurnID, err)
	}
	n, err := a.Transcript.Len(ctx, in.Session)
	if err != nil {
		return SaveAnswerResult{}, fmt.Errorf("count messages of %s: %w", in.Session, err)
	}
	res := SaveAnswerResult{MessageID: stored.ID, Tokens: stored.Tokens, Messages: n}
	if in.SummaryConfig != (convo.SummaryConfig{}) {
		sum, err := a.summary(ctx, in.Session, in.SummaryID)
		if err != nil {
			return res, err
		}
		plan, err := a.Transcript.PlanSummary(ctx, in.Session, stored.ID, FoldWindow(in.Window, in.SummaryConfig), in.SummaryConfig, sum)
		if err != nil {
			return res, fmt.Errorf("plan summary of %s: %w", in.Session, err)
		}
		res.SummaryDue = plan.Triggered && len(plan.Fold) > 0
	}
	return res, nil
}

// SummarizeInput asks for the running summary to fold older history.
type SummarizeInput struct {
	Session SessionKey          `json:"session"`
	LeafID  string              `json:"leafId"`
	Window  convo.WindowConfig  `json:"window"`
	Config  convo.SummaryConfig `json:"config"`
	// PrevID names the current summary's record ("" for none).
	PrevID string `json:"prevId,omitempty"`
	// Force folds everything but the newest round, even under the
	// threshold (the compress signal).
	Force bool `json:"force,omitempty"`
	// Linear stores the record only while LeafID is a leaf: where the leaf
	// has grown (a lost workflow task's turns, see LoadContext), nothing is
	// folded and the next turn adopts what grew.
	Linear bool `json:"linear,omitempty"`
}

// SummaryRef names a running summary stored in the transcript as a
// "summary" record: workflow history carries this, never the text.
type SummaryRef struct {
	ID     string `json:"id"`
	Folded int    `json:"folded"`
	Tokens int    `json:"tokens"`
	// CacheHits counts the times the session reused this summary instead
	// of asking the model again.
	CacheHits int `json:"cacheHits,omitempty"`
}

// SummarizeResult is the new running summary.
type SummarizeResult struct {
	// Ref is the new summary (the previous one when nothing was folded).
	Ref *SummaryRef `json:"ref,omitempty"`
	// Folded is how many messages this call folded (0: nothing to do).
	Folded int `json:"folded"`
	// CacheHit reports a summary reused without a model call.
	CacheHit bool `json:"cacheHit,omitempty"`
	// More reports a backlog left for another call.
	More bool `json:"more,omitempty"`
	// TookMS is the call's own time in milliseconds (at least 1): made as
	// an activity, the step's time in the workflow also holds the server's
	// round trips (0 in results recorded before it was measured).
	TookMS int64 `json:"tookMs,omitempty"`
}

// Summarize folds the messages older than the window into the running
// summary with the chat model (incrementally: previous summary + new
// messages), reusing a cached summary of the same branch prefix.
func (a *Session) Summarize(ctx context.Context, in SummarizeInput) (SummarizeResult, error) {
	start := time.Now()
	res, err := a.summarize(ctx, in)
	res.TookMS = max(time.Since(start).Milliseconds(), 1)
	return res, err
}

func (a *Session) summarize(ctx context.Context, in SummarizeInput) (SummarizeResult, error) {
	cfg, window := in.Config, FoldWindow(in.Window, in.Config)
	if in.Force { // fold everything but the newest round
		cfg.ThresholdMessages, cfg.ThresholdTokens = 1, 0
		window.MaxRounds = 1
	}
	prev, err := a.summary(ctx, in.Session, in.PrevID)
	if err != nil {
		return SummarizeResult{}, err
	}
	plan, err := a.Transcript.PlanSummary(ctx, in.Session, in.LeafID, window, cfg, prev)
	if err != nil {
		return SummarizeResult{}, Permanent(CodeInvalidArgument, fmt.Sprintf("plan summary of %s", in.Session), err)
	}
	if !plan.Triggered || len(plan.Fold) == 0 {
		if in.PrevID == "" {
			return SummarizeResult{}, nil
		}
		// The stored summary covers what there is to fold: reused (seed
		// 001 §5: same folded count, same config).
		return SummarizeResult{Ref: &SummaryRef{ID: in.PrevID, Folded: prev.Folded, Tokens: prev.Tokens}, CacheHit: true}, nil
	}
	recID := in.LeafID + ".s"
	if m, ok, err := a.Transcript.Get(ctx, in.Session, recID); err != nil {
		return SummarizeResult{}, fmt.Errorf("read summary %s of %s: %w", recID, in.Session, err)
	} else if ok {
		// An earlier attempt stored this fold already (a retry after a
		// crash, maybe on another worker): reuse it when it is the same.
		if st, err := convo.SummaryFromRecord(m); err == nil && st.Key == plan.Key {
			return SummarizeResult{Ref: &SummaryRef{ID: m.ID, Folded: st.Folded, Tokens: st.Tokens}, Folded: len(plan.Fold), CacheHit: true, More: plan.More}, nil
		}
	}
	defer keepAlive(ctx)()
	st, hit, err := convo.Summarize(ctx, a.Tokenizer, plan, cfg, a.SummaryCache, func(ctx context.Context, prompt []convo.ModelMessage) (string, error) {
		resp, err := a.Model.Chat(ctx, ChatRequest{Model: cfg.Model, Messages: prompt, Options: ModelOptions{NumPredict: 2 * cfg.MaxTokens}}, nil)
		return resp.Content, err
	})
	if err != nil {
		return SummarizeResult{}, modelFailure("summarize "+in.Session.String(), err)
	}
	// The record goes on the branch, below the leaf: the next message hangs
	// under it, and its id is derived from the leaf so a retry finds it.
	rec := convo.SummaryRecord(recID, in.LeafID, time.Now().UTC(), st)
	add := a.Transcript.Append
	if in.Linear {
		add = a.Transcript.AppendLeaf
	}
	stored, _, err := add(ctx, in.Session, rec)
	if errors.Is(err, convo.ErrNotLeaf) {
		return SummarizeResult{}, nil
	}
	if err != nil {
		return SummarizeResult{}, fmt.Errorf("store summary of %s: %w", in.Session, err)
	}
	ref := &SummaryRef{ID: stored.ID, Folded: st.Folded, Tokens: st.Tokens}
	return SummarizeResult{Ref: ref, Folded: len(plan.Fold), CacheHit: hit, More: plan.More}, nil
}

// FoldWindow is what a fold keeps beside the summary: half the rounds and
// half the tokens of the window, the tokens also at most half the summary's
// token threshold. So a history over the threshold always has something to
// fold, and the view grows back for a few rounds before the next fold
// instead of a summary call per turn.
func FoldWindow(w convo.WindowConfig, c convo.SummaryConfig) convo.WindowConfig {
	w.Strategy = convo.StrategyHybrid
	w.MaxRounds = max(1, w.MaxRounds/2)
	tokens := w.MaxTokens
	if c.ThresholdTokens > 0 {
		tokens = min(tokens, c.ThresholdTokens)
	}
	w.MaxTokens = max(convo.MinMaxTokens, tokens/2)
	return w
}

// summary reads the running summary from its record ("" → none).
func (a *Session) summary(ctx context.Context, s SessionKey, id string) (convo.SummaryState, error) {
	if id == "" {
		return convo.SummaryState{}, nil
	}
	m, ok, err := a.Transcript.Get(ctx, s, id)
	if err != nil {
		return convo.SummaryState{}, fmt.Errorf("summary %s of %s: %w", id, s, err)
	}
	if !ok {
		return convo.SummaryState{}, Permanent(CodeInvalidArgument, fmt.Sprintf("summary %s of %s", id, s), ErrNotFound)
	}
	st, err := convo.SummaryFromRecord(m)
	if err != nil {
		return convo.SummaryState{}, Permanent(CodeInvalidArgument, fmt.Sprintf("summary %s of %s", id, s), err)
	}
	return st, nil
}

// StoredTurn is a turn read back from the transcript.
type StoredTurn struct {
	Question           string `json:"question"`
	UserMessageID      string `json:"userMessageId,omitempty"`
	Answer             string `json:"answer,omitempty"`
	AssistantMessageID string `json:"assistantMessageId,omitempty"`
}

// LoadTurn reads a turn's question and answer from the transcript (the
// result of a repeated turn older than the results a session keeps).
func (a *Session) LoadTurn(ctx context.Context, s SessionKey, turnID string) (StoredTurn, error) {
	var t StoredTurn
	for _, p := range []struct {
		id        string
		text, ref *string
	}{{UserMessageID(turnID), &t.Question, &t.UserMessageID}, {AssistantMessageID(turnID), &t.Answer, &t.AssistantMessageID}} {
		m, ok, err := a.Transcript.Get(ctx, s, p.id)
		if err != nil {
			return t, fmt.Errorf("load turn %s of %s: %w", turnID, s, err)
		}
		if ok {
			*p.text, *p.ref = m.Content, m.ID
		}
	}
	return t, nil
}

// MessageRef is where a message sits in a session's tree.
type MessageRef struct {
	ID       string     `json:"id"`
	ParentID string     `json:"parentId,omitempty"`
	Role     convo.Role `json:"role"`
}

// Locate finds a message of a session's transcript (a not_found failure
// when there is none): the target of a branch or an edit.
func (a *Session) Locate(ctx context.Context, s SessionKey, id string) (MessageRef, error) {
	m, ok, err := a.Transcript.Get(ctx, s, id)
	switch {
	case err != nil:
		return MessageRef{}, fmt.Errorf("find message %s of %s: %w", id, s, err)
	case !ok:
		return MessageRef{}, Permanent(CodeNotFound, fmt.Sprintf("session %s has no message %q", s, id), nil)
	}
	return MessageRef{ID: m.ID, ParentID: m.ParentID, Role: m.Role}, nil
}

// SeedInput fills a new session: with the branch of From up to Through (a
// fork), or with the JSONL transcript at Path, whose SHA-256 is SHA256 (an
// import; Leaf is its active leaf, "" for its last message).
type SeedInput struct {
	Session SessionKey  `json:"session"`
	From    *SessionKey `json:"from,omitempty"`
	Through string      `json:"through,omitempty"`
	Path    string      `json:"path,omitempty"`
	SHA256  string      `json:"sha256,omitempty"`
	Leaf    string      `json:"leaf,omitempty"`
}

// SeededTurn is a turn found in a seeded transcript: its id and the
// fingerprint of its question ([QuestionHash]), for the session's ledger.
type SeededTurn struct {
	TurnID       string `json:"t"`
	QuestionHash uint32 `json:"q"`
}

// SeedResult is the seeded session: its active leaf, its message count,
// and its turns (those answered count as the session's turns).
type SeedResult struct {
	Leaf     string       `json:"leaf"`
	Messages int          `json:"messages"`
	Turns    []SeededTurn `json:"turns,omitempty"`
	Answered int          `json:"answered"`
}

// QuestionHash is the fingerprint of a question a session's turn ledger
// keeps (FNV-1a, 32 bits).
func QuestionHash(q string) uint32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(q))
	return h.Sum32()
}

// Seed copies a fork's branch or an imported transcript into a new
// session, message by message with their ids (appends are idempotent, so
// a retry completes what an attempt began).
func (a *Session) Seed(ctx context.Context, in SeedInput) (SeedResult, error) {
	defer keepAlive(ctx)()
	var msgs []convo.Message
	leaf := in.Leaf
	if in.From != nil {
		b, err := a.Transcript.Branch(ctx, *in.From, in.Through)
		switch {
		case errors.Is(err, convo.ErrNotFound):
			return SeedResult{}, Permanent(CodeNotFound, fmt.Sprintf("session %s has no message %q", in.From, in.Through), nil)
		case err != nil:
			return SeedResult{}, fmt.Errorf("read %s up to %s: %w", in.From, in.Through, err)
		}
		msgs, leaf = b, in.Through
		countTokens(a.Tokenizer, msgs) // stored before counts existed, or imported then
	} else {
		data, err := os.ReadFile(in.Path)
		if err != nil {
			return SeedResult{}, Permanent(CodeNotFound, "read the uploaded transcript", err)
		}
		if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != in.SHA256 {
			return SeedResult{}, Permanent(CodeDocumentChanged, "the uploaded transcript changed after it was accepted: import it again", nil)
		}
		if msgs, err = convo.DecodeJSONL(bytes.NewReader(data)); err != nil {
			return SeedResult{}, Permanent(CodeInvalidArgument, "imported transcript", err)
		}
		countTokens(a.Tokenizer, msgs) // counted here, never taken from the file
		if leaf == "" && len(msgs) > 0 {
			leaf = msgs[len(msgs)-1].ID
		}
	}
	res := SeedResult{Leaf: leaf}
	for _, m := range msgs {
		if _, _, err := a.Transcript.Append(ctx, in.Session, m); err != nil {
			return res, fmt.Errorf("seed %s with %s: %w", in.Session, m.ID, err)
		}
	}
	res.Turns, res.Answered = seededTurns(msgs)
	if leaf != "" {
		if _, err := a.Locate(ctx, in.Session, leaf); err != nil {
			return res, Permanent(CodeInvalidArgument, fmt.Sprintf("active leaf %q is not in the transcript", leaf), nil)
		}
	}
	n, err := a.Transcript.Len(ctx, in.Session)
	if err != nil {
		return res, fmt.Errorf("count messages of %s: %w", in.Session, err)
	}
	res.Messages = n
	return res, nil
}

// countTokens sets each message's token count (see [convo.MessageTokens]).
func countTokens(tok convo.Tokenizer, msgs []convo.Message) {
	for i := range msgs {
		msgs[i].Tokens = convo.MessageTokens(tok, msgs[i])
	}
}

// seededTurns finds the turns of a seeded transcript: those of ctxflow's
// own ids (question "<turn>.u", answer "<turn>.a") go to the session's
// ledger; answered counts every question that has an answer below it,
// whatever its ids (seed 004's transcripts have ids of their own).
func seededTurns(msgs []convo.Message) (turns []SeededTurn, answered int) {
	replied := map[string]bool{}
	for _, m := range msgs {
		if m.Role == convo.RoleAssistant {
			replied[m.ParentID] = true
		}
	}
	for _, m := range msgs {
		if m.Role != convo.RoleUser {
			continue
		}
		if replied[m.ID] {
			answered++
		}
		if strings.HasSuffix(m.ID, ".u") {
			turns = append(turns, SeededTurn{TurnID: cmp.Or(m.Meta["turnId"], strings.TrimSuffix(m.ID, ".u")), QuestionHash: QuestionHash(m.Content)})
		}
	}
	return turns, answered
}

// SaveSnapshot stores a session's working state so that a session that
// ended idle can be revived by its next turn.
func (a *Session) SaveSnapshot(ctx context.Context, s SessionKey, state json.RawMessage) error {
	if err := a.Transcript.SaveSnapshot(ctx, s, state); err != nil {
		return fmt.Errorf("save snapshot of %s: %w", s, err)
	}
	return nil
}

// Snapshot is a stored working state; Found is false when there is none.
type Snapshot struct {
	Found bool            `json:"found"`
	State json.RawMessage `json:"state,omitempty"`
}

// LoadSnapshot returns the last stored working state of a session.
func (a *Session) LoadSnapshot(ctx context.Context, s SessionKey) (Snapshot, error) {
	b, ok, err := a.Transcript.LoadSnapshot(ctx, s)
	if err != nil {
		return Snapshot{}, fmt.Errorf("load snapshot of %s: %w", s, err)
	}
	return Snapshot{Found: ok, State: b}, nil
}

// DeleteSession removes a closed session's transcript and snapshot.
func (a *Session) DeleteSession(ctx context.Context, s SessionKey) error {
	if err := a.Transcript.Delete(ctx, s); err != nil {
		return fmt.Errorf("delete session %s: %w", s, err)
	}
	return nil
}

// ErrNotFound reports a missing session or message.
var ErrNotFound = errors.New("not found")
