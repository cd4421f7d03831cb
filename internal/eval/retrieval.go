package eval

import (
	"context"
	"fmt"
	"io"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/activities/offline"
	"github.com/ctxflow/ctxflow/activities/vecstore"
	"github.com/ctxflow/ctxflow/internal/eval/evaldata"
	"github.com/ctxflow/ctxflow/lexical"
	"github.com/ctxflow/ctxflow/workflows"
)

// Row is recall@K for one search mode and query form.
type Row struct {
	Mode   activities.SearchMode
	Query  string // "asked", "rewritten", "gold"
	Recall float64
}

// Report is a retrieval evaluation.
type Report struct {
	Set      string
	K        int
	Cases    int // cases with at least one gold passage in the corpus
	Passages int
	Rows     []Row
}

// Write prints the report as a table.
func (r Report) Write(w io.Writer) {
	fmt.Fprintf(w, "%s: recall@%d over %d cases, %d passages (offline embedder, embedded store)\n", r.Set, r.K, r.Cases, r.Passages)
	fmt.Fprintf(w, "%-8s %10s %10s %10s\n", "mode", "asked", "rewritten", "gold")
	for _, mode := range []activities.SearchMode{activities.SearchDense, activities.SearchKeyword, activities.SearchHybrid} {
		fmt.Fprintf(w, "%-8s", mode)
		for _, q := range []string{"asked", "rewritten", "gold"} {
			fmt.Fprintf(w, " %10.3f", r.Recall(mode, q))
		}
		fmt.Fprintln(w)
	}
}

// Recall returns the row's recall, or -1 if absent.
func (r Report) Recall(mode activities.SearchMode, query string) float64 {
	for _, row := range r.Rows {
		if row.Mode == mode && row.Query == query {
			return row.Recall
		}
	}
	return -1
}

// Set is an evaluation set, loaded and indexed: its cases and, when it
// has passages, its closed corpus in an in-memory embedded store (offline
// embedder), searched by the retrieval a qa turn runs.
type Set struct {
	Name     string
	Path     string
	Cases    []evaldata.Case
	Passages int
	// Gold are the cases that have a gold passage in the corpus.
	Gold     []GoldCase
	store    *vecstore.Store // nil without passages
	inCorpus map[string]bool // the ids of the passages
	rag      *activities.RAG
	rewriter activities.Rewriter
	qa       workflows.SessionConfig // the qa turn's retrieval settings
}

// GoldCase is a case with its gold passages that are in the corpus.
type GoldCase struct {
	evaldata.Case
	Gold []string
}

// Load reads the set's cases from path (its first limit cases, all when
// limit ≤ 0) and indexes its corpus (see [evaldata.Corpus]: all the
// passages, whatever the limit). Close releases the index.
func Load(ctx context.Context, path string, limit int) (*Set, error) {
	cases, err := evaldata.ReadCases(path)
	if err != nil {
		return nil, err
	}
	passages, err := evaldata.Corpus(path, cases)
	if err != nil {
		return nil, err
	}
	if limit > 0 && len(cases) > limit {
		cases = cases[:limit]
	}
	// The worker's own rewriter (worker.BuildPorts wires lexical.Rewriter
	// into the session activities).
	set := &Set{Name: evaldata.SetName(path), Path: path, Cases: cases, Passages: len(passages),
		rewriter: lexical.Rewriter{}, qa: workflows.DefaultSessionConfig()}
	if len(passages) == 0 {
		return set, nil
	}
	if set.store, set.inCorpus, err = index(ctx, passages); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	engine := &offline.Engine{}
	set.rag = &activities.RAG{
		Store: set.store, Embedders: []activities.NamedEmbedder{{Embedder: engine, Model: offline.ModelName}},
		Grader: engine, Relevance: lexical.Relevance{}, Model: engine, Engine: offline.ModelName,
	}
	for _, c := range cases {
		if gold := set.goldIn(c); len(gold) > 0 {
			set.Gold = append(set.Gold, GoldCase{Case: c, Gold: gold})
		}
	}
	return set, nil
}

// Close releases the set's index.
func (s *Set) Close() error {
	if s.store == nil {
		return nil
	}
	return s.store.Close()
}

// Store is the set's index: the embedded store, its passages embedded by
// the offline engine.
func (s *Set) Store() activities.VectorStore { return s.store }

// RAG is the retrieval the set is measured with: the activities a worker
// runs, over the set's index.
func (s *Set) RAG() *activities.RAG { return s.rag }

// Ranked returns the ids that retrieval ranks for query, best first, as a
// qa turn's retrieval would rank them.
func (s *Set) Ranked(ctx context.Context, query string, mode activities.SearchMode, k int) ([]string, error) {
	res, err := s.retrieve(ctx, activities.RetrieveInput{Query: query, TopK: k, Mode: mode})
	return docIDs(res.Docs), err
}

// retrieve runs the qa turn's retrieval over the set's corpus.
func (s *Set) retrieve(ctx context.Context, in activities.RetrieveInput) (activities.RetrieveResult, error) {
	if s.rag == nil {
		return activities.RetrieveResult{}, fmt.Errorf("%s has no passages to retrieve from", s.Name)
	}
	return s.rag.Retrieve(ctx, in)
}

// docIDs are the documents' ids, in order.
func docIDs(docs []activities.RetrievedDoc) []string {
	out := make([]string, len(docs))
	for i, d := range docs {
		out[i] = d.ID
	}
	return out
}

// Retrieval measures recall@k: per case, the share of its gold passages
// found in the top k, averaged over cases.
func (s *Set) Retrieval(ctx context.Context, k int) (Report, error) {
	rep := Report{Set: s.Name, K: k, Cases: len(s.Gold), Passages: s.Passages}
	if rep.Cases == 0 {
		return rep, fmt.Errorf("%s: no case has a gold passage in the corpus", s.Name)
	}
	sums := map[[2]string]float64{}
	for _, c := range s.Gold {
		rw, err := s.rewrite(ctx, c.Case)
		if err != nil {
			return rep, err
		}
		queries := map[string]string{"asked": c.Question, "rewritten": rw.Question, "gold": c.GoldRewrite}
		for _, form := range []string{"asked", "rewritten", "gold"} {
			for _, mode := range []activities.SearchMode{activities.SearchDense, activities.SearchKeyword, activities.SearchHybrid} {
				ids, err := s.Ranked(ctx, queries[form], mode, k)
				if err != nil {
					return rep, fmt.Errorf("case %s: %w", c.ID, err)
				}
				sums[[2]string{string(mode), form}] += RecallAt(ids, c.Gold, k)
			}
		}
	}
	for _, mode := range []activities.SearchMode{activities.SearchDense, activities.SearchKeyword, activities.SearchHybrid} {
		for _, form := range []string{"asked", "rewritten", "gold"} {
			rep.Rows = append(rep.Rows, Row{Mode: mode, Query: form, Recall: sums[[2]string{string(mode), form}] / float64(rep.Cases)})
		}
	}
	return rep, nil
}

// index stores passages in an in-memory embedded store, embedded by the
// offline embedder, and returns it with the set of their ids.
func index(ctx context.Context, passages []evaldata.Passage) (*vecstore.Store, map[string]bool, error) {
	store, err := vecstore.Open(vecstore.Options{Collection: "eval"})
	if err != nil {
		return nil, nil, err
	}
	emb := &offline.Engine{}
	inCorpus := map[string]bool{}
	for start := 0; start < len(passages); start += 256 {
		batch := passages[start:min(start+256, len(passages))]
		texts := make([]string, len(batch))
		for i, p := range batch {
			texts[i] = p.Text
		}
		vs, err := emb.Embed(ctx, offline.ModelName, texts)
		if err != nil {
			_ = store.Close()
			return nil, nil, fmt.Errorf("embed passages: %w", err)
		}
		chunks := make([]activities.Chunk, len(batch))
		for i, p := range batch {
			chunks[i] = activities.Chunk{ID: p.ID, DocumentID: p.ID, Text: p.Text, Vector: vs[i], Metadata: map[string]string{activities.MetaTenant: activities.DefaultTenant}}
			inCorpus[p.ID] = true
		}
		if err := store.Upsert(ctx, chunks); err != nil {
			_ = store.Close()
			return nil, nil, fmt.Errorf("index passages: %w", err)
		}
	}
	return store, inCorpus, nil
}
