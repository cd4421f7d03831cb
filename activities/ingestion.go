package activities

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/sdk/temporal"

	"github.com/ctxflow/ctxflow/activities/ingest"
	"github.com/ctxflow/ctxflow/convo"
)

// Ingest holds the ports of the ingestion activities: documents are read
// from a path the worker can see, chunked, embedded in batches and upserted.
// Workflow history carries the path, the content hash and counts, never the
// text: each batch re-reads and re-chunks the document (chunking is
// deterministic) and checks the hash.
type Ingest struct {
	Store     VectorStore
	Embedder  Embedder
	Tokenizer convo.Tokenizer
	// EmbedModel is the embedding model's name.
	EmbedModel string
	Chunk      ingest.ChunkOptions
}

// ErrTypeDocumentChanged marks a document that changed during its ingestion.
const ErrTypeDocumentChanged = "DocumentChanged"

// PrepareInput names a document to ingest.
type PrepareInput struct {
	DocumentID string `json:"documentId"`
	Path       string `json:"path"`
	BatchSize  int    `json:"batchSize"`
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
	pieces, text, hash, err := a.pieces(in.DocumentID, in.Path)
	if err != nil {
		return PrepareResult{}, err
	}
	if err := a.Store.DeleteDocument(ctx, in.DocumentID); err != nil {
		return PrepareResult{}, fmt.Errorf("delete old chunks of %s: %w", in.DocumentID, err)
	}
	size := max(in.BatchSize, 1)
	return PrepareResult{Hash: hash, Bytes: len(text), Chunks: len(pieces), Batches: (len(pieces) + size - 1) / size}, nil
}

// BatchInput is one batch of a prepared document.
type BatchInput struct {
	DocumentID string `json:"documentId"`
	Path       string `json:"path"`
	Hash       string `json:"hash"`
	Batch      int    `json:"batch"`
	BatchSize  int    `json:"batchSize"`
}

// IngestBatch embeds and upserts chunks [Batch*BatchSize, (Batch+1)*BatchSize)
// of a prepared document. Upserts are by chunk id, so a retry is harmless.
func (a *Ingest) IngestBatch(ctx context.Context, in BatchInput) (int, error) {
	pieces, _, hash, err := a.pieces(in.DocumentID, in.Path)
	if err != nil {
		return 0, err
	}
	if hash != in.Hash {
		return 0, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("%s changed during its ingestion: ingest it again", in.Path), ErrTypeDocumentChanged, nil)
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
	vectors, err := a.Embedder.Embed(ctx, a.EmbedModel, texts)
	if err != nil {
		err = fmt.Errorf("embed batch %d of %s: %w", in.Batch, in.DocumentID, err)
		if IsPermanent(err) {
			return 0, temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeModelPermanent, err)
		}
		return 0, err
	}
	chunks := make([]Chunk, len(batch))
	for i, p := range batch {
		chunks[i] = Chunk{
			ID: p.ID, DocumentID: in.DocumentID, Text: p.Text, Vector: vectors[i],
			Metadata: map[string]string{"source": in.Path, "chunk": fmt.Sprint(p.Index)},
		}
	}
	if err := a.Store.Upsert(ctx, chunks); err != nil {
		err = fmt.Errorf("upsert batch %d of %s: %w", in.Batch, in.DocumentID, err)
		if errors.Is(err, ErrDimension) {
			return 0, temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeBadInput, err)
		}
		return 0, err
	}
	return len(chunks), nil
}

// pieces reads and chunks a document; both steps fail permanently (a file
// that cannot be read or chunked now will not be on a retry).
func (a *Ingest) pieces(documentID, path string) (pieces []ingest.Piece, text, hash string, err error) {
	text, hash, err = ingest.ReadDocument(path)
	if err != nil {
		return nil, "", "", temporal.NewNonRetryableApplicationError(fmt.Sprintf("read %s", path), ErrTypeBadInput, err)
	}
	pieces, err = ingest.Chunk(documentID, text, a.Tokenizer, a.Chunk)
	if err != nil {
		return nil, "", "", temporal.NewNonRetryableApplicationError(fmt.Sprintf("chunk %s", path), ErrTypeBadInput, err)
	}
	return pieces, text, hash, nil
}
