// Package milvus is the Milvus VectorStore: dense cosine search on an HNSW
// index, keyword search with Milvus's built-in BM25 (a BM25 function fills a
// sparse vector from the analysed text), and hybrid search fusing both by
// reciprocal rank (k = 60). It mirrors the embedded store (activities/vecstore)
// and passes the same conformance suite (activities/vectorstoretest).
//
// One collection holds the chunks of a knowledge base:
//
//	id           VarChar(512), primary key (the chunk id)
//	document_id  VarChar(512)
//	text         VarChar(65535), analysed (jieba + lowercase), input of the BM25 function
//	metadata     JSON, an object of strings
//	vector       FloatVector(Dimension), HNSW index, COSINE
//	sparse       SparseFloatVector, output of the BM25 function, SPARSE_INVERTED_INDEX, BM25
//
// The collection is created with Strong consistency and every search and
// count asks for Strong consistency, so a search sees the writes that
// returned before it.
package milvus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/milvus-io/milvus/client/v2/column"
	"github.com/milvus-io/milvus/client/v2/entity"
	"github.com/milvus-io/milvus/client/v2/index"
	"github.com/milvus-io/milvus/client/v2/milvusclient"

	"github.com/ctxflow/ctxflow/activities"
)

// DefaultCollection is the collection used when Options.Collection is "".
const DefaultCollection = "rag_documents"

// DefaultTopK is the number of hits returned when SearchRequest.TopK <= 0
// (as in the embedded store).
const DefaultTopK = activities.DefaultTopK

// RRFK is the reciprocal-rank-fusion constant of hybrid search: a hit at
// rank r (from 1) of one list scores 1/(RRFK+r).
const RRFK = activities.RRFK

// ErrClosed is returned by calls on a closed Store.
var ErrClosed = errors.New("milvus: store is closed")

// Field, function and index names of the collection.
const (
	fieldID       = "id"
	fieldDocument = "document_id"
	fieldText     = "text"
	fieldMetadata = "metadata"
	fieldVector   = "vector"
	fieldSparse   = "sparse"
	bm25Function  = "text_bm25"
	denseIndex    = "vector_hnsw"
	sparseIndex   = "sparse_bm25"
)

const (
	maxIDLen   = 512   // bytes of id and document_id
	maxTextLen = 65535 // bytes of text: Milvus's default VarChar limit
	// maxTopK is Milvus's limit on a search's topk (quota topK limit).
	maxTopK = 16384
	// Dense index: HNSW with the common M=16, efConstruction=200; chosen
	// over AUTOINDEX so that every deployment builds the same index and the
	// search parameter ef means the same thing. Searches use
	// ef = max(limit, minEf) (Milvus requires ef >= limit).
	hnswM              = 16
	hnswEfConstruction = 200
	minEf              = 64
	// Upserts are sent in batches of at most this many rows or bytes, well
	// under Milvus's 64 MB gRPC message limit.
	batchRows  = 1000
	batchBytes = 16 << 20
)

// analyzerParams configures the text field's analyser: Milvus's jieba
// tokenizer segments Chinese into words (search mode also emits the
// sub-words of long words) and keeps runs of Latin letters and digits as
// words; lowercase makes English case-insensitive, as in the embedded
// store; cnalphanumonly drops punctuation and whitespace tokens. The
// built-in "chinese" analyser is jieba + cnalphanumonly without lowercase,
// and the standard tokenizer does not segment Chinese into words.
var analyzerParams = map[string]any{
	"tokenizer": "jieba",
	"filter":    []any{"lowercase", "cnalphanumonly"},
}

// Options configures Open.
type Options struct {
	// Address is the Milvus endpoint, "host:19530"; an https:// URL enables TLS.
	Address string
	// Token is an API key, or "user:password"; it overrides Username and
	// Password.
	Token    string
	Username string
	Password string
	// DBName selects the database; "" is Milvus's default.
	DBName string
	// Collection names the collection; "" means DefaultCollection.
	Collection string
	// Dimension is the vectors' dimension. It is required to create a
	// missing collection; for an existing one it must be 0 or match.
	Dimension int
	// Logger receives a line when a collection is created or loaded; nil
	// discards them.
	Logger *slog.Logger
}

// Store is a VectorStore on a Milvus collection. It is safe for concurrent
// use.
type Store struct {
	mu     sync.RWMutex // write-held only by Close
	closed bool
	client *milvusclient.Client
	name   string
	dim    int
	log    *slog.Logger
}

var _ activities.VectorStore = (*Store)(nil)

// Open connects to Milvus and opens the collection, creating it (schema,
// indexes) when it is missing and loading it when it is not loaded (which
// may take long for a large collection). ctx bounds the whole call; without
// a deadline, connecting alone is bounded to 30 s.
func Open(ctx context.Context, opts Options) (*Store, error) {
	if opts.Address == "" {
		return nil, errors.New("milvus: no address")
	}
	if opts.Dimension < 0 {
		return nil, fmt.Errorf("milvus: negative dimension %d", opts.Dimension)
	}
	name := opts.Collection
	if name == "" {
		name = DefaultCollection
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("collection", name)
	dialCtx := ctx
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		dialCtx, cancel = context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
	}
	client, err := milvusclient.New(dialCtx, &milvusclient.ClientConfig{
		Address:  opts.Address,
		Username: opts.Username,
		Password: opts.Password,
		APIKey:   opts.Token,
		DBName:   opts.DBName,
	})
	if err != nil {
		return nil, fmt.Errorf("milvus connect %s: %w", opts.Address, err)
	}
	s := &Store{client: client, name: name, log: log}
	if err := s.open(ctx, opts.Dimension); err != nil {
		_ = client.Close(context.Background())
		return nil, err
	}
	return s, nil
}

func (s *Store) open(ctx context.Context, dim int) error {
	has, err := s.client.HasCollection(ctx, milvusclient.NewHasCollectionOption(s.name))
	if err != nil {
		return fmt.Errorf("milvus has collection %s: %w", s.name, err)
	}
	if !has {
		if dim == 0 {
			return fmt.Errorf("milvus: collection %q does not exist and Options.Dimension is 0: the dimension is needed to create it", s.name)
		}
		if err := s.create(ctx, dim); err != nil {
			return err
		}
	}
	coll, err := s.client.DescribeCollection(ctx, milvusclient.NewDescribeCollectionOption(s.name))
	if err != nil {
		return fmt.Errorf("milvus describe collection %s: %w", s.name, err)
	}
	got, err := checkSchema(coll.Schema)
	if err != nil {
		return fmt.Errorf("milvus: collection %q: %w", s.name, err)
	}
	if dim != 0 && got != dim {
		return fmt.Errorf("milvus: collection %q stores %d-dimensional vectors but Options.Dimension is %d: %w; use the embedding model the collection was built with, or a new collection name for the new model",
			s.name, got, dim, activities.ErrDimension)
	}
	s.dim = got
	state, err := s.client.GetLoadState(ctx, milvusclient.NewGetLoadStateOption(s.name))
	if err != nil {
		return fmt.Errorf("milvus load state %s: %w", s.name, err)
	}
	if state.State != entity.LoadStateLoaded {
		s.log.Info("milvus: loading collection")
		task, err := s.client.LoadCollection(ctx, milvusclient.NewLoadCollectionOption(s.name))
		if err == nil {
			err = task.Await(ctx)
		}
		if err != nil {
			return fmt.Errorf("milvus load collection %s: %w", s.name, err)
		}
	}
	return nil
}

// schema is the collection schema for dim-dimensional vectors.
func schema(name string, dim int) *entity.Schema {
	return entity.NewSchema().WithName(name).
		WithDescription("ctxflow chunks").
		WithDynamicFieldEnabled(false).
		WithField(entity.NewField().WithName(fieldID).WithDataType(entity.FieldTypeVarChar).
			WithMaxLength(maxIDLen).WithIsPrimaryKey(true)).
		WithField(entity.NewField().WithName(fieldDocument).WithDataType(entity.FieldTypeVarChar).
			WithMaxLength(maxIDLen)).
		WithField(entity.NewField().WithName(fieldText).WithDataType(entity.FieldTypeVarChar).
			WithMaxLength(maxTextLen).WithEnableAnalyzer(true).WithAnalyzerParams(analyzerParams)).
		WithField(entity.NewField().WithName(fieldMetadata).WithDataType(entity.FieldTypeJSON)).
		WithField(entity.NewField().WithName(fieldVector).WithDataType(entity.FieldTypeFloatVector).
			WithDim(int64(dim))).
		WithField(entity.NewField().WithName(fieldSparse).WithDataType(entity.FieldTypeSparseVector)).
		WithFunction(entity.NewFunction().WithName(bm25Function).WithType(entity.FunctionTypeBM25).
			WithInputFields(fieldText).WithOutputFields(fieldSparse))
}

// indexes are the collection's two vector indexes.
func indexes(name string) []milvusclient.CreateIndexOption {
	return []milvusclient.CreateIndexOption{
		milvusclient.NewCreateIndexOption(name, fieldVector,
			index.NewHNSWIndex(entity.COSINE, hnswM, hnswEfConstruction)).WithIndexName(denseIndex),
		milvusclient.NewCreateIndexOption(name, fieldSparse, index.NewGenericIndex(sparseIndex, map[string]string{
			index.IndexTypeKey:    string(index.SparseInverted),
			index.MetricTypeKey:   string(entity.BM25),
			"inverted_index_algo": "DAAT_MAXSCORE",
			"bm25_k1":             "1.2",
			"bm25_b":              "0.75",
		})).WithIndexName(sparseIndex),
	}
}

func (s *Store) create(ctx context.Context, dim int) error {
	opt := milvusclient.NewCreateCollectionOption(s.name, schema(s.name, dim)).WithConsistencyLevel(entity.ClStrong)
	if err := s.client.CreateCollection(ctx, opt); err != nil {
		// Another process may have created it meanwhile.
		if has, herr := s.client.HasCollection(ctx, milvusclient.NewHasCollectionOption(s.name)); herr == nil && has {
			return nil
		}
		return fmt.Errorf("milvus create collection %s: %w", s.name, err)
	}
	// Indexes on an empty collection are ready at once; loading waits for
	// them anyway, so their build is not awaited here.
	for _, idx := range indexes(s.name) {
		if _, err := s.client.CreateIndex(ctx, idx); err != nil {
			return fmt.Errorf("milvus create index %s: %w", s.name, err)
		}
	}
	s.log.Info("milvus: created collection", "dimension", dim)
	return nil
}

// checkSchema verifies that sch is a ctxflow schema and returns its dimension.
func checkSchema(sch *entity.Schema) (int, error) {
	want := map[string]entity.FieldType{
		fieldID: entity.FieldTypeVarChar, fieldDocument: entity.FieldTypeVarChar,
		fieldText: entity.FieldTypeVarChar, fieldMetadata: entity.FieldTypeJSON,
		fieldVector: entity.FieldTypeFloatVector, fieldSparse: entity.FieldTypeSparseVector,
	}
	dim := 0
	for _, f := range sch.Fields {
		t, ok := want[f.Name]
		if !ok {
			continue
		}
		if f.DataType != t {
			return 0, fmt.Errorf("field %q is %s, want %s: not a ctxflow collection", f.Name, f.DataType.Name(), t.Name())
		}
		delete(want, f.Name)
		if f.Name == fieldVector {
			d, err := f.GetDim()
			if err != nil || d <= 0 {
				return 0, fmt.Errorf("field %q has no valid dimension: %v", f.Name, err)
			}
			dim = int(d)
		}
	}
	if len(want) > 0 {
		missing := slices.Sorted(maps.Keys(want))
		return 0, fmt.Errorf("no field %q: not a ctxflow collection", missing[0])
	}
	if sch.PKFieldName() != fieldID {
		return 0, fmt.Errorf("primary key is %q, want %q: not a ctxflow collection", sch.PKFieldName(), fieldID)
	}
	for _, fn := range sch.Functions {
		if fn.Type == entity.FunctionTypeBM25 && len(fn.OutputFieldNames) == 1 && fn.OutputFieldNames[0] == fieldSparse {
			return dim, nil
		}
	}
	return 0, fmt.Errorf("no BM25 function filling %q: not a ctxflow collection", fieldSparse)
}

// Close releases the connection. It is idempotent.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if err := s.client.Close(context.Background()); err != nil {
		return fmt.Errorf("milvus close: %w", err)
	}
	return nil
}

// acquire read-locks the store for one call; release with s.mu.RUnlock.
func (s *Store) acquire(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return ErrClosed
	}
	return nil
}

func (s *Store) dimError(what string, got int) error {
	return fmt.Errorf("milvus: %s has %d dimensions but collection %q has %d: %w; embed with the model the collection was built with, or use a new collection for a %d-dimensional model",
		what, got, s.name, s.dim, activities.ErrDimension, got)
}

// checkVector reports a vector Milvus must not receive: wrong dimension,
// NaN or infinite components.
func (s *Store) checkVector(what string, v []float32) error {
	if len(v) != s.dim {
		return s.dimError(what, len(v))
	}
	for _, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return fmt.Errorf("milvus: %s has a NaN or infinite component", what)
		}
	}
	return nil
}

// Upsert stores chunks, replacing those with the same id (the last of
// repeated ids in one call wins). The whole call is checked before anything
// is sent: a vector of the wrong dimension refuses it with an ErrDimension
// error. Large calls are sent in several batches; a failure midway leaves
// the earlier batches stored.
func (s *Store) Upsert(ctx context.Context, chunks []activities.Chunk) error {
	if err := s.acquire(ctx); err != nil {
		return err
	}
	defer s.mu.RUnlock()
	last := make(map[string]int, len(chunks))
	for i, c := range chunks {
		switch {
		case c.ID == "":
			return fmt.Errorf("milvus: chunk %d has no id", i)
		case len(c.Vector) == 0:
			return fmt.Errorf("milvus: chunk %q has no vector", c.ID)
		case len(c.ID) > maxIDLen || len(c.DocumentID) > maxIDLen:
			return fmt.Errorf("milvus: chunk %q: id and document id are limited to %d bytes", c.ID, maxIDLen)
		case len(c.Text) > maxTextLen:
			return fmt.Errorf("milvus: chunk %q: text of %d bytes exceeds the %d-byte limit", c.ID, len(c.Text), maxTextLen)
		case !utf8.ValidString(c.ID) || !utf8.ValidString(c.DocumentID) || !utf8.ValidString(c.Text):
			return fmt.Errorf("milvus: chunk %q: id, document id and text must be valid UTF-8", c.ID)
		}
		if err := s.checkVector(fmt.Sprintf("chunk %q", c.ID), c.Vector); err != nil {
			return err
		}
		last[c.ID] = i
	}
	var b batch
	for i, c := range chunks {
		if last[c.ID] != i {
			continue
		}
		md := c.Metadata
		if md == nil {
			md = map[string]string{}
		}
		meta, err := json.Marshal(md)
		if err != nil {
			return fmt.Errorf("milvus: chunk %q: metadata: %w", c.ID, err)
		}
		b.add(c, meta)
		if len(b.ids) >= batchRows || b.bytes >= batchBytes {
			if err := s.send(ctx, &b); err != nil {
				return err
			}
		}
	}
	return s.send(ctx, &b)
}

// batch collects the columns of one Upsert request.
type batch struct {
	ids, docs, texts []string
	metas            [][]byte
	vecs             [][]float32
	bytes            int
}

func (b *batch) add(c activities.Chunk, meta []byte) {
	b.ids = append(b.ids, c.ID)
	b.docs = append(b.docs, c.DocumentID)
	b.texts = append(b.texts, c.Text)
	b.metas = append(b.metas, meta)
	b.vecs = append(b.vecs, c.Vector)
	b.bytes += len(c.ID) + len(c.DocumentID) + len(c.Text) + len(meta) + 4*len(c.Vector)
}

func (s *Store) send(ctx context.Context, b *batch) error {
	if len(b.ids) == 0 {
		return nil
	}
	opt := milvusclient.NewColumnBasedInsertOption(s.name,
		column.NewColumnVarChar(fieldID, b.ids),
		column.NewColumnVarChar(fieldDocument, b.docs),
		column.NewColumnVarChar(fieldText, b.texts),
		column.NewColumnJSONBytes(fieldMetadata, b.metas),
		column.NewColumnFloatVector(fieldVector, s.dim, b.vecs),
	)
	*b = batch{}
	if _, err := s.client.Upsert(ctx, opt); err != nil {
		return fmt.Errorf("milvus upsert %s: %w", s.name, err)
	}
	return nil
}

// DeleteDocument removes every chunk of the document; an unknown document
// is not an error.
func (s *Store) DeleteDocument(ctx context.Context, documentID string) error {
	if err := s.acquire(ctx); err != nil {
		return err
	}
	defer s.mu.RUnlock()
	opt := milvusclient.NewDeleteOption(s.name).WithExpr(fieldDocument + " == " + quote(documentID))
	if _, err := s.client.Delete(ctx, opt); err != nil {
		return fmt.Errorf("milvus delete %s: %w", s.name, err)
	}
	return nil
}

// EraseTenant implements [activities.TenantEraser]: it deletes every chunk
// whose metadata names the tenant (chunks of documents whose workflows are
// no longer listed too). Milvus drops the deleted rows' bytes when it
// compacts the segments, on its own schedule.
func (s *Store) EraseTenant(ctx context.Context, tenant string) error {
	if err := s.acquire(ctx); err != nil {
		return err
	}
	defer s.mu.RUnlock()
	expr, err := filterExpr(map[string]string{activities.MetaTenant: tenant})
	if err != nil {
		return err
	}
	if _, err := s.client.Delete(ctx, milvusclient.NewDeleteOption(s.name).WithExpr(expr)); err != nil {
		return fmt.Errorf("milvus delete the chunks of tenant %s in %s: %w", tenant, s.name, err)
	}
	return nil
}

// Info describes the collection; Count is Milvus's count(*) at Strong
// consistency.
func (s *Store) Info(ctx context.Context) (activities.CollectionInfo, error) {
	if err := s.acquire(ctx); err != nil {
		return activities.CollectionInfo{}, err
	}
	defer s.mu.RUnlock()
	rs, err := s.client.Query(ctx, milvusclient.NewQueryOption(s.name).
		WithOutputFields("count(*)").WithConsistencyLevel(entity.ClStrong))
	var n int64
	if err == nil {
		col := rs.GetColumn("count(*)")
		if col == nil {
			err = errors.New("no count(*) in the answer")
		} else {
			n, err = col.GetAsInt64(0)
		}
	}
	if err != nil {
		return activities.CollectionInfo{}, fmt.Errorf("milvus count %s: %w", s.name, err)
	}
	return activities.CollectionInfo{Name: s.name, Dimension: s.dim, Count: int(n)}, nil
}

// quote makes s a Milvus expression string literal. Milvus reads a
// double-quoted literal with Go's strconv.Unquote, so Go quoting escapes
// quotes, backslashes and control characters exactly.
func quote(s string) string { return strconv.Quote(s) }
