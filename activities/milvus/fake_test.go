package milvus

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unicode"

	"github.com/milvus-io/milvus-proto/go-api/v2/commonpb"
	"github.com/milvus-io/milvus-proto/go-api/v2/milvuspb"
	"github.com/milvus-io/milvus-proto/go-api/v2/schemapb"
	"github.com/milvus-io/milvus/client/v2/column"
	"github.com/milvus-io/milvus/client/v2/entity"
	"github.com/milvus-io/milvus/pkg/v2/util/merr"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// fakeMilvus is an in-process Milvus server: it implements the gRPC calls
// that the adapter and the client's Connect make, over rows held in memory,
// and records every request for the tests to inspect. Searches really run:
// cosine similarity for float vectors (a zero vector stays zero and scores
// 0, as in Milvus), BM25 over a stand-in analyser (lower-cased Latin words,
// CJK bigrams) for the BM25 function's sparse field. Filters are parsed for the forms the
// adapter emits and anything else is an error, so the adapter cannot emit
// an expression the fake silently misreads.
type fakeMilvus struct {
	milvuspb.UnimplementedMilvusServiceServer

	mu     sync.Mutex
	colls  map[string]*fakeColl
	nextID int64
	log    requests
}

// requests are the requests a fake received, in order.
type requests struct {
	created  []*milvuspb.CreateCollectionRequest
	indexes  []*milvuspb.CreateIndexRequest
	loads    []*milvuspb.LoadCollectionRequest
	upserts  []*milvuspb.UpsertRequest
	deletes  []*milvuspb.DeleteRequest
	queries  []*milvuspb.QueryRequest
	searches []*milvuspb.SearchRequest
	hybrids  []*milvuspb.HybridSearchRequest
}

// requests returns the requests received so far.
func (f *fakeMilvus) requests() requests {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.log
}

type fakeColl struct {
	id      int64
	schema  *schemapb.CollectionSchema
	level   commonpb.ConsistencyLevel
	dim     int
	indexes map[string]map[string]string // field → index params
	loaded  bool
	rows    map[string]*fakeRow
}

type fakeRow struct {
	id, doc, text string
	meta          []byte
	metaMap       map[string]any
	vec           []float32
	terms         map[string]int
	length        int
}

// startFake serves a new fake on a loopback TCP port until t ends.
func startFake(t testing.TB) (*fakeMilvus, string) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeMilvus{colls: map[string]*fakeColl{}}
	srv := grpc.NewServer()
	milvuspb.RegisterMilvusServiceServer(srv, f)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return f, lis.Addr().String()
}

func fail(format string, args ...any) *commonpb.Status {
	return merr.Status(merr.WrapErrParameterInvalidMsg(format, args...))
}

func kv(pairs []*commonpb.KeyValuePair) map[string]string {
	m := make(map[string]string, len(pairs))
	for _, p := range pairs {
		m[p.GetKey()] = p.GetValue()
	}
	return m
}

func (f *fakeMilvus) coll(name string) (*fakeColl, *commonpb.Status) {
	c := f.colls[name]
	if c == nil {
		return nil, merr.Status(merr.WrapErrCollectionNotFound(name))
	}
	return c, nil
}

func (c *fakeColl) field(name string) *schemapb.FieldSchema {
	for _, fs := range c.schema.GetFields() {
		if fs.GetName() == name {
			return fs
		}
	}
	return nil
}

// bm25Output reports whether field is the output of a BM25 function.
func (c *fakeColl) bm25Output(field string) bool {
	for _, fn := range c.schema.GetFunctions() {
		if fn.GetType() == schemapb.FunctionType_BM25 && slices.Contains(fn.GetOutputFieldNames(), field) {
			return true
		}
	}
	return false
}

func (f *fakeMilvus) Connect(context.Context, *milvuspb.ConnectRequest) (*milvuspb.ConnectResponse, error) {
	return &milvuspb.ConnectResponse{Status: merr.Success(), ServerInfo: &commonpb.ServerInfo{BuildTags: "fake"}, Identifier: 1}, nil
}

func (f *fakeMilvus) CreateCollection(_ context.Context, req *milvuspb.CreateCollectionRequest) (*commonpb.Status, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log.created = append(f.log.created, req)
	name := req.GetCollectionName()
	if f.colls[name] != nil {
		return fail("collection %s already exists", name), nil
	}
	sch := &schemapb.CollectionSchema{}
	if err := proto.Unmarshal(req.GetSchema(), sch); err != nil {
		return fail("schema: %v", err), nil
	}
	if sch.GetName() != name {
		return fail("schema name %q, collection %q", sch.GetName(), name), nil
	}
	c := &fakeColl{schema: sch, level: req.GetConsistencyLevel(), indexes: map[string]map[string]string{}, rows: map[string]*fakeRow{}}
	pks := 0
	byName := map[string]*schemapb.FieldSchema{}
	for i, fs := range sch.GetFields() {
		fs.FieldID = int64(100 + i)
		byName[fs.GetName()] = fs
		p := kv(fs.GetTypeParams())
		if fs.GetIsPrimaryKey() {
			pks++
		}
		switch fs.GetDataType() {
		case schemapb.DataType_VarChar:
			if n, err := strconv.Atoi(p["max_length"]); err != nil || n <= 0 || n > 65535 {
				return fail("field %s: max_length %q", fs.GetName(), p["max_length"]), nil
			}
		case schemapb.DataType_FloatVector:
			d, err := strconv.Atoi(p["dim"])
			if err != nil || d <= 0 {
				return fail("field %s: dim %q", fs.GetName(), p["dim"]), nil
			}
			c.dim = d
		}
	}
	if pks != 1 {
		return fail("%d primary keys", pks), nil
	}
	for _, fn := range sch.GetFunctions() {
		if fn.GetType() != schemapb.FunctionType_BM25 || len(fn.GetInputFieldNames()) != 1 || len(fn.GetOutputFieldNames()) != 1 {
			return fail("unsupported function %v", fn), nil
		}
		in, out := byName[fn.GetInputFieldNames()[0]], byName[fn.GetOutputFieldNames()[0]]
		if in == nil || in.GetDataType() != schemapb.DataType_VarChar || kv(in.GetTypeParams())["enable_analyzer"] != "true" {
			return fail("BM25 input must be a VarChar field with enable_analyzer"), nil
		}
		if out == nil || out.GetDataType() != schemapb.DataType_SparseFloatVector {
			return fail("BM25 output must be a SparseFloatVector field"), nil
		}
		out.IsFunctionOutput = true
		fn.InputFieldIds = []int64{in.GetFieldID()}
		fn.OutputFieldIds = []int64{out.GetFieldID()}
	}
	f.nextID++
	c.id = f.nextID
	f.colls[name] = c
	return merr.Success(), nil
}

func (f *fakeMilvus) DescribeCollection(_ context.Context, req *milvuspb.DescribeCollectionRequest) (*milvuspb.DescribeCollectionResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, st := f.coll(req.GetCollectionName())
	if st != nil {
		return &milvuspb.DescribeCollectionResponse{Status: st}, nil
	}
	return &milvuspb.DescribeCollectionResponse{
		Status:           merr.Success(),
		Schema:           proto.Clone(c.schema).(*schemapb.CollectionSchema),
		CollectionID:     c.id,
		CollectionName:   req.GetCollectionName(),
		ConsistencyLevel: c.level,
		ShardsNum:        1,
		UpdateTimestamp:  1,
	}, nil
}

func (f *fakeMilvus) CreateIndex(_ context.Context, req *milvuspb.CreateIndexRequest) (*commonpb.Status, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log.indexes = append(f.log.indexes, req)
	c, st := f.coll(req.GetCollectionName())
	if st != nil {
		return st, nil
	}
	fs := c.field(req.GetFieldName())
	if fs == nil {
		return fail("no field %s", req.GetFieldName()), nil
	}
	p := kv(req.GetExtraParams())
	switch fs.GetDataType() {
	case schemapb.DataType_FloatVector:
		if !slices.Contains([]string{"COSINE", "IP", "L2"}, p["metric_type"]) || p["index_type"] == "" {
			return fail("float vector index %v", p), nil
		}
	case schemapb.DataType_SparseFloatVector:
		if c.bm25Output(fs.GetName()) && p["metric_type"] != "BM25" {
			return fail("BM25 function output needs metric BM25, got %q", p["metric_type"]), nil
		}
		if p["index_type"] != "SPARSE_INVERTED_INDEX" && p["index_type"] != "SPARSE_WAND" {
			return fail("sparse index type %q", p["index_type"]), nil
		}
	default:
		return fail("field %s is not a vector", fs.GetName()), nil
	}
	c.indexes[fs.GetName()] = p
	return merr.Success(), nil
}

func (f *fakeMilvus) LoadCollection(_ context.Context, req *milvuspb.LoadCollectionRequest) (*commonpb.Status, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log.loads = append(f.log.loads, req)
	c, st := f.coll(req.GetCollectionName())
	if st != nil {
		return st, nil
	}
	for _, fs := range c.schema.GetFields() {
		t := fs.GetDataType()
		if (t == schemapb.DataType_FloatVector || t == schemapb.DataType_SparseFloatVector) && c.indexes[fs.GetName()] == nil {
			return fail("there is no vector index on field %s", fs.GetName()), nil
		}
	}
	c.loaded = true
	return merr.Success(), nil
}

func (f *fakeMilvus) GetLoadState(_ context.Context, req *milvuspb.GetLoadStateRequest) (*milvuspb.GetLoadStateResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, st := f.coll(req.GetCollectionName())
	if st != nil {
		return &milvuspb.GetLoadStateResponse{Status: st}, nil
	}
	state := commonpb.LoadState_LoadStateNotLoad
	if c.loaded {
		state = commonpb.LoadState_LoadStateLoaded
	}
	return &milvuspb.GetLoadStateResponse{Status: merr.Success(), State: state}, nil
}

func (f *fakeMilvus) GetLoadingProgress(_ context.Context, req *milvuspb.GetLoadingProgressRequest) (*milvuspb.GetLoadingProgressResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, st := f.coll(req.GetCollectionName())
	if st != nil {
		return &milvuspb.GetLoadingProgressResponse{Status: st}, nil
	}
	var p int64
	if c.loaded {
		p = 100
	}
	return &milvuspb.GetLoadingProgressResponse{Status: merr.Success(), Progress: p, RefreshProgress: p}, nil
}

func (f *fakeMilvus) Upsert(_ context.Context, req *milvuspb.UpsertRequest) (*milvuspb.MutationResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log.upserts = append(f.log.upserts, req)
	c, st := f.coll(req.GetCollectionName())
	if st != nil {
		return &milvuspb.MutationResult{Status: st}, nil
	}
	rows, err := c.decodeRows(req.GetFieldsData(), int(req.GetNumRows()))
	if err != nil {
		return &milvuspb.MutationResult{Status: fail("upsert: %v", err)}, nil
	}
	ids := make([]string, len(rows))
	for i, r := range rows {
		c.rows[r.id] = r
		ids[i] = r.id
	}
	return &milvuspb.MutationResult{
		Status:    merr.Success(),
		IDs:       &schemapb.IDs{IdField: &schemapb.IDs_StrId{StrId: &schemapb.StringArray{Data: ids}}},
		UpsertCnt: int64(len(rows)),
	}, nil
}

// decodeRows checks the columns of an upsert against the schema, as Milvus
// does, and returns the rows.
func (c *fakeColl) decodeRows(fds []*schemapb.FieldData, n int) ([]*fakeRow, error) {
	cols := map[string]column.Column{}
	for _, fd := range fds {
		fs := c.field(fd.GetFieldName())
		switch {
		case fs == nil:
			return nil, fmt.Errorf("no field %q", fd.GetFieldName())
		case fs.GetIsFunctionOutput():
			return nil, fmt.Errorf("field %q is a function output and must not be given", fd.GetFieldName())
		case fd.GetType() != fs.GetDataType():
			return nil, fmt.Errorf("field %q has type %v, want %v", fd.GetFieldName(), fd.GetType(), fs.GetDataType())
		case fs.GetDataType() == schemapb.DataType_FloatVector && int(fd.GetVectors().GetDim()) != c.dim:
			return nil, fmt.Errorf("the dim (%d) of field data(%s) is not equal to schema dim (%d)", fd.GetVectors().GetDim(), fd.GetFieldName(), c.dim)
		}
		col, err := column.FieldDataColumn(fd, 0, -1)
		if err != nil {
			return nil, err
		}
		if col.Len() != n {
			return nil, fmt.Errorf("field %q has %d rows, want %d", fd.GetFieldName(), col.Len(), n)
		}
		if maxLen, ok := kv(fs.GetTypeParams())["max_length"]; ok {
			m, _ := strconv.Atoi(maxLen)
			for i := range n {
				if v, _ := col.GetAsString(i); len(v) > m {
					return nil, fmt.Errorf("field %q: length %d exceeds max length %d", fd.GetFieldName(), len(v), m)
				}
			}
		}
		cols[fd.GetFieldName()] = col
	}
	for _, fs := range c.schema.GetFields() {
		if cols[fs.GetName()] == nil && !fs.GetIsFunctionOutput() {
			return nil, fmt.Errorf("field %q missing", fs.GetName())
		}
	}
	rows := make([]*fakeRow, n)
	seen := map[string]bool{}
	for i := range n {
		r := &fakeRow{}
		r.id, _ = cols[fieldID].GetAsString(i)
		r.doc, _ = cols[fieldDocument].GetAsString(i)
		r.text, _ = cols[fieldText].GetAsString(i)
		m, _ := cols[fieldMetadata].Get(i)
		r.meta, _ = m.([]byte)
		if err := json.Unmarshal(r.meta, &r.metaMap); err != nil {
			return nil, fmt.Errorf("row %d: metadata: %v", i, err)
		}
		v, _ := cols[fieldVector].Get(i)
		vec, ok := v.(entity.FloatVector)
		if !ok {
			return nil, fmt.Errorf("row %d: vector is %T", i, v)
		}
		r.vec = slices.Clone([]float32(vec))
		r.terms = map[string]int{}
		for _, tok := range analyse(r.text) {
			r.terms[tok]++
			r.length++
		}
		if seen[r.id] {
			return nil, fmt.Errorf("duplicate primary key %q in one batch", r.id)
		}
		seen[r.id] = true
		rows[i] = r
	}
	return rows, nil
}

func (f *fakeMilvus) Delete(_ context.Context, req *milvuspb.DeleteRequest) (*milvuspb.MutationResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log.deletes = append(f.log.deletes, req)
	c, st := f.coll(req.GetCollectionName())
	if st != nil {
		return &milvuspb.MutationResult{Status: st}, nil
	}
	if strings.TrimSpace(req.GetExpr()) == "" {
		return &milvuspb.MutationResult{Status: fail("delete needs an expression")}, nil
	}
	match, err := parseExpr(req.GetExpr())
	if err != nil {
		return &milvuspb.MutationResult{Status: fail("delete: %v", err)}, nil
	}
	var n int64
	for id, r := range c.rows {
		if match(r) {
			delete(c.rows, id)
			n++
		}
	}
	return &milvuspb.MutationResult{Status: merr.Success(), DeleteCnt: n}, nil
}

func (f *fakeMilvus) Query(_ context.Context, req *milvuspb.QueryRequest) (*milvuspb.QueryResults, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log.queries = append(f.log.queries, req)
	c, st := f.coll(req.GetCollectionName())
	if st != nil {
		return &milvuspb.QueryResults{Status: st}, nil
	}
	if !c.loaded {
		return &milvuspb.QueryResults{Status: merr.Status(merr.WrapErrCollectionNotLoaded(req.GetCollectionName()))}, nil
	}
	if !slices.Equal(req.GetOutputFields(), []string{"count(*)"}) {
		return &milvuspb.QueryResults{Status: fail("fake supports count(*) only, got %v", req.GetOutputFields())}, nil
	}
	match, err := parseExpr(req.GetExpr())
	if err != nil {
		return &milvuspb.QueryResults{Status: fail("query: %v", err)}, nil
	}
	var n int64
	for _, r := range c.rows {
		if match(r) {
			n++
		}
	}
	return &milvuspb.QueryResults{
		Status:         merr.Success(),
		CollectionName: req.GetCollectionName(),
		OutputFields:   []string{"count(*)"},
		FieldsData:     []*schemapb.FieldData{column.NewColumnInt64("count(*)", []int64{n}).FieldData()},
	}, nil
}

type scored struct {
	row   *fakeRow
	score float32
}

func (f *fakeMilvus) Search(_ context.Context, req *milvuspb.SearchRequest) (*milvuspb.SearchResults, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log.searches = append(f.log.searches, req)
	c, st := f.coll(req.GetCollectionName())
	if st != nil {
		return &milvuspb.SearchResults{Status: st}, nil
	}
	res, err := c.search(req)
	if err != nil {
		return &milvuspb.SearchResults{Status: fail("search: %v", err)}, nil
	}
	return c.results(res, req.GetOutputFields())
}

// HybridSearch is recorded and refused: the adapter fuses hybrid searches
// itself (activities.FuseHybrid).
func (f *fakeMilvus) HybridSearch(_ context.Context, req *milvuspb.HybridSearchRequest) (*milvuspb.SearchResults, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log.hybrids = append(f.log.hybrids, req)
	return &milvuspb.SearchResults{Status: fail("the fake does not run hybrid searches")}, nil
}

func sortScored(s []scored) {
	sort.Slice(s, func(i, j int) bool {
		if s[i].score != s[j].score {
			return s[i].score > s[j].score
		}
		return s[i].row.id < s[j].row.id
	})
}

// search runs one ANN request.
func (c *fakeColl) search(req *milvuspb.SearchRequest) ([]scored, error) {
	if !c.loaded {
		return nil, errors.New("collection not loaded")
	}
	if req.GetNq() != 1 {
		return nil, fmt.Errorf("nq %d", req.GetNq())
	}
	p := kv(req.GetSearchParams())
	fs := c.field(p["anns_field"])
	if fs == nil {
		return nil, fmt.Errorf("no anns_field %q", p["anns_field"])
	}
	idx := c.indexes[fs.GetName()]
	if m := p["metric_type"]; m != "" && m != idx["metric_type"] {
		return nil, fmt.Errorf("metric type not match: index %s, search %s", idx["metric_type"], m)
	}
	topk, err := strconv.Atoi(p["topk"])
	if err != nil || topk <= 0 || topk > 16384 {
		return nil, fmt.Errorf("topk %q", p["topk"])
	}
	var extra map[string]any
	if err := json.Unmarshal([]byte(p["params"]), &extra); err != nil {
		return nil, fmt.Errorf("params %q: %v", p["params"], err)
	}
	if ef, ok := extra["ef"].(float64); ok && idx["index_type"] == "HNSW" && int(ef) < topk {
		return nil, fmt.Errorf("ef(%v) should be larger than k(%d)", ef, topk)
	}
	match, err := parseExpr(req.GetDsl())
	if err != nil {
		return nil, err
	}
	var pg commonpb.PlaceholderGroup
	if err := proto.Unmarshal(req.GetPlaceholderGroup(), &pg); err != nil || len(pg.GetPlaceholders()) != 1 || len(pg.GetPlaceholders()[0].GetValues()) != 1 {
		return nil, fmt.Errorf("placeholder group: %v", err)
	}
	ph := pg.GetPlaceholders()[0]
	var score func(r *fakeRow) (float32, bool)
	switch {
	case ph.GetType() == commonpb.PlaceholderType_FloatVector && fs.GetDataType() == schemapb.DataType_FloatVector:
		raw := ph.GetValues()[0]
		if len(raw) != 4*c.dim {
			return nil, fmt.Errorf("vector dimension mismatch: query %d, field %d", len(raw)/4, c.dim)
		}
		q := make([]float32, c.dim)
		for i := range q {
			q[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		}
		q = unit(q)
		score = func(r *fakeRow) (float32, bool) { return dot(q, unit(r.vec)), true }
	case ph.GetType() == commonpb.PlaceholderType_VarChar && c.bm25Output(fs.GetName()):
		k1, _ := strconv.ParseFloat(idx["bm25_k1"], 64)
		b, _ := strconv.ParseFloat(idx["bm25_b"], 64)
		score = c.bm25(analyse(string(ph.GetValues()[0])), k1, b)
	default:
		return nil, fmt.Errorf("placeholder type %v does not fit field %s", ph.GetType(), fs.GetName())
	}
	var out []scored
	for _, r := range c.rows {
		if !match(r) {
			continue
		}
		if s, ok := score(r); ok {
			out = append(out, scored{r, s})
		}
	}
	sortScored(out)
	return out[:min(topk, len(out))], nil
}

// bm25 scores rows for the query terms over the whole collection's
// statistics; rows sharing no term with the query are not hits.
func (c *fakeColl) bm25(query []string, k1, b float64) func(*fakeRow) (float32, bool) {
	n, total := float64(len(c.rows)), 0.0
	df := map[string]float64{}
	for _, r := range c.rows {
		total += float64(r.length)
		for t := range r.terms {
			df[t]++
		}
	}
	avg := max(total/max(n, 1), 1)
	return func(r *fakeRow) (float32, bool) {
		var s float64
		for _, t := range query {
			tf := float64(r.terms[t])
			if tf == 0 {
				continue
			}
			idf := math.Log(1 + (n-df[t]+0.5)/(df[t]+0.5))
			s += idf * tf * (k1 + 1) / (tf + k1*(1-b+b*float64(r.length)/avg))
		}
		return float32(s), s > 0
	}
}

// analyse stands in for the jieba analyser: lower-cased runs of letters
// and digits, and bigrams of CJK runs (a lone character stays a token).
func analyse(text string) []string {
	var out []string
	var word, cjk []rune
	flush := func() {
		if len(word) > 0 {
			out = append(out, string(word))
		}
		if len(cjk) == 1 {
			out = append(out, string(cjk))
		}
		for i := 0; i+1 < len(cjk); i++ {
			out = append(out, string(cjk[i:i+2]))
		}
		word, cjk = word[:0], cjk[:0]
	}
	for _, r := range strings.ToLower(text) {
		switch {
		case unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul):
			if len(word) > 0 {
				flush()
			}
			cjk = append(cjk, r)
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			if len(cjk) > 0 {
				flush()
			}
			word = append(word, r)
		default:
			flush()
		}
	}
	flush()
	return out
}

// unit scales v to unit length; like knowhere, a zero vector stays zero.
func unit(v []float32) []float32 {
	var n float64
	for _, x := range v {
		n += float64(x) * float64(x)
	}
	if n == 0 {
		return v
	}
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(float64(x) / math.Sqrt(n))
	}
	return out
}

func dot(a, b []float32) float32 {
	var s float32
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

// results builds a search answer with the requested output fields.
func (c *fakeColl) results(hits []scored, fields []string) (*milvuspb.SearchResults, error) {
	ids := make([]string, len(hits))
	scores := make([]float32, len(hits))
	for i, h := range hits {
		ids[i], scores[i] = h.row.id, h.score
	}
	var data []*schemapb.FieldData
	for _, name := range fields {
		var col column.Column
		switch name {
		case fieldID, fieldDocument, fieldText:
			vals := make([]string, len(hits))
			for i, h := range hits {
				vals[i] = map[string]string{fieldID: h.row.id, fieldDocument: h.row.doc, fieldText: h.row.text}[name]
			}
			col = column.NewColumnVarChar(name, vals)
		case fieldMetadata:
			vals := make([][]byte, len(hits))
			for i, h := range hits {
				vals[i] = h.row.meta
			}
			col = column.NewColumnJSONBytes(name, vals)
		default:
			return &milvuspb.SearchResults{Status: fail("fake cannot output field %q", name)}, nil
		}
		data = append(data, col.FieldData())
	}
	return &milvuspb.SearchResults{
		Status: merr.Success(),
		Results: &schemapb.SearchResultData{
			NumQueries:   1,
			TopK:         int64(len(hits)),
			Topks:        []int64{int64(len(hits))},
			Scores:       scores,
			Ids:          &schemapb.IDs{IdField: &schemapb.IDs_StrId{StrId: &schemapb.StringArray{Data: ids}}},
			FieldsData:   data,
			OutputFields: fields,
		},
	}, nil
}

// parseExpr parses the boolean expressions the adapter emits: terms joined
// by "&&", each `field == "string"` on a VarChar field or
// `metadata["key"] == "string"` on the JSON field. String literals are read
// with strconv.Unquote, as Milvus does; the key between the brackets is
// taken verbatim, as Milvus does. "" matches every row.
func parseExpr(expr string) (func(*fakeRow) bool, error) {
	p := &exprParser{s: expr}
	var terms []func(*fakeRow) bool
	if p.skip(); p.eof() {
		return func(*fakeRow) bool { return true }, nil
	}
	for {
		t, err := p.term()
		if err != nil {
			return nil, fmt.Errorf("expression %q: %w", expr, err)
		}
		terms = append(terms, t)
		if p.skip(); p.eof() {
			break
		}
		if !p.take("&&") {
			return nil, fmt.Errorf("expression %q: want && at %d", expr, p.i)
		}
	}
	return func(r *fakeRow) bool {
		for _, t := range terms {
			if !t(r) {
				return false
			}
		}
		return true
	}, nil
}

type exprParser struct {
	s string
	i int
}

func (p *exprParser) eof() bool { return p.i >= len(p.s) }

func (p *exprParser) skip() {
	for !p.eof() && p.s[p.i] == ' ' {
		p.i++
	}
}

func (p *exprParser) take(tok string) bool {
	p.skip()
	if strings.HasPrefix(p.s[p.i:], tok) {
		p.i += len(tok)
		return true
	}
	return false
}

func (p *exprParser) term() (func(*fakeRow) bool, error) {
	p.skip()
	start := p.i
	for !p.eof() && (p.s[p.i] == '_' || unicode.IsLetter(rune(p.s[p.i])) || unicode.IsDigit(rune(p.s[p.i]))) {
		p.i++
	}
	field := p.s[start:p.i]
	var key string
	isJSON := false
	if p.take(`["`) {
		end := strings.Index(p.s[p.i:], `"`)
		if end < 0 {
			return nil, errors.New("unterminated JSON key")
		}
		key, isJSON = p.s[p.i:p.i+end], true
		p.i += end + 1
		if !p.take("]") {
			return nil, errors.New("want ] after the JSON key")
		}
	}
	if !p.take("==") {
		return nil, fmt.Errorf("want == at %d", p.i)
	}
	val, err := p.str()
	if err != nil {
		return nil, err
	}
	switch {
	case field == fieldMetadata && isJSON:
		return func(r *fakeRow) bool { v, ok := r.metaMap[key].(string); return ok && v == val }, nil
	case !isJSON && (field == fieldID || field == fieldDocument || field == fieldText):
		return func(r *fakeRow) bool {
			return map[string]string{fieldID: r.id, fieldDocument: r.doc, fieldText: r.text}[field] == val
		}, nil
	}
	return nil, fmt.Errorf("unsupported operand %q", p.s[start:p.i])
}

func (p *exprParser) str() (string, error) {
	p.skip()
	if p.eof() || p.s[p.i] != '"' {
		return "", fmt.Errorf("want a string literal at %d", p.i)
	}
	for j := p.i + 1; j < len(p.s); j++ {
		switch p.s[j] {
		case '\\':
			j++
		case '"':
			v, err := strconv.Unquote(p.s[p.i : j+1])
			p.i = j + 1
			return v, err
		}
	}
	return "", errors.New("unterminated string literal")
}
