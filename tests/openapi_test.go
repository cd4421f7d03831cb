package tests

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
)

// The document describes streams as the sequence of their items (see its
// info): these decoders turn a body into that sequence for the validator.
func init() {
	openapi3filter.RegisterBodyDecoder("text/event-stream", decodeSSE)
	openapi3filter.RegisterBodyDecoder("application/x-ndjson", decodeNDJSON)
}

// decodeSSE reads server-sent events as [{event, id?, data}], data parsed
// as JSON (an event whose data is not JSON is an error).
func decodeSSE(body io.Reader, _ http.Header, _ *openapi3.SchemaRef, _ openapi3filter.EncodingFn) (any, error) {
	events := []any{}
	ev := map[string]any{}
	var data []string
	sc := bufio.NewScanner(body)
	sc.Buffer(nil, 8<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if len(data) > 0 {
				var v any
				if err := json.Unmarshal([]byte(strings.Join(data, "\n")), &v); err != nil {
					return nil, fmt.Errorf("event %v: data is not JSON: %w", ev["event"], err)
				}
				ev["data"] = v
				if ev["event"] == nil {
					ev["event"] = "message"
				}
				events = append(events, ev)
			}
			ev, data = map[string]any{}, nil
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event", "id":
			ev[field] = value
		case "data":
			data = append(data, value)
		}
	}
	return events, sc.Err()
}

// decodeNDJSON reads one JSON value a line.
func decodeNDJSON(body io.Reader, _ http.Header, _ *openapi3.SchemaRef, _ openapi3filter.EncodingFn) (any, error) {
	lines := []any{}
	dec := json.NewDecoder(body)
	for dec.More() {
		var v any
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("line %d: %w", len(lines)+1, err)
		}
		lines = append(lines, v)
	}
	return lines, nil
}

// specClient sends requests to the API and checks each exchange against
// the OpenAPI document: the request (valid, or refused by the document
// when it is bad on purpose) and the real answer (status, headers, content
// type, body).
type specClient struct {
	t      *testing.T
	base   string
	key    string
	doc    *openapi3.T
	router routers.Router
	// seen lists the statuses each operation answered ("GET /v1/...").
	seen map[string][]int
}

// newSpecClient loads the document the API at base serves.
func newSpecClient(t *testing.T, base, key string) *specClient {
	t.Helper()
	var spec json.RawMessage
	if _, err := (apiClient{base: base, key: key}).do(t.Context(), http.MethodGet, "/v1/openapi.json", nil, &spec); err != nil {
		t.Fatal(err)
	}
	doc, err := openapi3.NewLoader().LoadFromData(spec)
	if err != nil {
		t.Fatalf("load the served document: %v", err)
	}
	router, err := legacy.NewRouter(doc) // validates it
	if err != nil {
		t.Fatal(err)
	}
	return &specClient{t: t, base: base, key: key, doc: doc, router: router, seen: map[string][]int{}}
}

type specCall struct {
	method, path string
	body         string
	ctype        string            // the body's Content-Type (default application/json)
	header       map[string]string // more request headers
	noKey        bool
	want         int // the status
	// bad: the request breaks the document on purpose, and the document
	// must refuse it too.
	bad bool
}

func (s *specClient) do(c specCall) (int, []byte) {
	s.t.Helper()
	newReq := func() *http.Request {
		var body io.Reader
		if c.body != "" {
			body = strings.NewReader(c.body)
		}
		req, err := http.NewRequestWithContext(s.t.Context(), c.method, s.base+c.path, body)
		if err != nil {
			s.t.Fatal(err)
		}
		if c.body != "" {
			req.Header.Set("Content-Type", c.ctype)
			if c.ctype == "" {
				req.Header.Set("Content-Type", "application/json")
			}
		}
		if !c.noKey && s.key != "" {
			req.Header.Set("Authorization", "Bearer "+s.key)
		}
		for k, v := range c.header {
			req.Header.Set(k, v)
		}
		return req
	}
	req := newReq()
	route, params, err := s.router.FindRoute(req)
	if err != nil {
		s.t.Fatalf("%s %s: no operation in the document: %v", c.method, c.path, err)
	}
	reqIn := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
	switch err := openapi3filter.ValidateRequest(s.t.Context(), reqIn); {
	case err != nil && !c.bad:
		s.t.Errorf("%s %s: the request does not match the document: %v", c.method, c.path, err)
	case err == nil && c.bad:
		s.t.Errorf("%s %s: the document accepts a request that is bad on purpose", c.method, c.path)
	}
	req = newReq()
	resp, err := httpClient.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", c.method, c.path, err)
	}
	data, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		s.t.Fatalf("%s %s: read the answer: %v", c.method, c.path, err)
	}
	if resp.StatusCode != c.want {
		s.t.Fatalf("%s %s = %d, want %d: %s", c.method, c.path, resp.StatusCode, c.want, tail(string(data), 2000))
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
		Status:                 resp.StatusCode, Header: resp.Header, Body: io.NopCloser(bytes.NewReader(data)),
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	if err := openapi3filter.ValidateResponse(s.t.Context(), in); err != nil {
		s.t.Errorf("%s %s answered %d %s, which does not match the document:\n%v\nbody: %s", c.method, c.path,
			resp.StatusCode, resp.Header.Get("Content-Type"), err, tail(string(data), 2000))
	}
	op := route.Method + " " + route.Path
	s.seen[op] = append(s.seen[op], resp.StatusCode)
	return resp.StatusCode, data
}

// poll repeats a call (each answer checked) until done says so.
func (s *specClient) poll(c specCall, done func(status int, body []byte) bool) {
	s.t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		if status, body := s.do(c); done(status, body) {
			return
		} else if time.Now().After(deadline) {
			s.t.Fatalf("%s %s: still %d %s after 90s", c.method, c.path, status, tail(string(body), 500))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func jsonField(t *testing.T, body []byte, path ...string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("decode %s: %v", tail(string(body), 500), err)
	}
	for _, p := range path {
		m, _ := v.(map[string]any)
		v = m[p]
	}
	return v
}

// needTranscripts are the operations the stack's API (no transcript
// reader) answers 503 only.
var needTranscripts = []string{"GET /v1/sessions/{id}/messages", "GET /v1/sessions/{id}/tree", "GET /v1/sessions/{id}/export"}

// TestOpenAPIMatchesRealAnswers calls every operation of the document on a
// real stack (API keys on, offline engine) with real requests, successes
// and the main errors, and validates every request and every answer
// against the document the API serves, so that the two cannot drift.
func TestOpenAPIMatchesRealAnswers(t *testing.T) {
	const key = "cfk_openapi"
	sum := sha256.Sum256([]byte(key))
	s := startStack(t, stackOptions{extraEnv: []string{"CTXFLOW_MODEL_PROVIDER=offline"}, keys: map[string]string{hex.EncodeToString(sum[:]): "acme"}})
	s.startWorker()
	defer func() {
		if t.Failed() {
			t.Log(s.workerLogs())
		}
	}()

	c := newSpecClient(t, s.base, key)
	start := time.Now()

	// The document itself, and the security scheme.
	c.do(specCall{method: "GET", path: "/v1/openapi.json", want: 200})
	c.do(specCall{method: "GET", path: "/v1/openapi.json", noKey: true, want: 401})
	c.do(specCall{method: "GET", path: "/v1/sessions", noKey: true, header: map[string]string{"Authorization": "Bearer cfk_unknown"}, want: 401})
	c.do(specCall{method: "GET", path: "/v1/sessions", header: map[string]string{"X-Tenant-ID": "beta"}, want: 400})

	// Documents: the knowledge base of the qa turns and the corrective query below.
	guide := "# ctxflow\n\nctxflow keeps the context of multi-turn conversations in Temporal workflows.\n\n" +
		"Run it with `make run`: one process with Temporal, the worker and the API.\n\n" +
		"Sessions store their transcripts; documents go to the vector store.\n"
	c.do(specCall{method: "POST", path: "/v1/documents?id=guide&wait=true", ctype: "text/markdown", body: guide, want: 200})
	var form bytes.Buffer
	mw := multipart.NewWriter(&form)
	fw, _ := mw.CreateFormFile("file", "notes.txt")
	_, _ = fw.Write([]byte("Notes: the offline engine answers without model weights.\n"))
	_ = mw.Close()
	c.do(specCall{method: "POST", path: "/v1/documents", ctype: mw.FormDataContentType(), body: form.String(), want: 202})
	c.do(specCall{method: "POST", path: "/v1/documents?id=empty", ctype: "text/plain", body: " \n", want: 400})
	c.do(specCall{method: "POST", path: "/v1/documents?id=x", ctype: "application/xml", body: "<a/>", want: 400, bad: true})
	c.do(specCall{method: "GET", path: "/v1/documents/guide", want: 200})
	c.do(specCall{method: "GET", path: "/v1/documents/nope", want: 404})
	c.poll(specCall{method: "GET", path: "/v1/documents/notes.txt", want: 200}, func(_ int, b []byte) bool { return jsonField(t, b, "status") == "completed" })
	c.do(specCall{method: "DELETE", path: "/v1/documents/notes.txt", want: 204})
	c.do(specCall{method: "DELETE", path: "/v1/documents/notes.txt", want: 404})
	c.do(specCall{method: "GET", path: "/v1/documents/notes.txt", want: 404})
	c.do(specCall{method: "GET", path: "/v1/documents/bad%20id", want: 400, bad: true})

	// Sessions.
	c.do(specCall{method: "POST", path: "/v1/sessions", body: `{"sessionId": "oa", "title": "OpenAPI tour", "config": {"maxSteps": 6}}`, want: 201})
	c.do(specCall{method: "POST", path: "/v1/sessions", body: `{"sessionId": "oa"}`, want: 409})
	c.do(specCall{method: "POST", path: "/v1/sessions", want: 201})
	c.do(specCall{method: "POST", path: "/v1/sessions", body: `{"config": {"topK": 0}}`, want: 400, bad: true})
	c.do(specCall{method: "POST", path: "/v1/sessions", body: `{"title": "` + strings.Repeat("x", 1100<<10) + `"}`, want: 413, bad: true})
	c.do(specCall{method: "GET", path: "/v1/sessions", want: 200})
	c.do(specCall{method: "GET", path: "/v1/sessions?status=idle&limit=1", want: 200})
	c.do(specCall{method: "GET", path: "/v1/sessions?status=bogus", want: 400, bad: true})
	c.do(specCall{method: "GET", path: "/v1/sessions?pageToken=garbage", want: 400})

	// Turns: waited for, queued, refused, streamed.
	c.do(specCall{method: "POST", path: "/v1/sessions/oa/turns?wait=true", body: `{"question": "What is ctxflow?", "turnId": "t1"}`, want: 200})
	c.do(specCall{method: "POST", path: "/v1/sessions/oa/turns", body: `{"question": "How do I run it?", "turnId": "t2"}`, want: 202})
	c.do(specCall{method: "POST", path: "/v1/sessions/oa/turns?wait=true", body: `{"question": "   "}`, want: 400})
	c.do(specCall{method: "POST", path: "/v1/sessions/oa/turns?wait=true", body: `{"question": "Another question", "turnId": "t1"}`, want: 409})
	c.do(specCall{method: "POST", path: "/v1/sessions/oa/turns", body: `{"question": "x", "bogus": 1}`, want: 400, bad: true})
	c.do(specCall{method: "POST", path: "/v1/sessions/oa/turns?wait=maybe", body: `{"question": "x"}`, want: 400, bad: true})
	_, stream := c.do(specCall{method: "POST", path: "/v1/sessions/oa/turns", header: map[string]string{"Accept": "text/event-stream"},
		body: `{"question": "Where are the transcripts?", "turnId": "t3"}`, want: 200})
	if !bytes.Contains(stream, []byte("event: final\n")) {
		t.Errorf("the stream has no final event:\n%s", stream)
	}
	_, resumed := c.do(specCall{method: "GET", path: "/v1/sessions/oa/turns/t3/events", header: map[string]string{"Last-Event-ID": "2"}, want: 200})
	if !bytes.Contains(resumed, []byte("event: final\n")) || bytes.Contains(resumed, []byte("id: 2\n")) {
		t.Errorf("the resumed stream (after event 2):\n%s", resumed)
	}
	c.do(specCall{method: "GET", path: "/v1/sessions/oa/turns/nope/events", header: map[string]string{"Accept": "text/event-stream"}, want: 404})
	c.do(specCall{method: "GET", path: "/v1/sessions/oa/turns/t3/events", header: map[string]string{"Last-Event-ID": "x"}, want: 400, bad: true})
	c.do(specCall{method: "GET", path: "/v1/sessions/oa/turns/t1", want: 200})
	c.do(specCall{method: "GET", path: "/v1/sessions/oa/turns/t2", want: 200})
	c.do(specCall{method: "GET", path: "/v1/sessions/oa/turns/nope", want: 404})
	c.do(specCall{method: "GET", path: "/v1/sessions/oa", want: 200})
	c.do(specCall{method: "GET", path: "/v1/sessions/nosuch", want: 404})
	c.do(specCall{method: "GET", path: "/v1/sessions/oa/steps", want: 200})
	c.do(specCall{method: "POST", path: "/v1/sessions/oa/compress", want: 202})
	c.do(specCall{method: "POST", path: "/v1/sessions/nosuch/compress", want: 404})

	// Trees. The stack's API reads no transcripts: those routes answer 503.
	for _, op := range needTranscripts {
		path := strings.Replace(strings.TrimPrefix(op, "GET "), "{id}", "oa", 1)
		c.do(specCall{method: "GET", path: path, want: 503})
	}
	c.do(specCall{method: "POST", path: "/v1/sessions/oa/branch", body: `{"fromMessageId": "t1.a"}`, want: 200})
	c.do(specCall{method: "POST", path: "/v1/sessions/oa/branch", body: `{"fromMessageId": "nope"}`, want: 404})
	c.do(specCall{method: "POST", path: "/v1/sessions/nosuch/branch", body: `{"fromMessageId": "t1.a"}`, want: 404})
	c.do(specCall{method: "POST", path: "/v1/sessions/oa/branch", body: `{}`, want: 400, bad: true})
	c.do(specCall{method: "POST", path: "/v1/sessions/oa/messages/t1.u/edit?wait=true", body: `{"content": "What is ctxflow, in one line?", "turnId": "e1"}`, want: 200})
	c.do(specCall{method: "POST", path: "/v1/sessions/oa/messages/t1.u/edit", body: `{"content": "什么是 ctxflow？", "turnId": "e2"}`, want: 202})
	c.do(specCall{method: "POST", path: "/v1/sessions/oa/messages/t1.a/edit?wait=true", body: `{"content": "not a question"}`, want: 400})
	c.do(specCall{method: "POST", path: "/v1/sessions/oa/messages/nope/edit?wait=true", body: `{"content": "x"}`, want: 404})
	c.do(specCall{method: "POST", path: "/v1/sessions/oa/fork", body: `{"fromMessageId": "t1.a", "sessionId": "oa-fork"}`, want: 201})
	c.do(specCall{method: "POST", path: "/v1/sessions/oa/fork", body: `{"fromMessageId": "t1.a", "sessionId": "oa-fork"}`, want: 409})
	transcript := `{"id":"i0.u","parentId":null,"type":"user","content":"Hello","timestamp":1700000000000}` + "\n" +
		`{"id":"i0.a","parentId":"i0.u","type":"assistant","content":"Hi!","timestamp":1700000001000}` + "\n"
	c.do(specCall{method: "POST", path: "/v1/sessions/import?sessionId=oa-import", ctype: "application/x-ndjson", body: transcript, want: 201})
	c.do(specCall{method: "POST", path: "/v1/sessions/import?sessionId=oa-import", ctype: "application/x-ndjson", body: transcript, want: 409})
	c.do(specCall{method: "POST", path: "/v1/sessions/import", ctype: "application/x-ndjson", body: `{"id":"b","parentId":"zz","type":"assistant","content":"y"}` + "\n", want: 400})
	c.do(specCall{method: "POST", path: "/v1/sessions/import", ctype: "application/x-ndjson", body: `{"id":"a","type":"robot","content":"y"}` + "\n", want: 400, bad: true})

	// Agent tasks on the demo shop: paused, canceled, queued, continued.
	_, paused := c.do(specCall{method: "POST", path: "/v1/sessions/shop/tasks?wait=true", body: `{"goal": "How many orders are there?", "taskId": "k1", "config": {"maxSteps": 1}}`, want: 200})
	if jsonField(t, paused, "type") != "pause" {
		t.Errorf("task k1 did not pause at its first step: %s", tail(string(paused), 1000))
	}
	c.do(specCall{method: "GET", path: "/v1/sessions/shop/tasks/k1", want: 200})
	c.do(specCall{method: "DELETE", path: "/v1/sessions/shop/tasks/k1", want: 204})
	c.do(specCall{method: "DELETE", path: "/v1/sessions/shop/tasks/k1", want: 409})
	c.do(specCall{method: "POST", path: "/v1/sessions/shop/continue?wait=true", want: 409})
	c.do(specCall{method: "GET", path: "/v1/sessions/shop/tasks/nope", want: 404})
	c.do(specCall{method: "DELETE", path: "/v1/sessions/shop/tasks/nope", want: 404})
	c.do(specCall{method: "POST", path: "/v1/sessions/shop/tasks", body: `{"taskId": "k9"}`, want: 400, bad: true})
	c.do(specCall{method: "POST", path: "/v1/sessions/shop2/tasks", body: `{"goal": "How many customers are there?", "taskId": "k2", "config": {"maxSteps": 1}}`, want: 202})
	turnDone := func(_ int, b []byte) bool {
		return jsonField(t, b, "status") != "queued" && jsonField(t, b, "status") != "running"
	}
	c.poll(specCall{method: "GET", path: "/v1/sessions/shop2/turns/k2", want: 200}, turnDone)
	c.do(specCall{method: "POST", path: "/v1/sessions/shop2/continue", body: `{"turnId": "c1"}`, want: 202})
	c.poll(specCall{method: "GET", path: "/v1/sessions/shop2/turns/c1", want: 200}, turnDone)
	c.do(specCall{method: "POST", path: "/v1/sessions/shop2/continue?wait=true", body: `{"turnId": "c2"}`, want: 200})
	c.do(specCall{method: "GET", path: "/v1/sessions/shop2/tasks/k2", want: 200})

	// The approval gate (issue 25, item 1): every tool of shop3 waits for
	// approval; a rejected call is an observation and the task goes on.
	c.do(specCall{method: "POST", path: "/v1/sessions", body: `{"sessionId": "shop3", "config": {"maxSteps": 2, "approveTools": ["*"], "approvalTimeout": "1h"}}`, want: 201})
	_, gated := c.do(specCall{method: "POST", path: "/v1/sessions/shop3/tasks?wait=true", body: `{"goal": "How many orders are there?", "taskId": "k3"}`, want: 200})
	var gate struct {
		Type    string `json:"type"`
		Pending []struct {
			CallID string `json:"callId"`
		} `json:"pending"`
	}
	if err := json.Unmarshal(gated, &gate); err != nil || gate.Type != "approval" || len(gate.Pending) == 0 {
		t.Fatalf("task k3 did not wait for approval: %v %s", err, tail(string(gated), 1000))
	}
	approvals := "/v1/sessions/shop3/tasks/k3/approvals/"
	c.do(specCall{method: "GET", path: "/v1/sessions/shop3/tasks/k3", want: 200})
	c.do(specCall{method: "POST", path: approvals + "nope", body: `{"decision": "approve"}`, want: 404})
	c.do(specCall{method: "POST", path: approvals + gate.Pending[0].CallID, body: `{"decision": "maybe"}`, want: 400, bad: true})
	c.do(specCall{method: "POST", path: approvals + gate.Pending[0].CallID, body: `{"decision": "reject", "message": "not now"}`, want: 200})
	c.do(specCall{method: "POST", path: approvals + gate.Pending[0].CallID, body: `{"decision": "approve"}`, want: 409})
	// Cancel (issue 25, item 3): a turn queued behind the waiting task is
	// dropped; cancelling it again is a conflict, an unknown turn not found.
	c.do(specCall{method: "POST", path: "/v1/sessions/shop3/turns", body: `{"question": "And after that?", "turnId": "q9"}`, want: 202})
	c.do(specCall{method: "POST", path: "/v1/sessions/shop3/turns/q9/cancel", want: 200})
	c.do(specCall{method: "POST", path: "/v1/sessions/shop3/turns/q9/cancel", want: 409})
	c.do(specCall{method: "POST", path: "/v1/sessions/shop3/turns/nope/cancel", want: 404})

	// The corrective query.
	c.do(specCall{method: "POST", path: "/v1/rag/corrective", body: `{"query": "How do I run ctxflow?", "topK": 3}`, want: 200})
	c.do(specCall{method: "POST", path: "/v1/rag/corrective", body: `{"query": ""}`, want: 400, bad: true})
	c.do(specCall{method: "POST", path: "/v1/rag/corrective", body: `{"query": "x", "milvusConfig": {}}`, want: 400, bad: true})
	c.do(specCall{method: "POST", path: "/v1/rag/corrective", body: `{"query": "x", "topK": 0}`, want: 400, bad: true})

	// Deleting sessions.
	c.do(specCall{method: "DELETE", path: "/v1/sessions/oa-fork", want: 204})
	c.do(specCall{method: "DELETE", path: "/v1/sessions/oa-fork", want: 404})
	c.do(specCall{method: "DELETE", path: "/v1/sessions/bad%20id", want: 400, bad: true})
	// Erasing one: a deleted session can still be erased, then nothing is left.
	c.do(specCall{method: "DELETE", path: "/v1/sessions/oa-fork?erase=true", want: 204})
	c.do(specCall{method: "DELETE", path: "/v1/sessions/oa-fork?erase=true", want: 404})
	c.do(specCall{method: "DELETE", path: "/v1/sessions/oa-fork?erase=maybe", want: 400, bad: true})

	// Every operation was called, and answered a success (the transcript
	// readers: their 503).
	var calls, ops int
	for path, item := range c.doc.Paths.Map() {
		for method := range item.Operations() {
			ops++
			op := method + " " + path
			statuses := c.seen[op]
			calls += len(statuses)
			ok := slices.ContainsFunc(statuses, func(s int) bool { return s < 300 })
			if slices.Contains(needTranscripts, op) {
				ok = slices.Contains(statuses, http.StatusServiceUnavailable)
			}
			if !ok {
				t.Errorf("%s: never answered a success in this test (statuses %v)", op, statuses)
			}
		}
	}
	t.Logf("%d operations, %d requests and answers validated against the document in %v", ops, calls, time.Since(start).Round(time.Millisecond))
}

// TestOpenAPITranscriptRoutes validates the answers of the routes that read
// transcripts, which the stack's API cannot, against `ctxflow dev`: the
// messages of a branch, the tree, the export (JSONL) imported back, a task
// with its step log, and a stream with tokens (dev's in-process broker).
func TestOpenAPITranscriptRoutes(t *testing.T) {
	dir := t.TempDir()
	port := freePort(t)
	env := []string{
		fmt.Sprintf("CTXFLOW_HTTP_ADDR=127.0.0.1:%d", port), fmt.Sprintf("CTXFLOW_UI_PORT=%d", freePort(t)),
		fmt.Sprintf("CTXFLOW_TEMPORAL_PORT=%d", freePort(t)), "CTXFLOW_DATA_DIR=" + dir, "CTXFLOW_MODEL_PROVIDER=offline",
	}
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	startDev(t, env, apiClient{base: base}, filepath.Join(dir, "dev.log"))
	c := newSpecClient(t, base, "")
	c.do(specCall{method: "POST", path: "/v1/sessions/tr/turns?wait=true", body: `{"question": "Hello!", "turnId": "t0"}`, want: 200})
	c.do(specCall{method: "POST", path: "/v1/sessions/tr/turns?wait=true", body: `{"question": "你好吗？", "turnId": "t1"}`, want: 200})
	c.do(specCall{method: "POST", path: "/v1/sessions/tr/messages/t1.u/edit?wait=true", body: `{"content": "And now?", "turnId": "t2"}`, want: 200})
	_, stream := c.do(specCall{method: "POST", path: "/v1/sessions/tr/turns", header: map[string]string{"Accept": "text/event-stream"},
		body: `{"question": "Tell me more.", "turnId": "t3"}`, want: 200})
	if !bytes.Contains(stream, []byte("event: token\n")) || !bytes.Contains(stream, []byte("event: final\n")) {
		t.Errorf("the stream of ctxflow dev (in-process broker) has no token or no final event:\n%s", tail(string(stream), 2000))
	}
	c.do(specCall{method: "GET", path: "/v1/sessions/tr/messages", want: 200})
	c.do(specCall{method: "GET", path: "/v1/sessions/tr/messages?leaf=t1.a", want: 200})
	c.do(specCall{method: "GET", path: "/v1/sessions/tr/messages?leaf=nope", want: 404})
	_, tree := c.do(specCall{method: "GET", path: "/v1/sessions/tr/tree", want: 200})
	if nodes, _ := jsonField(t, tree, "nodes").([]any); len(nodes) != 8 {
		t.Errorf("tree: %s", tree)
	}
	c.do(specCall{method: "GET", path: "/v1/sessions/nosuch/tree", want: 404})
	_, jsonl := c.do(specCall{method: "GET", path: "/v1/sessions/tr/export", want: 200})
	c.do(specCall{method: "POST", path: "/v1/sessions/import?sessionId=tr-copy", ctype: "application/x-ndjson", body: string(jsonl), want: 201})
	c.do(specCall{method: "GET", path: "/v1/sessions/tr-copy", want: 200})
	c.do(specCall{method: "POST", path: "/v1/sessions/shop/tasks?wait=true", body: `{"goal": "How many orders are there?", "taskId": "k1", "config": {"maxSteps": 1}}`, want: 200})
	_, task := c.do(specCall{method: "GET", path: "/v1/sessions/shop/tasks/k1", want: 200})
	if msgs, _ := jsonField(t, task, "messages").([]any); len(msgs) == 0 {
		t.Errorf("a task read with transcripts has no messages: %s", tail(string(task), 1000))
	}
}
