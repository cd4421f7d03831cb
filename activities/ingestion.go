package activities

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Ingest holds the ports of the ingestion activities: documents are read
// from a path the worker can see, chunked, embedded in batches and upserted.
// Workflow history carries the path, the content hash and counts, never the
// text: each batch re-reads the document and checks its hash, and takes
// its chunks from a small worker-local cache keyed by that hash (or chunks
// it again on a miss: chunking is deterministic), so that a document is
// chunked about once per worker rather than once per batch.
//
// The zero value of the unexported fields is ready to use.
type Ingest struct {
	Store    VectorStore
	Embedder Embedder
	// Parser reads and chunks documents.
	Parser DocumentParser
	// EmbedModel is the embedding model's name.
	EmbedModel string
	// Alternatives are tried, in order, when the collection's dimension
	// is not the embedder's (as retrieval does: the collection keeps one
	// embedding space).
	Alternatives []NamedEmbedder

	cache pieceCache
	dims  sync.Map // embedding model → dimension
}

// PrepareInput names a document to ingest.
type PrepareInput struct {
	DocumentID string `json:"documentId"`
	Path       string `json:"path"`
	BatchSize  int    `json:"batchSize"`
	// Source names the document in errors (an upload's file name); the
	// path, a server detail, never appears in them.
	Source string `json:"source,omitempty"`
}

// DeleteInput names a document whose chunks to delete.
type DeleteInput struct {
	DocumentID string `json:"documentId"`
}

// PrepareResult describes the document's chunks.
type PrepareResult struct {
	Hash    string `json:"hash"`
	Bytes   int    `json:"bytes"`
	Chunks  int    `json:"chunks"`
	Batches int    `json:"batches"`
}

// PrepareDocument reads and chunks a document and removes the chunks an
// earlier version of it left in the store.
func (a *Ingest) PrepareDocument(ctx context.Context, in PrepareInput) (PrepareResult, error) {
	defer keepAlive(ctx)()
	pieces, doc, err := a.pieces(in.DocumentID, in.Path, in.Source, "")
	if err != nil {
		return PrepareResult{}, err
	}
	if err := a.Store.DeleteDocument(ctx, in.DocumentID); err != nil {
		return PrepareResult{}, fmt.Errorf("delete old chunks of %s: %w", in.DocumentID, err)
	}
	size := max(in.BatchSize, 1)
	return PrepareResult{Hash: doc.Hash, Bytes: doc.Bytes, Chunks: len(pieces), Batches: (len(pieces) + size - 1) / size}, nil
}

// DeleteDocumentChunks removes every chunk of a document from the store; a
// document without chunks is not an error, so a retry is harmless.
func (a *Ingest) DeleteDocumentChunks(ctx context.Context, in DeleteInput) error {
	defer keepAlive(ctx)()
	if err := a.Store.DeleteDocument(ctx, in.DocumentID); err != nil {
		return fmt.Errorf("delete chunks of %s: %w", in.DocumentID, err)
	}
	return nil
}

// BatchInput is one batch of a prepared document.
type BatchInput struct {
	DocumentID string `json:"documentId"`
	Path       string `json:"path"`
	Hash       string `json:"hash"`
	Batch      int    `json:"batch"`
	BatchSize  int    `json:"batchSize"`
	// Source is what the chunks name as their source (metadata "source");
	// "" means Path.
	Source string `json:"source,omitempty"`
	// Tenant owns the document (metadata MetaTenant; "" is the default).
	Tenant string `json:"tenant,omitempty"`
}

// IngestBatch embeds and upserts chunks [Batch*BatchSize, (Batch+1)*BatchSize)
// of a prepared document. Upserts are by chunk id, so a retry is harmless.
func (a *Ingest) IngestBatch(ctx context.Context, in BatchInput) (int, error) {
	defer keepAlive(ctx)()
	pieces, _, err := a.pieces(in.DocumentID, in.Path, in.Source, in.Hash)
	if err != nil {
		return 0, err
	}
	size := max(in.BatchSize, 1)
	lo, hi := in.Batch*size, min((in.Batch+1)*size, len(pieces))
	if lo >= hi {
		return 0, nil
	}
	batch := pieces[lo:hi]
	texts := make([]string, len(batch))
	for i, p := range batch {
		texts[i] = p.Text
	}
	info, err := a.Store.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("embed batch %d of %s: collection info: %w", in.Batch, in.DocumentID, err)
	}
	embedders := append([]NamedEmbedder{{Embedder: a.Embedder, Model: a.EmbedModel}}, a.Alternatives...)
	vectors, _, err := embedFor(ctx, embedders, &a.dims, texts, info)
	if err != nil {
		return 0, withContext(fmt.Sprintf("embed batch %d of %s", in.Batch, in.DocumentID), err)
	}
	source := in.Source
	if source == "" {
		source = in.Path
	}
	chunks := make([]Chunk, len(batch))
	for i, p := range batch {
		md := map[string]string{"source": source, "chunk": strconv.Itoa(p.Index)}
		maps.Copy(md, p.Metadata)
		md[MetaTenant] = TenantOf(in.Tenant)
		chunks[i] = Chunk{ID: p.ID, DocumentID: in.DocumentID, Text: p.Text, Vector: vectors[i], Metadata: md}
	}
	if err := a.Store.Upsert(ctx, chunks); err != nil {
		err = fmt.Errorf("upsert batch %d of %s: %w", in.Batch, in.DocumentID, err)
		if errors.Is(err, ErrDimension) {
			return 0, Permanent(CodeDimensionMismatch, err.Error(), err)
		}
		return 0, err
	}
	return len(chunks), nil
}

// pieces reads and chunks a document; both steps fail permanently (a file
// that cannot be read or chunked now will not be on a retry). The error's
// message says why (e.g. the bad line of a JSONL document) and names the
// document by source (or its id), never by its path on the worker. With
// wantHash set, a document whose bytes no longer have that hash is refused.
func (a *Ingest) pieces(documentID, path, source, wantHash string) ([]Piece, docInfo, error) {
	name := cmp.Or(source, documentID)
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, docInfo{}, Permanent(CodeInvalidArgument, fmt.Sprintf("read %s: %s", name, fileError(err)), nil)
	}
	h := sha256.Sum256(b)
	key := pieceKey{documentID: documentID, ext: strings.ToLower(filepath.Ext(path)), hash: hex.EncodeToString(h[:])}
	info := docInfo{Hash: key.hash, Bytes: len(b)}
	if wantHash != "" && key.hash != wantHash {
		return nil, info, Permanent(CodeDocumentChanged, fmt.Sprintf("%s changed during its ingestion: ingest it again", name), nil)
	}
	if pieces, ok := a.cache.get(key); ok {
		return pieces, info, nil
	}
	pieces, err := a.Parser.Parse(documentID, key.ext, b)
	if err != nil {
		return nil, info, Permanent(CodeInvalidArgument, fmt.Sprintf("read %s: %v", name, err), nil)
	}
	a.cache.put(key, pieces)
	return pieces, info, nil
}

// docInfo is what the ingestion records of a document's bytes.
type docInfo struct {
	Hash  string
	Bytes int
}

// fileError describes a failed read without the path (a server detail).
func fileError(err error) string {
	var pe *fs.PathError
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "the worker cannot find its file (with separate api and worker processes, CTXFLOW_UPLOAD_DIR must be one volume shared at the same path)"
	case errors.As(err, &pe):
		return pe.Op + ": " + pe.Err.Error()
	}
	return err.Error()
}

// Bounds of the chunk cache: a few documents' chunks at most.
const (
	pieceCacheEntries = 8
	pieceCacheBytes   = 128 << 20
)

// pieceKey names a chunked document: the same bytes, read the same way
// for the same document id give the same pieces (a worker has one parser).
type pieceKey struct {
	documentID, ext, hash string
}

type pieceEntry struct {
	key    pieceKey
	pieces []Piece
	bytes  int
}

// pieceCache is a small LRU of chunked documents; safe for concurrent use.
// Cached pieces are shared: callers must not modify them.
type pieceCache struct {
	mu      sync.Mutex
	entries []pieceEntry // most recently used last
}

func (c *pieceCache) get(k pieceKey) ([]Piece, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, e := range c.entries {
		if e.key == k {
			c.entries = append(append(c.entries[:i:i], c.entries[i+1:]...), e)
			return e.pieces, true
		}
	}
	return nil, false
}

func (c *pieceCache) put(k pieceKey, pieces []Piece) {
	n := 0
	for _, p := range pieces {
		n += len(p.Text) + len(p.ID) + 64
	}
	if n > pieceCacheBytes {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries = slices.DeleteFunc(c.entries, func(e pieceEntry) bool { return e.key == k })
	c.entries = append(c.entries, pieceEntry{key: k, pieces: pieces, bytes: n})
	total := 0
	for _, e := range c.entries {
		total += e.bytes
	}
	for len(c.entries) > pieceCacheEntries || total > pieceCacheBytes {
		total -= c.entries[0].bytes
		c.entries = c.entries[1:]
	}
}
