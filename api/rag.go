package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/convo"
	"github.com/ctxflow/ctxflow/workflows"
)

// correctiveRequest is seed 003's request. Absent numbers take the service
// defaults; milvusConfig is refused (the store is the workers' to choose).
type correctiveRequest struct {
	Query               string          `json:"query"`
	TopK                *int            `json:"topK"`
	SimilarityThreshold *float64        `json:"similarityThreshold"`
	MaxRewriteAttempts  *int            `json:"maxRewriteAttempts"`
	GradePassThreshold  *float64        `json:"gradePassThreshold"`
	SearchMode          *string         `json:"searchMode"`
	LLMModel            *string         `json:"llmModel"`
	MilvusConfig        json.RawMessage `json:"milvusConfig"`
}

// correctiveResponse is seed 003's response.
type correctiveResponse struct {
	Success bool `json:"success"`
	workflows.CorrectiveResult
}

// postCorrective runs one corrective retrieval (CorrectiveRAGWorkflow, not
// tied to a session) and answers with its result and trace.
func (s *Server) postCorrective(c *gin.Context) {
	t, err := tenant(c)
	if err != nil {
		writeError(c, err)
		return
	}
	var body correctiveRequest
	if err := bindJSON(c, &body, false); err != nil {
		writeError(c, err)
		return
	}
	if err := workflows.ValidateQuestion("query", body.Query, s.opts.Limits.MaxQuestionBytes); err != nil {
		writeError(c, errInvalid("%s", err))
		return
	}
	if len(body.MilvusConfig) > 0 {
		writeError(c, errInvalid("milvusConfig is not accepted: the workers' vector store is configured by CTXFLOW_COLLECTION (and the store settings) in their environment"))
		return
	}
	cfg, err := workflows.TurnOptions{
		LLMModel: body.LLMModel, TopK: body.TopK, SimilarityThreshold: body.SimilarityThreshold,
		SearchMode: body.SearchMode, MaxRewriteAttempts: body.MaxRewriteAttempts, GradePassThreshold: body.GradePassThreshold,
	}.Apply(s.opts.Defaults)
	if err != nil {
		writeError(c, errInvalid("%s", err))
		return
	}
	in := workflows.CorrectiveInput{
		Query: body.Query, TopK: cfg.TopK, SimilarityThreshold: cfg.SimilarityThreshold,
		MaxRewriteAttempts: cfg.MaxRewriteAttempts, GradePassThreshold: cfg.GradePassThreshold,
		SearchMode: cfg.SearchMode, Model: cfg.LLMModel, IncludeText: true, Limits: s.opts.Limits, Tenant: t,
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), s.opts.TurnWaitTimeout)
	defer cancel()
	id := newID("rag")
	run, err := s.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: "rag/" + id, TaskQueue: workflows.TaskQueue,
		WorkflowExecutionTimeout: s.opts.TurnWaitTimeout + time.Minute,
		StaticSummary:            "Corrective RAG: " + convo.Clip(body.Query, 80),
	}, workflows.CorrectiveRAGWorkflowName, in)
	if err != nil {
		writeError(c, fromTemporal("corrective query", err))
		return
	}
	var res workflows.CorrectiveResult
	if err := run.Get(ctx, &res); err != nil {
		var appErr *temporal.ApplicationError
		var timeout *temporal.TimeoutError
		if errors.As(err, &appErr) || errors.As(err, &timeout) { // the loop ran and its answer failed
			_, msg := rootCause(err)
			writeError(c, failed(activities.CodeOf(err), "corrective query "+run.GetID()+" failed", msg))
			return
		}
		writeError(c, fromTemporal("corrective query "+run.GetID(), err))
		return
	}
	c.Header("X-Workflow-ID", run.GetID())
	c.JSON(http.StatusOK, correctiveResponse{Success: true, CorrectiveResult: res})
}
