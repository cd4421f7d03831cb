// Package vecstore is the embedded, persistent VectorStore: dense cosine
// search over the chunks' vectors (an exact scan for small collections and
// selective filters, an HNSW graph above; see ann.go), keyword BM25 search
// on a bleve (scorch) index whose analyser adds Chinese words to CJK
// bigrams (analyzer.go), and hybrid search fusing both by reciprocal rank.
//
// The chunk log (see log.go) is the source of truth for chunks (id,
// document, text, metadata, unit vector): every write is appended to it and
// fsynced before it is applied, and a crash can damage only its last
// record, which Open cuts off (logged) so that the batch is written again by
// its retried activity. Chunks are held in memory. The bleve index is
// derived from them and rebuilt when it is missing, unreadable or possibly
// stale (the previous process did not Close cleanly); so is the dense
// index, saved at Close and trusted only when it cannot be stale.
//
// Layout under Options.Dir, one folder per collection:
//
//	<Dir>/<collection>/meta.json   name and dimension
//	<Dir>/<collection>/chunks.log  the chunk log
//	<Dir>/<collection>/text/       bleve scorch index
//	<Dir>/<collection>/dense.hnsw  the HNSW graph (hnsw_file.go)
//	<Dir>/<collection>/dirty       present while a process has unflushed writes
//
// A collection written by an earlier version (chromem-go files under
// vectors/) is imported into the log once, at Open.
package vecstore

import (
	"cmp"
	"container/heap"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
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
	"github.com/blevesearch/bleve/v2/index/scorch"
	"github.com/blevesearch/bleve/v2/mapping"
	"github.com/blevesearch/bleve/v2/search/query"
	index "github.com/blevesearch/bleve_index_api"

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
	// NoSync skips the fsync of each write: a write then survives a crash
	// of the process but not of the machine (tests, benchmarks).
	NoSync bool
	// Logger reports damage found and repaired at Open; default slog's.
	Logger *slog.Logger
}

// Store is an embedded VectorStore. It is safe for concurrent use.
type Store struct {
	mu     sync.RWMutex
	name   string
	dir    string // collection folder, "" in memory
	dim    int
	chunks map[string]*entry
	byDoc  map[string]map[string]struct{} // document id → chunk ids
	// terms holds, for each metadata key=value, the chunks with vectors
	// that have it (filtered dense search, ann.go).
	terms map[string]map[*entry]struct{}
	// rows are the chunks with a non-zero vector, in no order: the exact
	// scan walks a slice, twice as fast as walking the map.
	rows   []*entry
	ann    annState
	text   bleve.Index
	log    *logFile // nil in memory
	live   int64    // bytes of the log's records that are still current
	dirty  bool     // dirty marker written by this process
	closed bool
	logger *slog.Logger
}

var _ activities.VectorStore = (*Store)(nil)

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

// Open opens (creating if needed) the collection described by opts. The
// dense index of a large collection is built in the background (ann.go).
func Open(opts Options) (*Store, error) {
	return openWith(opts, defaultANN)
}

func openWith(opts Options, ann annConfig) (*Store, error) {
	name := opts.Collection
	if name == "" {
		name = "default"
	}
	if opts.Dimension < 0 {
		return nil, fmt.Errorf("vecstore: negative dimension %d", opts.Dimension)
	}
	s := &Store{
		name:   name,
		dim:    opts.Dimension,
		chunks: map[string]*entry{},
		byDoc:  map[string]map[string]struct{}{},
		terms:  map[string]map[*entry]struct{}{},
		ann:    annState{cfg: ann, stop: make(chan struct{}), saved: -1},
		logger: cmp.Or(opts.Logger, slog.Default()),
	}
	if opts.Dir == "" {
		text, err := bleve.NewUsing("", newMapping(), scorch.Name, scorch.Name, nil)
		if err != nil {
			return nil, fmt.Errorf("vecstore: keyword index: %w", err)
		}
		s.text = text
		s.maybeIndex()
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
	if err := s.openDisk(!opts.NoSync); err != nil {
		if s.text != nil {
			_ = s.text.Close()
		}
		if s.log != nil {
			_ = s.log.close()
		}
		s.release()
		return nil, err
	}
	s.maybeIndex()
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

func newMapping() mapping.IndexMapping {
	im := bleve.NewIndexMapping()
	im.ScoringModel = index.BM25Scoring
	im.DefaultAnalyzer = analyzerName
	doc := bleve.NewDocumentStaticMapping()
	tf := bleve.NewTextFieldMapping()
	tf.Analyzer = analyzerName
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

func (s *Store) openDisk(sync bool) error {
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
	_, dirtyErr := os.Stat(filepath.Join(s.dir, "dirty"))
	logPath := filepath.Join(s.dir, logName)
	if err := s.importLegacy(logPath); err != nil {
		return err
	}
	good, damage, err := replay(logPath, s.apply)
	if err != nil {
		return fmt.Errorf("vecstore: read %s: %w", logPath, err)
	}
	if damage != "" {
		// A crash tore the last write: its batch is written again when its
		// activity is retried (or the document is ingested again).
		s.logger.Warn("vecstore: chunk log damaged, cut back to its last good record",
			"collection", s.name, "damage", damage, "kept bytes", good)
	}
	if s.log, err = openLog(logPath, good, sync); err != nil {
		return fmt.Errorf("vecstore: open %s: %w", logPath, err)
	}
	if meta.Dimension == 0 {
		meta.Dimension = s.storedDim()
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
	if err := s.compactIfDue(); err != nil {
		return err
	}
	if err := s.openText(damage != ""); err != nil {
		return err
	}
	s.loadGraph(errors.Is(dirtyErr, os.ErrNotExist) && damage == "", good)
	return nil
}

// apply replays one log record into memory.
func (s *Store) apply(r record) {
	if r.e != nil {
		s.put(r.e)
		return
	}
	for _, id := range r.ids {
		s.remove(id)
	}
}

// put stores e in memory, replacing a chunk with its id.
func (s *Store) put(e *entry) {
	s.remove(e.id)
	s.chunks[e.id] = e
	set := s.byDoc[e.doc]
	if set == nil {
		set = map[string]struct{}{}
		s.byDoc[e.doc] = set
	}
	set[e.id] = struct{}{}
	s.live += int64(frameHeader + len(encodeUpsert(nil, e)))
	s.indexPut(e)
}

func (s *Store) remove(id string) {
	old, ok := s.chunks[id]
	if !ok {
		return
	}
	delete(s.chunks, id)
	if set := s.byDoc[old.doc]; set != nil {
		delete(set, id)
		if len(set) == 0 {
			delete(s.byDoc, old.doc)
		}
	}
	s.live -= int64(frameHeader + len(encodeUpsert(nil, old)))
	s.indexRemove(old)
}

// storedDim is the dimension of the stored vectors (0 for none).
func (s *Store) storedDim() int {
	for _, e := range s.chunks {
		if !e.zero {
			return len(e.vec)
		}
	}
	return 0
}

// compactIfDue rewrites the log with the current chunks when most of it is
// dead and it is large enough to matter.
func (s *Store) compactIfDue() error {
	if s.log == nil || s.log.size < 1<<20 || s.log.size < 2*s.live {
		return nil
	}
	return s.compact()
}

// compact rewrites the log with the current chunks only.
func (s *Store) compact() error {
	ids := make([]string, 0, len(s.chunks))
	for id := range s.chunks {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var b, payload []byte
	for _, id := range ids {
		payload = encodeUpsert(payload[:0], s.chunks[id])
		b = frame(b, payload)
	}
	path := filepath.Join(s.dir, logName)
	if err := writeLog(path, b); err != nil {
		return fmt.Errorf("vecstore: compact %s: %w", path, err)
	}
	_ = s.log.close()
	var err error
	if s.log, err = openLog(path, int64(len(b)), s.log.sync); err != nil {
		return fmt.Errorf("vecstore: reopen %s: %w", path, err)
	}
	return nil
}

// openText opens the keyword index, or rebuilds it from the chunks when
// the previous process did not close cleanly, rebuild is set, it does not
// match them, or it was analysed otherwise (an index written before the
// Chinese segmenter: the questions must be analysed as the chunks were).
func (s *Store) openText(rebuild bool) error {
	textDir := filepath.Join(s.dir, "text")
	_, dirtyErr := os.Stat(filepath.Join(s.dir, "dirty"))
	cfg := map[string]any{"bolt_timeout": "2s"}
	if dirtyErr != nil && !rebuild { // clean: try the persisted keyword index
		text, err := bleve.OpenUsing(textDir, cfg)
		if err == nil {
			n, cerr := text.DocCount()
			if cerr == nil && int(n) == len(s.chunks) && textAnalyzer(text) == analyzerName {
				s.text = text
				return nil
			}
			_ = text.Close()
		} else if isLocked(err) {
			return fmt.Errorf("vecstore: collection %q in %s is in use by another process: %w", s.name, s.dir, err)
		}
	}
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
	b := text.NewBatch()
	for _, e := range s.chunks {
		if err := b.Index(e.id, textDoc(e.text, e.meta)); err != nil {
			return fmt.Errorf("vecstore: rebuild keyword index: %w", err)
		}
		if b.Size() >= batchSize {
			if err := text.Batch(b); err != nil {
				return fmt.Errorf("vecstore: rebuild keyword index: %w", err)
			}
			b = text.NewBatch()
		}
	}
	if err := text.Batch(b); err != nil {
		return fmt.Errorf("vecstore: rebuild keyword index: %w", err)
	}
	if err := os.Remove(filepath.Join(s.dir, "dirty")); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("vecstore: %w", err)
	}
	return nil
}

// textAnalyzer names the analyzer of idx's text field.
func textAnalyzer(idx bleve.Index) string { return idx.Mapping().AnalyzerNameForPath(fieldText) }

func isLocked(err error) bool {
	return err != nil && strings.Contains(err.Error(), "timeout")
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
	f, err := os.Create(tmp)
	if err == nil {
		_, err = f.Write(b)
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(s.dir, "meta.json"))
	}
	if err != nil {
		return fmt.Errorf("vecstore: write meta.json: %w", err)
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
	// The saved graph is stale from now on (written again at Close).
	if err := os.Remove(filepath.Join(s.dir, graphName)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("vecstore: %w", err)
	}
	s.dirty = true
	return nil
}

func textDoc(text string, md map[string]string) map[string]any {
	meta := make([]string, 0, len(md))
	for k, v := range md {
		meta = append(meta, k+metaSep+v)
	}
	return map[string]any{fieldText: text, fieldMeta: meta}
}

func (s *Store) dimError(what string, got int) error {
	return fmt.Errorf("vecstore: %s has %d dimensions but collection %q has %d: %w; embed with the model the collection was built with, or use a new collection (or Dir) for a %d-dimensional model",
		what, got, s.name, s.dim, ErrDimension, got)
}

// normalise returns v scaled to unit length, or zero=true for a zero
// vector.
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
// The batch is in the chunk log, fsynced, before it is searchable.
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
	last := make(map[string]int, len(chunks)) // the last occurrence of an id wins
	for i, c := range chunks {
		switch {
		case c.ID == "":
			return fmt.Errorf("vecstore: chunk %d has no id", i)
		case len(c.Vector) == 0:
			return fmt.Errorf("vecstore: chunk %q has no vector", c.ID)
		case len(c.Vector) != dim && s.dim == 0:
			return fmt.Errorf("vecstore: chunks in one batch have %d and %d dimensions (chunk %q): %w", dim, len(c.Vector), c.ID, ErrDimension)
		case len(c.Vector) != dim:
			return s.dimError(fmt.Sprintf("chunk %q", c.ID), len(c.Vector))
		}
		last[c.ID] = i
	}
	entries := make([]*entry, 0, len(last))
	var buf, payload []byte
	batch := s.text.NewBatch()
	for i, c := range chunks {
		if last[c.ID] != i {
			continue
		}
		vec, zero, err := normalise(c.Vector)
		if err != nil {
			return fmt.Errorf("vecstore: chunk %q: %w", c.ID, err)
		}
		e := &entry{id: c.ID, doc: c.DocumentID, text: c.Text, meta: maps(c.Metadata), vec: vec, zero: zero}
		entries = append(entries, e)
		payload = encodeUpsert(payload[:0], e)
		buf = frame(buf, payload)
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
	if err := s.write(buf); err != nil {
		return err
	}
	for _, e := range entries {
		s.put(e)
	}
	s.maybeIndex()
	if err := s.text.Batch(batch); err != nil {
		return fmt.Errorf("vecstore: keyword index: %w", err)
	}
	return nil
}

// write appends framed records to the log (persistent stores).
func (s *Store) write(buf []byte) error {
	if s.log == nil {
		return nil
	}
	if err := s.markDirty(); err != nil {
		return err
	}
	if err := s.log.append(buf); err != nil {
		return fmt.Errorf("vecstore: write the chunk log: %w", err)
	}
	return nil
}

func maps(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
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
	return s.deleteChunks(ids)
}

// deleteChunks removes the chunks ids from the log, the index and the
// keyword index (the caller holds the lock).
func (s *Store) deleteChunks(ids []string) error {
	slices.Sort(ids)
	if err := s.write(frame(nil, encodeDelete(nil, ids))); err != nil {
		return err
	}
	batch := s.text.NewBatch()
	for _, id := range ids {
		s.remove(id)
		batch.Delete(id)
	}
	s.maybeIndex()
	if err := s.text.Batch(batch); err != nil {
		return fmt.Errorf("vecstore: keyword index: %w", err)
	}
	return s.compactIfDue()
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
	return activities.CollectionInfo{Name: s.name, Dimension: s.dim, Count: len(s.chunks)}, nil
}

// Close flushes and releases the store, and stops a build of the dense
// index. It is idempotent.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.ann.stop)
	defer s.ann.bg.Wait() // after the unlock: a build takes the lock to end
	defer s.mu.Unlock()
	if err := s.saveGraph(); err != nil {
		s.logger.Warn("vecstore: the dense index will be rebuilt at the next Open", "collection", s.name, "error", err)
	}
	err := s.text.Close()
	if s.log != nil {
		if cerr := s.log.close(); err == nil {
			err = cerr
		}
	}
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
		hits, err = s.dense(req.Vector, k, req.Filter)
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

func (e *entry) chunk() activities.Chunk {
	return activities.Chunk{ID: e.id, DocumentID: e.doc, Text: e.text, Metadata: maps(e.meta)}
}

// scored is a candidate of a dense search.
type scored struct {
	e     *entry
	score float32
}

// worse orders candidates: lower score, then higher id, is worse, so that
// ties are broken by id whatever the map's order.
func worse(a, b scored) bool {
	if a.score != b.score {
		return a.score < b.score
	}
	return a.e.id > b.e.id
}

// topHeap keeps the best k candidates, the worst at the root.
type topHeap []scored

func (h topHeap) Len() int           { return len(h) }
func (h topHeap) Less(i, j int) bool { return worse(h[i], h[j]) }
func (h topHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *topHeap) Push(x any)        { *h = append(*h, x.(scored)) }
func (h *topHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// dense is cosine search: every stored vector is unit length, so the dot
// product with the normalised query is the cosine. It is exact for small
// collections and selective filters, approximate (the HNSW graph) otherwise;
// see ann.go.
func (s *Store) dense(vec []float32, k int, filter map[string]string) ([]activities.Hit, error) {
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
	if zero || k <= 0 {
		return nil, nil
	}
	set, n := s.candidates(filter)
	if n == 0 {
		return nil, nil
	}
	var top []scored
	if g := s.ann.g; g != nil && g.ef >= 0 && n >= s.ann.cfg.ExactBelow {
		top = s.approx(g, q, k, filter, n)
	}
	if top != nil {
		s.ann.approx.Add(1)
	} else {
		top = s.exact(q, k, filter, set)
		s.ann.exact.Add(1)
	}
	hits := make([]activities.Hit, len(top))
	for i, c := range top {
		score := float64(c.score)
		hits[i] = activities.Hit{Chunk: c.e.chunk(), Score: score, Similarity: &score}
	}
	return hits, nil
}

// approx searches the graph for the k chunks nearest q that match filter,
// of at most n; nil when the walk found fewer than k, or when, filtered, it
// would cost more than an exact scan of the n (the scan answers then).
func (s *Store) approx(g *graph, q []float32, k int, filter map[string]string, n int) []scored {
	var accept func(*entry) bool
	budget := 0
	if len(filter) > 0 {
		accept = func(e *entry) bool { return matches(e.meta, filter) }
		budget = max(n, 1)
	}
	ef := g.ef
	if ef == 0 { // not calibrated yet
		ef = s.ann.cfg.Params.EfSearch
	}
	cs, exhausted := g.search(q, max(ef, k), accept, budget)
	if exhausted || len(cs) < k {
		return nil
	}
	top := make([]scored, len(cs))
	for i, c := range cs {
		e := g.ents[c.id]
		top[i] = scored{e: e, score: dot(q, e.vec)} // the exact scan's score, bit for bit
	}
	sortBest(top)
	return top[:k]
}

// scanShard is the fewest rows a goroutine of the exact scan takes: a scan
// of 100,000 rows of 384 dimensions takes 13 ms on one core of this machine,
// 7 on two.
const scanShard = 16384

// exact scans the chunks of set (all of them when nil) that match filter;
// a scan of all the rows is shared among the processors.
func (s *Store) exact(q []float32, k int, filter map[string]string, set map[*entry]struct{}) []scored {
	if set != nil {
		h := make(topHeap, 0, k+1)
		for e := range set {
			h.offer(q, e, k, filter)
		}
		sortBest(h)
		return h
	}
	parts := max(1, min(runtime.GOMAXPROCS(0), len(s.rows)/scanShard))
	tops := make([]topHeap, parts)
	var wg sync.WaitGroup
	for p := range parts {
		rows := s.rows[p*len(s.rows)/parts : (p+1)*len(s.rows)/parts]
		wg.Go(func() {
			h := make(topHeap, 0, k+1)
			for _, e := range rows {
				h.offer(q, e, k, filter)
			}
			tops[p] = h
		})
	}
	wg.Wait()
	top := slices.Concat(tops...)
	sortBest(top)
	return top[:min(k, len(top))]
}

// offer keeps e among the best k when it matches filter and scores better
// than the worst of them.
func (h *topHeap) offer(q []float32, e *entry, k int, filter map[string]string) {
	if e.zero || !matches(e.meta, filter) {
		return
	}
	c := scored{e: e, score: dot(q, e.vec)}
	if len(*h) < k {
		heap.Push(h, c)
	} else if worse((*h)[0], c) {
		(*h)[0] = c
		heap.Fix(h, 0)
	}
}

// sortBest sorts best first: higher score, then lower id.
func sortBest(cs []scored) {
	slices.SortFunc(cs, func(a, b scored) int {
		if worse(a, b) {
			return 1
		}
		if worse(b, a) {
			return -1
		}
		return 0
	})
}

func (s *Store) keyword(ctx context.Context, text string, k int, filter map[string]string) ([]activities.Hit, error) {
	if text == "" || len(s.chunks) == 0 {
		return nil, nil
	}
	mq := s.matchQuery(text)
	if mq == nil {
		return nil, nil
	}
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
		e, ok := s.chunks[h.ID]
		if !ok || !matches(e.meta, filter) {
			continue
		}
		hits = append(hits, activities.Hit{Chunk: e.chunk(), Score: h.Score})
	}
	return hits, nil
}

// MaxQueryTerms bounds the distinct terms a keyword search looks for: its
// work grows with them, not with the question's length (a 32 KB question
// made thousands of term searches and minutes of CPU). The first ones of
// the question are kept.
const MaxQueryTerms = 64

// matchQuery is bleve's match query (a disjunction of the analysed terms)
// over at most MaxQueryTerms distinct terms, a term that occurs n times
// boosted n times instead of searched n times. For a question without
// repeated terms under the bound it is the match query itself; nil when
// the text has no term.
func (s *Store) matchQuery(text string) *query.DisjunctionQuery {
	m := s.text.Mapping()
	tokens := m.AnalyzerNamed(m.AnalyzerNameForPath(fieldText)).Analyze([]byte(text))
	count := map[string]int{}
	var terms []string
	for _, tok := range tokens {
		t := string(tok.Term)
		if _, ok := count[t]; !ok {
			if len(terms) == MaxQueryTerms {
				continue
			}
			terms = append(terms, t)
		}
		count[t]++
	}
	if len(terms) == 0 {
		return nil
	}
	tqs := make([]query.Query, len(terms))
	for i, t := range terms {
		tq := bleve.NewTermQuery(t)
		tq.SetField(fieldText)
		tq.SetBoost(float64(count[t]))
		tqs[i] = tq
	}
	q := bleve.NewDisjunctionQuery(tqs...)
	q.SetMin(1)
	return q
}

// hybrid is [activities.FuseHybrid] over this store's two rankings.
func (s *Store) hybrid(ctx context.Context, req activities.SearchRequest, k int) ([]activities.Hit, error) {
	depth := activities.HybridDepth(k)
	var dense, kw []activities.Hit
	var err error
	if len(req.Vector) > 0 {
		if dense, err = s.dense(req.Vector, depth, req.Filter); err != nil {
			return nil, err
		}
	}
	if req.Text != "" {
		if kw, err = s.keyword(ctx, req.Text, depth, req.Filter); err != nil {
			return nil, err
		}
	}
	return activities.FuseHybrid(dense, kw), nil
}

// EraseTenant implements [activities.TenantEraser]: it removes every chunk
// of the tenant's documents (chunks without a tenant are left alone).
func (s *Store) EraseTenant(ctx context.Context, tenant string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	var ids []string
	for id, e := range s.chunks {
		if e.meta[activities.MetaTenant] == tenant {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	return s.deleteChunks(ids)
}

// Scrub implements [activities.Scrubber]: a deleted chunk's text stays in
// the chunk log until it is compacted and in the keyword index's segments
// until they merge, so Scrub rewrites both now (the log with the live
// chunks only, the index from them): after it no file of the collection
// holds a deleted chunk. It costs a rebuild of the keyword index.
func (s *Store) Scrub(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if s.dir == "" {
		return nil
	}
	if err := s.compact(); err != nil {
		return err
	}
	if err := s.text.Close(); err != nil {
		return fmt.Errorf("vecstore: close the keyword index: %w", err)
	}
	if err := s.openText(true); err != nil { // removes the dirty marker:
		return err
	}
	s.dirty = false // so it is written again, the index being new
	return s.markDirty()
}
