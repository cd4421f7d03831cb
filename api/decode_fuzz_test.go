package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/api"
	"github.com/ctxflow/ctxflow/workflows"
)

// decodeRoutes are the /v1 routes whose JSON body the API decodes and
// validates (the JSONL import has FuzzImport): a fuzz input picks one by
// its first argument.
var decodeRoutes = []struct{ name, path string }{
	{"create", "/v1/sessions"},
	{"turn", "/v1/sessions/s1/turns"},
	{"task", "/v1/sessions/s1/tasks"},
	{"continue", "/v1/sessions/s1/continue"},
	{"branch", "/v1/sessions/s1/branch"},
	{"edit", "/v1/sessions/s1/messages/t1.u/edit"},
	{"fork", "/v1/sessions/s1/fork"},
	{"corrective", "/v1/rag/corrective"},
}

// decodeSeeds are, per route, bodies the API accepts and bodies it
// refuses, each for a reason of its own.
var decodeSeeds = map[string][]string{
	"create": {``, `{}`, `{"sessionId":"s2","title":"Pixel prices","config":{"maxRounds":5,"windowStrategy":"sliding_window","topK":3}}`,
		`{"config":{"maxSteps":0}}`, `{"title":"` + strings.Repeat("长", 70) + `"}`, `{"sessionId":"../x"}`, `{"config":null}`,
		`{"config":{"similarityThreshold":1.5}}`, `{"config":{"llmModel":"a b"}}`, `{"Title":"case"}`},
	"turn": {`{"question":"hi"}`, `{"question":"hi","turnId":"t-1","config":{"topK":4,"searchMode":"keyword"}}`,
		`{"question":"\u0007bell"}`, `{"question":" \t\n"}`, `{"question":"hi","config":{"maxTokens":10}}`,
		`{"question":"hi","config":{"embeddingModel":"x"}}`, `{"question":"hi"} {}`, "{\"question\":\"caf\xe9\"}",
		`{"question":"hi","config":{"topK":1e2}}`, `{"question":"\ud800"}`, `{"question":"a\u2028b\u0085c"}`},
	"task": {`{"goal":"How many orders?"}`, `{"goal":"继续","taskId":"task-1","config":{"maxSteps":200}}`,
		`{"goal":"x","config":{"maxSteps":201}}`, `{"goal":"x","config":{"maxSteps":-1}}`, `{"goal":"x","config":{"topK":3}}`},
	"continue": {``, `{}`, `{"turnId":"c-1"}`, `{"turnId":""}`, `{"turnId":"a b"}`, `null`, `[]`},
	"branch":   {`{"fromMessageId":"t0.a"}`, `{"fromMessageId":"t0.a","turnId":"b-1"}`, `{"fromMessageId":""}`, `{"fromMessageId":"a/b"}`},
	"edit":     {`{"content":"second, again"}`, `{"content":"x","config":{"topK":2}}`, `{"question":"x"}`, `{"content":""}`},
	"fork":     {`{"fromMessageId":"t0.a","sessionId":"s2"}`, `{"fromMessageId":"t0.a"}`, `{"fromMessageId":"t0.a","sessionId":"-s"}`},
	"corrective": {`{"query":"how much is it?","topK":3,"gradePassThreshold":0.8,"maxRewriteAttempts":0}`,
		`{"query":"x","topK":null,"searchMode":"dense","llmModel":"qwen2.5:0.5b"}`, `{"query":"x","milvusConfig":{}}`,
		`{"query":"x","searchMode":"all"}`, `{"query":"x","llmModel":""}`, `{"query":""}`},
}

// FuzzRequestDecoding: whatever the body of a /v1 request with a JSON
// body, the API answers without a panic or a 5xx. What it accepts reaches
// Temporal holding the documented invariants (ids of the ID pattern, a
// question that is non-blank UTF-8 of at most 32 KiB without control
// characters but tab, CR and LF, options in range), and a plain body (see
// isPlain) it accepts is one that openapi.json accepts, read member for
// member; anything else is a 400 invalid_argument (413 too_large past the
// body limit) that says why, with nothing started or changed in Temporal.
func FuzzRequestDecoding(f *testing.F) {
	for i, r := range decodeRoutes {
		for _, body := range decodeSeeds[r.name] {
			f.Add(uint8(i), []byte(body))
		}
	}
	router, names := openAPIRouter(f)
	defaults := workflows.DefaultSessionConfig()
	f.Fuzz(func(t *testing.T, route uint8, body []byte) {
		r := decodeRoutes[int(route)%len(decodeRoutes)]
		fc, got := decodeFake(t)
		w := do(api.New(fc, options()).Handler(), http.MethodPost, r.path, string(body))
		req := httptest.NewRequest(http.MethodPost, r.path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		op, params, err := router.FindRoute(req)
		if err != nil {
			t.Fatalf("openapi.json has no route %s: %v", r.path, err)
		}
		switch {
		case w.Code >= 200 && w.Code < 300:
			plain := isPlain(body, names)
			checkAccepted(t, r.name, body, plain, got, defaults)
			if plain && len(bytes.TrimSpace(body)) > 0 { // an empty body is allowed where optional
				in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: op,
					Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
				if err := openapi3filter.ValidateRequest(t.Context(), in); err != nil {
					t.Fatalf("%s accepted (%d) a body openapi.json refuses: %q\n%v", r.name, w.Code, body, err)
				}
			}
		case w.Code == http.StatusBadRequest || w.Code == http.StatusRequestEntityTooLarge:
			if n := got.mutations(); n > 0 {
				t.Fatalf("%s refused (%d) %q after %d calls that start or change a workflow", r.name, w.Code, body, n)
			}
			var e errorBody // the shape of openapi.json's Error (TestOpenAPIServed checks it there)
			dec := json.NewDecoder(bytes.NewReader(w.Body.Bytes()))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&e); err != nil {
				t.Fatalf("%s: error body %q: %v", r.name, w.Body, err)
			}
			want := map[int]string{http.StatusBadRequest: activities.CodeInvalidArgument, http.StatusRequestEntityTooLarge: activities.CodeTooLarge}[w.Code]
			if e.Error.Code != want || strings.TrimSpace(e.Error.Message) == "" || e.Error.RequestID == "" {
				t.Fatalf("%s refused %q with %d %s", r.name, body, w.Code, w.Body)
			}
		default:
			t.Fatalf("%s answered %d to %q: %s", r.name, w.Code, body, w.Body)
		}
	})
}

// openAPIRouter loads openapi.json and returns a router over its
// operations and the property names of the request bodies of decodeRoutes.
func openAPIRouter(tb testing.TB) (routers.Router, map[string]bool) {
	raw, err := os.ReadFile("openapi.json")
	if err != nil {
		tb.Fatal(err)
	}
	doc, err := openapi3.NewLoader().LoadFromData(raw)
	if err != nil {
		tb.Fatal(err)
	}
	router, err := legacy.NewRouter(doc)
	if err != nil {
		tb.Fatal(err)
	}
	names := map[string]bool{}
	var walk func(s *openapi3.Schema)
	walk = func(s *openapi3.Schema) {
		for name, p := range s.Properties {
			names[name] = true
			if p.Value != nil {
				walk(p.Value)
			}
		}
	}
	for _, r := range decodeRoutes {
		route, _, err := router.FindRoute(httptest.NewRequest(http.MethodPost, r.path, nil))
		if err != nil || route.Operation.RequestBody == nil {
			tb.Fatalf("openapi.json: no body for POST %s: %v", r.path, err)
		}
		walk(route.Operation.RequestBody.Value.Content.Get("application/json").Schema.Value)
	}
	return router, names
}

// isPlain reports a body in which every object member is spelled as
// openapi.json spells it, once, and not null, and no id is "". The API
// reads a body as encoding/json does: a key in another case ("Question")
// is the property, null is absence, and an empty optional id is absence
// (one is made) — openapi.json describes none of these, so only a plain
// body is held to the document and to its own members; every accepted
// body is held to the invariants of what reaches Temporal.
func isPlain(raw []byte, names map[string]bool) bool {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return len(raw) == 0 || string(raw) != "null"
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil {
		return false
	}
	var seen []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		key, _ := tok.(string)
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return false
		}
		for _, k := range seen {
			if strings.EqualFold(k, key) {
				return false
			}
		}
		seen = append(seen, key)
		if !names[key] || string(val) == "null" || strings.HasSuffix(key, "Id") && string(val) == `""` || !isPlain(val, names) {
			return false
		}
	}
	return true
}

// sentToTemporal is what the API asked of the fake Temporal.
type sentToTemporal struct {
	turns      []client.UpdateWithStartWorkflowOptions
	sessions   []workflows.SessionInput
	corrective []workflows.CorrectiveInput
	signals    int
}

// mutations counts the calls that start or change a workflow.
func (s *sentToTemporal) mutations() int {
	return len(s.turns) + len(s.sessions) + len(s.corrective) + s.signals
}

// decodeFake is a Temporal with session s1 live, no other session, and
// every turn and workflow completing at once; it records what it is sent.
func decodeFake(t *testing.T) (*fakeClient, *sentToTemporal) {
	fc := newFake(t)
	got := &sentToTemporal{}
	fc.QueryWorkflowFn = func(_ context.Context, workflowID, _, _ string, _ ...any) (converter.EncodedValue, error) {
		if workflowID != "session/default/s1" {
			return nil, serviceerror.NewNotFound("workflow not found")
		}
		return encode(t, workflows.SessionState{SessionID: "s1", ActiveLeaf: "t1.a", Status: workflows.StatusIdle}), nil
	}
	fc.DescribeWorkflowExecutionFn = func(context.Context, string, string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
		return nil, serviceerror.NewNotFound("workflow not found")
	}
	fc.UpdateWithStartWorkflowFn = func(_ context.Context, opts client.UpdateWithStartWorkflowOptions) (client.WorkflowUpdateHandle, error) {
		got.turns = append(got.turns, opts)
		req := opts.UpdateOptions.Args[0].(workflows.TurnRequest)
		return handle{id: opts.UpdateOptions.UpdateID, val: encode(t, workflows.TurnResult{TurnID: req.TurnID, Status: workflows.TurnCompleted, ActiveLeaf: "t1.a"})}, nil
	}
	fc.SignalWithStartWorkflowFn = func(context.Context, string, string, any, client.StartWorkflowOptions, any, ...any) (client.WorkflowRun, error) {
		got.signals++
		return nil, nil
	}
	fc.ExecuteWorkflowFn = func(_ context.Context, o client.StartWorkflowOptions, workflow any, args ...any) (client.WorkflowRun, error) {
		switch in := args[0].(type) {
		case workflows.SessionInput:
			got.sessions = append(got.sessions, in)
		case workflows.CorrectiveInput:
			got.corrective = append(got.corrective, in)
		default:
			t.Fatalf("ExecuteWorkflow(%v) with a %T", workflow, in)
		}
		return run{id: o.ID, get: result(t, workflows.CorrectiveResult{Answer: "ok"})}, nil
	}
	return fc, got
}

// checkAccepted checks what an accepted request sent to Temporal against
// the body, read again on its own (a generic decode, not the API's).
func checkAccepted(t *testing.T, route string, body []byte, plain bool, got *sentToTemporal, defaults workflows.SessionConfig) {
	t.Helper()
	if len(bytes.TrimSpace(body)) > 0 && (!utf8.Valid(body) || !json.Valid(body)) {
		t.Fatalf("%s accepted a body that is not one UTF-8 JSON value: %q", route, body)
	}
	var fields map[string]json.RawMessage
	_ = json.Unmarshal(body, &fields)
	// field is a string member of the body ("" when absent); the checks
	// against it are made on plain bodies only (see isPlain).
	field := func(name string) string {
		var s string
		_ = json.Unmarshal(fields[name], &s)
		return s
	}
	switch route {
	case "create":
		if len(got.sessions) != 1 || got.mutations() != 1 {
			t.Fatalf("create sent %+v", got)
		}
		in := got.sessions[0]
		checkID(t, "sessionId", in.SessionID)
		if len(in.Title) > 200 || plain && in.Title != field("title") {
			t.Fatalf("create: title %q from body %q", in.Title, body)
		}
		var cfg workflows.SessionConfig
		if err := json.Unmarshal(in.Config, &cfg); err != nil || cfg.Validate() != nil {
			t.Fatalf("create: config %s from body %q: %v %v", in.Config, body, err, cfg.Validate())
		}
		return
	case "corrective":
		if len(got.corrective) != 1 || got.mutations() != 1 {
			t.Fatalf("corrective sent %+v", got)
		}
		in := got.corrective[0]
		checkQuestion(t, in.Query)
		if plain && in.Query != field("query") {
			t.Fatalf("corrective: query %q from body %q", in.Query, body)
		}
		cfg := defaults
		cfg.TopK, cfg.SimilarityThreshold, cfg.MaxRewriteAttempts, cfg.GradePassThreshold, cfg.SearchMode, cfg.LLMModel =
			in.TopK, in.SimilarityThreshold, in.MaxRewriteAttempts, in.GradePassThreshold, in.SearchMode, in.Model
		if err := cfg.Validate(); err != nil || in.SearchMode == "" {
			t.Fatalf("corrective: options out of range %+v from body %q: %v", in, body, err)
		}
		return
	}
	if len(got.turns) != 1 || got.mutations() != 1 {
		t.Fatalf("%s sent %d turns, %d calls in all", route, len(got.turns), got.mutations())
	}
	opts := got.turns[0]
	req := opts.UpdateOptions.Args[0].(workflows.TurnRequest)
	if err := workflows.ValidateTurn(req, defaults, workflows.DefaultLimits()); err != nil {
		t.Fatalf("%s sent a turn its own validation refuses: %+v: %v", route, req, err)
	}
	checkID(t, "turnId", req.TurnID)
	checkQuestion(t, req.Question)
	if opts.UpdateOptions.UpdateID != workflows.TurnUpdateID(opts.UpdateOptions.UpdateName, req) {
		t.Fatalf("%s: update id %q for turn %+v", route, opts.UpdateOptions.UpdateID, req)
	}
	idField := "turnId"
	if route == "task" {
		idField = "taskId"
	}
	if id := field(idField); plain && id != "" && id != req.TurnID {
		t.Fatalf("%s: turn id %q, the body said %q", route, req.TurnID, id)
	}
	var kind, question string
	switch route {
	case "turn":
		question = field("question")
	case "task":
		kind = workflows.KindTask
		question = field("goal")
		var c struct {
			MaxSteps int `json:"maxSteps"`
		}
		_ = json.Unmarshal(fields["config"], &c)
		if req.MaxSteps < 0 || req.MaxSteps > 200 || plain && req.MaxSteps != c.MaxSteps {
			t.Fatalf("task: maxSteps %d from body %q", req.MaxSteps, body)
		}
	case "continue":
		kind, question = workflows.KindContinue, "continue"
	case "branch":
		kind, question = workflows.KindBranch, req.Question
		if plain && req.Target != field("fromMessageId") {
			t.Fatalf("branch: target %q from body %q", req.Target, body)
		}
		checkID(t, "fromMessageId", req.Target)
	case "edit":
		question = field("content")
		if req.EditOf != "t1.u" {
			t.Fatalf("edit of %q", req.EditOf)
		}
	case "fork":
		kind, question = workflows.KindImport, req.Question
		if req.Import == nil || req.Import.From == nil || plain && req.Import.Through != field("fromMessageId") ||
			*req.Import.From != (activities.SessionKey{Tenant: "default", SessionID: "s1"}) {
			t.Fatalf("fork: seed %+v from body %q", req.Import, body)
		}
		dst := opts.StartWorkflowOperation.(*startOp).opts.ID
		id, _ := strings.CutPrefix(dst, "session/default/")
		checkID(t, "sessionId", id)
		if want := field("sessionId"); plain && want != "" && want != id {
			t.Fatalf("fork into %s, the body said %q", dst, want)
		}
	}
	if req.Kind != kind || plain && req.Question != question {
		t.Fatalf("%s: turn of kind %q, question %q; want %q, %q (body %q)", route, req.Kind, req.Question, kind, question, body)
	}
	if _, err := workflows.ParseTurnOptions(req.Config); err != nil {
		t.Fatalf("%s: config %s: %v", route, req.Config, err)
	}
}

// checkID checks an id against the documented pattern, written out here.
func checkID(t *testing.T, what, id string) {
	t.Helper()
	ok := len(id) >= 1 && len(id) <= 128
	for i, r := range id {
		alnum := r < utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsDigit(r))
		ok = ok && (alnum || i > 0 && strings.ContainsRune("._:-", r))
	}
	if !ok {
		t.Fatalf("%s %q sent to Temporal is not an id", what, id)
	}
}

// checkQuestion checks a question against the documented rules, written
// out here: non-blank UTF-8 of at most 32 KiB with no control character
// but tab, CR and LF.
func checkQuestion(t *testing.T, q string) {
	t.Helper()
	if !utf8.ValidString(q) || strings.TrimSpace(q) == "" || len(q) > 32<<10 {
		t.Fatalf("question %q sent to Temporal", q)
	}
	for _, r := range q {
		if r < 0x20 && r != '\t' && r != '\r' && r != '\n' || r >= 0x7f && r <= 0x9f {
			t.Fatalf("question %q sent to Temporal holds the control character %U", q, r)
		}
	}
}
