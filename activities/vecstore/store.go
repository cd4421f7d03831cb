// Package vecstore is the embedded, persistent VectorStore: dense cosine
// search on chromem-go, keyword BM25 search on a bleve (scorch) index with
// a CJK-bigram analyser, and hybrid search fusing both by reciprocal rank.
//
// chromem-go is the source of truth for chunks (id, document, text,
// metadata, vector); the bleve index is derived from it and is rebuilt
// from it when it is missing, unreadable or possibly stale (the previous
// session did not Close cleanly).
//
// Layout under Options.Dir, one folder per collection:
//
//	<Dir>/<collection>/meta.json   name and dimension
//	<Dir>/<collection>/vectors/    chromem-go files (one gob per chunk)
//	<Dir>/<collection>/text/       bleve scorch index
//	<Dir>/<collection>/dirty       present while a session has unflushed writes
package vecstore

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/analysis/analyzer/keyword"
	"github.com/blevesearch/bleve/v2/analysis/lang/cjk"
	"github.com/blevesearch/bleve/v2/index/scorch"
	"github.com/blevesearch/bleve/v2/mapping"
	"github.com/blevesearch/bleve/v2/search/query"
	index "github.com/blevesearch/bleve_index_api"
	"github.com/philippgille/chromem-go"

	"github.com/ctxflow/ctxflow/activities"
)

// ErrDimension is wrapped by every error about a vector whose dimension is
// not the collection's. It is permanent: retrying the same call fails again.
var ErrDimension = activities.ErrDimension

// ErrClosed is returned by calls on a closed Store.
var ErrClosed = errors.New("vecstore: store is closed")

// DefaultTopK is the number of hits returned when SearchRequest.TopK <= 0.
const DefaultTopK = activities.DefaultTopK

// RRFK is the reciprocal-rank-fusion constant: a hit at rank r (from 1) of
// one list scores 1/(RRFK+r).
const RRFK = activities.RRFK

// Options configures Open.
type Options struct {
	// Dir holds the collection persistently (in Dir/<collection>); "" keeps
	// it in memory only.
	Dir string
	// Collection names the collection; "" means "default".
	Collection string
	// Dimension is the vectors' dimension; 0 learns it from the first
	// Upsert. Once known it is fixed (and persisted with the collection).
	Dimension int
}

// Store is an embedded VectorStore. It is safe for concurrent use.
type Store struct {
	mu     sync.RWMutex
	name   string
	dir    string // collection folder, "" in memory
	dim    int
	col    *chromem.Collection
	text   bleve.Index
	byDoc  map[string]map[string]struct{} // document id → chunk ids
	docOf  map[string]string              // chunk id → document id
	dirty  bool                           // dirty marker written this session
	closed bool
}

var _ activities.VectorStore = (*Store)(nil)

// Reserved chromem metadata keys; user metadata keys may not start with NUL.
const (
	keyDoc  = "\x00doc"
	keyZero = "\x00zero" // "1" for a zero vector (stored as a placeholder)
)

const (
	fieldText = "text"
	fieldMeta = "meta"
	metaSep   = "\x1f"
)

var (
	openMu   sync.Mutex
	openDirs = map[string]bool{}
)

var safeName = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$`)

type metaFile struct {
	Name      string `json:"name"`
	Dimension int    `json:"dimension"`
}

// Open opens (creating if needed) the collection described by opts.
func Open(opts Options) (*Store, error) {
	name := opts.Collection
	if name == "" {
		name = "default"
	}
	if opts.Dimension < 0 {
		return nil, fmt.Errorf("vecstore: negative dimension %d", opts.Dimension)
	}
	s := &Store{
		name:  name,
		dim:   opts.Dimension,
		byDoc: map[string]map[string]struct{}{},
		docOf: map[string]string{},
	}
	if opts.Dir == "" {
		if err := s.openMemory(); err != nil {
			return nil, err
		}
		return s, nil
	}
	folder := name
	if !safeName.MatchString(name) {
		sum := sha256.Sum256([]byte(name))
		folder = "c-" + hex.EncodeToString(sum[:12])
	}
	dir, err := filepath.Abs(filepath.Join(opts.Dir, folder))
	if err != nil {
		return nil, fmt.Errorf("vecstore: %w", err)
	}
	openMu.Lock()
	if openDirs[dir] {
		openMu.Unlock()
		return nil, fmt.Errorf("vecstore: collection %q in %s is already open in this process", name, opts.Dir)
	}
	openDirs[dir] = true
	openMu.Unlock()
	s.dir = dir
	if err := s.openDisk(); err != nil {
		if s.text != nil {
			_ = s.text.Close()
		}
		s.release()
		return nil, err
	}
	return s, nil
}

func (s *Store) release() {
	if s.dir == "" {
		return
	}
	openMu.Lock()
	delete(openDirs, s.dir)
	openMu.Unlock()
}

func failEmbed(context.Context, string) ([]float32, error) {
	return nil, errors.New("vecstore: chunks must carry their vectors")
}

func newMapping() mapping.IndexMapping {
	im := bleve.NewIndexMapping()
	im.ScoringModel = index.BM25Scoring
	im.DefaultAnalyzer = cjk.AnalyzerName
	doc := bleve.NewDocumentStaticMapping()
	tf := bleve.NewTextFieldMapping()
	tf.Analyzer = cjk.AnalyzerName
	tf.Store = false
	tf.IncludeInAll = false
	tf.IncludeTermVectors = false
	doc.AddFieldMappingsAt(fieldText, tf)
	mf := bleve.NewKeywordFieldMapping()
	mf.Analyzer = keyword.Name
	mf.Store = false
	mf.IncludeInAll = false
	mf.IncludeTermVectors = false
	doc.AddFieldMappingsAt(fieldMeta, mf)
	im.DefaultMapping = doc
	return im
}

func (s *Store) openMemory() error {
	db := chromem.NewDB()
	col, err := db.CreateCollection(s.name, nil, failEmbed)
	if err != nil {
		return fmt.Errorf("vecstore: %w", err)
	}
	s.col = col
	text, err := bleve.NewUsing("", newMapping(), scorch.Name, scorch.Name, nil)
	if err != nil {
		return fmt.Errorf("vecstore: keyword index: %w", err)
	}
	s.text = text
	return nil
}

func (s *Store) openDisk() error {
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return fmt.Errorf("vecstore: %w", err)
	}
	var meta metaFile
	b, err := os.ReadFile(filepath.Join(s.dir, "meta.json"))
	switch {
	case err == nil:
		if err := json.Unmarshal(b, &meta); err != nil {
			return fmt.Errorf("vecstore: %s: %w", filepath.Join(s.dir, "meta.json"), err)
		}
		if meta.Name != s.name {
			return fmt.Errorf("vecstore: folder %s holds collection %q, not %q", s.dir, meta.Name, s.name)
		}
	case errors.Is(err, os.ErrNotExist):
		meta.Name = s.name
	default:
		return fmt.Errorf("vecstore: %w", err)
	}
	db, err := chromem.NewPersistentDB(filepath.Join(s.dir, "vectors"), false)
	if err != nil {
		return fmt.Errorf("vecstore: open vectors: %w", err)
	}
	col, err := db.GetOrCreateCollection(s.name, nil, failEmbed)
	if err != nil {
		return fmt.Errorf("vecstore: open vectors: %w", err)
	}
	s.col = col
	if meta.Dimension == 0 {
		meta.Dimension = storedDim(col)
	}
	switch {
	case meta.Dimension != 0 && s.dim != 0 && meta.Dimension != s.dim:
		return fmt.Errorf("vecstore: collection %q stores %d-dimensional vectors but Options.Dimension is %d: %w; use the embedding model the collection was built with, or a new collection name (or Dir) for the new model",
			s.name, meta.Dimension, s.dim, ErrDimension)
	case meta.Dimension != 0:
		s.dim = meta.Dimension
	}
	meta.Dimension = s.dim
	if err := s.writeMeta(meta); err != nil {
		return err
	}
	all, err := s.all()
	if err != nil {
		return err
	}
	for _, r := range all {
		s.track(r.ID, r.Metadata[keyDoc])
	}

	textDir := filepath.Join(s.dir, "text")
	_, dirtyErr := os.Stat(filepath.Join(s.dir, "dirty"))
	cfg := map[string]any{"bolt_timeout": "2s"}
	if dirtyErr != nil { // clean: try the persisted keyword index
		text, err := bleve.OpenUsing(textDir, cfg)
		if err == nil {
			n, cerr := text.DocCount()
			if cerr == nil && int(n) == len(all) {
				s.text = text
				return nil
			}
			_ = text.Close()
		} else if isLocked(err) {
			return fmt.Errorf("vecstore: collection %q in %s is in use by another process: %w", s.name, s.dir, err)
		}
	}
	// Rebuild the keyword index from the vectors.
	if err := os.RemoveAll(textDir); err != nil {
		return fmt.Errorf("vecstore: %w", err)
	}
	text, err := bleve.NewUsing(textDir, newMapping(), scorch.Name, scorch.Name, cfg)
	if err != nil {
		if isLocked(err) {
			return fmt.Errorf("vecstore: collection %q in %s is in use by another process: %w", s.name, s.dir, err)
		}
		return fmt.Errorf("vecstore: keyword index: %w", err)
	}
	s.text = text
	const batchSize = 1000
	for i := 0; i < len(all); i += batchSize {
		b := text.NewBatch()
		for _, r := range all[i:min(i+batchSize, len(all))] {
			if err := b.Index(r.ID, textDoc(r.Content, r.Metadata)); err != nil {
				return fmt.Errorf("vecstore: rebuild keyword index: %w", err)
			}
		}
		if err := text.Batch(b); err != nil {
			return fmt.Errorf("vecstore: rebuild keyword index: %w", err)
		}
	}
	if err := os.Remove(filepath.Join(s.dir, "dirty")); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("vecstore: %w", err)
	}
	return nil
}

func isLocked(err error) bool {
	return err != nil && strings.Contains(err.Error(), "timeout")
}

// all returns every stored chunk (at Open only; s.dim must be known when
// the collection is not empty).
func (s *Store) all() ([]chromem.Result, error) {
	n := s.col.Count()
	if n == 0 {
		return nil, nil
	}
	// chromem-go has no iterator: a query for n results returns them all.
	probe := make([]float32, s.dim)
	probe[0] = 1
	var out []chromem.Result
	for _, z := range []string{"0", "1"} {
		rs, err := s.col.QueryEmbedding(context.Background(), probe, n, map[string]string{keyZero: z}, nil)
		if err != nil {
			return nil, fmt.Errorf("vecstore: read vectors: %w", err)
		}
		out = append(out, rs...)
	}
	return out, nil
}

// storedDim finds the stored dimension when meta.json lost it, by probing:
// chromem-go reports a length mismatch as an error.
func storedDim(col *chromem.Collection) int {
	if col.Count() == 0 {
		return 0
	}
	for d := 1; d <= 1<<16; d++ {
		probe := make([]float32, d)
		probe[0] = 1
		if _, err := col.QueryEmbedding(context.Background(), probe, 1, nil, nil); err == nil {
			return d
		}
	}
	return 0
}

func (s *Store) writeMeta(m metaFile) error {
	if s.dir == "" {
		return nil
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(s.dir, "meta.json.tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("vecstore: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(s.dir, "meta.json")); err != nil {
		return fmt.Errorf("vecstore: %w", err)
	}
	return nil
}

func (s *Store) markDirty() error {
	if s.dir == "" || s.dirty {
		return nil
	}
	if err := os.WriteFile(filepath.Join(s.dir, "dirty"), nil, 0o600); err != nil {
		return fmt.Errorf("vecstore: %w", err)
	}
	s.dirty = true
	return nil
}

func (s *Store) track(id, doc string) {
	if old, ok := s.docOf[id]; ok {
		if set := s.byDoc[old]; set != nil {
			delete(set, id)
			if len(set) == 0 {
				delete(s.byDoc, old)
			}
		}
	}
	s.docOf[id] = doc
	set := s.byDoc[doc]
	if set == nil {
		set = map[string]struct{}{}
		s.byDoc[doc] = set
	}
	set[id] = struct{}{}
}

func textDoc(text string, md map[string]string) map[string]any {
	var meta []string
	for k, v := range md {
		if len(k) > 0 && k[0] == 0 {
			continue
		}
		meta = append(meta, k+metaSep+v)
	}
	return map[string]any{fieldText: text, fieldMeta: meta}
}

func (s *Store) dimError(what string, got int) error {
	return fmt.Errorf("vecstore: %s has %d dimensions but collection %q has %d: %w; embed with the model the collection was built with, or use a new collection (or Dir) for a %d-dimensional model",
		what, got, s.name, s.dim, ErrDimension, got)
}

// normalise returns v scaled to unit length, or ok=false for a zero (or
// non-finite) vector.
func normalise(v []float32) (out []float32, zero bool, err error) {
	var sum float64
	for _, x := range v {
		f := float64(x)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, false, errors.New("vector has a NaN or infinite component")
		}
		sum += f * f
	}
	if sum == 0 {
		return nil, true, nil
	}
	norm := math.Sqrt(sum)
	out = make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(float64(x) / norm)
	}
	return out, false, nil
}

// Upsert stores chunks, replacing those with the same id. Every vector must
// have the collection's dimension (the first Upsert fixes it when it was
// unknown); a mismatch refuses the whole batch with an ErrDimension error.
func (s *Store) Upsert(ctx context.Context, chunks []activities.Chunk) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(chunks) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	dim := s.dim
	if dim == 0 {
		dim = len(chunks[0].Vector)
	}
	// Last occurrence of an id wins.
	last := make(map[string]int, len(chunks))
	for i, c := range chunks {
		if c.ID == "" {
			return fmt.Errorf("vecstore: chunk %d has no id", i)
		}
		if len(c.Vector) == 0 {
			return fmt.Errorf("vecstore: chunk %q has no vector", c.ID)
		}
		if len(c.Vector) != dim {
			if s.dim == 0 {
				return fmt.Errorf("vecstore: chunks in one batch have %d and %d dimensions (chunk %q): %w", dim, len(c.Vector), c.ID, ErrDimension)
			}
			return s.dimError(fmt.Sprintf("chunk %q", c.ID), len(c.Vector))
		}
		for k := range c.Metadata {
			if len(k) > 0 && k[0] == 0 {
				return fmt.Errorf("vecstore: chunk %q: metadata key %q is reserved", c.ID, k)
			}
		}
		last[c.ID] = i
	}
	docs := make([]chromem.Document, 0, len(last))
	batch := s.text.NewBatch()
	for i, c := range chunks {
		if last[c.ID] != i {
			continue
		}
		vec, zero, err := normalise(c.Vector)
		if err != nil {
			return fmt.Errorf("vecstore: chunk %q: %w", c.ID, err)
		}
		md := make(map[string]string, len(c.Metadata)+2)
		for k, v := range c.Metadata {
			md[k] = v
		}
		md[keyDoc] = c.DocumentID
		md[keyZero] = "0"
		if zero {
			// chromem-go would divide by zero; store a unit placeholder that
			// dense search never sees.
			vec = make([]float32, dim)
			vec[0] = 1
			md[keyZero] = "1"
		}
		docs = append(docs, chromem.Document{ID: c.ID, Metadata: md, Embedding: vec, Content: c.Text})
		if err := batch.Index(c.ID, textDoc(c.Text, c.Metadata)); err != nil {
			return fmt.Errorf("vecstore: keyword index: %w", err)
		}
	}
	if s.dim == 0 {
		s.dim = dim
		if err := s.writeMeta(metaFile{Name: s.name, Dimension: dim}); err != nil {
			return err
		}
	}
	if err := s.markDirty(); err != nil {
		return err
	}
	if err := s.col.AddDocuments(ctx, docs, runtime.GOMAXPROCS(0)); err != nil {
		return fmt.Errorf("vecstore: store vectors: %w", err)
	}
	if err := s.text.Batch(batch); err != nil {
		return fmt.Errorf("vecstore: keyword index: %w", err)
	}
	for _, d := range docs {
		s.track(d.ID, d.Metadata[keyDoc])
	}
	return nil
}

// DeleteDocument removes every chunk of the document; an unknown document
// is not an error.
func (s *Store) DeleteDocument(ctx context.Context, documentID string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	set := s.byDoc[documentID]
	if len(set) == 0 {
		return nil
	}
	ids := make([]string, 0, len(set))
	for id := range set {
		ids = append(ids, id)
	}
	if err := s.markDirty(); err != nil {
		return err
	}
	if err := s.col.Delete(ctx, nil, nil, ids...); err != nil {
		return fmt.Errorf("vecstore: delete vectors: %w", err)
	}
	batch := s.text.NewBatch()
	for _, id := range ids {
		batch.Delete(id)
	}
	if err := s.text.Batch(batch); err != nil {
		return fmt.Errorf("vecstore: keyword index: %w", err)
	}
	for _, id := range ids {
		delete(s.docOf, id)
	}
	delete(s.byDoc, documentID)
	return nil
}

// Info describes the collection; Dimension is 0 until it is known.
func (s *Store) Info(ctx context.Context) (activities.CollectionInfo, error) {
	if err := ctx.Err(); err != nil {
		return activities.CollectionInfo{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return activities.CollectionInfo{}, ErrClosed
	}
	return activities.CollectionInfo{Name: s.name, Dimension: s.dim, Count: s.col.Count()}, nil
}

// Close flushes and releases the store. It is idempotent.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	err := s.text.Close()
	if err == nil && s.dirty {
		if rerr := os.Remove(filepath.Join(s.dir, "dirty")); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
			err = rerr
		}
	}
	s.release()
	if err != nil {
		return fmt.Errorf("vecstore: close: %w", err)
	}
	return nil
}

// Search runs req. Mode "" means hybrid when both Vector and Text are set,
// otherwise dense or keyword by whichever is set. Dense needs Vector (a
// zero vector matches nothing); keyword with no searchable text returns no
// hits; hybrid uses whichever of the two is given. TopK <= 0 means
// DefaultTopK. Scores: cosine similarity (dense), BM25 (keyword), RRF
// (hybrid); MinScore applies to the mode's score, and 0 means no minimum
// (negative cosines are kept). Hits carry the chunk's
// id, document, text and metadata but not its vector.
func (s *Store) Search(ctx context.Context, req activities.SearchRequest) ([]activities.Hit, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	mode, k := req.Resolve()
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, ErrClosed
	}
	var hits []activities.Hit
	var err error
	switch mode {
	case activities.SearchDense:
		if len(req.Vector) == 0 {
			return nil, errors.New("vecstore: dense search needs a query vector")
		}
		hits, err = s.dense(ctx, req.Vector, k, req.Filter)
	case activities.SearchKeyword:
		hits, err = s.keyword(ctx, req.Text, k, req.Filter)
	case activities.SearchHybrid:
		if len(req.Vector) == 0 && req.Text == "" {
			return nil, errors.New("vecstore: hybrid search needs a query vector or text")
		}
		hits, err = s.hybrid(ctx, req, k)
	default:
		return nil, fmt.Errorf("vecstore: unknown search mode %q", req.Mode)
	}
	if err != nil {
		return nil, err
	}
	return req.Keep(hits, k), nil
}

func matches(md, filter map[string]string) bool {
	for k, v := range filter {
		got, ok := md[k]
		if !ok || got != v {
			return false
		}
	}
	return true
}

func chunkOf(id, text string, md map[string]string) activities.Chunk {
	c := activities.Chunk{ID: id, DocumentID: md[keyDoc], Text: text}
	for k, v := range md {
		if len(k) > 0 && k[0] == 0 {
			continue
		}
		if c.Metadata == nil {
			c.Metadata = make(map[string]string, len(md))
		}
		c.Metadata[k] = v
	}
	return c
}

func (s *Store) dense(ctx context.Context, vec []float32, k int, filter map[string]string) ([]activities.Hit, error) {
	if s.dim == 0 {
		return nil, nil // nothing ever stored
	}
	if len(vec) != s.dim {
		return nil, s.dimError("the query vector", len(vec))
	}
	q, zero, err := normalise(vec)
	if err != nil {
		return nil, fmt.Errorf("vecstore: query vector: %w", err)
	}
	// chromem-go ranks in parallel, so which of several equally similar
	// chunks makes the cut varies between runs: ask for a few more and
	// break ties by id.
	n := min(k+denseTieSlack, s.col.Count())
	if zero || n == 0 {
		return nil, nil
	}
	where := make(map[string]string, len(filter)+1)
	for key, v := range filter {
		if len(key) > 0 && key[0] == 0 {
			return nil, nil
		}
		where[key] = v
	}
	where[keyZero] = "0"
	rs, err := s.col.QueryEmbedding(ctx, q, n, where, nil)
	if err != nil {
		return nil, fmt.Errorf("vecstore: dense search: %w", err)
	}
	hits := make([]activities.Hit, 0, len(rs))
	for _, r := range rs {
		if !matches(r.Metadata, filter) {
			continue // chromem-go lets "" match a missing key
		}
		hits = append(hits, activities.Hit{Chunk: chunkOf(r.ID, r.Content, r.Metadata), Score: float64(r.Similarity)})
	}
	slices.SortStableFunc(hits, func(a, b activities.Hit) int {
		if c := cmp.Compare(b.Score, a.Score); c != 0 {
			return c
		}
		return strings.Compare(a.Chunk.ID, b.Chunk.ID)
	})
	return hits[:min(len(hits), k)], nil
}

// denseTieSlack is how many extra results a dense search asks for, so that
// ties at the cut are broken by id rather than by goroutine scheduling.
const denseTieSlack = 8

func (s *Store) keyword(ctx context.Context, text string, k int, filter map[string]string) ([]activities.Hit, error) {
	if text == "" || s.col.Count() == 0 {
		return nil, nil
	}
	mq := bleve.NewMatchQuery(text)
	mq.SetField(fieldText)
	var q query.Query = mq
	if len(filter) > 0 {
		terms := make([]query.Query, 0, len(filter))
		for key, v := range filter {
			tq := bleve.NewTermQuery(key + metaSep + v)
			tq.SetField(fieldMeta)
			terms = append(terms, tq)
		}
		bq := bleve.NewBooleanQuery()
		bq.AddMust(mq)
		bq.AddFilter(bleve.NewConjunctionQuery(terms...))
		q = bq
	}
	req := bleve.NewSearchRequestOptions(q, k, 0, false)
	req.SortBy([]string{"-_score", "_id"}) // ties by id, not by segment order
	res, err := s.text.SearchInContext(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("vecstore: keyword search: %w", err)
	}
	hits := make([]activities.Hit, 0, len(res.Hits))
	for _, h := range res.Hits {
		d, err := s.col.GetByID(ctx, h.ID)
		if err != nil {
			continue // deleted meanwhile: cannot happen under the lock
		}
		if !matches(d.Metadata, filter) {
			continue
		}
		hits = append(hits, activities.Hit{Chunk: chunkOf(d.ID, d.Content, d.Metadata), Score: h.Score})
	}
	return hits, nil
}

func (s *Store) hybrid(ctx context.Context, req activities.SearchRequest, k int) ([]activities.Hit, error) {
	depth := max(4*k, 50)
	var lists [][]activities.Hit
	if len(req.Vector) > 0 {
		d, err := s.dense(ctx, req.Vector, depth, req.Filter)
		if err != nil {
			return nil, err
		}
		lists = append(lists, d)
	}
	if req.Text != "" {
		kw, err := s.keyword(ctx, req.Text, depth, req.Filter)
		if err != nil {
			return nil, err
		}
		lists = append(lists, kw)
	}
	return activities.FuseRRF(lists...), nil
}
