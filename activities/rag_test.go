package activities_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/activities/offline"
	"github.com/ctxflow/ctxflow/activities/vecstore"
	"github.com/ctxflow/ctxflow/lexical"
)

var docs = []string{
	"The Pixel 8 costs 699 dollars and weighs 187 grams.",
	"华为Mate60 的售价是 5999 元。",
	"Ollama serves language models on port 11434.",
	"The weather in Lisbon is mild in winter.",
}

// newKB is an embedded store holding docs, embedded by the offline engine.
func newKB(t *testing.T) *vecstore.Store {
	t.Helper()
	store, err := vecstore.Open(vecstore.Options{Collection: "rag"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	vecs, err := (&offline.Engine{}).Embed(context.Background(), offline.ModelName, docs)
	if err != nil {
		t.Fatal(err)
	}
	var chunks []activities.Chunk
	for i, d := range docs {
		chunks = append(chunks, activities.Chunk{ID: string(rune('a' + i)), DocumentID: "doc", Text: d, Vector: vecs[i],
			Metadata: map[string]string{"source": "test.md", activities.MetaTenant: activities.DefaultTenant}})
	}
	// Another tenant's copy of the first document.
	chunks = append(chunks, activities.Chunk{ID: "acme/a", DocumentID: "acme/doc", Text: docs[0], Vector: vecs[0],
		Metadata: map[string]string{"source": "test.md", activities.MetaTenant: "acme"}})
	if err := store.Upsert(context.Background(), chunks); err != nil {
		t.Fatal(err)
	}
	return store
}

func offlineRAG(store activities.VectorStore, embedders ...activities.NamedEmbedder) *activities.RAG {
	e := &offline.Engine{}
	if len(embedders) == 0 {
		embedders = []activities.NamedEmbedder{{Embedder: e, Model: offline.ModelName}}
	}
	return &activities.RAG{Store: store, Embedders: embedders, Grader: e, Reformulator: e, Relevance: lexical.Relevance{}, Model: e, Engine: "offline"}
}

func byID(docs []activities.RetrievedDoc) map[string]activities.RetrievedDoc {
	out := map[string]activities.RetrievedDoc{}
	for _, d := range docs {
		out[d.ID] = d
	}
	return out
}

func TestRetrieveRelevanceFilter(t *testing.T) {
	rag := offlineRAG(newKB(t))
	ctx := context.Background()
	tests := []struct {
		name  string
		in    activities.RetrieveInput
		check func(t *testing.T, got map[string]activities.RetrievedDoc)
	}{
		{"hybrid keeps keyword matches and says why", activities.RetrieveInput{Query: "How much does the Pixel 8 cost?", TopK: 4, SimilarityThreshold: 0.01},
			func(t *testing.T, got map[string]activities.RetrievedDoc) {
				a := got["a"]
				if !a.Kept || !strings.HasPrefix(a.Reason, "matches the query: matched") || a.Similarity == nil {
					t.Errorf("pixel doc = %+v", a)
				}
				if d, ok := got["d"]; ok && d.Kept {
					t.Errorf("weather doc kept: %+v", d)
				}
			}},
		{"below the similarity threshold only keyword matches are kept", activities.RetrieveInput{Query: "How much does the Pixel 8 cost?", TopK: 4, SimilarityThreshold: 0.99},
			func(t *testing.T, got map[string]activities.RetrievedDoc) {
				for _, d := range got {
					if d.Kept != (d.ID == "a") || (d.ID == "a") != strings.Contains(d.Reason, "is below the threshold 0.99") {
						t.Errorf("doc %s = %+v", d.ID, d)
					}
				}
			}},
		{"keyword mode has no similarity", activities.RetrieveInput{Query: "Ollama port", TopK: 2, Mode: activities.SearchKeyword, SimilarityThreshold: 0.99},
			func(t *testing.T, got map[string]activities.RetrievedDoc) {
				c, ok := got["c"]
				if !ok || c.Similarity != nil || !c.Kept {
					t.Errorf("ollama doc = %+v (all: %v)", c, got)
				}
			}},
		{"chinese", activities.RetrieveInput{Query: "华为Mate60多少钱", TopK: 2, SimilarityThreshold: 0.01},
			func(t *testing.T, got map[string]activities.RetrievedDoc) {
				if b := got["b"]; !b.Kept {
					t.Errorf("mate60 doc = %+v", b)
				}
			}},
		{"on the conversation's topic", activities.RetrieveInput{Query: "what about its weight", TopK: 4, SimilarityThreshold: 0.0001, Topic: "Pixel 8"},
			func(t *testing.T, got map[string]activities.RetrievedDoc) {
				a, ok := got["a"]
				if !ok || !a.Kept || !strings.Contains(a.Reason, `on the conversation's topic "Pixel 8"`) {
					t.Errorf("pixel doc = %+v", a)
				}
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := rag.Retrieve(ctx, tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Docs) == 0 || len(res.Docs) > max(tc.in.TopK, 1) {
				t.Fatalf("%d docs", len(res.Docs))
			}
			for i, d := range res.Docs {
				if d.Reason == "" || d.Text == "" || (i > 0 && d.Score > res.Docs[i-1].Score) {
					t.Errorf("doc %d = %+v", i, d)
				}
			}
			tc.check(t, byID(res.Docs))
		})
	}
}

// hitsStore answers every search with its hits.
type hitsStore struct {
	activities.VectorStore
	hits []activities.Hit
}

func (s hitsStore) Info(context.Context) (activities.CollectionInfo, error) {
	return activities.CollectionInfo{Name: "fixed", Count: len(s.hits)}, nil
}

func (s hitsStore) Search(context.Context, activities.SearchRequest) ([]activities.Hit, error) {
	return s.hits, nil
}

// TestRelevanceFilterOrder: keywords first (issue 23: a keyword match
// keeps a document below the threshold), then the similarity threshold, a high
// similarity, the topic.
func TestRelevanceFilterOrder(t *testing.T) {
	sim := func(x float64) *float64 { return &x }
	const query = "华为Mate60的续航怎么样"
	tests := []struct {
		name       string
		text       string
		similarity *float64
		threshold  float64
		topic      string
		kept       bool
		reason     string
	}{
		{"keywords keep below the threshold", "华为Mate60的续航：电池容量为4750毫安时。", sim(0.23), 0.3, "", true, "matches the query though its similarity 0.23 is below the threshold 0.30"},
		{"keywords keep above it", "华为Mate60的续航：电池容量为4750毫安时。", sim(0.4), 0.3, "", true, "matches the query: matched"},
		{"keywords keep at any similarity", "华为Mate60的续航：电池容量为4750毫安时。", sim(0.09), 0.3, "", true, "matches the query though its similarity 0.09 is below the threshold 0.30"},
		{"no keyword below the threshold", "今天天气晴朗。", sim(0.25), 0.3, "", false, "similarity 0.25 below the threshold 0.30 and matched 0"},
		{"no keyword, high similarity", "今天天气晴朗。", sim(0.6), 0.3, "", true, "similarity 0.60 is high"},
		{"no keyword, on the topic", "今天天气晴朗，适合出门。", sim(0.35), 0.3, "天气", true, `on the conversation's topic "天气"`},
		{"no keyword, above the threshold, off the topic", "今天天气晴朗。", sim(0.35), 0.3, "", false, "matched 0"},
		{"found by keyword only", "华为Mate60的续航：电池容量为4750毫安时。", nil, 0.3, "", true, "matches the query: matched"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			store := hitsStore{hits: []activities.Hit{{Chunk: activities.Chunk{ID: "x", Text: tc.text}, Score: 1, Similarity: tc.similarity}}}
			res, err := offlineRAG(store).Retrieve(context.Background(), activities.RetrieveInput{
				Query: query, TopK: 1, SimilarityThreshold: tc.threshold, Topic: tc.topic, Mode: activities.SearchKeyword,
			})
			if err != nil {
				t.Fatal(err)
			}
			if d := res.Docs[0]; d.Kept != tc.kept || !strings.Contains(d.Reason, tc.reason) {
				t.Errorf("kept %v (%s), want %v (%s)", d.Kept, d.Reason, tc.kept, tc.reason)
			}
		})
	}
}

func TestRetrieveEmptyKnowledgeBase(t *testing.T) {
	store, err := vecstore.Open(vecstore.Options{Collection: "empty"})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	res, err := offlineRAG(store).Retrieve(context.Background(), activities.RetrieveInput{Query: "anything", TopK: 3})
	if err != nil || !res.Empty || len(res.Docs) != 0 {
		t.Fatalf("Retrieve = %+v, %v", res, err)
	}
}

// sizedEmbedder embeds in dim dimensions and counts its calls.
type sizedEmbedder struct {
	dim   int
	mu    sync.Mutex
	calls int
}

func (e *sizedEmbedder) Embed(_ context.Context, _ string, texts []string) ([][]float32, error) {
	e.mu.Lock()
	e.calls++
	e.mu.Unlock()
	out := make([][]float32, len(texts))
	for i := range out {
		out[i] = make([]float32, e.dim)
		out[i][0] = 1
	}
	return out, nil
}

// recordingStore remembers the vector dimensions it was asked to search.
type recordingStore struct {
	activities.VectorStore
	dims []int
}

func (s *recordingStore) Search(ctx context.Context, req activities.SearchRequest) ([]activities.Hit, error) {
	if req.Vector != nil {
		s.dims = append(s.dims, len(req.Vector))
	}
	return s.VectorStore.Search(ctx, req)
}

func TestRetrieveAdaptsToTheCollectionDimension(t *testing.T) {
	ctx := context.Background()
	big := &sizedEmbedder{dim: 1024}
	store := &recordingStore{VectorStore: newKB(t)} // 384 dimensions
	rag := offlineRAG(store,
		activities.NamedEmbedder{Embedder: big, Model: "bge-m3"},
		activities.NamedEmbedder{Embedder: &offline.Engine{}, Model: offline.ModelName})
	for range 3 {
		res, err := rag.Retrieve(ctx, activities.RetrieveInput{Query: "Pixel 8 price", TopK: 2})
		if err != nil {
			t.Fatal(err)
		}
		if res.EmbedModel != offline.ModelName || len(res.Docs) == 0 {
			t.Fatalf("Retrieve = %+v", res)
		}
	}
	if big.calls != 1 {
		t.Errorf("the mismatched embedder was called %d times; its dimension should be learnt once", big.calls)
	}
	for _, d := range store.dims {
		if d != 384 {
			t.Fatalf("searched with a %d-dimension vector", d)
		}
	}
	model, err := activities.CheckEmbedder(ctx, rag)
	if err != nil || model != offline.ModelName {
		t.Errorf("CheckEmbedder = %q, %v", model, err)
	}
}

func TestRetrieveRefusesWithoutAMatchingEmbedder(t *testing.T) {
	store := &recordingStore{VectorStore: newKB(t)}
	rag := offlineRAG(store, activities.NamedEmbedder{Embedder: &sizedEmbedder{dim: 1024}, Model: "bge-m3"})
	_, err := rag.Retrieve(context.Background(), activities.RetrieveInput{Query: "Pixel 8 price", TopK: 2})
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || !appErr.NonRetryable() || appErr.Type() != activities.CodeDimensionMismatch {
		t.Fatalf("error = %v, want a non-retryable %s", err, activities.CodeDimensionMismatch)
	}
	for _, want := range []string{"dimension 384", "bge-m3 (1024)", "CTXFLOW_EMBEDDING_MODEL"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if len(store.dims) != 0 {
		t.Errorf("searched with vectors of dimensions %v", store.dims)
	}
	if _, err := activities.CheckEmbedder(context.Background(), rag); err == nil {
		t.Error("CheckEmbedder accepted a mismatched embedder")
	}
}

func TestAnswerHonestWithoutDocuments(t *testing.T) {
	rag := offlineRAG(newKB(t))
	res, err := rag.Answer(context.Background(), activities.AnswerInput{Query: "Who won the 1998 World Cup?", Model: "offline"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Answer, "The knowledge base has nothing on “Who won the 1998 World Cup”") || res.Engine != "offline" {
		t.Errorf("answer = %+v", res)
	}
	res, err = rag.Answer(context.Background(), activities.AnswerInput{Query: "How much is the Pixel 8?", Model: "offline",
		Docs: []activities.Doc{{ID: "a", Text: docs[0]}}})
	if err != nil || !strings.Contains(res.Answer, "699") || !strings.Contains(res.Answer, "[a]") {
		t.Errorf("answer = %+v, %v", res, err)
	}
}

func TestFuseRRF(t *testing.T) {
	hit := func(id string) activities.Hit { return activities.Hit{Chunk: activities.Chunk{ID: id}} }
	got := activities.FuseRRF(
		[]activities.Hit{hit("a"), hit("b"), hit("c")},
		[]activities.Hit{hit("c"), hit("b"), hit("d")},
	)
	var ids []string
	for _, h := range got {
		ids = append(ids, h.Chunk.ID)
	}
	// b: 1/62+1/62; c: 1/63+1/61 (larger); a: 1/61; d: 1/63.
	if strings.Join(ids, "") != "cbad" {
		t.Errorf("order = %v", ids)
	}
	if want := 1.0/61 + 1.0/63; got[0].Score != want {
		t.Errorf("score of c = %v, want %v", got[0].Score, want)
	}
}

// failingEmbedder always fails.
type failingEmbedder struct{ err error }

func (e failingEmbedder) Embed(context.Context, string, []string) ([][]float32, error) {
	return nil, e.err
}

func TestRetrieveFallsBackWhenTheEmbedderFails(t *testing.T) {
	ctx := context.Background()
	down := failingEmbedder{errors.New("connection refused")}
	rag := offlineRAG(newKB(t),
		activities.NamedEmbedder{Embedder: down, Model: "bge-m3"},
		activities.NamedEmbedder{Embedder: &offline.Engine{}, Model: offline.ModelName})
	res, err := rag.Retrieve(ctx, activities.RetrieveInput{Query: "Pixel 8 price", TopK: 2})
	if err != nil || res.EmbedModel != offline.ModelName {
		t.Fatalf("Retrieve = %+v, %v", res, err)
	}
	// With no alternative of the right dimension, the failure is reported
	// as it is (transient), not as a dimension mismatch.
	rag = offlineRAG(newKB(t),
		activities.NamedEmbedder{Embedder: down, Model: "bge-m3"},
		activities.NamedEmbedder{Embedder: &sizedEmbedder{dim: 8}, Model: "small"})
	_, err = rag.Retrieve(ctx, activities.RetrieveInput{Query: "Pixel 8 price", TopK: 2})
	var appErr *temporal.ApplicationError
	if err == nil || !strings.Contains(err.Error(), "connection refused") || (errors.As(err, &appErr) && appErr.NonRetryable()) {
		t.Fatalf("error = %v, want the embedder's transient failure", err)
	}
}

// TestRetrieveSeesOnlyItsTenant: a retrieval finds its tenant's chunks
// only, whatever filter the caller adds.
func TestRetrieveSeesOnlyItsTenant(t *testing.T) {
	rag := offlineRAG(newKB(t))
	for _, tc := range []struct {
		tenant string
		filter map[string]string
		want   []string
	}{
		{"acme", nil, []string{"acme/a"}},
		{"acme", map[string]string{activities.MetaTenant: activities.DefaultTenant}, []string{"acme/a"}},
		{"other", nil, nil},
	} {
		res, err := rag.Retrieve(context.Background(), activities.RetrieveInput{Query: docs[0], TopK: 10, Tenant: tc.tenant, Filter: tc.filter})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, d := range res.Docs {
			got = append(got, d.ID)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("tenant %s: %v, want %v", tc.tenant, got, tc.want)
		}
	}
	res, err := rag.Retrieve(context.Background(), activities.RetrieveInput{Query: docs[0], TopK: 10})
	if err != nil || len(res.Docs) == 0 || slices.ContainsFunc(res.Docs, func(d activities.RetrievedDoc) bool { return d.ID == "acme/a" }) {
		t.Errorf("the default tenant: %v %+v", err, res.Docs)
	}
}

// A Retrieve past its deadline stops and says so, rather than working on
// for an attempt Temporal has given up on.
func TestRetrieveStopsAtItsDeadline(t *testing.T) {
	rag := offlineRAG(newKB(t))
	ctx, cancel := context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancel()
	time.Sleep(time.Millisecond)
	res, err := rag.Retrieve(ctx, activities.RetrieveInput{Query: "How much does the Pixel 8 cost?", TopK: 4})
	if !errors.Is(err, context.DeadlineExceeded) || len(res.Docs) != 0 {
		t.Errorf("Retrieve past its deadline = %d docs, %v", len(res.Docs), err)
	}
}
