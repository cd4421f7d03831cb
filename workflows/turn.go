package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/convo"
)

// runTurn is the turn pipeline (docs/architecture.md §3): load_context → (chat:
// generate | qa: rewrite_query → corrective_rag) → save. It fills res and
// never returns an error: a failed turn is a result, and the user's message
// is kept whatever happens.
func (s *session) runTurn(ctx workflow.Context, req TurnRequest, res *TurnResult) lostOutcome {
	if err := ValidateTurn(req, s.st.Config, s.limits); err != nil {
		// Only signals get here: the update validator rejects bad turns first.
		res.Status, res.Error, res.ErrorCode = TurnRejected, err.Error(), activities.CodeInvalidArgument
		return lostRunNow
	}
	opts, _ := ParseTurnOptions(req.Config) // validated above
	cfg, _ := opts.Apply(s.st.Config)
	if req.Kind == "" && s.continuable() && isContinue(req.Question) {
		req.Kind = KindContinue // "继续", "continue", "go on"
	} else if g, ok := continueGuidance(req.Question); ok && req.Kind == "" && s.continuable() &&
		workflow.GetVersion(ctx, steerChange, workflow.DefaultVersion, 1) >= 1 {
		req.Kind, req.Guidance = KindContinue, g // "继续，只看2024年的订单"
	}
	if req.Kind == KindContinue && !s.continuable() {
		res.Status, res.ErrorCode = TurnRejected, activities.CodeConflict
		res.Error = "no paused task to continue"
		return lostRunNow
	}
	switch req.Kind {
	case KindBranch:
		s.branchTo(ctx, req, res)
		return lostRunNow
	case KindImport:
		s.importTranscript(ctx, req, res)
		return lostRunNow
	}
	parent := s.st.ActiveLeaf
	if req.EditOf != "" {
		var err error
		if parent, err = s.editParent(ctx, req, res); err != nil {
			s.refuse(res, "edit", err)
			return lostRunNow
		}
	}

	continues := s.stoppedAnswer(ctx, req, parent)
	lc, err := s.loadContext(ctx, req, cfg, parent, continues, res)
	for round := 0; err == nil && len(lc.Lost) > 0; round++ {
		if round == maxAdoptRounds {
			err = activities.Permanent(activities.CodeUnavailable, fmt.Sprintf("the transcript grew below the session's leaf %d times while this turn was stored", round), nil)
			break
		}
		if out := s.adoptLost(ctx, req, lc.Lost, lc.Messages, res); out != lostRunNow {
			return out
		}
		parent = s.st.ActiveLeaf
		continues = s.stoppedAnswer(ctx, req, parent)
		lc, err = s.loadContext(ctx, req, cfg, parent, continues, res)
	}
	if err != nil {
		s.fail(res, "load context", err)
		return lostRunNow
	}
	if lc.AnswerID != "" { // a repeat whose answer is stored: nothing is generated again
		res.Steps = append(res.Steps, Step{Name: "generate", Status: "skipped", Start: workflow.Now(ctx),
			Details: map[string]any{"reason": "answer already in transcript"}})
		if lc.AnswerFollows {
			// This turn, answered in a workflow task lost with its worker
			// (a fast model's turn is one task), and made again: it is
			// complete, and the conversation goes on from its answer.
			s.complete(res, lc.AnswerID, lc.Answer)
			return lostRunNow
		}
		res.Status, res.Answer, res.AssistantMessageID = TurnCompleted, lc.Answer, lc.AnswerID
		return lostRunNow
	}
	s.st.ActiveLeaf = lc.UserMessageID

	var gen activities.GenerateResult
	route := lc.Route
	if req.Kind == "" && continues == "" {
		switch route = s.classify(ctx, lc, res); route {
		case RouteTask:
			req.Kind = KindTask // the question is the task's goal
		case RouteContinue:
			req.Kind = KindContinue
		}
	}
	if req.Kind != "" {
		if gen, err = s.runTask(ctx, req, cfg, res); err != nil {
			s.refuse(res, "task", err)
			return lostRunNow
		}
	} else if route == RouteClarify {
		gen = s.clarify(ctx, req, res)
	} else if route == activities.RouteQA {
		if gen, err = s.answerFromKnowledge(ctx, req, cfg, lc, res); err != nil {
			if s.stopped(res) {
				s.cancelTurn(ctx, req, cfg, lc, partialAnswer(err), res)
				return lostRunNow
			}
			s.fail(res, "answer from the knowledge base", err)
			return lostRunNow
		}
	} else if gen, err = s.generate(ctx, s.generateInput(req, cfg, lc), cfg, res); err != nil {
		if s.stopped(res) {
			s.cancelTurn(ctx, req, cfg, lc, partialAnswer(err), res)
			return lostRunNow
		}
		s.fail(res, "model unavailable", err)
		return lostRunNow
	}
	res.Model, res.Engine, res.RewrittenQuery = gen.Model, gen.Engine, gen.RewrittenQuery
	res.RetrievedDocs = excerpts(gen.Docs)
	s.calibrate(gen.Model, gen.PromptTokens, gen.CountedTokens)

	saved, err := s.save(ctx, req, cfg, lc, gen, res)
	if err != nil {
		s.fail(res, "save answer", err)
		return lostRunNow
	}
	s.st.Messages = saved.Messages
	s.summaryDue = saved.SummaryDue
	s.complete(res, saved.MessageID, gen.Answer)
	if s.stopped(res) { // a task turn: the task stopped at the cancel
		res.Status = TurnCancelled
	}
	return lostRunNow
}

// loadContext stores the question and assembles the model view: the
// load_context step. continues is the cancelled answer the question
// continues ("" for none): the model view shows it, and the turn takes the
// chat route.
func (s *session) loadContext(ctx workflow.Context, req TurnRequest, cfg SessionConfig, parent, continues string, res *TurnResult) (activities.LoadContextResult, error) {
	// Sessions recorded before the corrective loop existed replay without it.
	route := workflow.GetVersion(ctx, "corrective-rag", workflow.DefaultVersion, 1) >= 1 && cfg.TopK > 0
	var lc activities.LoadContextResult
	err := s.step(ctx, res, "load_context", func() (map[string]any, error) {
		err := workflow.ExecuteLocalActivity(s.localCtx(ctx, fmt.Sprintf("load context (%s, %d rounds, %d tokens)", cfg.WindowStrategy, cfg.MaxRounds, cfg.MaxTokens)),
			sa.LoadContext, activities.LoadContextInput{
				Session: s.key, TurnID: req.TurnID, Question: req.Question, ParentID: parent,
				Window: s.calibrated(cfg), SystemPrompt: cfg.SystemPrompt, ReceivedAt: req.ReceivedAt,
				SummaryID: s.summaryID(), Fallback: s.fallback(cfg), Route: route,
				ClassifyIntent: req.Kind == "" && s.intents(ctx), RecentIntents: recentIntents(s.st.Intents), Model: cfg.LLMModel,
				Linear: s.checkLost(ctx) && parent == s.st.ActiveLeaf && !s.st.LeafMoved, Continues: continues,
			}).Get(ctx, &lc)
		if len(lc.Lost) > 0 {
			return map[string]any{"lostTurns": len(lc.Lost), "messages": lc.Messages}, err
		}
		return loadDetails(lc), err
	})
	if err != nil || len(lc.Lost) > 0 {
		return lc, err
	}
	if continues != "" { // the model goes on with its answer, from the conversation alone
		lc.Route, lc.RouteReason = activities.RouteChat, "continues the cancelled answer "+continues
		res.Steps[len(res.Steps)-1].Details["continues"] = continues
	}
	if lc.Degraded {
		res.Steps[len(res.Steps)-1].Status = "degraded"
	}
	res.UserMessageID = lc.UserMessageID
	s.st.Messages, s.st.LeafMoved = lc.Messages, false
	s.st.TokensBefore, s.st.TokensAfter, s.st.TrimmedCount = lc.TokensBefore, lc.TokensAfter, lc.TrimmedCount
	return lc, nil
}

// generateInput asks for the answer over the turn's model view.
func (s *session) generateInput(req TurnRequest, cfg SessionConfig, lc activities.LoadContextResult) activities.GenerateInput {
	summaryID := ""
	if lc.SummaryUsed {
		summaryID = s.summaryID()
	}
	return activities.GenerateInput{
		Session: s.key, TurnID: req.TurnID, WindowIDs: lc.WindowIDs, SystemPrompt: cfg.SystemPrompt,
		SummaryID: summaryID, Model: cfg.LLMModel, Options: activities.ModelOptions{NumPredict: s.limits.LLMMaxTokens},
		Attempts: cfg.MaxRetries + 1,
	}
}

// generate is the chat route's generate step. (Before the corrective loop,
// in histories of its version 0, Generate also retrieved; they replay its
// recorded results.) A fast model (Limits.FastModel) is called in the
// turn's workflow task; if that fails but for good, as an activity.
func (s *session) generate(ctx workflow.Context, in activities.GenerateInput, cfg SessionConfig, res *TurnResult) (activities.GenerateResult, error) {
	var gen activities.GenerateResult
	err := s.step(ctx, res, "generate", func() (map[string]any, error) {
		start := workflow.Now(ctx)
		fast := s.fastModel(ctx, cfg.LLMModel)
		if !fast {
			s.leavingTask(ctx)
		}
		// The model's own failures are bounded in the activity (Attempts);
		// the policy also allows for attempts lost with a worker.
		var inTask bool
		err := s.stoppable(ctx, func(ctx workflow.Context) error {
			if s.stopped(res) { // cancelled before the call
				return temporal.NewCanceledError()
			}
			var err error
			ctx = workflow.WithWaitForCancellation(ctx, true) // the call's partial answer comes with its cancellation
			inTask, err = s.modelCall(ctx, fast, "generate with "+cfg.LLMModel,
				cfg.MaxRetries+1+lostWorkerAttempts, sa.Generate, in, &gen)
			return err
		})
		if err == nil {
			s.observeModel(cfg.LLMModel, workflow.Now(ctx).Sub(start))
		}
		details := generateDetails(cfg.LLMModel, in, gen)
		details["inWorkflowTask"] = inTask
		return details, err
	})
	return gen, err
}

// modelCall is modelCall for the session's own steps: a call that fails
// in the workflow task is made again as an activity after the "running"
// status a quiet turn skipped is published (it may retry for a while).
func (s *session) modelCall(ctx workflow.Context, fast bool, summary string, attempts int, fn, arg, out any) (inTask bool, err error) {
	if fast {
		if done, err := inTaskCall(ctx, s.limits, summary, fn, arg, out); done {
			return true, err
		}
		// Runs recorded before this stayed "idle" through the retries.
		if workflow.GetVersion(ctx, "fallback-running", workflow.DefaultVersion, 1) >= 1 {
			s.leavingTask(ctx)
		}
	}
	return modelCall(ctx, s.limits, false, summary, attempts, fn, arg, out)
}

// fastModel reports a model whose answers in this session have been fast
// enough to call it in the workflow task (Limits.FastModel).
func (s *session) fastModel(ctx workflow.Context, model string) bool {
	if !s.fastModelKnown(model) {
		return false
	}
	// Runs recorded before fast models replay with activities only.
	return workflow.GetVersion(ctx, "fast-model", workflow.DefaultVersion, 1) >= 1
}

// fastModelKnown reports a model whose running average answer time is
// under Limits.FastModel.
func (s *session) fastModelKnown(model string) bool {
	ms, ok := s.st.ModelMS[model]
	return s.underFast(ms, ok)
}

// underFast reports a running average (ms, known) under Limits.FastModel.
func (s *session) underFast(ms float64, known bool) bool {
	return s.limits.FastModel > 0 && known && ms < float64(s.limits.FastModel.Milliseconds())
}

// observeModel folds one answer time into the model's running average.
func (s *session) observeModel(model string, took time.Duration) {
	if s.limits.FastModel <= 0 {
		return
	}
	if s.st.ModelMS == nil {
		s.st.ModelMS = map[string]float64{}
	}
	old, ok := s.st.ModelMS[model]
	s.st.ModelMS[model] = runningMS(old, ok, took)
}

// runningMS folds one time into a running average of milliseconds.
func runningMS(old float64, known bool, took time.Duration) float64 {
	ms := float64(took.Milliseconds())
	if known {
		ms = 0.7*old + 0.3*ms
	}
	return ms
}

// fastRetrieve reports retrieval that has taken less than
// Limits.FastModel in this session, as a fast model's answers: the
// corrective child retrieves in its workflow task, which saves it a
// workflow task and a round trip through the server.
func (s *session) fastRetrieve(ctx workflow.Context) bool {
	if !s.underFast(s.st.RetrieveMS, s.st.RetrieveMS > 0) {
		return false
	}
	// Runs recorded before it retrieved as an activity only.
	return workflow.GetVersion(ctx, "fast-retrieve", workflow.DefaultVersion, 1) >= 1
}

// fastSummary reports a running summary that has taken less than a tenth
// of Limits.FastModel on average in this session (50 ms by default): it is
// made in the workflow task of the turn that made it due, which saves the
// session an activity and a workflow task about every fifth turn (events,
// history bytes and CPU), and delays that turn's answer by about as long —
// which is why the bound is a tenth of a fast model's.
func (s *session) fastSummary(ctx workflow.Context) bool {
	if !s.underFast(s.st.SummaryMS*10, s.st.SummaryMS > 0) {
		return false
	}
	// Runs recorded before it summarised as an activity only.
	return workflow.GetVersion(ctx, "summary-in-task", workflow.DefaultVersion, 1) >= 1
}

// summaryTime is how long a summary took, as fastSummary compares it: the
// summary's own time, measured in the call. The step's time in the
// workflow (stepMS) also holds, for a summary made as an activity, the
// server's round trips, which on a loaded machine alone passed the bound:
// every summary after the first (always an activity) stayed one, and a
// long session's history grew by 6 % (events a turn 8.25 → 9.5). Runs
// recorded before "summary-own-time" took the step's time.
func (s *session) summaryTime(ctx workflow.Context, out activities.SummarizeResult, stepMS int64) int64 {
	if out.TookMS > 0 && workflow.GetVersion(ctx, "summary-own-time", workflow.DefaultVersion, 1) >= 1 {
		return out.TookMS
	}
	return stepMS
}

// observeRetrieve folds the corrective child's retrievals into
// RetrieveMS.
func (s *session) observeRetrieve(out CorrectiveResult) {
	for _, n := range out.Workflow.NodeExecutions {
		if n.Node == "retrieve" && n.Status == "ok" {
			s.observeStep(&s.st.RetrieveMS, n.DurationMS)
		}
	}
}

// observeStep folds a step's time into a running average of milliseconds
// whose zero means unknown (RetrieveMS, SummaryMS): a step under a
// millisecond counts as one, so that the average is known once observed.
// Without a fast-model bound nothing is kept.
func (s *session) observeStep(avg *float64, durationMS int64) {
	if s.limits.FastModel > 0 {
		*avg = runningMS(*avg, *avg > 0, time.Duration(max(durationMS, 1))*time.Millisecond)
	}
}

// save stores the answer: the save step.
func (s *session) save(ctx workflow.Context, req TurnRequest, cfg SessionConfig, lc activities.LoadContextResult, gen activities.GenerateResult, res *TurnResult) (activities.SaveAnswerResult, error) {
	var saved activities.SaveAnswerResult
	err := s.step(ctx, res, "save", func() (map[string]any, error) {
		err := workflow.ExecuteLocalActivity(s.localCtx(ctx, "save answer"), sa.SaveAnswer, activities.SaveAnswerInput{
			Session: s.key, TurnID: req.TurnID, ParentID: lc.UserMessageID, Answer: gen.Answer,
			Model: gen.Model, Engine: gen.Engine, CreatedAt: workflow.Now(ctx),
			Window: cfg.Window(), SummaryConfig: cfg.Summary(), SummaryID: s.summaryID(),
		}).Get(ctx, &saved)
		return map[string]any{"messageId": saved.MessageID, "tokens": saved.Tokens, "summaryDue": saved.SummaryDue}, err
	})
	return saved, err
}

// answerFromKnowledge is the qa route: the question made standalone from
// the conversation, the corrective loop (a child workflow) choosing the
// documents, then the session's own generate step answering from them
// over the turn's window. (Before the change "qa-own-generate", the child
// answered too.)
func (s *session) answerFromKnowledge(ctx workflow.Context, req TurnRequest, cfg SessionConfig,
	lc activities.LoadContextResult, res *TurnResult,
) (activities.GenerateResult, error) {
	rq := activities.RewriteQuestionResult{Question: req.Question}
	fast := s.fastModel(ctx, cfg.LLMModel)
	if cfg.EnableQueryRewriting && len(lc.WindowIDs) > 1 {
		err := s.step(ctx, res, "rewrite_query", func() (map[string]any, error) {
			inTask, err := s.modelCall(ctx, fast, "rewrite the question to stand alone", cfg.MaxRetries+1,
				sa.RewriteQuestion, activities.RewriteQuestionInput{
					Session: s.key, TurnID: req.TurnID, WindowIDs: lc.WindowIDs,
					Model: cfg.LLMModel, SummaryID: rewriteSummary(lc, s.summaryID()), Topic: s.st.Topic,
				}, &rq)
			return map[string]any{"query": rq.Question, "rewritten": rq.Rewritten, "topic": rq.Topic, "inWorkflowTask": inTask}, err
		})
		if err != nil { // retrieval goes on with the question as asked
			res.Steps[len(res.Steps)-1].Status = "degraded"
			rq = activities.RewriteQuestionResult{Question: req.Question}
		}
		if rq.Rewritten {
			countRewrite(ctx, "question")
		}
	}
	if rq.Topic != "" {
		s.st.Topic = rq.Topic
	}
	res.Topic = rq.Topic
	genIn := s.generateInput(req, cfg, lc)
	own := workflow.GetVersion(ctx, "qa-own-generate", workflow.DefaultVersion, 1) >= 1
	child := CorrectiveInput{
		Query: rq.Question, TopK: cfg.TopK, SimilarityThreshold: cfg.SimilarityThreshold, SearchMode: cfg.SearchMode,
		MaxRewriteAttempts: cfg.MaxRewriteAttempts, GradePassThreshold: cfg.GradePassThreshold,
		Model: cfg.LLMModel, Topic: rq.Topic, Tenant: s.key.Tenant, Choose: own, Limits: s.limits, FastModel: fast,
		FastRetrieve: s.fastRetrieve(ctx), FilterBinds: true,
	}
	if !own {
		child.Generate = &genIn
	}
	var out CorrectiveResult
	childID := QAWorkflowID(s.key.Tenant, s.key.SessionID, req.TurnID)
	if !s.quietChild(ctx, child) { // the child workflow runs in workflow tasks of its own
		s.leavingTask(ctx)
	}
	err := s.step(ctx, res, "corrective_rag", func() (map[string]any, error) {
		cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
			WorkflowID:               childID,
			WorkflowExecutionTimeout: correctiveBudget(s.limits, cfg.MaxRewriteAttempts),
			StaticSummary:            fmt.Sprintf("corrective retrieval for turn %s of session %s", req.TurnID, s.key),
		})
		err := s.stoppable(cctx, func(cctx workflow.Context) error {
			return workflow.ExecuteChildWorkflow(cctx, CorrectiveRAGWorkflowName, child).Get(ctx, &out)
		})
		return correctiveDetails(childID, out), err
	})
	s.observeRetrieve(out)
	var gen activities.GenerateResult
	if own {
		if err != nil {
			return gen, err
		}
		// Documents that passed before a failed retrieval are still used.
		genIn.UseDocs, genIn.Docs = len(out.Chosen) > 0 || out.Retrieval.Error == "", out.Chosen
		gen, err = s.generate(ctx, genIn, cfg, res)
		gen.Docs, gen.RetrievalError = out.Chosen, out.Retrieval.Error
	} else {
		gen = s.childAnswer(cfg, out)
	}
	if rq.Rewritten {
		gen.RewrittenQuery = rq.Question
	}
	return gen, err
}

// quietChild reports a corrective child whose model and retrieval are both
// fast in this session: it ends within a fraction of a second, so the
// "running" status a quiet turn would publish before it is never seen (as
// oneTaskTurn's), and the turn's end joins the burst's once-a-second
// status: two of the five visibility writes a qa turn made (the child's
// start and end are the others, and its version upsert, which
// CorrectiveInput.FilterBinds saves). Runs recorded before "quiet-fast-qa"
// published "running" before every child.
func (s *session) quietChild(ctx workflow.Context, in CorrectiveInput) bool {
	return s.quiet && in.FastModel && in.FastRetrieve &&
		workflow.GetVersion(ctx, "quiet-fast-qa", workflow.DefaultVersion, 1) >= 1
}

// childAnswer is the answer of a corrective child that generated it
// (sessions before "qa-own-generate"); its time tells how fast the model is.
func (s *session) childAnswer(cfg SessionConfig, out CorrectiveResult) activities.GenerateResult {
	for _, n := range out.Workflow.NodeExecutions {
		if n.Node == "generate" && n.Status == "ok" {
			s.observeModel(cfg.LLMModel, time.Duration(n.DurationMS)*time.Millisecond)
		}
	}
	gen := activities.GenerateResult{
		Answer: out.Answer, Model: out.Model, Engine: out.Engine,
		PromptTokens: out.PromptTokens, CompletionTokens: out.CompletionTokens, CountedTokens: out.CountedTokens,
		RetrievalError: out.Retrieval.Error,
	}
	for _, d := range out.Retrieval.Documents {
		if d.Used {
			gen.Docs = append(gen.Docs, d.Doc)
		}
	}
	return gen
}

// correctiveBudget bounds a corrective child workflow: each round's
// retrieval (3 attempts of up to a minute), grading and rewrite (2 model
// attempts each), then generation (3 attempts), with a minute to spare.
func correctiveBudget(l Limits, rewrites int) time.Duration {
	round := 3*time.Minute + 4*l.LLMTimeout
	return time.Duration(rewrites+1)*round + 3*l.LLMTimeout + time.Minute
}

// calibrated is the window with its token budget in tiktoken tokens scaled
// by the model's calibration ratio, so that the budget holds in the model's
// own tokens (Qwen and Llama count differently from tiktoken).
func (s *session) calibrated(cfg SessionConfig) convo.WindowConfig {
	w := cfg.Window()
	if r := s.st.TokenRatio[cfg.LLMModel]; r > 0 && w.MaxTokens > 0 {
		w.MaxTokens = max(convo.MinMaxTokens, int(float64(w.MaxTokens)/r))
	}
	return w
}

// calibrate folds one observation into the running ratio of the model
// that served the request: its server counted served prompt tokens where
// ctxflow counted counted for the same request (system prompt, summary,
// window and documents alike: [convo.RequestTokens]). An exponential
// average, clamped to [0.25, 8] against outliers (a byte-level tokenizer
// counts 4.5 times cl100k on English, 2.4 times on Chinese). Results
// recorded before the count existed (counted 0) teach nothing.
func (s *session) calibrate(model string, served, counted int) {
	if model == "" || served <= 0 || counted <= 0 {
		return
	}
	r := min(max(float64(served)/float64(counted), 0.25), 8)
	if s.st.TokenRatio == nil {
		s.st.TokenRatio = map[string]float64{}
	}
	if old, ok := s.st.TokenRatio[model]; ok {
		r = 0.8*old + 0.2*r
	}
	s.st.TokenRatio[model] = r
}

// rewriteSummary is the running summary a rewrite reads: the one the
// turn's view holds, "" for none.
func rewriteSummary(lc activities.LoadContextResult, id string) string {
	if !lc.SummaryUsed {
		return ""
	}
	return id
}

// summaryID names the running summary's record, "" for none.
func (s *session) summaryID() string {
	if s.st.Summary == nil {
		return ""
	}
	return s.st.Summary.ID
}

// fallback is the fallback-truncation size while the summary is degraded.
func (s *session) fallback(cfg SessionConfig) int {
	if s.st.SummaryDegraded == "" || !cfg.EnableSummarization {
		return 0
	}
	return cfg.Summary().FallbackMessages
}

// summarize folds history older than the window into the running summary
// (force: even under the threshold). Its steps go to res. A failure keeps
// the old summary and switches the model view to fallback truncation,
// reported as degraded, until a later summary succeeds.
func (s *session) summarize(ctx workflow.Context, force bool, res *TurnResult) {
	cfg := s.st.Config
	if !cfg.EnableSummarization || s.st.ActiveLeaf == "" {
		return
	}
	for range 8 { // a long backlog folds in a few bounded steps
		var out activities.SummarizeResult
		err := s.step(ctx, res, "summarize", func() (map[string]any, error) {
			inTask, err := modelCall(ctx, s.limits, s.fastSummary(ctx), "summarize older history", cfg.MaxRetries+1,
				sa.Summarize, activities.SummarizeInput{
					Session: s.key, LeafID: s.st.ActiveLeaf, Window: cfg.Window(), Config: cfg.Summary(),
					PrevID: s.summaryID(), Force: force, Linear: s.checkLost(ctx) && !s.st.LeafMoved,
				}, &out)
			details := map[string]any{"folded": out.Folded, "cacheHit": out.CacheHit, "forced": force, "inWorkflowTask": inTask}
			if out.Ref != nil {
				details["summaryTokens"] = out.Ref.Tokens
			}
			return details, err
		})
		if err == nil {
			s.observeStep(&s.st.SummaryMS, s.summaryTime(ctx, out, res.Steps[len(res.Steps)-1].DurationMS))
		}
		if err != nil {
			s.st.SummaryDegraded = fmt.Sprintf("summary unavailable (%s); model view truncated to the last %d messages",
				rootMessage(err), cfg.Summary().FallbackMessages)
			s.st.Health, s.st.DegradedReason = HealthDegraded, s.st.SummaryDegraded
			return
		}
		if out.Ref != nil {
			countSummary(ctx, out.CacheHit)
		}
		if out.Ref != nil && (s.st.Summary == nil || out.Ref.ID != s.st.Summary.ID) {
			s.st.Summary = out.Ref
			s.st.ActiveLeaf = out.Ref.ID // the record hangs below the leaf
		}
		if out.CacheHit && s.st.Summary != nil {
			s.st.Summary.CacheHits++
		}
		if was := s.st.SummaryDegraded; was != "" {
			s.st.SummaryDegraded = ""
			if s.st.DegradedReason == was {
				s.st.Health, s.st.DegradedReason = HealthOK, ""
			}
		}
		if !out.More {
			return
		}
	}
}

// step runs one pipeline step and records it in the turn's trace.
func (s *session) step(ctx workflow.Context, res *TurnResult, name string, fn func() (map[string]any, error)) error {
	start := workflow.Now(ctx)
	s.showStep(ctx, res, name)
	res.RunningStep = name
	details, err := fn()
	res.RunningStep = ""
	st := Step{Name: name, Status: "ok", Start: start, DurationMS: workflow.Now(ctx).Sub(start).Milliseconds(), Details: details}
	if err != nil {
		st.Status = "failed"
		if st.Details == nil {
			st.Details = map[string]any{}
		}
		st.Details["error"] = rootMessage(err)
	}
	res.Steps = append(res.Steps, st)
	recordStep(ctx, name, st.Status, workflow.Now(ctx).Sub(start))
	return err
}

func (s *session) complete(res *TurnResult, answerID, answer string) {
	res.Status, res.Answer, res.AssistantMessageID = TurnCompleted, answer, answerID
	s.st.ActiveLeaf = answerID
	s.st.Turns++
	s.st.Health, s.st.DegradedReason = HealthOK, ""
	if s.st.SummaryDegraded != "" {
		s.st.Health, s.st.DegradedReason = HealthDegraded, s.st.SummaryDegraded
	}
}

// refuse ends a turn the session cannot run as asked — an unknown message,
// a bad seed, a task no longer paused — with the failure's code, leaving
// the session's health alone; any other failure fails the turn.
func (s *session) refuse(res *TurnResult, what string, err error) {
	switch code := activities.CodeOf(err); code {
	case activities.CodeNotFound, activities.CodeInvalidArgument, activities.CodeConflict, activities.CodeDocumentChanged:
		res.Status, res.ErrorCode, res.Error = TurnRejected, code, what+": "+rootMessage(err)
	default:
		s.fail(res, what, err)
	}
}

// fail marks the turn failed and the session degraded. The user's message
// stays in the transcript; no answer is invented.
func (s *session) fail(res *TurnResult, what string, err error) {
	res.Status, res.ErrorCode = TurnFailed, activities.CodeOf(err)
	res.Error = what + ": " + rootMessage(err)
	s.st.Health, s.st.DegradedReason = HealthDegraded, res.Error
	s.logger.Warn("turn failed", "turn", res.TurnID, "error", err)
}

// rootMessage is what went wrong in err, without Temporal's wrapping
// ([activities.Cause]).
func rootMessage(err error) string {
	_, msg := activities.Cause(err)
	return msg
}
