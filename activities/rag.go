package activities

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/ctxflow/ctxflow/convo"
)

// RAG holds the ports of the corrective-retrieval activities (seed 003):
// retrieve with the relevance filter, grade, reformulate, answer.
type RAG struct {
	Store VectorStore
	// Embedders are tried in order for a collection's dimension: the
	// configured embedder first, then the alternatives (seed 000 §3.3.1).
	Embedders    []NamedEmbedder
	Grader       Grader
	Reformulator Reformulator
	Relevance    Relevance
	// Model answers standalone corrective queries; Engine names its provider.
	Model  ChatModel
	Engine string
	// Tokenizer counts an answer's prompt for calibration (nil: estimated).
	Tokenizer convo.Tokenizer

	dims sync.Map // embedding model → dimension, learnt from its vectors
}

// RetrieveInput is one retrieval of the corrective loop.
type RetrieveInput struct {
	Query string `json:"query"`
	TopK  int    `json:"topK"`
	// SimilarityThreshold is the relevance filter's minimum cosine
	// similarity (dense and hybrid modes).
	SimilarityThreshold float64    `json:"similarityThreshold"`
	Mode                SearchMode `json:"mode,omitempty"`
	// Topic is the conversation's topic, if known: a document that matches
	// neither the query nor the topic is dropped by the filter.
	Topic  string            `json:"topic,omitempty"`
	Filter map[string]string `json:"filter,omitempty"`
	// Tenant is whose documents are searched ("" is the default tenant).
	Tenant string `json:"tenant,omitempty"`
}

// Doc is a retrieved chunk: the one shape a document keeps from retrieval
// to the answer (graded, chosen, shown to the model, returned with the
// turn). Its Text is left out where only the reference is needed.
type Doc struct {
	ID         string `json:"id"`
	DocumentID string `json:"documentId,omitempty"`
	Source     string `json:"source,omitempty"`
	Text       string `json:"text,omitempty"`
	// Score is the search's rank score (hybrid: fused by reciprocal rank).
	Score float64 `json:"score"`
	// Similarity is the cosine similarity to the query; nil when the
	// document was found by keyword only.
	Similarity *float64 `json:"similarity,omitempty"`
}

// Ref is d without its text.
func (d Doc) Ref() Doc {
	d.Text = ""
	return d
}

// RetrievedDoc is a retrieved chunk with the relevance filter's verdict.
type RetrievedDoc struct {
	Doc
	// Kept is the relevance filter's verdict and Reason its explanation.
	Kept   bool   `json:"kept"`
	Reason string `json:"reason"`
}

// RetrieveResult is a retrieval's documents, best first.
type RetrieveResult struct {
	Docs []RetrievedDoc `json:"docs"`
	// Empty reports an empty knowledge base: there is nothing to correct.
	Empty bool `json:"empty,omitempty"`
	// EmbedModel is the embedder that matched the collection's dimension.
	EmbedModel string `json:"embedModel,omitempty"`
}

// Retrieve searches the knowledge base and runs the relevance filter (seed
// 000 §3.3.2) over the hits, keywords first: a document that matches the
// query's keywords or entities is kept, even below the similarity
// threshold; of the rest, one below the threshold is
// dropped, one very similar is kept, one that matches the conversation's
// topic is kept as on-topic, and the others are dropped. Each verdict
// carries its reason.
//
// It is the one retrieval path: qa turns and corrective queries run it as
// an activity, `ctxflow eval` calls it directly. The search is the store's
// own (hybrid by default: [FuseHybrid]), whose hits carry the similarity the
// filter reads.
func (a *RAG) Retrieve(ctx context.Context, in RetrieveInput) (RetrieveResult, error) {
	defer keepAlive(ctx)()
	info, err := a.Store.Info(ctx)
	if err != nil {
		return RetrieveResult{}, fmt.Errorf("retrieve %q: collection info: %w", convo.Clip(in.Query, 60), err)
	}
	if info.Count == 0 {
		return RetrieveResult{Empty: true}, nil
	}
	filter := maps.Clone(in.Filter)
	if filter == nil {
		filter = map[string]string{}
	}
	filter[MetaTenant] = TenantOf(in.Tenant)
	req := SearchRequest{Text: in.Query, Mode: cmp.Or(in.Mode, SearchHybrid), TopK: max(in.TopK, 1), Filter: filter}
	var res RetrieveResult
	if req.Mode != SearchKeyword {
		if req.Vector, res.EmbedModel, err = a.embedQuery(ctx, in.Query, info); err != nil {
			return res, err
		}
	}
	if req.Mode == SearchDense {
		req.Text = ""
	}
	hits, err := a.Store.Search(ctx, req)
	if errors.Is(err, ErrDimension) { // the collection changed under us
		return res, Permanent(CodeDimensionMismatch, fmt.Sprintf("retrieve %q: %v", convo.Clip(in.Query, 60), err), err)
	}
	if err != nil {
		return res, fmt.Errorf("retrieve %q: %w", convo.Clip(in.Query, 60), err)
	}
	for _, h := range hits {
		if err := ctx.Err(); err != nil { // past the deadline: Temporal has given up on this attempt
			return RetrieveResult{}, fmt.Errorf("retrieve %q: %w", convo.Clip(in.Query, 60), err)
		}
		d := RetrievedDoc{Doc: Doc{
			ID: h.Chunk.ID, DocumentID: h.Chunk.DocumentID, Source: h.Chunk.Metadata["source"],
			Text: h.Chunk.Text, Score: h.Score, Similarity: h.Similarity,
		}}
		d.Kept, d.Reason = a.filter(in, d)
		res.Docs = append(res.Docs, d)
	}
	return res, nil
}

// highSimilarity keeps a document without a keyword match (seed 000:
// "at least one keyword, or a high similarity").
const highSimilarity = 0.5

// filter is the relevance filter's verdict on one document: the keywords
// first, then the similarity threshold. Seed 000's code cuts at a
// similarity of 0.2 before it looks at keywords, a floor on bge-m3's scale;
// ctxflow's embedders differ (the offline n-gram embedder gives 0.09 to the
// page that answers 哪款手机可以打卫星电话？), so a keyword match keeps a
// document whatever its similarity (measured through the whole loop:
// zh-phones answers cite a gold passage 0.714 without the floor, 0.607
// with it; mtrag 0.479 and 0.492).
func (a *RAG) filter(in RetrieveInput, d RetrievedDoc) (bool, string) {
	sim, hasSim := 0.0, d.Similarity != nil
	if hasSim {
		sim = *d.Similarity
	}
	below := hasSim && sim < in.SimilarityThreshold
	if a.Relevance == nil {
		if below {
			return false, fmt.Sprintf("similarity %.2f below the threshold %.2f (no relevance filter configured)", sim, in.SimilarityThreshold)
		}
		return true, "no relevance filter configured"
	}
	ok, _, why := a.Relevance.Relevance(in.Query, d.Text)
	switch {
	case ok && below:
		return true, fmt.Sprintf("matches the query though its similarity %.2f is below the threshold %.2f: %s", sim, in.SimilarityThreshold, why)
	case ok:
		return true, "matches the query: " + why
	case below:
		return false, fmt.Sprintf("similarity %.2f below the threshold %.2f and %s", sim, in.SimilarityThreshold, why)
	case hasSim && sim >= highSimilarity:
		return true, fmt.Sprintf("similarity %.2f is high though %s", sim, why)
	case in.Topic != "" && strings.Contains(strings.ToLower(d.Text), strings.ToLower(in.Topic)):
		return true, fmt.Sprintf("on the conversation's topic %q though %s", in.Topic, why)
	}
	return false, why
}

// embedQuery embeds query with the first embedder whose dimension is the
// collection's; it never searches with a wrong-dimension vector.
func (a *RAG) embedQuery(ctx context.Context, query string, info CollectionInfo) ([]float32, string, error) {
	vs, model, err := embedFor(ctx, a.Embedders, &a.dims, []string{query}, info)
	if err != nil {
		return nil, "", err
	}
	return vs[0], model, nil
}

// embedFor embeds texts with the first of list whose vectors have the
// collection's dimension (any, for an empty collection), learning each
// embedder's dimension in dims so that a mismatched one is asked once. A
// failing embedder is passed over; when none matched, its error is
// returned (transient or permanent as it was), else a permanent
// CodeDimensionMismatch error naming both dimensions and the fix.
func embedFor(ctx context.Context, list []NamedEmbedder, dims *sync.Map, texts []string, info CollectionInfo) ([][]float32, string, error) {
	var tried []string
	var embedErr error // the first embedder failure, if none matched
	for i, e := range list {
		if d, ok := dims.Load(e.Model); ok && info.Dimension > 0 && d.(int) != info.Dimension {
			tried = append(tried, fmt.Sprintf("%s (%d)", e.Model, d.(int)))
			continue
		}
		vs, err := e.Embedder.Embed(ctx, e.Model, texts)
		if err != nil { // an alternative of the right dimension may serve
			if embedErr == nil {
				embedErr = modelFailure("embed with "+e.Model, err)
			}
			logger(ctx).Info("embedder failed, trying the next", "embedder", e.Model, "error", err)
			continue
		}
		if len(vs) != len(texts) || len(vs[0]) == 0 {
			return nil, "", fmt.Errorf("embed with %s: %d vectors for %d texts", e.Model, len(vs), len(texts))
		}
		dims.Store(e.Model, len(vs[0]))
		if info.Dimension == 0 || len(vs[0]) == info.Dimension {
			if i > 0 {
				logger(ctx).Info("embedder adapted to the collection's dimension",
					"collection", info.Name, "dimension", info.Dimension, "embedder", e.Model, "instead of", list[0].Model)
			}
			return vs, e.Model, nil
		}
		tried = append(tried, fmt.Sprintf("%s (%d)", e.Model, len(vs[0])))
	}
	if embedErr != nil {
		return nil, "", embedErr
	}
	if len(tried) == 0 {
		tried = append(tried, "none configured")
	}
	msg := fmt.Sprintf("collection %q has dimension %d but no configured embedder matches: tried %s; "+
		"set CTXFLOW_EMBEDDING_MODEL (or CTXFLOW_ALT_EMBEDDING_MODELS) to a model of dimension %d, "+
		"or ingest into a new collection (CTXFLOW_COLLECTION)",
		info.Name, info.Dimension, strings.Join(tried, ", "), info.Dimension)
	return nil, "", Permanent(CodeDimensionMismatch, msg, ErrDimension)
}

// CheckEmbedder is the start-up check of dimension adaptation: it names the
// embedder that will search a's collection, or returns the error every
// retrieval would. (A function, not a method: RAG's methods are activities.)
func CheckEmbedder(ctx context.Context, a *RAG) (string, error) {
	info, err := a.Store.Info(ctx)
	if err != nil {
		return "", fmt.Errorf("collection info: %w", err)
	}
	_, model, err := a.embedQuery(ctx, "dimension check", info)
	return model, err
}

// GradeInput asks whether one document answers a query.
type GradeInput struct {
	Query string       `json:"query"`
	Doc   RetrievedDoc `json:"doc"`
	Model string       `json:"model"`
}

// GradeDoc grades one document (one activity per document, so that a
// retrieval's documents are graded in parallel).
func (a *RAG) GradeDoc(ctx context.Context, in GradeInput) (Grade, error) {
	defer keepAlive(ctx)()
	g, err := a.Grader.Grade(ctx, in.Model, in.Query, in.Doc.Text)
	if err != nil {
		return Grade{}, modelFailure(fmt.Sprintf("grade %s for %q", in.Doc.ID, convo.Clip(in.Query, 60)), err)
	}
	g.Confidence = min(max(g.Confidence, 0), 1)
	return g, nil
}

// ReformulateInput asks for a better query after a failed retrieval.
type ReformulateInput struct {
	Original string          `json:"original"`
	Current  string          `json:"current"`
	Failed   []string        `json:"failed,omitempty"`
	History  []Reformulation `json:"history,omitempty"`
	Model    string          `json:"model"`
}

// Reformulate rewrites the current query for another retrieval.
func (a *RAG) Reformulate(ctx context.Context, in ReformulateInput) (Reformulation, error) {
	defer keepAlive(ctx)()
	r, err := a.Reformulator.Reformulate(ctx, in.Model, ReformulateRequest{
		Original: in.Original, Current: in.Current, Failed: in.Failed, History: in.History,
	})
	if err != nil {
		return Reformulation{}, modelFailure(fmt.Sprintf("rewrite %q", convo.Clip(in.Current, 60)), err)
	}
	r.RewrittenQuery = strings.TrimSpace(r.RewrittenQuery)
	return r, nil
}

// AnswerInput asks for an answer from graded documents (standalone
// corrective queries; sessions answer with Session.Generate).
type AnswerInput struct {
	Query   string       `json:"query"`
	Docs    []Doc        `json:"docs"`
	Model   string       `json:"model"`
	Options ModelOptions `json:"options"`
}

// AnswerResult is a generated answer.
type AnswerResult struct {
	Answer           string `json:"answer"`
	Model            string `json:"model"`
	Engine           string `json:"engine"`
	PromptTokens     int    `json:"promptTokens,omitempty"`
	CompletionTokens int    `json:"completionTokens,omitempty"`
	// CountedTokens is ctxflow's count of the same prompt (see
	// GenerateResult.CountedTokens).
	CountedTokens int `json:"countedTokens,omitempty"`
}

// Answer generates the answer to a standalone query from the documents
// that passed the grader (seed 003's generate prompt); with none it answers
// honestly that the knowledge base has nothing on the question.
func (a *RAG) Answer(ctx context.Context, in AnswerInput) (AnswerResult, error) {
	defer keepAlive(ctx)()
	msgs := []convo.ModelMessage{
		{Role: string(convo.RoleSystem), Content: answerPrompt},
		{Role: string(convo.RoleSystem), Content: DocumentsMessage(in.Docs)},
		{Role: string(convo.RoleUser), Content: in.Query},
	}
	resp, err := a.Model.Chat(ctx, ChatRequest{Model: in.Model, Messages: msgs, Options: in.Options}, nil)
	if err != nil {
		return AnswerResult{}, modelFailure(fmt.Sprintf("answer %q with %s", convo.Clip(in.Query, 60), in.Model), err)
	}
	answer := strings.TrimSpace(resp.Content)
	if answer == "" {
		return AnswerResult{}, fmt.Errorf("answer %q: %s returned an empty answer", convo.Clip(in.Query, 60), in.Model)
	}
	model := resp.Model
	if model == "" {
		model = in.Model
	}
	return AnswerResult{Answer: answer, Model: model, Engine: cmp.Or(resp.Engine, a.Engine),
		PromptTokens: resp.PromptTokens, CompletionTokens: resp.CompletionTokens,
		CountedTokens: convo.RequestTokens(a.Tokenizer, msgs)}, nil
}

// answerPrompt is seed 003's generation instruction.
const answerPrompt = `Answer the user's question from the knowledge base excerpts that passed a relevance check.
Use only information from the excerpts and do not make anything up. If the information is incomplete or missing, say so honestly.
Answer clearly and concisely, in the question's language, and cite the excerpts' [ids].`

// NothingRelevant starts the system message that tells a model the
// knowledge base was searched and nothing relevant was found, so that it
// answers honestly instead of from its own knowledge.
const NothingRelevant = "Knowledge base searched: nothing relevant was found."

// DocumentsMessage renders documents as "[id] text" blocks after a heading,
// the form the offline engine and a prompted model both read; with no
// documents it is the [NothingRelevant] note.
func DocumentsMessage(docs []Doc) string {
	if len(docs) == 0 {
		return NothingRelevant + " Say that the knowledge base has nothing on the question."
	}
	var b strings.Builder
	b.WriteString("Knowledge base excerpts; answer from them and cite their [ids]:\n")
	for _, d := range docs {
		fmt.Fprintf(&b, "[%s] %s\n", d.ID, strings.TrimSpace(d.Text))
	}
	return b.String()
}

// KnowledgeTool is search_knowledge: the qa turn's retrieval (with its
// relevance filter) as an agent tool.
func KnowledgeTool(rag *RAG) Tool {
	return NewTool("search_knowledge", "Search the knowledge base (the documents ingested into ctxflow) and return the passages that match, best first.",
		ToolPolicy{Timeout: time.Minute, ReadOnly: true},
		func(ctx context.Context, a struct {
			Query string `json:"query" desc:"what to look for"`
			TopK  int    `json:"topK,omitempty" desc:"how many passages (default 5, at most 20)"`
		}) (any, error) {
			if strings.TrimSpace(a.Query) == "" {
				return nil, fmt.Errorf("%w: query is empty", ErrToolArgs)
			}
			k := a.TopK
			if k <= 0 {
				k = 5
			}
			res, err := rag.Retrieve(ctx, RetrieveInput{Query: a.Query, TopK: min(k, 20), SimilarityThreshold: 0.3, Tenant: TenantFrom(ctx)})
			if err != nil {
				if IsPermanent(err) || CodeOf(err) == CodeDimensionMismatch {
					return nil, fmt.Errorf("%w: %v", ErrToolFailed, err)
				}
				return nil, err
			}
			type passage struct {
				ID     string `json:"id"`
				Source string `json:"source,omitempty"`
				Text   string `json:"text"`
			}
			out := struct {
				Passages []passage `json:"passages"`
				Empty    bool      `json:"knowledgeBaseEmpty,omitempty"`
			}{Passages: []passage{}, Empty: res.Empty}
			for _, d := range res.Docs {
				if d.Kept {
					out.Passages = append(out.Passages, passage{ID: d.ID, Source: d.Source, Text: convo.Clip(d.Text, 800)})
				}
			}
			return out, nil
		})
}
