package milvus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/milvus-io/milvus/client/v2/entity"
	"github.com/milvus-io/milvus/client/v2/index"
	"github.com/milvus-io/milvus/client/v2/milvusclient"

	"github.com/ctxflow/ctxflow/activities"
)

// outputFields are the fields every search returns.
var outputFields = []string{fieldID, fieldDocument, fieldText, fieldMetadata}

// Search runs req with the embedded store's semantics. Mode "" means
// hybrid when both Vector and Text are set, otherwise dense or keyword by
// whichever is set. Dense needs Vector (a zero vector matches nothing);
// keyword with no text returns no hits; hybrid uses whichever of the two is
// given. TopK <= 0 means DefaultTopK (Milvus caps it at 16384). Scores:
// cosine similarity (dense), Milvus's BM25 (keyword), the exact RRF score
// sum of 1/(RRFK+rank) (hybrid); MinScore applies to the mode's score, and
// 0 means no minimum. Unlike the embedded store, which leaves them out, chunks
// stored with a zero vector take part in dense search with a score of 0 (Milvus
// leaves zero vectors unnormalised). Hits carry the chunk's id, document, text
// and metadata but not its vector.
func (s *Store) Search(ctx context.Context, req activities.SearchRequest) ([]activities.Hit, error) {
	if err := s.acquire(ctx); err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	mode, k := req.Resolve()
	k = min(k, maxTopK)
	filter, err := filterExpr(req.Filter)
	if err != nil {
		return nil, err
	}
	var hits []activities.Hit
	switch mode {
	case activities.SearchDense:
		if len(req.Vector) == 0 {
			return nil, errors.New("milvus: dense search needs a query vector")
		}
		var sub *subSearch
		if sub, err = s.dense(req.Vector); err == nil && sub != nil {
			hits, err = s.search(ctx, *sub, k, filter)
		}
	case activities.SearchKeyword:
		if req.Text != "" {
			hits, err = s.search(ctx, keyword(req.Text), k, filter)
		}
	case activities.SearchHybrid:
		if len(req.Vector) == 0 && req.Text == "" {
			return nil, errors.New("milvus: hybrid search needs a query vector or text")
		}
		hits, err = s.hybrid(ctx, req, k, filter)
	default:
		return nil, fmt.Errorf("milvus: unknown search mode %q", req.Mode)
	}
	if err != nil {
		return nil, err
	}
	return req.Keep(hits, k), nil
}

// subSearch is one ANN search: dense on the vector field, or BM25 on the
// sparse field with the query text (Milvus runs the BM25 function on it).
type subSearch struct {
	field  string
	metric entity.MetricType
	query  entity.Vector
	dense  bool
}

// dense is the dense sub-search for vec, nil for a zero vector (which has
// no direction, so matches nothing), or an error for a vector Milvus must
// not receive.
func (s *Store) dense(vec []float32) (*subSearch, error) {
	if err := s.checkVector("the query vector", vec); err != nil {
		return nil, err
	}
	if !slices.ContainsFunc(vec, func(x float32) bool { return x != 0 }) {
		return nil, nil
	}
	return &subSearch{field: fieldVector, metric: entity.COSINE, query: entity.FloatVector(vec), dense: true}, nil
}

func keyword(text string) subSearch {
	return subSearch{field: fieldSparse, metric: entity.BM25, query: entity.Text(text)}
}

func (s *Store) search(ctx context.Context, q subSearch, k int, filter string) ([]activities.Hit, error) {
	opt := milvusclient.NewSearchOption(s.name, k, []entity.Vector{q.query}).
		WithANNSField(q.field).
		WithSearchParam("metric_type", string(q.metric)).
		WithFilter(filter).
		WithOutputFields(outputFields...).
		WithConsistencyLevel(entity.ClStrong)
	if q.dense {
		opt.WithAnnParam(index.NewHNSWAnnParam(max(k, minEf)))
	}
	rss, err := s.client.Search(ctx, opt)
	if err != nil {
		return nil, fmt.Errorf("milvus search %s: %w", s.name, err)
	}
	hits, err := s.hits(rss)
	if err != nil {
		return nil, err
	}
	if q.dense {
		for i := range hits {
			// float32 rounding can take a cosine just past ±1.
			score := max(-1, min(1, hits[i].Score))
			hits[i].Score, hits[i].Similarity = score, &score
		}
	}
	return hits, nil
}

// hybrid is [activities.FuseHybrid] over a dense and a keyword search of
// the collection (the fusion is the embedded store's, so that both rank
// alike and the relevance filter knows each dense hit's similarity).
func (s *Store) hybrid(ctx context.Context, req activities.SearchRequest, k int, filter string) ([]activities.Hit, error) {
	depth := min(activities.HybridDepth(k), maxTopK)
	var dense, kw []activities.Hit
	if len(req.Vector) > 0 {
		d, err := s.dense(req.Vector)
		if err != nil {
			return nil, err
		}
		if d != nil {
			if dense, err = s.search(ctx, *d, depth, filter); err != nil {
				return nil, err
			}
		}
	}
	if req.Text != "" {
		var err error
		if kw, err = s.search(ctx, keyword(req.Text), depth, filter); err != nil {
			return nil, err
		}
	}
	return activities.FuseHybrid(dense, kw), nil
}

// hits reads the chunks of a one-query search answer; Score is Milvus's.
func (s *Store) hits(rss []milvusclient.ResultSet) ([]activities.Hit, error) {
	if len(rss) == 0 {
		return nil, nil
	}
	rs := rss[0]
	fail := func(err error) ([]activities.Hit, error) {
		return nil, fmt.Errorf("milvus search %s: read results: %w", s.name, err)
	}
	if rs.Err != nil {
		return fail(rs.Err)
	}
	if rs.ResultCount == 0 {
		return nil, nil
	}
	docs, texts, metas := rs.GetColumn(fieldDocument), rs.GetColumn(fieldText), rs.GetColumn(fieldMetadata)
	if rs.IDs == nil || docs == nil || texts == nil || metas == nil || len(rs.Scores) < rs.ResultCount {
		return fail(errors.New("missing output fields"))
	}
	hits := make([]activities.Hit, rs.ResultCount)
	for i := range hits {
		c := &hits[i].Chunk
		var err error
		if c.ID, err = rs.IDs.GetAsString(i); err != nil {
			return fail(err)
		}
		if c.DocumentID, err = docs.GetAsString(i); err != nil {
			return fail(err)
		}
		if c.Text, err = texts.GetAsString(i); err != nil {
			return fail(err)
		}
		raw, err := metas.Get(i)
		if err != nil {
			return fail(err)
		}
		b, _ := raw.([]byte)
		if len(b) > 0 {
			if err := json.Unmarshal(b, &c.Metadata); err != nil {
				return fail(fmt.Errorf("metadata of chunk %q: %w", c.ID, err))
			}
		}
		if len(c.Metadata) == 0 {
			c.Metadata = nil
		}
		hits[i].Score = float64(rs.Scores[i])
	}
	return hits, nil
}

// filterExpr turns a metadata filter into a boolean expression on the JSON
// field, keys sorted so that the same filter gives the same expression:
//
//	metadata["lang"] == "zh" && metadata["n"] == "3"
//
// A chunk without the key does not match. Values are quoted (see quote);
// Milvus takes a JSON key between the quotes verbatim, so keys that are
// empty or hold double quotes, backslashes, brackets or control characters
// cannot be expressed and are refused.
func filterExpr(filter map[string]string) (string, error) {
	keys := slices.Sorted(maps.Keys(filter))
	parts := make([]string, len(keys))
	for i, k := range keys {
		if k == "" || !utf8.ValidString(k) || strings.ContainsFunc(k, func(r rune) bool {
			return strings.ContainsRune(`"\[]`, r) || unicode.IsControl(r)
		}) {
			return "", fmt.Errorf("milvus: metadata filter key %q cannot be expressed in a Milvus filter: keys must be non-empty valid UTF-8 without double quotes, backslashes, brackets or control characters", k)
		}
		parts[i] = fieldMetadata + `["` + k + `"] == ` + quote(filter[k])
	}
	return strings.Join(parts, " && "), nil
}
