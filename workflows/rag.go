package workflows

import (
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/convo"
)

// CorrectiveRAGWorkflowName is the registered name of [CorrectiveRAGWorkflow].
const CorrectiveRAGWorkflowName = "CorrectiveRAGWorkflow"

var ra *activities.RAG // method references only

// CorrectiveInput is one corrective retrieval (seed 003). A TopK of 0 and
// an empty Model take the defaults of [DefaultSessionConfig]; the
// thresholds are used as given (0 means no minimum).
type CorrectiveInput struct {
	Query               string  `json:"query"`
	TopK                int     `json:"topK,omitempty"`
	SimilarityThreshold float64 `json:"similarityThreshold,omitempty"`
	MaxRewriteAttempts  int     `json:"maxRewriteAttempts,omitempty"`
	GradePassThreshold  float64 `json:"gradePassThreshold,omitempty"`
	// SearchMode is dense, keyword or hybrid (default).
	SearchMode string `json:"searchMode,omitempty"`
	// Model grades, rewrites and answers.
	Model string `json:"model,omitempty"`
	// Topic is the conversation's topic, for the relevance filter.
	Topic string `json:"topic,omitempty"`
	// Tenant is whose documents are searched ("" is the default tenant).
	Tenant string `json:"tenant,omitempty"`
	// Choose ends the loop at the choice of documents: the result's
	// Chosen, which a session's own generate step answers from.
	Choose bool `json:"choose,omitempty"`
	// Generate, when set, answers inside a session: the turn's window is
	// the model view and the graded documents are added to it. (Sessions
	// before the change "qa-own-generate"; later ones set Choose.)
	Generate *activities.GenerateInput `json:"generate,omitempty"`
	// IncludeText returns the documents' text (standalone queries; a
	// session's result stays small).
	IncludeText bool   `json:"includeText,omitempty"`
	Limits      Limits `json:"limits"`
	// FastModel calls the model in the workflow task (see
	// Limits.FastModel): the session has seen it answer fast.
	FastModel bool `json:"fastModel,omitempty"`
	// FastRetrieve retrieves in the workflow task: the session has seen
	// retrieval take less than Limits.FastModel.
	FastRetrieve bool `json:"fastRetrieve,omitempty"`
	// FilterBinds says that the starter knows the change "filter-binds"
	// (a document the relevance filter dropped is neither graded nor
	// used), so that the run need not ask for it with GetVersion: the SDK
	// records each version with an upsert of TemporalChangeVersion, one
	// more visibility write for every qa turn. Starts without it (before
	// this field) ask as before.
	FilterBinds bool `json:"filterBinds,omitempty"`
}

// CorrectiveResult is seed 003's response (without its "success").
type CorrectiveResult struct {
	Answer           string `json:"answer"`
	Model            string `json:"model,omitempty"`
	Engine           string `json:"engine,omitempty"`
	PromptTokens     int    `json:"promptTokens,omitempty"`
	CompletionTokens int    `json:"completionTokens,omitempty"`
	// CountedTokens is ctxflow's count of the answer's prompt (calibration).
	CountedTokens int `json:"countedTokens,omitempty"`
	// Chosen are the documents to answer from, with their text (Choose).
	Chosen         []activities.Doc `json:"chosen,omitempty"`
	Query          QueryInfo        `json:"query"`
	RewriteHistory []RewriteRecord  `json:"rewriteHistory"`
	Retrieval      RetrievalInfo    `json:"retrieval"`
	GraderResult   GraderResult     `json:"graderResult"`
	Workflow       WorkflowTrace    `json:"workflow"`
}

// QueryInfo is the query before and after the loop.
type QueryInfo struct {
	Original     string `json:"original"`
	Final        string `json:"final"`
	WasRewritten bool   `json:"wasRewritten"`
	RewriteCount int    `json:"rewriteCount"`
}

// RewriteRecord is one corrective rewrite.
type RewriteRecord struct {
	Attempt        int      `json:"attempt"`
	From           string   `json:"from"`
	RewrittenQuery string   `json:"rewrittenQuery"`
	RewriteReason  string   `json:"rewriteReason"`
	Keywords       []string `json:"keywords,omitempty"`
}

// RetrievalInfo lists every document graded, latest verdict first seen.
type RetrievalInfo struct {
	TotalDocuments int `json:"totalDocuments"`
	// FilteredDocuments is how many documents the answer was built from.
	FilteredDocuments int      `json:"filteredDocuments"`
	Documents         []RAGDoc `json:"documents"`
	// Error says why retrieval failed, when it did.
	Error string `json:"error,omitempty"`
}

// RAGDoc is a retrieved document with the filter's and grader's verdicts
// (its text only for a standalone query: CorrectiveInput.IncludeText).
type RAGDoc struct {
	activities.Doc
	Attempt      int               `json:"attempt"`
	FilterKept   bool              `json:"filterKept"`
	FilterReason string            `json:"filterReason"`
	Grade        *activities.Grade `json:"grade,omitempty"`
	// GradedBy is "grader", or "relevance_filter" when the filter dropped
	// it (it is not graded, and fails) or the grader failed (the filter's
	// verdict stands).
	GradedBy string `json:"gradedBy"`
	Passed   bool   `json:"passed"`
	// Used reports that the answer was generated from it.
	Used bool `json:"used"`
}

// GraderResult is the last grading round.
type GraderResult struct {
	PassRate      float64 `json:"passRate"`
	PassCount     int     `json:"passCount"`
	TotalCount    int     `json:"totalCount"`
	ShouldRewrite bool    `json:"shouldRewrite"`
	Reasoning     string  `json:"reasoning"`
	// Degraded says which documents the relevance filter graded because
	// the grader failed.
	Degraded string `json:"degraded,omitempty"`
}

// WorkflowTrace is how the loop went.
type WorkflowTrace struct {
	NodeExecutions []NodeExecution `json:"nodeExecutions"`
	DecisionPath   []string        `json:"decisionPath"`
	TotalDuration  int64           `json:"totalDuration"` // milliseconds
}

// NodeExecution is one run of a node (retrieve, grade, rewrite, generate).
type NodeExecution struct {
	Node       string    `json:"node"`
	Attempt    int       `json:"attempt"`
	Status     string    `json:"status"` // ok, failed, degraded
	StartedAt  time.Time `json:"startedAt"`
	DurationMS int64     `json:"durationMs"`
	Detail     string    `json:"detail,omitempty"`
	// InWorkflowTask: the node's call ran in the workflow task (a local
	// activity), not as an activity.
	InWorkflowTask bool `json:"inWorkflowTask,omitempty"`
}

// CorrectiveRAGWorkflow runs seed 003's loop: retrieve (with the relevance
// filter) → grade every document the filter kept (one activity each, in
// parallel; a dropped document is not graded and counts as failed) → if
// the pass rate reaches gradePassThreshold, generate; else rewrite the
// query and retrieve again, at most maxRewriteAttempts times; then
// generate from the documents that passed, or answer honestly that the
// knowledge base has nothing. A grader failure degrades to the relevance
// filter's verdict; a retrieval failure answers without documents; both
// are recorded in the trace.
//
// Runs started before the change "filter-binds" grade the documents the
// filter dropped too, as they did.
func CorrectiveRAGWorkflow(ctx workflow.Context, in CorrectiveInput) (CorrectiveResult, error) {
	c := &corrective{in: in.withDefaults(), start: workflow.Now(ctx), byID: map[string]int{}, texts: map[string]string{}}
	c.filterBinds = in.FilterBinds || workflow.GetVersion(ctx, "filter-binds", workflow.DefaultVersion, 1) >= 1
	c.res.Query = QueryInfo{Original: in.Query, Final: in.Query}
	c.res.RewriteHistory = []RewriteRecord{}
	c.res.Retrieval.Documents = []RAGDoc{}
	if err := workflow.SetQueryHandler(ctx, QueryState, func() (CorrectiveResult, error) { return c.res, nil }); err != nil {
		return c.res, fmt.Errorf("set state query: %w", err)
	}
	err := c.run(ctx)
	c.res.Workflow.TotalDuration = workflow.Now(ctx).Sub(c.start).Milliseconds()
	return c.res, err
}

type corrective struct {
	in    CorrectiveInput
	res   CorrectiveResult
	start time.Time
	byID  map[string]int    // document id → index in res.Retrieval.Documents
	texts map[string]string // document id → text, for generation
	// filterBinds: a document the relevance filter dropped is neither
	// graded nor used (false in runs recorded before it).
	filterBinds bool
}

func (in CorrectiveInput) withDefaults() CorrectiveInput {
	d := DefaultSessionConfig()
	if in.TopK <= 0 {
		in.TopK = d.TopK
	}
	if in.MaxRewriteAttempts < 0 {
		in.MaxRewriteAttempts = 0
	}
	if in.Model == "" {
		in.Model = d.LLMModel
	}
	in.Limits = in.Limits.withDefaults()
	return in
}

func (c *corrective) run(ctx workflow.Context) error {
	query := c.in.Query
	tried := triedQueries{}
	tried.add(query)
	for attempt := 0; ; attempt++ {
		docs, ok := c.retrieve(ctx, query, attempt)
		if !ok {
			break
		}
		c.grade(ctx, query, docs, attempt)
		rewrite, why := afterGrade(c.res.GraderResult, attempt, c.in.MaxRewriteAttempts, c.in.GradePassThreshold)
		c.decide(why)
		if !rewrite {
			break
		}
		r, ok := c.rewrite(ctx, query, docs, attempt)
		if !ok {
			break
		}
		next := r.RewrittenQuery
		if tried.has(next) {
			c.decide(fmt.Sprintf("rewrite: %q was already tried (%s) → generate", convo.Clip(next, 60), r.RewriteReason))
			break
		}
		tried.add(next)
		countRewrite(ctx, "corrective")
		c.res.RewriteHistory = append(c.res.RewriteHistory, RewriteRecord{
			Attempt: attempt + 1, From: query, RewrittenQuery: next, RewriteReason: r.RewriteReason, Keywords: r.Keywords,
		})
		c.decide(fmt.Sprintf("rewrite → %q", convo.Clip(next, 60)))
		query = next
		c.res.Query.Final, c.res.Query.WasRewritten, c.res.Query.RewriteCount = next, true, len(c.res.RewriteHistory)
	}
	return c.generate(ctx)
}

// retrieve runs one retrieval; false ends the loop (no knowledge base, or
// retrieval failed: the answer goes on without documents).
func (c *corrective) retrieve(ctx workflow.Context, query string, attempt int) ([]activities.RetrievedDoc, bool) {
	var out activities.RetrieveResult
	in := activities.RetrieveInput{
		Query: query, TopK: c.in.TopK, SimilarityThreshold: c.in.SimilarityThreshold,
		Mode: activities.SearchMode(c.in.SearchMode), Topic: c.in.Topic, Tenant: c.in.Tenant,
	}
	summary := fmt.Sprintf("retrieve top %d for %q", c.in.TopK, convo.Clip(query, 60))
	inTask := false
	err := c.node(ctx, "retrieve", attempt, func() (string, error) {
		var err error
		if c.in.FastRetrieve { // one attempt in this workflow task, then as an activity
			inTask, err = inTaskCall(ctx, c.in.Limits, summary, ra.Retrieve, in, &out)
		}
		if !inTask {
			err = workflow.ExecuteActivity(c.actx(ctx, summary, time.Minute, 3), ra.Retrieve, in).Get(ctx, &out)
		}
		kept := 0
		for _, d := range out.Docs {
			if d.Kept {
				kept++
			}
		}
		return fmt.Sprintf("%d documents, %d kept by the relevance filter", len(out.Docs), kept), err
	})
	nodes := c.res.Workflow.NodeExecutions
	nodes[len(nodes)-1].InWorkflowTask = inTask
	switch {
	case err != nil:
		c.res.Retrieval.Error = rootMessage(err)
		c.decide("retrieve failed → generate without documents")
		return nil, false
	case out.Empty:
		c.decide("retrieve: the knowledge base is empty → generate")
		return nil, false
	}
	c.decide(fmt.Sprintf("retrieve %q: %d documents", convo.Clip(query, 60), len(out.Docs)))
	return out.Docs, true
}

// grade grades docs in parallel and records the round in GraderResult:
// those the relevance filter kept (all, before "filter-binds"); a dropped
// document fails ungraded.
func (c *corrective) grade(ctx workflow.Context, query string, docs []activities.RetrievedDoc, attempt int) {
	start := workflow.Now(ctx)
	graded := make([]bool, len(docs))
	dropped := 0
	for i, d := range docs {
		graded[i] = d.Kept || !c.filterBinds
		if !graded[i] {
			dropped++
		}
	}
	grades, errs := c.gradeDocs(ctx, query, docs, graded)
	var pass int
	var failed []string
	for i := range docs {
		d := docs[i]
		doc := RAGDoc{Doc: d.Doc, Attempt: attempt, FilterKept: d.Kept, FilterReason: d.Reason, GradedBy: "grader"}
		if !c.in.IncludeText {
			doc.Doc = d.Ref()
		}
		switch err := errs[i]; {
		case !graded[i]:
			doc.GradedBy = "relevance_filter"
		case err != nil:
			failed = append(failed, fmt.Sprintf("%s (%s)", d.ID, rootMessage(err)))
			doc.GradedBy, doc.Passed = "relevance_filter", d.Kept
		default:
			doc.Grade, doc.Passed = &grades[i], grades[i].IsRelevant
		}
		if doc.Passed {
			pass++
		}
		c.res.Retrieval.Documents = mergeDoc(c.res.Retrieval.Documents, c.byID, doc, c.filterBinds)
		c.texts[d.ID] = d.Text
	}
	g := gradeRound(query, pass, len(docs), c.in.GradePassThreshold)
	status, detail := "ok", fmt.Sprintf("%d of %d passed", pass, len(docs))
	if dropped > 0 {
		why := fmt.Sprintf("%d dropped by the relevance filter, not graded", dropped)
		g.Reasoning += "; " + why
		detail += " (" + why + ")"
	}
	if len(failed) > 0 {
		g.Degraded = "grader failed, relevance filter used for " + strings.Join(failed, ", ")
		status, detail = "degraded", detail+"; "+g.Degraded
		c.decide("grade: " + g.Degraded)
	}
	c.res.GraderResult = g
	c.res.Workflow.NodeExecutions = append(c.res.Workflow.NodeExecutions, NodeExecution{
		Node: "grade", Attempt: attempt, Status: status, StartedAt: start,
		DurationMS: workflow.Now(ctx).Sub(start).Milliseconds(), Detail: detail,
	})
}

// gradeDocs grades the documents of docs marked in graded, in parallel,
// with a failure for each document the grader could not grade. (Each call
// is scheduled in document order, as the futures of runs recorded before
// fast models were.)
func (c *corrective) gradeDocs(ctx workflow.Context, query string, docs []activities.RetrievedDoc, graded []bool) ([]activities.Grade, []error) {
	grades, errs := make([]activities.Grade, len(docs)), make([]error, len(docs))
	wg := workflow.NewWaitGroup(ctx)
	for i, d := range docs {
		if !graded[i] {
			continue
		}
		wg.Add(1)
		workflow.Go(ctx, func(ctx workflow.Context) {
			defer wg.Done()
			_, errs[i] = modelCall(ctx, c.in.Limits, c.in.FastModel, fmt.Sprintf("grade %s", convo.Clip(d.ID, 60)), 2, ra.GradeDoc,
				activities.GradeInput{Query: query, Doc: d, Model: c.in.Model}, &grades[i])
		})
	}
	wg.Wait(ctx)
	return grades, errs
}

// rewrite asks for a better query; false ends the loop.
func (c *corrective) rewrite(ctx workflow.Context, query string, docs []activities.RetrievedDoc, attempt int) (activities.Reformulation, bool) {
	in := activities.ReformulateInput{Original: c.in.Query, Current: query, Model: c.in.Model}
	for _, d := range docs {
		in.Failed = append(in.Failed, convo.Clip(d.Text, 500))
	}
	for _, r := range c.res.RewriteHistory {
		in.History = append(in.History, activities.Reformulation{RewrittenQuery: r.RewrittenQuery, RewriteReason: r.RewriteReason, Keywords: r.Keywords})
	}
	var out activities.Reformulation
	err := c.node(ctx, "rewrite", attempt, func() (string, error) {
		_, err := modelCall(ctx, c.in.Limits, c.in.FastModel, fmt.Sprintf("rewrite %q", convo.Clip(query, 60)), 2, ra.Reformulate, in, &out)
		return fmt.Sprintf("%q → %q: %s", convo.Clip(query, 60), convo.Clip(out.RewrittenQuery, 60), out.RewriteReason), err
	})
	if err != nil {
		c.decide("rewrite failed → generate")
		return out, false
	}
	return out, true
}

// generate answers from the documents that passed: the topK most
// confidently graded, so that the prompt stays as large as one retrieval
// however many rounds ran. With Choose it only returns them.
func (c *corrective) generate(ctx workflow.Context) error {
	passed := forAnswer(c.res.Retrieval.Documents, c.in.TopK)
	used := make(map[string]bool, len(passed))
	docs := make([]activities.Doc, len(passed))
	ids := make([]string, len(passed))
	for i, d := range passed {
		// Texts come from the retrievals; they are in this workflow's
		// history already, so generation needs no second read of the store.
		docs[i], ids[i], used[d.ID] = d.Doc, d.ID, true
		docs[i].Text = c.texts[d.ID]
	}
	for i := range c.res.Retrieval.Documents {
		c.res.Retrieval.Documents[i].Used = used[c.res.Retrieval.Documents[i].ID]
	}
	c.res.Retrieval.TotalDocuments = len(c.res.Retrieval.Documents)
	c.res.Retrieval.FilteredDocuments = len(docs)
	if c.in.Choose { // the session's generate step answers from them
		c.res.Chosen = docs
		c.decide("generate")
		return nil
	}
	return c.node(ctx, "generate", len(c.res.RewriteHistory), func() (string, error) {
		detail := fmt.Sprintf("from %d documents %v", len(docs), ids)
		if c.in.Generate != nil {
			genIn := *c.in.Generate
			// Documents that passed before a failed retrieval are still used.
			genIn.UseDocs, genIn.Docs = len(docs) > 0 || c.res.Retrieval.Error == "", docs
			// Three attempts of the model's own; more for lost workers
			// (see lostWorkerAttempts).
			genIn.Attempts = 3
			var gen activities.GenerateResult
			_, err := modelCall(ctx, c.in.Limits, c.in.FastModel, "generate with "+genIn.Model, 3+lostWorkerAttempts, sa.Generate, genIn, &gen)
			c.res.Answer, c.res.Model, c.res.Engine = gen.Answer, gen.Model, gen.Engine
			c.res.PromptTokens, c.res.CompletionTokens, c.res.CountedTokens = gen.PromptTokens, gen.CompletionTokens, gen.CountedTokens
			return detail, err
		}
		var out activities.AnswerResult
		_, err := modelCall(ctx, c.in.Limits, c.in.FastModel, "answer with "+c.in.Model, 3, ra.Answer,
			activities.AnswerInput{Query: c.res.Query.Original, Docs: docs, Model: c.in.Model,
				Options: activities.ModelOptions{NumPredict: c.in.Limits.LLMMaxTokens}}, &out)
		c.res.Answer, c.res.Model, c.res.Engine = out.Answer, out.Model, out.Engine
		c.res.PromptTokens, c.res.CompletionTokens, c.res.CountedTokens = out.PromptTokens, out.CompletionTokens, out.CountedTokens
		return detail, err
	})
}

// node runs one node and records its execution.
func (c *corrective) node(ctx workflow.Context, name string, attempt int, fn func() (string, error)) error {
	start := workflow.Now(ctx)
	detail, err := fn()
	n := NodeExecution{Node: name, Attempt: attempt, Status: "ok", StartedAt: start,
		DurationMS: workflow.Now(ctx).Sub(start).Milliseconds(), Detail: detail}
	if err != nil {
		n.Status, n.Detail = "failed", rootMessage(err)
	}
	c.res.Workflow.NodeExecutions = append(c.res.Workflow.NodeExecutions, n)
	if name == "generate" {
		c.decide("generate")
	}
	return err
}

func (c *corrective) decide(step string) {
	c.res.Workflow.DecisionPath = append(c.res.Workflow.DecisionPath, step)
}

func (c *corrective) actx(ctx workflow.Context, summary string, timeout time.Duration, attempts int) workflow.Context {
	return activityCtx(ctx, c.in.Limits, summary, timeout, attempts)
}
