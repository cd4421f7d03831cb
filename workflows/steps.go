package workflows

import (
	"fmt"
	"slices"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/convo"
)

// The details each step of a turn records in its trace (the steps query,
// the turn result, the web page's timeline).

// loadDetails are the load_context step's details.
func loadDetails(lc activities.LoadContextResult) map[string]any {
	d := map[string]any{
		"windowMessages": len(lc.WindowIDs), "tokensBefore": lc.TokensBefore,
		"tokensAfter": lc.TokensAfter, "trimmedCount": lc.TrimmedCount,
		"summaryUsed": lc.SummaryUsed, "fallbackTruncation": lc.Degraded,
	}
	if lc.Route != "" {
		d["route"], d["routeReason"] = lc.Route, lc.RouteReason
	}
	return d
}

// generateDetails are the generate step's details: in, the documents
// shown to the model (or, in histories from before the corrective loop,
// those Generate retrieved itself).
func generateDetails(model string, in activities.GenerateInput, gen activities.GenerateResult) map[string]any {
	d := map[string]any{
		"model": model, "engine": gen.Engine, "retrievedDocs": max(len(in.Docs), len(gen.Docs)),
		"promptTokens": gen.PromptTokens, "completionTokens": gen.CompletionTokens,
	}
	if gen.RetrievalError != "" {
		d["retrievalError"] = gen.RetrievalError
	}
	return d
}

// docExcerpt bounds the text a turn's result keeps of each document the
// answer was generated from (bytes): results travel in update results,
// queries and continue-as-new, and the store keeps the whole chunk.
const docExcerpt = 480

// excerpts are docs with their texts clipped to docExcerpt.
func excerpts(docs []activities.Doc) []activities.Doc {
	out := slices.Clone(docs)
	for i := range out {
		out[i].Text = convo.Clip(out[i].Text, docExcerpt)
	}
	return out
}

// maxFilterDetails bounds the relevance-filter verdicts a turn's step
// keeps: turn results travel in update results and in continue-as-new.
const maxFilterDetails = 20

// correctiveDetails are the corrective_rag step's details: the child
// workflow, its decision path, the last grading round and every relevance
// filter verdict (the first maxFilterDetails), in retrieval order.
func correctiveDetails(childID string, out CorrectiveResult) map[string]any {
	g := out.GraderResult
	d := map[string]any{
		"workflowId": childID, "decisionPath": out.Workflow.DecisionPath, "finalQuery": out.Query.Final,
		"rewriteCount": out.Query.RewriteCount, "passRate": g.PassRate, "passCount": g.PassCount,
		"totalCount": g.TotalCount, "usedDocuments": out.Retrieval.FilteredDocuments,
		"model": out.Model, "engine": out.Engine,
	}
	if g.Degraded != "" {
		d["graderDegraded"] = g.Degraded
	}
	for _, n := range out.Workflow.NodeExecutions {
		if n.Node == "retrieve" {
			d["retrieveInWorkflowTask"] = n.InWorkflowTask // the last round's
		}
	}
	if out.Retrieval.Error != "" {
		d["retrievalError"] = out.Retrieval.Error
	}
	var filter []string
	for i, doc := range out.Retrieval.Documents {
		if i == maxFilterDetails {
			filter = append(filter, fmt.Sprintf("… and %d more (see the child workflow)", len(out.Retrieval.Documents)-i))
			break
		}
		filter = append(filter, fmt.Sprintf("%s %s: %s", doc.ID, map[bool]string{true: "kept", false: "dropped"}[doc.FilterKept], doc.FilterReason))
	}
	d["relevanceFilter"] = filter
	return d
}
