// Package activities holds the Temporal activities of ctxflow and the ports
// (interfaces) they call. Adapters for concrete vendors live in sub-packages
// (ollama, transcript, tiktoken, ...) and are the only importers of vendor SDKs.
package activities

import (
	"context"
	"encoding/json"
	"errors"
	"sort"
	"time"

	"github.com/ctxflow/ctxflow/convo"
)

// ChatRequest is one call to a chat model.
type ChatRequest struct {
	// Model is the provider's model name, e.g. "qwen2.5:0.5b".
	Model string
	// Messages is the model view of the conversation, oldest first.
	Messages []convo.ModelMessage
	// Options are sampling options; zero values mean "provider default".
	Options ModelOptions
	// Format, when non-empty, is a JSON schema (or the literal "json") the
	// answer must follow.
	Format []byte
	// Tools are offered to the model; it may answer with ToolCalls instead
	// of (or besides) text.
	Tools []ToolSpec
}

// ToolSpec declares a tool a model may call.
type ToolSpec struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Parameters is the JSON schema of the arguments: an object schema.
	Parameters json.RawMessage `json:"parameters"`
}

// ModelOptions are per-call generation options. Zero values (nil pointers)
// leave the model's own default.
type ModelOptions struct {
	// Temperature is the sampling temperature; 0 is greedy.
	Temperature *float64
	// NumCtx is the context window in tokens.
	NumCtx int
	// NumPredict caps the tokens generated; -1 means no cap (Ollama also
	// accepts -2: fill the context).
	NumPredict int
	// Seed makes sampling reproducible.
	Seed *int
}

// ChatResponse is a finished chat call.
type ChatResponse struct {
	Content string
	Model   string
	// PromptTokens and CompletionTokens are the provider's own counts
	// (Ollama's prompt_eval_count and eval_count); zero when unknown.
	PromptTokens     int
	CompletionTokens int
	// ToolCalls are the calls the model asked for, in order; Args is a
	// JSON object.
	ToolCalls []convo.ToolCall
	// DoneReason is why generation stopped as the provider says it
	// ("stop", "length", ...); "length" means the answer was cut off.
	DoneReason string
	// Engine names the provider that answered when the model knows it
	// better than the worker's configuration (a worker that started
	// offline and moved to Ollama); "" otherwise.
	Engine string
}

// ChatModel generates assistant messages. Implementations must honour ctx
// cancellation and classify their errors: a *ModelError with Retryable=false
// for requests that will never succeed (unknown model, bad request), anything
// else is treated as transient.
type ChatModel interface {
	// Chat returns the complete answer. If onDelta is non-nil it is called
	// with each streamed fragment, in order, before Chat returns.
	Chat(ctx context.Context, req ChatRequest, onDelta func(delta string)) (ChatResponse, error)
}

// Broker carries a turn's answer as the model writes it, from the model
// activity to the API's streams (server-sent events), and the turn's steps
// as the session's workflow starts and ends them. It is best effort: a
// delta nobody listens to is dropped, and the turn result stays the
// durable answer.
type Broker interface {
	// Publish sends a delta to the topic's subscribers.
	Publish(ctx context.Context, topic string, d Delta) error
	// Subscribe returns the topic's deltas from now on, until ctx ends
	// (the channel is then closed).
	Subscribe(ctx context.Context, topic string) (<-chan Delta, error)
}

// Delta is a fragment of an answer. Call names the execution of the model
// call that made it, one value for each: a call made again (a retried
// activity, a call made again in a new workflow task or as an activity
// after failing in one) streams the answer again from its start, and a
// stream shows the text of the latest call only. (Not the attempt number:
// each of those executions may be attempt 1.)
//
// A delta with Step is a step event of the turn instead (Call and Text
// are then empty).
type Delta struct {
	Call int        `json:"a"`
	Text string     `json:"t"`
	Step *StepDelta `json:"s,omitempty"`
}

// StepDelta is a turn step's start, or its end, published by the session's
// workflow as it runs the step: the turn query cannot answer while a
// workflow task runs, and a fast model's turn is one workflow task. Index
// is the step's place among the turn's steps; a start names the step, an
// end holds it as in the turn result (JSON).
type StepDelta struct {
	Index int             `json:"i"`
	Name  string          `json:"n,omitempty"`
	End   json.RawMessage `json:"e,omitempty"`
}

// TurnTopic is the broker topic of a turn's answer.
func TurnTopic(s SessionKey, turnID string) string {
	return s.Tenant + "/" + s.SessionID + "/" + turnID
}

// Embedder turns texts into vectors: one vector per input text, in the same
// order, all of the model's dimension. Errors are classified as ChatModel's.
type Embedder interface {
	Embed(ctx context.Context, model string, texts []string) ([][]float32, error)
}

// ModelError is a classified model failure.
type ModelError struct {
	// StatusCode is the HTTP status the provider answered, 0 if none.
	StatusCode int
	// Retryable says whether the same request may succeed later.
	Retryable bool
	// Message says what failed, fit for a log or a step trace; it includes
	// the provider's own message when there was one.
	Message string
	// Err is the underlying cause, if any (a network error, a deadline).
	Err error
}

func (e *ModelError) Error() string {
	if e.Err != nil {
		return e.Message + ": " + e.Err.Error()
	}
	return e.Message
}

func (e *ModelError) Unwrap() error { return e.Err }

// IsPermanent reports whether err is a model error that must not be retried.
func IsPermanent(err error) bool {
	var me *ModelError
	return errors.As(err, &me) && !me.Retryable
}

// TranscriptStore keeps every message of every session (the full
// transcript) and a snapshot of each session's working state. Workflow
// history holds only ids; bodies live here.
//
// A session is named by its tenant and id. Appends are idempotent by message
// id: appending a message whose id exists is a no-op that reports the stored
// message, so a retried activity never duplicates a message.
type TranscriptStore interface {
	// Append adds m to the session's tree and returns the stored message
	// (the existing one if m.ID was already there). The parent must exist.
	Append(ctx context.Context, s SessionKey, m convo.Message) (stored convo.Message, existed bool, err error)
	// Get returns one message.
	Get(ctx context.Context, s SessionKey, id string) (convo.Message, bool, error)
	// Messages returns the messages with the given ids, in that order; a
	// missing id is an error.
	Messages(ctx context.Context, s SessionKey, ids []string) ([]convo.Message, error)
	// Assemble builds the model view of the branch ending at leafID: the
	// running summary sum (zero for none) and the window after it, in
	// O(window). With fallback > 0 it is the summariser-failure view
	// instead: the window over the last fallback messages.
	Assemble(ctx context.Context, s SessionKey, leafID string, w convo.WindowConfig, sum convo.SummaryState, fallback int) (convo.Context, error)
	// PlanSummary decides whether and what to fold into the running summary.
	PlanSummary(ctx context.Context, s SessionKey, leafID string, w convo.WindowConfig, c convo.SummaryConfig, prev convo.SummaryState) (convo.SummaryPlan, error)
	// Branch returns the branch root → leafID (the display transcript).
	Branch(ctx context.Context, s SessionKey, leafID string) ([]convo.Message, error)
	// All returns every message of the session, parents before children,
	// in the order they were added (the tree and the export).
	All(ctx context.Context, s SessionKey) ([]convo.Message, error)
	// AppendLeaf is Append for a message that must hang below a leaf: a
	// new m whose parent already has a child is refused with an error
	// wrapping convo.ErrNotLeaf (a turn's question, a summary record: the
	// session's leaf moved without it knowing, see LoadContext).
	AppendLeaf(ctx context.Context, s SessionKey, m convo.Message) (stored convo.Message, existed bool, err error)
	// Grown returns what grew below a message since it was a leaf (see
	// convo.Tree.Grown).
	Grown(ctx context.Context, s SessionKey, id string) ([]convo.Message, error)
	// Len returns the number of messages in the session.
	Len(ctx context.Context, s SessionKey) (int, error)
	// SaveSnapshot stores the session's working state; LoadSnapshot returns
	// the last one stored (ok false if none).
	SaveSnapshot(ctx context.Context, s SessionKey, snapshot []byte) error
	LoadSnapshot(ctx context.Context, s SessionKey) (snapshot []byte, ok bool, err error)
	// Delete removes the session's transcript and snapshot.
	Delete(ctx context.Context, s SessionKey) error
}

// DefaultTenant is the tenant of requests that name none.
const DefaultTenant = "default"

// MetaTenant is the chunk metadata key of a document's tenant: every
// chunk carries it, and every retrieval filters on it, so a tenant's
// questions never see another tenant's documents.
const MetaTenant = "tenant"

// TenantOf is t, or DefaultTenant for "".
func TenantOf(t string) string {
	if t == "" {
		return DefaultTenant
	}
	return t
}

type tenantKey struct{}

// WithTenant tells what runs under ctx (a tool) whose tenant it serves.
func WithTenant(ctx context.Context, tenant string) context.Context {
	return context.WithValue(ctx, tenantKey{}, tenant)
}

// TenantFrom is the tenant WithTenant set ("" → DefaultTenant).
func TenantFrom(ctx context.Context) string {
	t, _ := ctx.Value(tenantKey{}).(string)
	return TenantOf(t)
}

// SessionKey names a session in the stores.
type SessionKey struct {
	Tenant    string `json:"tenant"`
	SessionID string `json:"sessionId"`
}

func (k SessionKey) String() string { return k.Tenant + "/" + k.SessionID }

// Piece is a chunk of a document before it is embedded.
type Piece struct {
	// ID is stable: the same document id, position and text give the same
	// id, so that re-ingesting an unchanged document is idempotent.
	ID    string
	Index int
	Text  string
	// Metadata is stored with the chunk (e.g. a passage's id and title).
	Metadata map[string]string
}

// DocumentParser reads a document and cuts it into chunks. ext names its
// format (".md", ".txt", ".html", ".pdf", ".jsonl", ...; anything else is
// plain text). A document it cannot read is an error whose message says
// why (e.g. the bad line of a JSONL file); retrying cannot help.
// Implementations are deterministic: the same bytes give the same pieces.
type DocumentParser interface {
	Parse(documentID, ext string, data []byte) ([]Piece, error)
}

// Chunk is a piece of a document stored with its vector.
type Chunk struct {
	// ID is stable for the same document, position and text, so that
	// re-ingesting a document is idempotent.
	ID         string            `json:"id"`
	DocumentID string            `json:"documentId"`
	Text       string            `json:"text"`
	Vector     []float32         `json:"vector,omitempty"`
	Metadata   map[string]string `json:"metadata,omitempty"`
}

// SearchMode selects how a VectorStore searches.
type SearchMode string

// Search modes: dense vectors, keyword (BM25), or both fused by reciprocal
// rank fusion.
const (
	SearchDense   SearchMode = "dense"
	SearchKeyword SearchMode = "keyword"
	SearchHybrid  SearchMode = "hybrid"
)

// SearchRequest is one search.
type SearchRequest struct {
	// Vector is the query's embedding (dense and hybrid modes).
	Vector []float32
	// Text is the query's text (keyword and hybrid modes).
	Text string
	Mode SearchMode
	TopK int
	// MinScore drops results scoring below it (dense scores are cosine
	// similarities; fused scores are RRF scores).
	MinScore float64
	// Filter keeps only chunks whose metadata has every key with the value.
	Filter map[string]string
}

// DefaultTopK is the number of hits a search returns when TopK <= 0.
const DefaultTopK = 10

// Resolve returns the search's mode and result count, as every VectorStore
// reads them: Mode "" is hybrid when both Vector and Text are set, else
// dense or keyword by whichever is; TopK <= 0 is DefaultTopK.
func (r SearchRequest) Resolve() (SearchMode, int) {
	mode := r.Mode
	if mode == "" {
		switch {
		case len(r.Vector) > 0 && r.Text != "":
			mode = SearchHybrid
		case len(r.Vector) > 0:
			mode = SearchDense
		default:
			mode = SearchKeyword
		}
	}
	k := r.TopK
	if k <= 0 {
		k = DefaultTopK
	}
	return mode, k
}

// Keep applies the search's MinScore (0: no minimum) to ranked hits and
// keeps the first k; nil when none is left. It reuses hits' array.
func (r SearchRequest) Keep(hits []Hit, k int) []Hit {
	out := hits[:0]
	for _, h := range hits {
		if r.MinScore == 0 || h.Score >= r.MinScore {
			out = append(out, h)
		}
	}
	if len(out) > k {
		out = out[:k]
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// Hit is a search result.
type Hit struct {
	Chunk Chunk   `json:"chunk"`
	Score float64 `json:"score"`
	// Similarity is the cosine similarity of the chunk to the query
	// vector when a dense ranking holds the chunk (dense search; hybrid
	// search, for the chunks of its dense ranking); nil otherwise. The
	// relevance filter reads it.
	Similarity *float64 `json:"similarity,omitempty"`
}

// HybridDepth is how deep each ranking of a hybrid search for k results
// goes.
func HybridDepth(k int) int { return max(4*k, 50) }

// FuseHybrid is hybrid search, defined once for every VectorStore: a dense
// and a keyword ranking, each HybridDepth(k) deep, fused by reciprocal rank
// ([FuseRRF]). A fused hit keeps its cosine similarity when the dense
// ranking holds it.
func FuseHybrid(dense, keyword []Hit) []Hit {
	sims := make(map[string]float64, len(dense))
	for _, h := range dense {
		sims[h.Chunk.ID] = h.Score
	}
	out := FuseRRF(dense, keyword)
	for i := range out {
		if s, ok := sims[out[i].Chunk.ID]; ok {
			out[i].Similarity = &s
		}
	}
	return out
}

// FuseRRF merges ranked lists by reciprocal rank fusion: a hit at rank r
// (from 1) of a list scores 1/(RRFK+r), summed over the lists. Ties go to
// the better best rank, then to the smaller id, so the order is stable.
func FuseRRF(lists ...[]Hit) []Hit {
	type acc struct {
		hit   Hit
		score float64
		best  int
	}
	byID := map[string]*acc{}
	var all []*acc
	for _, l := range lists {
		for i, h := range l {
			rank := i + 1
			a := byID[h.Chunk.ID]
			if a == nil {
				a = &acc{hit: h, best: rank}
				byID[h.Chunk.ID] = a
				all = append(all, a)
			}
			a.score += 1 / float64(RRFK+rank)
			a.best = min(a.best, rank)
		}
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].score != all[j].score {
			return all[i].score > all[j].score
		}
		if all[i].best != all[j].best {
			return all[i].best < all[j].best
		}
		return all[i].hit.Chunk.ID < all[j].hit.Chunk.ID
	})
	out := make([]Hit, len(all))
	for i, a := range all {
		out[i] = a.hit
		out[i].Score = a.score
	}
	return out
}

// RRFK is the reciprocal-rank-fusion constant.
const RRFK = 60

// CollectionInfo describes a collection.
type CollectionInfo struct {
	Name      string `json:"name"`
	Dimension int    `json:"dimension"`
	Count     int    `json:"count"`
}

// ErrDimension is wrapped by a VectorStore's error for a vector whose
// dimension is not the collection's: a permanent failure.
var ErrDimension = errors.New("vector dimension mismatch")

// VectorStore keeps chunks and their vectors. Implementations: the embedded
// store (default) and Milvus. Upsert replaces chunks with the same id;
// vectors must have the collection's dimension (a mismatch is a permanent
// error naming both dimensions, never a silently stored vector).
type VectorStore interface {
	Upsert(ctx context.Context, chunks []Chunk) error
	DeleteDocument(ctx context.Context, documentID string) error
	Search(ctx context.Context, req SearchRequest) ([]Hit, error)
	Info(ctx context.Context) (CollectionInfo, error)
}

// IntentClassifier names what a question asks for (seed 002: qa,
// chitchat, task, continue, clarify) given the session's recent intents,
// oldest first, with the probability it gives that label; model is the
// session's chat model, for a classifier that asks one.
type IntentClassifier interface {
	Classify(ctx context.Context, model, question string, recent []string) (label string, confidence float64, err error)
}

// IntentGuess is a classifier's answer.
type IntentGuess struct {
	Label      string  `json:"label"`
	Confidence float64 `json:"confidence"`
}

// Rewriter makes a follow-up question stand alone from the conversation
// before it ("how much is it?" → "how much is the Pixel 8?") and names the
// conversation's topic (the entity a follow-up refers to), for retrieval
// and the relevance filter. It returns the question unchanged when nothing
// needs resolving, and topic "" when it found none.
type Rewriter interface {
	Rewrite(ctx context.Context, question string, history []convo.Message) (query, topic string, err error)
}

// Grade is a grader's verdict on one document (seed 003's
// {is_relevant, confidence, reasoning}).
type Grade struct {
	IsRelevant bool    `json:"is_relevant"`
	Confidence float64 `json:"confidence"`
	Reasoning  string  `json:"reasoning"`
}

// Grader judges whether a document holds what answering query needs. The
// model grader asks a chat model for structured output; the offline engine
// grades lexically.
type Grader interface {
	Grade(ctx context.Context, model, query, document string) (Grade, error)
}

// Reformulation is a corrective rewrite of a query that retrieved nothing
// useful (seed 003's {rewritten_query, rewrite_reason, keywords}).
type Reformulation struct {
	RewrittenQuery string   `json:"rewritten_query"`
	RewriteReason  string   `json:"rewrite_reason"`
	Keywords       []string `json:"keywords"`
}

// ReformulateRequest is what a reformulator sees: the user's question, the
// query that just failed, what it retrieved and the earlier rewrites.
type ReformulateRequest struct {
	Original string
	Current  string
	// Failed are the texts the failed query retrieved.
	Failed  []string
	History []Reformulation
}

// Reformulator rewrites a query for another retrieval attempt.
type Reformulator interface {
	Reformulate(ctx context.Context, model string, req ReformulateRequest) (Reformulation, error)
}

// Relevance scores a document against a query without a model (keyword and
// entity overlap plus n-gram similarity); the relevance filter and the
// fallback of a failed grader use it. Score is in [0, 1].
type Relevance interface {
	Relevance(query, document string) (relevant bool, score float64, reason string)
}

// NamedEmbedder is an embedder and the model it embeds with.
type NamedEmbedder struct {
	Embedder Embedder
	Model    string
}

// Tool is a function a model may call in an agent task. Spec offers it to
// the model (a JSON schema of its arguments); Policy says how a workflow
// schedules it; Call runs it with the model's JSON arguments and returns
// a JSON-encodable result. Call wraps ErrToolArgs for arguments that do not
// fit, ErrToolFailed for a request the tool refused (the model's to fix);
// any other error is the tool's infrastructure failing, retried as the
// policy allows. [NewTool] builds one from a typed Go function.
type Tool interface {
	Spec() ToolSpec
	Policy() ToolPolicy
	Call(ctx context.Context, args json.RawMessage) (any, error)
}

// ToolPolicy is how a tool runs: its timeout, and whether a retry is safe
// (read-only tools, and side-effecting ones that are idempotent, are
// retried; others run once).
type ToolPolicy struct {
	Timeout    time.Duration
	ReadOnly   bool
	Idempotent bool
	// RequiresApproval says a person must approve each call before it
	// runs (issue 25: the approval gate).
	RequiresApproval bool
}

// Planner decides an agent task's next step from its model view: calls of
// tools, or the final answer. A model's reply that is not what the
// planner asked for (JSON mode, a parse failure) is returned as a step
// with ParseError set, for the next step to see as an observation; only a
// model that does not answer is an error (classified like ChatModel's).
type Planner interface {
	Next(ctx context.Context, req PlanRequest) (PlanStep, error)
}

// PlanRequest is what a planner sees.
type PlanRequest struct {
	Model string
	// Goal is the task's goal; Facts what earlier steps and tasks found.
	Goal  string
	Facts KnownFacts
	// View is the task's model view: the system prompt, the running
	// summary of older steps and the recent steps, oldest first.
	View  []convo.ModelMessage
	Tools []ToolSpec
	// Step is the number of the step to decide (from 1); Steps the last
	// step, compact (the view holds the recent steps in full, the facts
	// and the running summary the older ones).
	Step    int
	Steps   []StepRecord
	Options ModelOptions
}

// StepRecord is one past step of a task, compact.
type StepRecord struct {
	N    int    `json:"n"`
	Tool string `json:"tool,omitempty"`
	// Args are the call's arguments (clipped).
	Args string `json:"args,omitempty"`
	OK   bool   `json:"ok"`
	// Observation is the start of what the step observed.
	Observation string `json:"observation,omitempty"`
}

// PlanStep is a planner's decision.
type PlanStep struct {
	// Thought is the planner's reasoning, if it gave one.
	Thought string
	// Calls are the tools to call, in order; empty when Answer is set.
	Calls []convo.ToolCall
	// Answer ends the task.
	Answer string
	// ParseError says why the model's reply could not be read (JSON
	// mode); Raw is the reply.
	ParseError string
	Raw        string
	// Engine names who decided ("ollama", "offline").
	Engine                         string
	PromptTokens, CompletionTokens int
}

// SmallTalkDetector tells greetings, thanks and goodbyes, which need no
// knowledge base.
type SmallTalkDetector interface {
	IsSmallTalk(text string) bool
}
