package workflows

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/ctxflow/ctxflow/activities"
)

// Names of the ingestion workflow.
const (
	IngestWorkflowName = "IngestWorkflow"
	QueryProgress      = "progress"
)

// DocumentKey names a tenant's document in the workflows and the store:
// the id itself for the default tenant, <tenant>/<id> for the others (no
// id holds a '/', so no two tenants' documents share a key).
func DocumentKey(tenant, documentID string) string {
	if tenant == "" || tenant == DefaultTenant {
		return documentID
	}
	return tenant + "/" + documentID
}

var unsafeIDRun = regexp.MustCompile(`[^A-Za-z0-9._:-]+`)

// DocumentID is the id of a document given without one, by `ctxflow ingest`
// and POST /v1/documents alike: its file name (the base name) when that is
// a valid id; else the name made safe plus a short hash of the name (so
// that names differing only in unsafe characters do not collide); else,
// without a usable name, doc-<hash of the bytes>. The same file name gives
// the same id, so a new version of a file replaces the old one, however it
// was ingested.
func DocumentID(name string, sum [32]byte) string {
	name = filepath.Base(filepath.ToSlash(name))
	if name == "." || name == "/" {
		name = ""
	}
	if name != "" && ValidateID("documentId", name) == nil {
		return name
	}
	if safe := strings.Trim(unsafeIDRun.ReplaceAllString(name, "_"), "._:-"); safe != "" {
		h := sha256.Sum256([]byte(name))
		id := safe[:min(len(safe), 110)] + "-" + hex.EncodeToString(h[:4])
		if ValidateID("documentId", id) == nil {
			return id
		}
	}
	return "doc-" + hex.EncodeToString(sum[:8])
}

// IngestInput names a document the workers can read.
type IngestInput struct {
	DocumentID string `json:"documentId"`
	Path       string `json:"path"`
	// BatchSize is how many chunks one activity embeds (default 32).
	BatchSize int `json:"batchSize,omitempty"`
	// Source is what the chunks name as their source, e.g. an uploaded
	// file's name; "" means Path.
	Source string `json:"source,omitempty"`
	// Tenant owns the document ("" is the default tenant); DocumentID is
	// then its [DocumentKey].
	Tenant string `json:"tenant,omitempty"`
}

// IngestProgress is what the progress query and the result report.
type IngestProgress struct {
	DocumentID string `json:"documentId"`
	Chunks     int    `json:"chunks"`
	Batches    int    `json:"batches"`
	Done       int    `json:"done"` // batches stored
	Stored     int    `json:"stored"`
	Bytes      int    `json:"bytes"`
}

var ia *activities.Ingest // method references only

// ingestHeartbeat bounds the silence of a running ingestion activity (they
// heartbeat while they run): a worker that dies mid-batch is noticed after
// this, not after the activity's 5-minute timeout.
const ingestHeartbeat = 10 * time.Second

// maxIngestBatches bounds one document's batches, so that its history stays
// far below Temporal's limits (about 3 events a batch).
const maxIngestBatches = 5000

// IngestWorkflow reads, chunks, embeds and stores one document. Each batch
// is an activity, so an ingestion survives worker restarts and resumes at
// the batch it was on; re-ingesting the same document replaces its chunks.
func IngestWorkflow(ctx workflow.Context, in IngestInput) (IngestProgress, error) {
	if in.BatchSize <= 0 {
		in.BatchSize = 32
	}
	p := IngestProgress{DocumentID: in.DocumentID}
	if err := workflow.SetQueryHandler(ctx, QueryProgress, func() (IngestProgress, error) { return p, nil }); err != nil {
		return p, fmt.Errorf("set progress query: %w", err)
	}
	actx := func(summary string) workflow.Context {
		return storeCtx(ctx, summary, 5*time.Minute)
	}
	name := in.Source
	if name == "" {
		name = in.Path
	}
	var prep activities.PrepareResult
	err := workflow.ExecuteActivity(actx("read and chunk "+name), ia.PrepareDocument,
		activities.PrepareInput{DocumentID: in.DocumentID, Path: in.Path, BatchSize: in.BatchSize, Source: in.Source}).Get(ctx, &prep)
	if err != nil {
		return p, fmt.Errorf("prepare %s: %w", in.DocumentID, err)
	}
	p.Chunks, p.Batches, p.Bytes = prep.Chunks, prep.Batches, prep.Bytes
	if p.Batches > maxIngestBatches {
		return p, activities.Permanent(activities.CodeInvalidArgument, fmt.Sprintf("%s has %d batches, over the limit of %d: raise the batch size or split the document", name, p.Batches, maxIngestBatches), nil)
	}
	for b := range p.Batches {
		var n int
		err := workflow.ExecuteActivity(actx(fmt.Sprintf("embed and store batch %d/%d", b+1, p.Batches)), ia.IngestBatch,
			activities.BatchInput{DocumentID: in.DocumentID, Path: in.Path, Hash: prep.Hash, Batch: b, BatchSize: in.BatchSize, Source: in.Source, Tenant: in.Tenant}).Get(ctx, &n)
		if err != nil {
			return p, fmt.Errorf("ingest batch %d of %s: %w", b, in.DocumentID, err)
		}
		p.Done++
		p.Stored += n
	}
	return p, nil
}
