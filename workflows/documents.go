package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/ctxflow/ctxflow/activities"
)

// DeleteDocumentWorkflowName names the workflow that deletes a document.
const DeleteDocumentWorkflowName = "DeleteDocumentWorkflow"

// DeleteDocumentInput names the document to delete.
type DeleteDocumentInput struct {
	DocumentID string `json:"documentId"`
}

// DeleteDocumentResult is the outcome of a deletion.
type DeleteDocumentResult struct {
	DocumentID string `json:"documentId"`
	Deleted    bool   `json:"deleted"`
}

// DeleteDocumentWorkflow removes every chunk of a document from the vector
// store. It runs under the document's workflow id ([IngestWorkflowID]), so
// it never overlaps an ingestion of the same document, and the latest run
// under that id says whether the document exists. Deleting a document that
// has no chunks succeeds.
func DeleteDocumentWorkflow(ctx workflow.Context, in DeleteDocumentInput) (DeleteDocumentResult, error) {
	ctx = storeCtx(ctx, "delete the chunks of "+in.DocumentID, 2*time.Minute)
	err := workflow.ExecuteActivity(ctx, ia.DeleteDocumentChunks, activities.DeleteInput{DocumentID: in.DocumentID}).Get(ctx, nil)
	if err != nil {
		return DeleteDocumentResult{DocumentID: in.DocumentID}, fmt.Errorf("delete %s: %w", in.DocumentID, err)
	}
	return DeleteDocumentResult{DocumentID: in.DocumentID, Deleted: true}, nil
}
