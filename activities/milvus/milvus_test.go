package milvus

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/milvus-io/milvus-proto/go-api/v2/commonpb"
	"github.com/milvus-io/milvus-proto/go-api/v2/milvuspb"
	"github.com/milvus-io/milvus-proto/go-api/v2/schemapb"
	"github.com/milvus-io/milvus/client/v2/milvusclient"
	"google.golang.org/protobuf/proto"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/activities/vectorstoretest"
)

var ctx = context.Background()

var seq atomic.Int64

// newName returns a collection name not used before in this process.
func newName(prefix string) string { return prefix + strconv.FormatInt(seq.Add(1), 10) }

func openT(t *testing.T, opts Options) *Store {
	t.Helper()
	s, err := Open(ctx, opts)
	if err != nil {
		t.Fatalf("Open(%+v): %v", opts, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func TestConformanceFake(t *testing.T) {
	_, addr := startFake(t)
	vectorstoretest.Run(t, func(t *testing.T, dim int) activities.VectorStore {
		return openT(t, Options{Address: addr, Collection: newName("c"), Dimension: dim})
	})
}

// TestRealMilvus runs the conformance suite against the Milvus at
// MILVUS_ADDRESS (host:port; MILVUS_TOKEN if it requires authentication),
// in throw-away collections that it drops afterwards.
func TestRealMilvus(t *testing.T) {
	addr := os.Getenv("MILVUS_ADDRESS")
	if addr == "" {
		t.Skip("MILVUS_ADDRESS is not set: set it to host:19530 of a Milvus 2.6 server (and MILVUS_TOKEN if it requires authentication) to run the conformance suite against real Milvus")
	}
	prefix := fmt.Sprintf("ctxflow_test_%d_", time.Now().UnixNano())
	vectorstoretest.Run(t, func(t *testing.T, dim int) activities.VectorStore {
		name := newName(prefix)
		s := openT(t, Options{Address: addr, Token: os.Getenv("MILVUS_TOKEN"), Collection: name, Dimension: dim})
		t.Cleanup(func() { // runs before openT's Close
			if err := s.client.DropCollection(ctx, milvusclient.NewDropCollectionOption(name)); err != nil {
				t.Errorf("drop %s: %v", name, err)
			}
		})
		return s
	})
}

func TestCollectionSchemaAndIndexes(t *testing.T) {
	f, addr := startFake(t)
	name := newName("schema")
	openT(t, Options{Address: addr, Collection: name, Dimension: 8})

	if len(f.requests().created) != 1 {
		t.Fatalf("%d CreateCollection requests, want 1", len(f.requests().created))
	}
	req := f.requests().created[0]
	if req.GetCollectionName() != name || req.GetConsistencyLevel() != commonpb.ConsistencyLevel_Strong || req.GetShardsNum() != 1 {
		t.Errorf("CreateCollection %s, consistency %v, shards %d; want %s, Strong, 1", req.GetCollectionName(), req.GetConsistencyLevel(), req.GetShardsNum(), name)
	}
	var sch schemapb.CollectionSchema
	if err := proto.Unmarshal(req.GetSchema(), &sch); err != nil {
		t.Fatal(err)
	}
	if sch.GetEnableDynamicField() {
		t.Errorf("schema enables dynamic fields")
	}
	fields := []struct {
		name   string
		typ    schemapb.DataType
		pk     bool
		params map[string]string
	}{
		{"id", schemapb.DataType_VarChar, true, map[string]string{"max_length": "512"}},
		{"document_id", schemapb.DataType_VarChar, false, map[string]string{"max_length": "512"}},
		{"text", schemapb.DataType_VarChar, false, map[string]string{
			"max_length":      "65535",
			"enable_analyzer": "true",
			"analyzer_params": `{"filter":["lowercase","cnalphanumonly"],"tokenizer":"jieba"}`,
		}},
		{"metadata", schemapb.DataType_JSON, false, map[string]string{}},
		{"vector", schemapb.DataType_FloatVector, false, map[string]string{"dim": "8"}},
		{"sparse", schemapb.DataType_SparseFloatVector, false, map[string]string{}},
	}
	if len(sch.GetFields()) != len(fields) {
		t.Fatalf("schema has %d fields, want %d", len(sch.GetFields()), len(fields))
	}
	for i, want := range fields {
		got := sch.GetFields()[i]
		t.Run(want.name, func(t *testing.T) {
			if got.GetName() != want.name || got.GetDataType() != want.typ || got.GetIsPrimaryKey() != want.pk || got.GetAutoID() || got.GetNullable() {
				t.Errorf("field %d: %s %v pk=%v autoID=%v nullable=%v; want %s %v pk=%v", i, got.GetName(), got.GetDataType(), got.GetIsPrimaryKey(), got.GetAutoID(), got.GetNullable(), want.name, want.typ, want.pk)
			}
			if p := kv(got.GetTypeParams()); !maps.Equal(p, want.params) {
				t.Errorf("type params %v, want %v", p, want.params)
			}
		})
	}
	if fns := sch.GetFunctions(); len(fns) != 1 {
		t.Errorf("%d functions, want 1", len(fns))
	} else if fn := fns[0]; fn.GetName() != "text_bm25" || fn.GetType() != schemapb.FunctionType_BM25 ||
		!slices.Equal(fn.GetInputFieldNames(), []string{"text"}) || !slices.Equal(fn.GetOutputFieldNames(), []string{"sparse"}) || len(fn.GetParams()) != 0 {
		t.Errorf("function %v, want text_bm25: BM25 text → sparse", fn)
	}

	indexes := []struct {
		field, name string
		params      map[string]string
	}{
		{"vector", "vector_hnsw", map[string]string{"index_type": "HNSW", "metric_type": "COSINE", "M": "16", "efConstruction": "200"}},
		{"sparse", "sparse_bm25", map[string]string{
			"index_type": "SPARSE_INVERTED_INDEX", "metric_type": "BM25",
			"inverted_index_algo": "DAAT_MAXSCORE", "bm25_k1": "1.2", "bm25_b": "0.75",
		}},
	}
	if len(f.requests().indexes) != len(indexes) {
		t.Fatalf("%d CreateIndex requests, want %d", len(f.requests().indexes), len(indexes))
	}
	for i, want := range indexes {
		got := f.requests().indexes[i]
		if got.GetCollectionName() != name || got.GetFieldName() != want.field || got.GetIndexName() != want.name {
			t.Errorf("index %d on %s.%s named %q, want %s.%s %q", i, got.GetCollectionName(), got.GetFieldName(), got.GetIndexName(), name, want.field, want.name)
		}
		if p := kv(got.GetExtraParams()); !maps.Equal(p, want.params) {
			t.Errorf("index %s params %v, want %v", want.name, p, want.params)
		}
	}
	if len(f.requests().loads) != 1 || f.requests().loads[0].GetCollectionName() != name {
		t.Errorf("LoadCollection requests %v, want one for %s", f.requests().loads, name)
	}
}

func TestOpenExisting(t *testing.T) {
	f, addr := startFake(t)
	name := newName("existing")
	first := openT(t, Options{Address: addr, Collection: name, Dimension: 8})
	if err := first.Upsert(ctx, []activities.Chunk{{ID: "a", DocumentID: "d", Text: "x", Vector: make([]float32, 8)}}); err != nil {
		t.Fatal(err)
	}

	again := openT(t, Options{Address: addr, Collection: name}) // dimension learnt
	info, err := again.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info != (activities.CollectionInfo{Name: name, Dimension: 8, Count: 1}) {
		t.Errorf("Info %+v, want %s, 8 dimensions, 1 chunk", info, name)
	}
	openT(t, Options{Address: addr, Collection: name, Dimension: 8})
	if len(f.requests().created) != 1 || len(f.requests().loads) != 1 {
		t.Errorf("reopening sent %d CreateCollection and %d LoadCollection requests, want 1 and 1", len(f.requests().created), len(f.requests().loads))
	}

	_, err = Open(ctx, Options{Address: addr, Collection: name, Dimension: 4})
	if !errors.Is(err, activities.ErrDimension) || !strings.Contains(err.Error(), "8") || !strings.Contains(err.Error(), "4") {
		t.Errorf("Open with dimension 4 over an 8-dimensional collection: %v, want an ErrDimension naming 8 and 4", err)
	}

	// A collection that is loaded elsewhere is not loaded again; one that
	// is not loaded is.
	f.mu.Lock()
	f.colls[name].loaded = false
	f.mu.Unlock()
	openT(t, Options{Address: addr, Collection: name})
	if len(f.requests().loads) != 2 {
		t.Errorf("%d LoadCollection requests, want 2", len(f.requests().loads))
	}
}

func TestOpenErrors(t *testing.T) {
	f, addr := startFake(t)
	foreign := &schemapb.CollectionSchema{Name: "foreign", Fields: []*schemapb.FieldSchema{
		{FieldID: 100, Name: "pk", IsPrimaryKey: true, DataType: schemapb.DataType_Int64},
		{FieldID: 101, Name: "vector", DataType: schemapb.DataType_FloatVector, TypeParams: []*commonpb.KeyValuePair{{Key: "dim", Value: "8"}}},
	}}
	f.colls["foreign"] = &fakeColl{id: 99, schema: foreign, dim: 8, loaded: true, rows: map[string]*fakeRow{}}

	tests := []struct {
		name string
		opts Options
		want string
	}{
		{"no address", Options{Collection: "x", Dimension: 4}, "no address"},
		{"negative dimension", Options{Address: addr, Dimension: -1}, "negative dimension"},
		{"missing collection without dimension", Options{Address: addr, Collection: "missing"}, "does not exist and Options.Dimension is 0"},
		{"foreign collection", Options{Address: addr, Collection: "foreign"}, "not a ctxflow collection"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Open(ctx, tc.opts)
			if err == nil {
				_ = s.Close()
				t.Fatalf("Open succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
		})
	}
	if len(f.requests().created) != 0 {
		t.Errorf("failed opens created %d collections", len(f.requests().created))
	}
}

func TestOpenUnreachable(t *testing.T) {
	c, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, err := Open(c, Options{Address: "127.0.0.1:1", Dimension: 4}); err == nil || !strings.Contains(err.Error(), "milvus connect 127.0.0.1:1") {
		t.Errorf("Open of an unreachable address: %v", err)
	}
}

// placeholder decodes a request's query.
func placeholder(t *testing.T, req *milvuspb.SearchRequest) (commonpb.PlaceholderType, []byte) {
	t.Helper()
	var pg commonpb.PlaceholderGroup
	if err := proto.Unmarshal(req.GetPlaceholderGroup(), &pg); err != nil || len(pg.GetPlaceholders()) != 1 || len(pg.GetPlaceholders()[0].GetValues()) != 1 {
		t.Fatalf("placeholder group: %v %v", err, &pg)
	}
	return pg.GetPlaceholders()[0].GetType(), pg.GetPlaceholders()[0].GetValues()[0]
}

func TestSearchRequests(t *testing.T) {
	f, addr := startFake(t)
	name := newName("requests")
	s := openT(t, Options{Address: addr, Collection: name, Dimension: 4})
	if err := s.Upsert(ctx, []activities.Chunk{
		{ID: "a", DocumentID: "d", Text: "hello world", Vector: []float32{1, 0, 0, 0}, Metadata: map[string]string{"lang": "en"}},
	}); err != nil {
		t.Fatal(err)
	}
	out := []string{"id", "document_id", "text", "metadata"}
	dense := func(topk, ef int) map[string]string {
		return map[string]string{"anns_field": "vector", "metric_type": "COSINE", "topk": strconv.Itoa(topk), "params": fmt.Sprintf(`{"ef":%d}`, ef),
			"offset": "0", "round_decimal": "-1", "ignore_growing": "false"}
	}
	keyword := func(topk int) map[string]string {
		return map[string]string{"anns_field": "sparse", "metric_type": "BM25", "topk": strconv.Itoa(topk), "params": "{}",
			"offset": "0", "round_decimal": "-1", "ignore_growing": "false"}
	}
	type sub struct {
		params map[string]string
		query  string // text, or "vector"
	}
	vec := []float32{1, 0, 0, 0}
	tests := []struct {
		name   string
		req    activities.SearchRequest
		search *sub  // the Search request, if one
		hybrid []sub // a hybrid search's two Search requests, if one
		dsl    string
	}{
		{"dense", activities.SearchRequest{Mode: activities.SearchDense, Vector: vec, TopK: 3}, &sub{dense(3, 64), "vector"}, nil, ""},
		{"dense default TopK", activities.SearchRequest{Mode: activities.SearchDense, Vector: vec}, &sub{dense(10, 64), "vector"}, nil, ""},
		{"dense deep", activities.SearchRequest{Mode: activities.SearchDense, Vector: vec, TopK: 100}, &sub{dense(100, 100), "vector"}, nil, ""},
		{"dense TopK capped", activities.SearchRequest{Mode: activities.SearchDense, Vector: vec, TopK: 20000}, &sub{dense(16384, 16384), "vector"}, nil, ""},
		{"dense filtered", activities.SearchRequest{Mode: activities.SearchDense, Vector: vec, TopK: 3, Filter: map[string]string{"lang": "en", "a": "b"}},
			&sub{dense(3, 64), "vector"}, nil, `metadata["a"] == "b" && metadata["lang"] == "en"`},
		{"dense zero vector sends nothing", activities.SearchRequest{Mode: activities.SearchDense, Vector: make([]float32, 4)}, nil, nil, ""},
		{"keyword", activities.SearchRequest{Mode: activities.SearchKeyword, Text: "hello 你好", TopK: 5}, &sub{keyword(5), "hello 你好"}, nil, ""},
		{"keyword filtered", activities.SearchRequest{Mode: activities.SearchKeyword, Text: "hello", TopK: 5, Filter: map[string]string{"lang": `en"`}},
			&sub{keyword(5), "hello"}, nil, `metadata["lang"] == "en\""`},
		{"keyword without text sends nothing", activities.SearchRequest{Mode: activities.SearchKeyword, TopK: 5}, nil, nil, ""},
		{"mode from the vector", activities.SearchRequest{Vector: vec, TopK: 2}, &sub{dense(2, 64), "vector"}, nil, ""},
		{"mode from the text", activities.SearchRequest{Text: "hello", TopK: 2}, &sub{keyword(2), "hello"}, nil, ""},
		{"hybrid", activities.SearchRequest{Mode: activities.SearchHybrid, Vector: vec, Text: "hello", TopK: 5},
			nil, []sub{{dense(50, 64), "vector"}, {keyword(50), "hello"}}, ""},
		{"hybrid deep", activities.SearchRequest{Mode: activities.SearchHybrid, Vector: vec, Text: "hello", TopK: 20, Filter: map[string]string{"lang": "en"}},
			nil, []sub{{dense(80, 80), "vector"}, {keyword(80), "hello"}}, `metadata["lang"] == "en"`},
		{"mode from both", activities.SearchRequest{Vector: vec, Text: "hello", TopK: 1},
			nil, []sub{{dense(50, 64), "vector"}, {keyword(50), "hello"}}, ""},
		{"hybrid zero vector", activities.SearchRequest{Mode: activities.SearchHybrid, Vector: make([]float32, 4), Text: "hello", TopK: 5},
			nil, []sub{{keyword(50), "hello"}}, ""},
		{"hybrid vector only", activities.SearchRequest{Mode: activities.SearchHybrid, Vector: vec, TopK: 5},
			nil, []sub{{dense(50, 64), "vector"}}, ""},
	}
	check := func(t *testing.T, req *milvuspb.SearchRequest, want sub, dsl string) {
		t.Helper()
		if p := kv(req.GetSearchParams()); !maps.Equal(p, want.params) {
			t.Errorf("search params %v, want %v", p, want.params)
		}
		if req.GetDsl() != dsl || req.GetDslType() != commonpb.DslType_BoolExprV1 {
			t.Errorf("filter %q (%v), want %q", req.GetDsl(), req.GetDslType(), dsl)
		}
		typ, val := placeholder(t, req)
		switch want.query {
		case "vector":
			if typ != commonpb.PlaceholderType_FloatVector || len(val) != 16 {
				t.Errorf("placeholder %v of %d bytes, want a 4-dimensional float vector", typ, len(val))
			}
		default:
			if typ != commonpb.PlaceholderType_VarChar || string(val) != want.query {
				t.Errorf("placeholder %v %q, want text %q", typ, val, want.query)
			}
		}
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ns, nh := len(f.requests().searches), len(f.requests().hybrids)
			if _, err := s.Search(ctx, tc.req); err != nil {
				t.Fatal(err)
			}
			searches, hybrids := f.requests().searches[ns:], f.requests().hybrids[nh:]
			want := tc.hybrid
			if tc.search != nil {
				want = []sub{*tc.search}
			}
			if len(searches) != len(want) || len(hybrids) != 0 {
				t.Fatalf("%d Search and %d HybridSearch requests, want %d and 0", len(searches), len(hybrids), len(want))
			}
			for i, w := range want {
				req := searches[i]
				if req.GetCollectionName() != name || !slices.Equal(req.GetOutputFields(), out) ||
					req.GetConsistencyLevel() != commonpb.ConsistencyLevel_Strong || req.GetUseDefaultConsistency() || req.GetNq() != 1 {
					t.Errorf("Search on %q, output %v, consistency %v (default %v), nq %d", req.GetCollectionName(), req.GetOutputFields(), req.GetConsistencyLevel(), req.GetUseDefaultConsistency(), req.GetNq())
				}
				check(t, req, w, tc.dsl)
			}
		})
	}
}

func TestFilterExpr(t *testing.T) {
	tests := []struct {
		filter map[string]string
		want   string
	}{
		{nil, ""},
		{map[string]string{}, ""},
		{map[string]string{"lang": "en"}, `metadata["lang"] == "en"`},
		{map[string]string{"n": "3", "lang": "zh", "b": ""}, `metadata["b"] == "" && metadata["lang"] == "zh" && metadata["n"] == "3"`},
		{map[string]string{"k": `say "hi" \ bye`}, `metadata["k"] == "say \"hi\" \\ bye"`},
		{map[string]string{"k": "line\nbreak\ttab\x00"}, `metadata["k"] == "line\nbreak\ttab\x00"`},
		{map[string]string{"语言": "中文", "it's": "o'clock"}, `metadata["it's"] == "o'clock" && metadata["语言"] == "中文"`},
		{map[string]string{"k": `') || true || ('`}, `metadata["k"] == "') || true || ('"`},
	}
	for _, tc := range tests {
		got, err := filterExpr(tc.filter)
		if err != nil || got != tc.want {
			t.Errorf("filterExpr(%q) = %s, %v; want %s", tc.filter, got, err, tc.want)
		}
	}
	for _, key := range []string{"", `a"b`, `a\b`, "a[0]", "a]", "a\nb", "\xff"} {
		if got, err := filterExpr(map[string]string{key: "v"}); err == nil {
			t.Errorf("filterExpr with key %q = %s, want an error", key, got)
		}
	}
}

// TestEscaping stores and finds values that need escaping, through the
// fake's parser (strconv.Unquote, as in Milvus).
func TestEscaping(t *testing.T) {
	f, addr := startFake(t)
	s := openT(t, Options{Address: addr, Collection: newName("escape"), Dimension: 2})
	doc := "doc \"1\" \\ 文档\n"
	val := `he said "hi" \o/`
	if err := s.Upsert(ctx, []activities.Chunk{
		{ID: "a", DocumentID: doc, Text: "tricky", Vector: []float32{1, 0}, Metadata: map[string]string{"q": val}},
		{ID: "b", DocumentID: "doc", Text: "plain", Vector: []float32{1, 0}, Metadata: map[string]string{"q": "he said"}},
	}); err != nil {
		t.Fatal(err)
	}
	hits, err := s.Search(ctx, activities.SearchRequest{Mode: activities.SearchDense, Vector: []float32{1, 0}, Filter: map[string]string{"q": val}})
	if err != nil || len(hits) != 1 || hits[0].Chunk.ID != "a" || hits[0].Chunk.DocumentID != doc || hits[0].Chunk.Metadata["q"] != val {
		t.Fatalf("filter on %q: %+v, %v", val, hits, err)
	}
	if err := s.DeleteDocument(ctx, doc); err != nil {
		t.Fatal(err)
	}
	if want := `document_id == "doc \"1\" \\ 文档\n"`; f.requests().deletes[len(f.requests().deletes)-1].GetExpr() != want {
		t.Errorf("delete expression %s, want %s", f.requests().deletes[len(f.requests().deletes)-1].GetExpr(), want)
	}
	if info, err := s.Info(ctx); err != nil || info.Count != 1 {
		t.Errorf("after deleting %q: %+v, %v; want 1 chunk left", doc, info, err)
	}
}

// TestEraseTenant deletes one tenant's chunks, by their metadata, and no
// other's.
func TestEraseTenant(t *testing.T) {
	f, addr := startFake(t)
	s := openT(t, Options{Address: addr, Collection: newName("erase"), Dimension: 2})
	if err := s.Upsert(ctx, []activities.Chunk{
		{ID: "a", DocumentID: "acme/d", Text: "x", Vector: []float32{1, 0}, Metadata: map[string]string{activities.MetaTenant: "acme"}},
		{ID: "b", DocumentID: "acme/e", Text: "y", Vector: []float32{1, 0}, Metadata: map[string]string{activities.MetaTenant: "acme"}},
		{ID: "c", DocumentID: "d", Text: "z", Vector: []float32{1, 0}, Metadata: map[string]string{activities.MetaTenant: "beta"}},
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.EraseTenant(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	if want := `metadata["tenant"] == "acme"`; f.requests().deletes[len(f.requests().deletes)-1].GetExpr() != want {
		t.Errorf("delete expression %s, want %s", f.requests().deletes[len(f.requests().deletes)-1].GetExpr(), want)
	}
	if info, err := s.Info(ctx); err != nil || info.Count != 1 {
		t.Errorf("after erasing acme: %+v, %v; want beta's 1 chunk", info, err)
	}
}

func TestDimensionMismatchNeverSent(t *testing.T) {
	f, addr := startFake(t)
	s := openT(t, Options{Address: addr, Collection: newName("dim"), Dimension: 4})
	n := len(f.requests().upserts)
	err := s.Upsert(ctx, []activities.Chunk{
		{ID: "ok", DocumentID: "d", Text: "x", Vector: make([]float32, 4)},
		{ID: "bad", DocumentID: "d", Text: "x", Vector: make([]float32, 7)},
	})
	if !errors.Is(err, activities.ErrDimension) || !strings.Contains(err.Error(), "7 dimensions") || !strings.Contains(err.Error(), "has 4") {
		t.Errorf("Upsert of a 7-dimensional vector: %v", err)
	}
	for _, mode := range []activities.SearchMode{activities.SearchDense, activities.SearchHybrid} {
		_, err := s.Search(ctx, activities.SearchRequest{Mode: mode, Vector: make([]float32, 7), Text: "x"})
		if !errors.Is(err, activities.ErrDimension) {
			t.Errorf("%s search with a 7-dimensional vector: %v", mode, err)
		}
	}
	if len(f.requests().upserts) != n || len(f.requests().searches) != 0 || len(f.requests().hybrids) != 0 {
		t.Errorf("refused calls were sent: %d upserts, %d searches, %d hybrid searches", len(f.requests().upserts)-n, len(f.requests().searches), len(f.requests().hybrids))
	}
}

func TestUpsert(t *testing.T) {
	f, addr := startFake(t)
	s := openT(t, Options{Address: addr, Collection: newName("upsert"), Dimension: 2})
	chunks := make([]activities.Chunk, 2500)
	for i := range chunks {
		chunks[i] = activities.Chunk{ID: fmt.Sprint(i), DocumentID: "d", Text: "t", Vector: []float32{1, float32(i)}}
	}
	if err := s.Upsert(ctx, chunks); err != nil {
		t.Fatal(err)
	}
	var rows []uint32
	for _, u := range f.requests().upserts {
		rows = append(rows, u.GetNumRows())
	}
	if !slices.Equal(rows, []uint32{1000, 1000, 500}) {
		t.Errorf("batches of %v rows, want 1000, 1000, 500", rows)
	}
	if info, err := s.Info(ctx); err != nil || info.Count != 2500 {
		t.Errorf("Info %+v, %v; want 2500 chunks", info, err)
	}
	if err := s.Upsert(ctx, nil); err != nil || len(f.requests().upserts) != 3 {
		t.Errorf("an empty Upsert: %v, %d requests", err, len(f.requests().upserts))
	}

	bad := []struct {
		name  string
		chunk activities.Chunk
		want  string
	}{
		{"no id", activities.Chunk{Vector: []float32{1, 0}}, "no id"},
		{"no vector", activities.Chunk{ID: "x"}, "no vector"},
		{"NaN", activities.Chunk{ID: "x", Vector: []float32{float32(math.NaN()), 0}}, "NaN"},
		{"long id", activities.Chunk{ID: strings.Repeat("x", 513), Vector: []float32{1, 0}}, "512 bytes"},
		{"long text", activities.Chunk{ID: "x", Text: strings.Repeat("字", 30000), Vector: []float32{1, 0}}, "65535-byte limit"},
		{"invalid UTF-8", activities.Chunk{ID: "x", Text: "\xff", Vector: []float32{1, 0}}, "UTF-8"},
	}
	for _, tc := range bad {
		if err := s.Upsert(ctx, []activities.Chunk{tc.chunk}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
	if len(f.requests().upserts) != 3 {
		t.Errorf("refused chunks were sent")
	}
}

func TestClose(t *testing.T) {
	_, addr := startFake(t)
	s, err := Open(ctx, Options{Address: addr, Collection: newName("close"), Dimension: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := s.Search(ctx, activities.SearchRequest{Text: "x"}); !errors.Is(err, ErrClosed) {
		t.Errorf("Search after Close: %v", err)
	}
	if _, err := s.Info(ctx); !errors.Is(err, ErrClosed) {
		t.Errorf("Info after Close: %v", err)
	}
}

// TestHybridScores checks the hybrid scores and order, and the dense
// hits' similarity, against the embedded store's definition.
func TestHybridScores(t *testing.T) {
	_, addr := startFake(t)
	s := openT(t, Options{Address: addr, Collection: newName("hybrid"), Dimension: 2})
	if err := s.Upsert(ctx, []activities.Chunk{
		{ID: "both", DocumentID: "d", Text: "apple banana", Vector: []float32{1, 0}},
		{ID: "dense", DocumentID: "d", Text: "cherry", Vector: []float32{1, 0.1}},
		{ID: "kw", DocumentID: "d", Text: "apple", Vector: []float32{0, 1}},
	}); err != nil {
		t.Fatal(err)
	}
	hits, err := s.Search(ctx, activities.SearchRequest{Mode: activities.SearchHybrid, Vector: []float32{1, 0}, Text: "apple banana"})
	if err != nil {
		t.Fatal(err)
	}
	// dense: both, dense, kw; keyword: both, kw.
	want := []activities.Hit{
		{Chunk: activities.Chunk{ID: "both"}, Score: 1.0/61 + 1.0/61},
		{Chunk: activities.Chunk{ID: "kw"}, Score: 1.0/63 + 1.0/62},
		{Chunk: activities.Chunk{ID: "dense"}, Score: 1.0 / 62},
	}
	if len(hits) != len(want) {
		t.Fatalf("hits %+v, want %+v", hits, want)
	}
	for i, h := range hits {
		if h.Chunk.ID != want[i].Chunk.ID || h.Score != want[i].Score {
			t.Errorf("hit %d: %s %v, want %s %v", i, h.Chunk.ID, h.Score, want[i].Chunk.ID, want[i].Score)
		}
		if h.Similarity == nil || (h.Chunk.ID == "both" && *h.Similarity < 0.999) {
			t.Errorf("hit %s: similarity %v", h.Chunk.ID, h.Similarity)
		}
	}
}
