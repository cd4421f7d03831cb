package vecstore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/blevesearch/bleve/v2"

	"github.com/ctxflow/ctxflow/activities"
)

// TestKeywordWorkIsBoundedByTerms: a keyword search looks for at most
// MaxQueryTerms distinct terms however long the question, each once; a
// question without repeats under the bound ranks as bleve's match query.
func TestKeywordWorkIsBoundedByTerms(t *testing.T) {
	ctx := context.Background()
	s := openT(t, Options{Dimension: 2})
	var chunks []activities.Chunk
	for i := range 200 {
		text := fmt.Sprintf("chunk %d talks about word%d and word%d, 华为Mate%d 的价格与续航", i, i%17, i%29, 50+i%20)
		chunks = append(chunks, activities.Chunk{ID: fmt.Sprintf("c%03d", i), Text: text, Vector: []float32{1, float32(i)}})
	}
	if err := s.Upsert(ctx, chunks); err != nil {
		t.Fatal(err)
	}
	var long strings.Builder
	for i := 0; long.Len() < 32<<10; i++ {
		fmt.Fprintf(&long, "word%d 价格%d ", i, i)
	}
	q := s.matchQuery(long.String())
	if n := len(q.Disjuncts); n != MaxQueryTerms {
		t.Errorf("a 32 KB question searched %d terms, want %d", n, MaxQueryTerms)
	}
	if q := s.matchQuery(strings.Repeat("价格 ", 5000)); len(q.Disjuncts) != 1 {
		t.Errorf("a repeated term searched %d times, want once", len(q.Disjuncts))
	}
	if _, err := s.Search(ctx, activities.SearchRequest{Mode: activities.SearchKeyword, Text: long.String(), TopK: 5}); err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{"word3 word5", "华为Mate60的价格", "what talks about chunk 7"} {
		got, err := s.Search(ctx, activities.SearchRequest{Mode: activities.SearchKeyword, Text: text, TopK: 10})
		if err != nil {
			t.Fatal(err)
		}
		mq := bleve.NewMatchQuery(text)
		mq.SetField(fieldText)
		req := bleve.NewSearchRequestOptions(mq, 10, 0, false)
		req.SortBy([]string{"-_score", "_id"})
		res, err := s.text.SearchInContext(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		var want, have []string
		for _, h := range res.Hits {
			want = append(want, h.ID)
		}
		for _, h := range got {
			have = append(have, h.Chunk.ID)
		}
		if !slices.Equal(have, want) {
			t.Errorf("%q ranks %v, the match query %v", text, have, want)
		}
	}
}
