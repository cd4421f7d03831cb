package workflows_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/activities/offline"
	"github.com/ctxflow/ctxflow/lexical"
	"github.com/ctxflow/ctxflow/workflows"
)

// fakeKB answers a keyword search with the documents listed for its text:
// ids "<query with _ for spaces>-<i>", texts as given. A text containing "GOOD" is relevant to
// the fake grader; one containing "DROP" is dropped by the fake relevance
// filter, which keeps the others.
type fakeKB struct {
	mu       sync.Mutex
	docs     map[string][]string
	count    int
	searches []string
	fail     map[string]bool // queries whose search fails
	flaky    map[string]int  // queries whose next n searches fail
	// any are the documents of a query docs does not list.
	any []string
}

func (k *fakeKB) Upsert(context.Context, []activities.Chunk) error { return nil }
func (k *fakeKB) DeleteDocument(context.Context, string) error     { return nil }
func (k *fakeKB) Info(context.Context) (activities.CollectionInfo, error) {
	return activities.CollectionInfo{Name: "kb", Dimension: 4, Count: k.count}, nil
}

func (k *fakeKB) Search(_ context.Context, req activities.SearchRequest) ([]activities.Hit, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.searches = append(k.searches, req.Text)
	if k.fail[req.Text] {
		return nil, errors.New("vector store unreachable")
	}
	if k.flaky[req.Text] > 0 {
		k.flaky[req.Text]--
		return nil, errors.New("vector store unreachable")
	}
	var hits []activities.Hit
	docs, ok := k.docs[req.Text]
	if !ok {
		docs = k.any
	}
	for i, text := range docs {
		hits = append(hits, activities.Hit{
			Chunk: activities.Chunk{ID: fmt.Sprintf("%s-%d", strings.ReplaceAll(req.Text, " ", "_"), i), DocumentID: req.Text, Text: text},
			Score: 1 / float64(i+1),
		})
	}
	return hits, nil
}

// fakeEmbedder embeds every text as the same 4-dimensional vector.
type fakeEmbedder struct{}

func (fakeEmbedder) Embed(_ context.Context, _ string, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i := range out {
		out[i] = []float32{1, 0, 0, 0}
	}
	return out, nil
}

type fakeGrader struct{ err error }

func (g fakeGrader) Grade(_ context.Context, _, _, doc string) (activities.Grade, error) {
	if g.err != nil {
		return activities.Grade{}, g.err
	}
	ok := strings.Contains(doc, "GOOD")
	return activities.Grade{IsRelevant: ok, Confidence: 0.9, Reasoning: fmt.Sprintf("GOOD in document: %v", ok)}, nil
}

type fakeRelevance struct{}

func (fakeRelevance) Relevance(_, doc string) (bool, float64, string) {
	drop := strings.Contains(doc, "DROP")
	return !drop, 0.5, fmt.Sprintf("DROP in document: %v", drop)
}

// scriptedRewrites rewrites to the next query of its script.
type scriptedRewrites struct {
	mu      sync.Mutex
	queries []string
	seen    []activities.ReformulateRequest
}

func (s *scriptedRewrites) Reformulate(_ context.Context, _ string, req activities.ReformulateRequest) (activities.Reformulation, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen = append(s.seen, req)
	q := s.queries[min(len(s.seen)-1, len(s.queries)-1)]
	return activities.Reformulation{RewrittenQuery: q, RewriteReason: "scripted", Keywords: []string{q}}, nil
}

type ragHarness struct {
	env     *testsuite.TestWorkflowEnvironment
	kb      *fakeKB
	rewrite *scriptedRewrites
	mu      sync.Mutex
	inTask  map[string]int // local activities started, by type
	grades  []string       // the texts of the documents graded
}

// graded returns the texts of the documents graded so far.
func (h *ragHarness) graded() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.grades)
}

// recordGrade notes the document of a GradeDoc call.
func (h *ragHarness) recordGrade(info *activity.Info, args []any) {
	if info.ActivityType.Name != "GradeDoc" || len(args) == 0 {
		return
	}
	if in, ok := args[0].(activities.GradeInput); ok {
		h.grades = append(h.grades, in.Doc.Text)
	}
}

func newRAGHarness(t *testing.T, docs map[string][]string, rewrites []string, grader activities.Grader) *ragHarness {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	kb := &fakeKB{docs: docs, count: 100}
	rw := &scriptedRewrites{queries: rewrites}
	env.RegisterWorkflowWithOptions(workflows.CorrectiveRAGWorkflow, workflow.RegisterOptions{Name: workflows.CorrectiveRAGWorkflowName})
	env.RegisterActivity(&activities.RAG{
		Store: kb, Grader: grader, Reformulator: rw, Relevance: fakeRelevance{},
		Model: &offline.Engine{}, Engine: "offline",
	})
	h := &ragHarness{env: env, kb: kb, rewrite: rw, inTask: map[string]int{}}
	env.SetOnLocalActivityStartedListener(func(info *activity.Info, _ context.Context, args []any) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.inTask[info.ActivityType.Name]++
		h.recordGrade(info, args)
	})
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, args converter.EncodedValues) {
		var in activities.GradeInput
		if info.ActivityType.Name != "GradeDoc" || args.Get(&in) != nil {
			return
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		h.grades = append(h.grades, in.Doc.Text)
	})
	return h
}

func (h *ragHarness) run(t *testing.T, in workflows.CorrectiveInput) workflows.CorrectiveResult {
	t.Helper()
	in.SearchMode = "keyword"
	h.env.ExecuteWorkflow(workflows.CorrectiveRAGWorkflowName, in)
	if !h.env.IsWorkflowCompleted() {
		t.Fatal("workflow did not complete")
	}
	if err := h.env.GetWorkflowError(); err != nil {
		t.Fatalf("workflow error: %v", err)
	}
	var res workflows.CorrectiveResult
	if err := h.env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	return res
}

func nodes(res workflows.CorrectiveResult) []string {
	var out []string
	for _, n := range res.Workflow.NodeExecutions {
		out = append(out, n.Node+":"+n.Status)
	}
	return out
}

func usedIDs(res workflows.CorrectiveResult) []string {
	var out []string
	for _, d := range res.Retrieval.Documents {
		if d.Passed {
			out = append(out, d.ID)
		}
	}
	return out
}

func TestCorrectivePassesFirstTime(t *testing.T) {
	h := newRAGHarness(t, map[string][]string{
		"pixel price": {"GOOD The Pixel 8 costs 699 dollars.", "GOOD Pixel 8 price list.", "GOOD pixel price history", "weather", "GOOD pixel price again"},
	}, []string{"unused"}, fakeGrader{})
	res := h.run(t, workflows.CorrectiveInput{Query: "pixel price", MaxRewriteAttempts: 3, GradePassThreshold: 0.6, IncludeText: true})

	if got, want := nodes(res), []string{"retrieve:ok", "grade:ok", "generate:ok"}; !slices.Equal(got, want) {
		t.Errorf("nodes = %v, want %v", got, want)
	}
	g := res.GraderResult
	if g.PassCount != 4 || g.TotalCount != 5 || g.PassRate != 0.8 || g.ShouldRewrite {
		t.Errorf("grader result = %+v", g)
	}
	if res.Query.WasRewritten || res.Query.RewriteCount != 0 || res.Query.Final != "pixel price" || len(res.RewriteHistory) != 0 {
		t.Errorf("query = %+v, history %v", res.Query, res.RewriteHistory)
	}
	if len(h.rewrite.seen) != 0 {
		t.Errorf("rewriter called %d times", len(h.rewrite.seen))
	}
	if res.Retrieval.TotalDocuments != 5 || res.Retrieval.FilteredDocuments != 4 || res.Retrieval.Documents[0].Text == "" {
		t.Errorf("retrieval = %+v", res.Retrieval)
	}
	// The offline engine answered from the passed documents only, citing them.
	if !strings.Contains(res.Answer, "[pixel_price-1]") || strings.Contains(res.Answer, "pixel_price-3") || res.Engine != "offline" {
		t.Errorf("answer = %q (engine %q)", res.Answer, res.Engine)
	}
	if last := res.Workflow.DecisionPath[len(res.Workflow.DecisionPath)-1]; last != "generate" {
		t.Errorf("decision path = %v", res.Workflow.DecisionPath)
	}
}

func TestCorrectiveRewritesThenPasses(t *testing.T) {
	for _, fast := range []bool{false, true} { // activities; fast model calls in the workflow task
		t.Run(fmt.Sprintf("fast=%v", fast), func(t *testing.T) {
			h := newRAGHarness(t, map[string][]string{
				"how much is it":   {"GOOD pixel 8 costs 699", "noise", "noise again", "more noise", "still noise"},
				"pixel 8 price":    {"GOOD the pixel 8 price is 699 dollars", "GOOD pixel 8 price in euros is 799", "GOOD pixel 8 launch price"},
				"never reached me": {"GOOD"},
			}, []string{"pixel 8 price", "never reached me"}, fakeGrader{})
			res := h.run(t, workflows.CorrectiveInput{Query: "how much is it", MaxRewriteAttempts: 3, GradePassThreshold: 0.6, FastModel: fast})

			want := []string{"retrieve:ok", "grade:ok", "rewrite:ok", "retrieve:ok", "grade:ok", "generate:ok"}
			if got := nodes(res); !slices.Equal(got, want) {
				t.Errorf("nodes = %v, want %v", got, want)
			}
			if !res.Query.WasRewritten || res.Query.RewriteCount != 1 || res.Query.Final != "pixel 8 price" {
				t.Errorf("query = %+v", res.Query)
			}
			if len(res.RewriteHistory) != 1 || res.RewriteHistory[0].From != "how much is it" || res.RewriteHistory[0].RewrittenQuery != "pixel 8 price" {
				t.Errorf("rewrite history = %+v", res.RewriteHistory)
			}
			// The rewriter saw the failed query, the original and what it retrieved.
			seen := h.rewrite.seen[0]
			if seen.Original != "how much is it" || seen.Current != "how much is it" || len(seen.Failed) != 5 {
				t.Errorf("rewriter request = %+v", seen)
			}
			// Documents that passed in either round are used.
			if got := usedIDs(res); !slices.Equal(got, []string{"how_much_is_it-0", "pixel_8_price-0", "pixel_8_price-1", "pixel_8_price-2"}) {
				t.Errorf("used documents = %v", got)
			}
			if g := res.GraderResult; g.PassCount != 3 || g.TotalCount != 3 || g.ShouldRewrite {
				t.Errorf("last grader result = %+v", g)
			}
			if want := map[bool]int{true: 8, false: 0}[fast]; h.inTask["GradeDoc"] != want || h.inTask["Reformulate"] != map[bool]int{true: 1}[fast] {
				t.Errorf("in the workflow task: %v, want %d grades and a rewrite only when fast", h.inTask, want)
			}
		})
	}
}

func TestCorrectiveNeverPassesStopsAtLimit(t *testing.T) {
	h := newRAGHarness(t, map[string][]string{
		"q0": {"noise a", "noise b"}, "q1": {"noise c"}, "q2": {"noise d"}, "q3": {"noise e"},
	}, []string{"q1", "q2", "q3"}, fakeGrader{})
	res := h.run(t, workflows.CorrectiveInput{Query: "q0", MaxRewriteAttempts: 2, GradePassThreshold: 0.6})

	want := []string{"retrieve:ok", "grade:ok", "rewrite:ok", "retrieve:ok", "grade:ok", "rewrite:ok", "retrieve:ok", "grade:ok", "generate:ok"}
	if got := nodes(res); !slices.Equal(got, want) {
		t.Errorf("nodes = %v, want %v", got, want)
	}
	if res.Query.RewriteCount != 2 || res.Query.Final != "q2" || len(h.rewrite.seen) != 2 {
		t.Errorf("query = %+v, rewriter calls %d", res.Query, len(h.rewrite.seen))
	}
	if !strings.Contains(res.Workflow.DecisionPath[len(res.Workflow.DecisionPath)-2], "rewrite limit 2 reached") {
		t.Errorf("decision path = %v", res.Workflow.DecisionPath)
	}
	if res.Retrieval.FilteredDocuments != 0 || res.Retrieval.TotalDocuments != 4 {
		t.Errorf("retrieval = %+v", res.Retrieval)
	}
	// The answer is honest: nothing relevant, naming the question.
	if !strings.Contains(res.Answer, "The knowledge base has nothing on “q0”") {
		t.Errorf("answer = %q", res.Answer)
	}
	// The second rewrite saw the first in its history.
	if h := h.rewrite.seen[1].History; len(h) != 1 || h[0].RewrittenQuery != "q1" {
		t.Errorf("rewrite history shown to the rewriter = %+v", h)
	}
}

func TestCorrectiveGraderFailureDegradesToFilter(t *testing.T) {
	for _, fast := range []bool{false, true} { // activities; fast model calls in the workflow task
		t.Run(fmt.Sprintf("fast=%v", fast), func(t *testing.T) {
			h := newRAGHarness(t, map[string][]string{
				"q": {"KEEP one", "KEEP two", "DROP three"},
			}, []string{"unused"}, fakeGrader{err: errors.New("grader model is down")})
			res := h.run(t, workflows.CorrectiveInput{Query: "q", MaxRewriteAttempts: 0, GradePassThreshold: 0.6, FastModel: fast})

			if got := nodes(res); !slices.Equal(got, []string{"retrieve:ok", "grade:degraded", "generate:ok"}) {
				t.Errorf("nodes = %v", got)
			}
			g := res.GraderResult
			if g.PassCount != 2 || g.ShouldRewrite || !strings.Contains(g.Degraded, "grader model is down") {
				t.Errorf("grader result = %+v", g)
			}
			for _, d := range res.Retrieval.Documents {
				if d.GradedBy != "relevance_filter" || d.Grade != nil || d.Passed != strings.HasPrefix(d.FilterReason, "matches") {
					t.Errorf("document %+v", d)
				}
			}
			if !slices.ContainsFunc(res.Workflow.DecisionPath, func(s string) bool { return strings.Contains(s, "relevance filter used") }) {
				t.Errorf("decision path = %v", res.Workflow.DecisionPath)
			}
			// A grader failure in the workflow task is tried again as an
			// activity, which fails too. (The dropped document is not graded.)
			if want := map[bool]int{true: 2, false: 0}[fast]; h.inTask["GradeDoc"] != want {
				t.Errorf("grades in the workflow task: %v, want %d", h.inTask, want)
			}
		})
	}
}

// TestCorrectiveFilterVerdictsBind: a document the relevance filter
// dropped is neither graded nor used, though the grader would pass it; it
// counts as failed in the pass rate; and one that passed in an earlier
// round keeps the verdicts it passed on. A run asks for the change with
// GetVersion unless its starter says it knows it (FilterBinds): then it
// does not ask (the version it would get here is the one before it).
func TestCorrectiveFilterVerdictsBind(t *testing.T) {
	for _, told := range []bool{false, true} {
		t.Run(fmt.Sprintf("told=%v", told), func(t *testing.T) {
			h := newRAGHarness(t, map[string][]string{
				"pixel 8 price": {"GOOD The Pixel 8 price is 699 dollars.", "GOOD DROP The Pixel 8 price was 799 dollars.", "noise"},
				"pixel price":   {"GOOD DROP The Pixel 8 price is 699 dollars.", "GOOD The Pixel 8 price in euros is 649."},
			}, []string{"pixel price"}, fakeGrader{})
			if told {
				h.env.OnGetVersion("filter-binds", workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
			}
			res := h.run(t, workflows.CorrectiveInput{Query: "pixel 8 price", MaxRewriteAttempts: 1, GradePassThreshold: 0.6, IncludeText: true, FilterBinds: told})
			filterVerdictsBind(t, h, res)
		})
	}
}

func filterVerdictsBind(t *testing.T, h *ragHarness, res workflows.CorrectiveResult) {
	t.Helper()
	byID := map[string]workflows.RAGDoc{}
	for _, d := range res.Retrieval.Documents {
		byID[d.ID] = d
		if !d.FilterKept && (d.Passed || d.Used || d.Grade != nil) {
			t.Errorf("dropped by the filter yet graded, passed or used: %+v", d)
		}
	}
	if d := byID["pixel_8_price-1"]; d.GradedBy != "relevance_filter" || d.Passed {
		t.Errorf("dropped document = %+v", d)
	}
	if got := usedIDs(res); !slices.Equal(got, []string{"pixel_8_price-0", "pixel_price-1"}) {
		t.Errorf("passed documents = %v", got)
	}
	// Round 1: 1 of 3 passed (the dropped document fails) → rewrite.
	if g := res.Workflow.NodeExecutions[1]; g.Detail != "1 of 3 passed (1 dropped by the relevance filter, not graded)" {
		t.Errorf("first grading = %+v", g)
	}
	if strings.Contains(res.Answer, "799") || !strings.Contains(res.Answer, "[pixel_8_price-0]") {
		t.Errorf("answer = %q", res.Answer)
	}
	for _, text := range h.graded() {
		if strings.Contains(text, "DROP") {
			t.Errorf("graded a dropped document: %q", text)
		}
	}
	if len(h.graded()) != 3 {
		t.Errorf("graded %q, want the 3 documents kept", h.graded())
	}
}

func TestCorrectiveStopsOnRepeatedRewrite(t *testing.T) {
	h := newRAGHarness(t, map[string][]string{"q": {"noise"}, "r": {"noise"}}, []string{"r", "R "}, fakeGrader{})
	res := h.run(t, workflows.CorrectiveInput{Query: "q", MaxRewriteAttempts: 5, GradePassThreshold: 0.5})
	if got := len(h.kb.searches); got != 2 {
		t.Errorf("%d searches (%v), want 2: a repeated query is not searched again", got, h.kb.searches)
	}
	if !strings.Contains(strings.Join(res.Workflow.DecisionPath, "\n"), "already tried") {
		t.Errorf("decision path = %v", res.Workflow.DecisionPath)
	}
	// Only the rewrite that searched counts.
	if len(res.RewriteHistory) != 1 || res.Query.RewriteCount != 1 || res.Query.Final != "r" {
		t.Errorf("rewrites = %+v, query %+v", res.RewriteHistory, res.Query)
	}
}

func TestCorrectiveEmptyKnowledgeBase(t *testing.T) {
	h := newRAGHarness(t, nil, []string{"unused"}, fakeGrader{})
	h.kb.count = 0
	res := h.run(t, workflows.CorrectiveInput{Query: "anything", MaxRewriteAttempts: 3})
	if got := nodes(res); !slices.Equal(got, []string{"retrieve:ok", "generate:ok"}) {
		t.Errorf("nodes = %v", got)
	}
	if len(h.kb.searches) != 0 || res.Answer == "" {
		t.Errorf("searches %v, answer %q", h.kb.searches, res.Answer)
	}
}

// newQAHarness is a session whose knowledge base is kb: turns that are not
// small talk take the qa route through the corrective child workflow.
func newQAHarness(t *testing.T, kb *fakeKB, rw *scriptedRewrites) *harness {
	t.Helper()
	store := newStore(t)
	return newHarnessWith(t, store, func(s *activities.Session, env *testsuite.TestWorkflowEnvironment) {
		s.Knowledge, s.SmallTalk, s.Rewriter = kb, lexical.SmallTalk{}, lexical.Rewriter{}
		env.RegisterWorkflowWithOptions(workflows.CorrectiveRAGWorkflow, workflow.RegisterOptions{Name: workflows.CorrectiveRAGWorkflowName})
		env.RegisterActivity(&activities.RAG{
			Store: kb, Grader: fakeGrader{}, Reformulator: rw, Relevance: fakeRelevance{},
			Embedders: []activities.NamedEmbedder{{Embedder: fakeEmbedder{}, Model: "fake-embed"}},
		})
	})
}

func stepNames(r workflows.TurnResult) string {
	var names []string
	for _, s := range r.Steps {
		names = append(names, s.Name+":"+s.Status)
	}
	return strings.Join(names, ",")
}

func TestSessionQARouteRunsCorrectiveLoop(t *testing.T) {
	kb := &fakeKB{count: 3, docs: map[string][]string{
		"What does the Pixel 8 cost?":          {"GOOD The Pixel 8 costs 699 dollars.", "noise"},
		"pixel 8 cost":                         {"GOOD Pixel 8: 699 dollars.", "GOOD The Pixel 8 price."},
		"What does the Pixel 8 weigh?":         {"GOOD The Pixel 8 weighs 187 g."},
		"Does the Pixel 8 come in green then?": {"GOOD The Pixel 8 comes in mint."},
	}}
	rw := &scriptedRewrites{queries: []string{"pixel 8 cost"}}
	h := newQAHarness(t, kb, rw)
	first := h.update(time.Second, workflows.TurnRequest{TurnID: "t-1", Question: "What does the Pixel 8 cost?"})
	hello := h.update(2*time.Second, workflows.TurnRequest{TurnID: "t-2", Question: "thanks!"})
	next := h.update(3*time.Second, workflows.TurnRequest{TurnID: "t-3", Question: "What does the Pixel 8 weigh?"})
	h.env.ExecuteWorkflow(workflows.SessionWorkflowName, h.input(workflows.Limits{IdleTTL: time.Hour}))

	r := first.result
	if r.Status != workflows.TurnCompleted || stepNames(r) != "load_context:ok,corrective_rag:ok,generate:ok,save:ok" {
		t.Fatalf("first turn: %s, steps %s, error %q", r.Status, stepNames(r), r.Error)
	}
	rag := r.Steps[1].Details
	if rag["rewriteCount"] != float64(1) && rag["rewriteCount"] != 1 {
		t.Errorf("corrective details = %v", rag)
	}
	if got := len(r.RetrievedDocs); got != 3 { // 1 from the first round, 2 after the rewrite
		t.Errorf("retrieved docs = %+v", r.RetrievedDocs)
	}
	// The child chose the documents; the session's generate step answered
	// from them, and the turn returns them with their text.
	for _, d := range r.RetrievedDocs {
		if !strings.HasPrefix(d.Text, "GOOD ") {
			t.Errorf("retrieved doc %s without its text: %+v", d.ID, d)
		}
	}
	if gen := r.Steps[2].Details; gen["retrievedDocs"] != float64(3) && gen["retrievedDocs"] != 3 {
		t.Errorf("generate details = %v", gen)
	}
	// The model saw the conversation and the documents that passed.
	call := h.model.calls[0]
	sys := call.Messages[len(call.Messages)-2].Content
	if !strings.Contains(sys, "699 dollars") || strings.Contains(sys, "noise") {
		t.Errorf("model view documents = %q", sys)
	}
	if s := stepNames(hello.result); s != "load_context:ok,generate:ok,save:ok" {
		t.Errorf("small talk steps = %s", s)
	}
	if d := hello.result.Steps[0].Details; d["route"] != "chat" || d["routeReason"] != "small talk" {
		t.Errorf("small talk route = %v", d)
	}
	// With history, the question is first made to stand alone.
	if s := stepNames(next.result); s != "load_context:ok,rewrite_query:ok,corrective_rag:ok,generate:ok,save:ok" {
		t.Errorf("third turn steps = %s", s)
	}
}

func TestCorrectiveUsesAtMostTopKPassedDocuments(t *testing.T) {
	h := newRAGHarness(t, map[string][]string{
		"q": {"GOOD a", "noise"}, "r": {"GOOD b", "GOOD c"},
	}, []string{"r"}, fakeGrader{})
	res := h.run(t, workflows.CorrectiveInput{Query: "q", TopK: 2, MaxRewriteAttempts: 1, GradePassThreshold: 0.6})
	var used []string
	for _, d := range res.Retrieval.Documents {
		if d.Used {
			used = append(used, d.ID)
		}
	}
	if !slices.Equal(used, []string{"q-0", "r-0"}) || res.Retrieval.FilteredDocuments != 2 || res.Retrieval.TotalDocuments != 4 {
		t.Errorf("used %v of %+v", used, res.Retrieval)
	}
}

func TestCorrectiveZeroThresholdNeverRewrites(t *testing.T) {
	h := newRAGHarness(t, map[string][]string{"q": {"noise"}}, []string{"r"}, fakeGrader{})
	res := h.run(t, workflows.CorrectiveInput{Query: "q", MaxRewriteAttempts: 3, GradePassThreshold: 0})
	if len(h.rewrite.seen) != 0 || res.GraderResult.ShouldRewrite {
		t.Errorf("a zero pass threshold rewrote: %+v", res.GraderResult)
	}
}

// TestFastRetrievalRunsInTheWorkflowTask: with FastRetrieve the child
// retrieves in its workflow task; a failure there that a retry may fix is
// retried as an activity.
func TestFastRetrievalRunsInTheWorkflowTask(t *testing.T) {
	for _, tc := range []struct {
		name       string
		fast       bool
		flaky      int
		inTaskRuns int
		inTask     bool
	}{
		{"activity", false, 0, 0, false},
		{"fast", true, 0, 1, true},
		{"fast, failing once in the task", true, 1, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newRAGHarness(t, map[string][]string{"Pixel 8 price": {"GOOD The Pixel 8 costs 699 dollars."}}, nil, fakeGrader{})
			h.kb.flaky = map[string]int{"Pixel 8 price": tc.flaky}
			res := h.run(t, workflows.CorrectiveInput{Query: "Pixel 8 price", GradePassThreshold: 0.6, FastRetrieve: tc.fast})
			n := res.Workflow.NodeExecutions[0]
			if n.Node != "retrieve" || n.Status != "ok" || n.InWorkflowTask != tc.inTask || res.Retrieval.Error != "" || res.Retrieval.FilteredDocuments != 1 {
				t.Errorf("retrieve node %+v, retrieval %+v", n, res.Retrieval)
			}
			if got := h.inTask["Retrieve"]; got != tc.inTaskRuns {
				t.Errorf("retrievals in the workflow task: %d, want %d", got, tc.inTaskRuns)
			}
		})
	}
}

func TestCorrectiveKeepsPassedDocumentsWhenALaterRetrievalFails(t *testing.T) {
	h := newRAGHarness(t, map[string][]string{"Pixel 8 price": {"GOOD The Pixel 8 costs 699 dollars.", "noise"}}, []string{"r"}, fakeGrader{})
	h.kb.fail = map[string]bool{"r": true}
	res := h.run(t, workflows.CorrectiveInput{Query: "Pixel 8 price", MaxRewriteAttempts: 1, GradePassThreshold: 0.6})
	if res.Retrieval.Error == "" || res.Retrieval.FilteredDocuments != 1 || !strings.Contains(res.Answer, "[Pixel_8_price-0]") {
		t.Errorf("retrieval %+v, answer %q", res.Retrieval, res.Answer)
	}
}

// TestFastQATurnPublishesRunningWhenItLeavesTheTask: on a fast model, a
// chat turn ends in its workflow task and publishes only its end; a qa
// turn, whose corrective child runs in tasks of its own, publishes
// "running" before it, unless its retrieval is known to be fast too: then
// the child ends within a fraction of a second and the turn stays quiet.
func TestFastQATurnPublishesRunningWhenItLeavesTheTask(t *testing.T) {
	kb := &fakeKB{count: 3, docs: map[string][]string{
		"What does the Pixel 8 cost?":  {"GOOD The Pixel 8 costs 699 dollars."},
		"What does the Pixel 8 weigh?": {"GOOD The Pixel 8 weighs 187 g."},
	}}
	h := newQAHarness(t, kb, &scriptedRewrites{})
	statuses := h.statuses()
	turns := []*outcome{
		h.update(time.Second, workflows.TurnRequest{TurnID: "t-1", Question: "thanks!"}),
		h.update(2*time.Second, workflows.TurnRequest{TurnID: "t-2", Question: "What does the Pixel 8 cost?"}),
		h.update(3*time.Second, workflows.TurnRequest{TurnID: "t-3", Question: "thanks!"}),
		h.update(4*time.Second, workflows.TurnRequest{TurnID: "t-4", Question: "What does the Pixel 8 weigh?"}),
	}
	h.env.ExecuteWorkflow(workflows.SessionWorkflowName, h.input(workflows.Limits{IdleTTL: time.Hour, FastModel: 500 * time.Millisecond}))

	qa := "load_context:ok,rewrite_query:ok,corrective_rag:ok,generate:ok,save:ok"
	want := []string{"load_context:ok,generate:ok,save:ok", qa, "load_context:ok,generate:ok,save:ok", qa}
	for i, o := range turns {
		if o.result.Status != workflows.TurnCompleted || stepNames(o.result) != want[i] {
			t.Errorf("turn %d: %s, steps %s", i+1, o.result.Status, stepNames(o.result))
		}
	}
	if d := turns[3].result.Steps[1].Details; d["inWorkflowTask"] != true {
		t.Errorf("rewrite_query of a fast model: %v", d)
	}
	// The first retrieval shows how fast it is; the next runs in the
	// child's workflow task.
	if d := turns[1].result.Steps[2].Details; d["retrieveInWorkflowTask"] != false {
		t.Errorf("the session's first retrieval: %v", d)
	}
	if d := turns[3].result.Steps[2].Details; d["retrieveInWorkflowTask"] != true || turns[3].result.Steps[2].Name != "corrective_rag" {
		t.Errorf("a retrieval after a fast one: %v", d)
	}
	// Start; t-1 (no answer time yet); t-2 (running before its child, whose
	// retrieval time is not known yet); t-3 (quiet); t-4 (quiet: its child
	// is fast).
	if got, want := *statuses, []string{"idle", "running", "idle", "running", "idle", "idle", "idle"}; !slices.Equal(got, want) {
		t.Errorf("published statuses %v, want %v", got, want)
	}
}
