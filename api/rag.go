package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"
	"go.temporal.io/sdk/temporal"

	"github.com/ctxflow/ctxflow/activities"
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
	s.answerCorrective(c, t, body)
}

// answerCorrective runs the corrective query and answers with seed 003's
// response, naming its workflow in X-Workflow-ID: for POST
// /v1/rag/corrective and seed 003's route alike.
func (s *Server) answerCorrective(c *gin.Context, t string, body correctiveRequest) {
	res, workflowID, err := s.corrective(c.Request.Context(), t, body)
	if err != nil {
		writeError(c, err)
		return
	}
	c.Header("X-Workflow-ID", workflowID)
	c.JSON(http.StatusOK, correctiveResponse{Success: true, CorrectiveResult: res})
}

// corrective runs one corrective query for the tenant and waits for its
// result; it returns the id of the workflow that ran it.
func (s *Server) corrective(ctx context.Context, t string, body correctiveRequest) (workflows.CorrectiveResult, string, error) {
	var res workflows.CorrectiveResult
	if err := workflows.ValidateQuestion("query", body.Query, s.opts.Limits.MaxQuestionBytes); err != nil {
		return res, "", errInvalid("%s", err)
	}
	if len(body.MilvusConfig) > 0 {
		return res, "", errInvalid("milvusConfig is not accepted: the workers' vector store is configured by CTXFLOW_COLLECTION (and the store settings) in their environment")
	}
	cfg, err := workflows.TurnOptions{
		LLMModel: body.LLMModel, TopK: body.TopK, SimilarityThreshold: body.SimilarityThreshold,
		SearchMode: body.SearchMode, MaxRewriteAttempts: body.MaxRewriteAttempts, GradePassThreshold: body.GradePassThreshold,
	}.Apply(s.opts.Defaults)
	if err != nil {
		return res, "", errInvalid("%s", err)
	}
	in := workflows.CorrectiveInput{
		Query: body.Query, TopK: cfg.TopK, SimilarityThreshold: cfg.SimilarityThreshold,
		MaxRewriteAttempts: cfg.MaxRewriteAttempts, GradePassThreshold: cfg.GradePassThreshold,
		SearchMode: cfg.SearchMode, Model: cfg.LLMModel, IncludeText: true, Limits: s.opts.Limits, Tenant: t,
		FilterBinds: true,
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.TurnWaitTimeout)
	defer cancel()
	run, err := s.c.ExecuteWorkflow(ctx, workflows.CorrectiveStartOptions(newID("rag"), body.Query, s.opts.TurnWaitTimeout),
		workflows.CorrectiveRAGWorkflowName, in)
	if err != nil {
		return res, "", fromTemporal("corrective query", err)
	}
	if err := run.Get(ctx, &res); err != nil {
		var appErr *temporal.ApplicationError
		var timeout *temporal.TimeoutError
		if errors.As(err, &appErr) || errors.As(err, &timeout) { // the loop ran and its answer failed
			_, msg := activities.Cause(err)
			return res, "", failed(activities.CodeOf(err), "corrective query "+run.GetID()+" failed", msg)
		}
		return res, "", fromTemporal("corrective query "+run.GetID(), err)
	}
	return res, run.GetID(), nil
}
