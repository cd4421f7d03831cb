// Package eval measures ctxflow against public development sets in the
// common JSONL format (make eval: ../shared/evaldata; the tests: small
// samples in testdata): retrieval recall on a closed corpus, per search
// mode and per query form (as asked, rewritten offline, gold rewrite),
// through the retrieval path qa turns run (activities.RAG.Retrieve).
package eval

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/activities/offline"
	"github.com/ctxflow/ctxflow/activities/vecstore"
	"github.com/ctxflow/ctxflow/convo"
	"github.com/ctxflow/ctxflow/lexical"
)

// Case is one turn of an evaluation set (the shared JSONL format).
type Case struct {
	ID          string   `json:"id"`
	History     []Turn   `json:"history"`
	Question    string   `json:"question"`
	GoldRewrite string   `json:"gold_rewrite"`
	GoldIDs     []string `json:"gold_passage_ids"`
}

// Turn is one message of a case's history.
type Turn struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Passage is one document of the closed corpus.
type Passage struct {
	ID   string `json:"id"`
	Text string `json:"text"`
}

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

// Set is an evaluation set, loaded and indexed: its passages in an
// in-memory embedded store (offline embedder), and the cases that have a
// gold passage in the corpus.
type Set struct {
	Name     string
	Passages int
	Cases    []GoldCase
	store    *vecstore.Store
	rag      *activities.RAG
}

// GoldCase is a case with its gold passages that are in the corpus and its
// history as messages.
type GoldCase struct {
	Case
	Gold    []string
	History []convo.Message
}

// Load reads dir/passages.jsonl and dir/cases.jsonl and indexes the
// passages. Close releases the index.
func Load(ctx context.Context, dir string) (*Set, error) {
	passages, err := readJSONL[Passage](filepath.Join(dir, "passages.jsonl"))
	if err != nil {
		return nil, err
	}
	cases, err := readJSONL[Case](filepath.Join(dir, "cases.jsonl"))
	if err != nil {
		return nil, err
	}
	store, inCorpus, err := index(ctx, passages)
	if err != nil {
		return nil, err
	}
	engine := &offline.Engine{}
	set := &Set{Name: filepath.Base(dir), Passages: len(passages), store: store, rag: &activities.RAG{
		Store: store, Embedders: []activities.NamedEmbedder{{Embedder: engine, Model: offline.ModelName}},
		Grader: engine, Relevance: lexical.Relevance{},
	}}
	for _, c := range cases {
		gc := GoldCase{Case: c, History: make([]convo.Message, len(c.History))}
		for _, id := range c.GoldIDs {
			if inCorpus[id] {
				gc.Gold = append(gc.Gold, id)
			}
		}
		if len(gc.Gold) == 0 {
			continue
		}
		for i, t := range c.History {
			gc.History[i] = convo.Message{Role: convo.Role(t.Role), Content: t.Content}
		}
		set.Cases = append(set.Cases, gc)
	}
	if len(set.Cases) == 0 {
		_ = store.Close()
		return nil, fmt.Errorf("%s: no case has a gold passage in the corpus", dir)
	}
	return set, nil
}

// Close releases the set's index.
func (s *Set) Close() error { return s.store.Close() }

// Store is the set's index: the embedded store, its passages embedded by
// the offline engine.
func (s *Set) Store() activities.VectorStore { return s.store }

// RAG is the retrieval the set is measured with: the activities a worker
// runs, over the set's index.
func (s *Set) RAG() *activities.RAG { return s.rag }

// Ranked returns the ids that retrieval ranks for query, best first, as a
// qa turn's retrieval would rank them.
func (s *Set) Ranked(ctx context.Context, query string, mode activities.SearchMode, k int) ([]string, error) {
	res, err := s.rag.Retrieve(ctx, activities.RetrieveInput{Query: query, TopK: k, Mode: mode})
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(res.Docs))
	for i, d := range res.Docs {
		ids[i] = d.ID
	}
	return ids, nil
}

// Retrieval measures recall@k: per case, the share of its gold passages
// found in the top k, averaged over cases.
func (s *Set) Retrieval(ctx context.Context, k int) (Report, error) {
	rep := Report{Set: s.Name, K: k, Cases: len(s.Cases), Passages: s.Passages}
	sums := map[[2]string]float64{}
	for _, c := range s.Cases {
		queries := map[string]string{
			"asked":     c.Question,
			"rewritten": lexical.Rewrite(c.Question, c.History).Query,
			"gold":      c.GoldRewrite,
		}
		for _, form := range []string{"asked", "rewritten", "gold"} {
			for _, mode := range []activities.SearchMode{activities.SearchDense, activities.SearchKeyword, activities.SearchHybrid} {
				ids, err := s.Ranked(ctx, queries[form], mode, k)
				if err != nil {
					return rep, fmt.Errorf("case %s: %w", c.ID, err)
				}
				found := 0
				for _, id := range c.Gold {
					if slices.Contains(ids, id) {
						found++
					}
				}
				sums[[2]string{string(mode), form}] += float64(found) / float64(len(c.Gold))
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
func index(ctx context.Context, passages []Passage) (*vecstore.Store, map[string]bool, error) {
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

func readJSONL[T any](path string) ([]T, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []T
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 16<<20)
	for line := 1; sc.Scan(); line++ {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var v T
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		out = append(out, v)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}
