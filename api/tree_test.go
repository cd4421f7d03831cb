package api_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/api"
	"github.com/ctxflow/ctxflow/convo"
	"github.com/ctxflow/ctxflow/workflows"
)

// fakeTranscripts serves one session's messages.
type fakeTranscripts struct{ msgs []convo.Message }

func (f fakeTranscripts) Get(_ context.Context, _ activities.SessionKey, id string) (convo.Message, bool, error) {
	for _, m := range f.msgs {
		if m.ID == id {
			return m, true, nil
		}
	}
	return convo.Message{}, false, nil
}

func (f fakeTranscripts) Branch(context.Context, activities.SessionKey, string) ([]convo.Message, error) {
	return nil, fmt.Errorf("not used")
}

func (f fakeTranscripts) All(context.Context, activities.SessionKey) ([]convo.Message, error) {
	return f.msgs, nil
}

// forked is a transcript with two branches below t0.a: t1 (older) and t2
// (the active one, an edit of t1's question).
var forked = []convo.Message{
	{ID: "t0.u", Role: convo.RoleUser, Content: "first"},
	{ID: "t0.a", ParentID: "t0.u", Role: convo.RoleAssistant, Content: "one"},
	{ID: "t2.u", ParentID: "t0.a", Role: convo.RoleUser, Content: "second, edited"},
	{ID: "t1.u", ParentID: "t0.a", Role: convo.RoleUser, Content: strings.Repeat("长", 100)},
	{ID: "t1.a", ParentID: "t1.u", Role: convo.RoleAssistant, Content: "two"},
	{ID: "t2.a", ParentID: "t2.u", Role: convo.RoleAssistant, Content: "two, again"},
}

func treeServer(f *fakeClient, msgs []convo.Message, leaf string) http.Handler {
	f.QueryWorkflowFn = func(_ context.Context, workflowID, _, queryType string, _ ...any) (converter.EncodedValue, error) {
		if workflowID != "session/default/s1" {
			return nil, serviceerror.NewNotFound("workflow not found")
		}
		return encode(f.t, workflows.SessionState{SessionID: "s1", ActiveLeaf: leaf, Status: workflows.StatusIdle}), nil
	}
	opts := options()
	opts.Transcripts = fakeTranscripts{msgs}
	opts.UploadDir = f.t.(*testing.T).TempDir()
	return api.New(f, opts).Handler()
}

func TestTree(t *testing.T) {
	h := treeServer(newFake(t), forked, "t2.a")
	var tree struct {
		ActiveLeaf string   `json:"activeLeaf"`
		Roots      []string `json:"roots"`
		Nodes      []struct {
			ID, ParentID, Role, Preview string
			Children                    []string
		} `json:"nodes"`
	}
	w := do(h, http.MethodGet, "/v1/sessions/s1/tree", "")
	decode(t, w, &tree)
	got := []string{}
	for _, n := range tree.Nodes {
		got = append(got, fmt.Sprintf("%s<%s %s %v", n.ID, n.ParentID, n.Role, n.Children))
	}
	want := []string{"t0.u< user [t0.a]", "t0.a<t0.u assistant [t2.u t1.u]",
		"t2.u<t0.a user [t2.a]", "t1.u<t0.a user [t1.a]", "t1.a<t1.u assistant []", "t2.a<t2.u assistant []"}
	if w.Code != http.StatusOK || tree.ActiveLeaf != "t2.a" || !reflect.DeepEqual(tree.Roots, []string{"t0.u"}) || !reflect.DeepEqual(got, want) {
		t.Fatalf("tree = %d %+v\n%v", w.Code, tree, got)
	}
	if p := tree.Nodes[3].Preview; p != strings.Repeat("长", 26)+"…" {
		t.Errorf("preview %q", p)
	}
	wantError(t, do(h, http.MethodGet, "/v1/sessions/other/tree", ""), http.StatusNotFound, "not_found")
	// Without transcripts: 503, saying why.
	b := wantError(t, do(server(newFake(t)), http.MethodGet, "/v1/sessions/s1/tree", ""), http.StatusServiceUnavailable, "unavailable")
	if !strings.Contains(b.Error.Message, "cannot read transcripts") {
		t.Errorf("message %q", b.Error.Message)
	}
}

// TestExport: JSONL in seed 004's shape, parents first, the active branch
// last; X-Active-Leaf names the leaf; the import of it takes it back.
func TestExport(t *testing.T) {
	h := treeServer(newFake(t), forked, "t2.a")
	w := do(h, http.MethodGet, "/v1/sessions/s1/export", "")
	if w.Code != http.StatusOK || w.Header().Get("X-Active-Leaf") != "t2.a" || w.Header().Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("export = %d %v", w.Code, w.Header())
	}
	msgs, err := convo.DecodeJSONL(bytes.NewReader(w.Body.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range msgs {
		ids = append(ids, m.ID)
	}
	if want := []string{"t0.u", "t0.a", "t1.u", "t1.a", "t2.u", "t2.a"}; !reflect.DeepEqual(ids, want) {
		t.Errorf("export order %v, want %v", ids, want)
	}
	if !strings.HasPrefix(w.Body.String(), `{"id":"t0.u","parentId":null,"type":"user","content":"first"}`) {
		t.Errorf("first line %q", strings.SplitN(w.Body.String(), "\n", 2)[0])
	}
}

func TestImport(t *testing.T) {
	f := newFake(t)
	got := recordUpdate(t, f, func(opts client.UpdateWithStartWorkflowOptions) (client.WorkflowUpdateHandle, error) {
		req := opts.UpdateOptions.Args[0].(workflows.TurnRequest)
		return handle{id: opts.UpdateOptions.UpdateID, val: encode(t, workflows.TurnResult{TurnID: req.TurnID, Status: workflows.TurnCompleted,
			ActiveLeaf: "t2.a", SessionInfo: workflows.SessionInfo{Turns: 3}})}, nil
	})
	h := treeServer(f, forked, "t2.a")
	var body bytes.Buffer
	if err := convo.EncodeJSONL(&body, forked); err != nil {
		t.Fatal(err)
	}
	w := do(h, http.MethodPost, "/v1/sessions/import?sessionId=copy&leaf=t2.a", body.String())
	var res struct {
		SessionID, ActiveLeaf string
		Messages, Turns       int
	}
	decode(t, w, &res)
	if w.Code != http.StatusCreated || res.SessionID != "copy" || res.ActiveLeaf != "t2.a" || res.Messages != 6 {
		t.Fatalf("import = %d %s", w.Code, w.Body)
	}
	u := (*got)[0]
	if r := u.UpdateOptions.Args[0].(workflows.TurnRequest); r.Kind != workflows.KindImport || r.Import == nil || r.Import.Path == "" ||
		len(r.Import.SHA256) != 64 || r.Import.Leaf != "t2.a" || u.StartWorkflowOperation.(*startOp).opts.ID != "session/default/copy" {
		t.Errorf("import turn %+v", r)
	}
	for _, tc := range []struct{ name, query, body, want string }{
		{"empty", "", "", "empty"},
		{"not JSON", "", "{\"id\":\"a\",\"type\":\"user\",\"content\":\"x\"}\nnope\n", "line 2"},
		{"missing parent", "", `{"id":"b","parentId":"a","type":"user","content":"x"}` + "\n", "line 1"},
		{"bad id", "", `{"id":"a/b","type":"user","content":"x"}` + "\n", "entry 1"},
		{"child before its parent", "", `{"id":"b","parentId":"a","type":"assistant","content":"y"}` + "\n" + `{"id":"a","type":"user","content":"x"}` + "\n", "entry 1"},
		{"NUL", "", `{"id":"a","type":"user","content":"x\u0000y"}` + "\n", "U+0000"},
		{"control character", "", `{"id":"a","type":"user","content":"bell \u0007"}` + "\n", "U+0007"},
		{"orphan tool result", "", `{"id":"a","type":"user","content":"x"}` + "\n" + `{"id":"r","parentId":"a","type":"tool_result","toolCallId":"k","content":"{}"}` + "\n", "entry 2"},
		{"unknown leaf", "?leaf=zz", body.String(), `leaf "zz"`},
		{"bad session id", "?sessionId=..", body.String(), "sessionId"},
	} {
		b := wantError(t, do(h, http.MethodPost, "/v1/sessions/import"+tc.query, tc.body), http.StatusBadRequest, "invalid_argument")
		if !strings.Contains(b.Error.Message, tc.want) {
			t.Errorf("%s: message %q, want %q", tc.name, b.Error.Message, tc.want)
		}
	}
}

// TestTreeTurns: branch, edit and fork are turns of the right kind, sent to
// the right session.
func TestTreeTurns(t *testing.T) {
	f := newFake(t)
	got := recordUpdate(t, f, func(opts client.UpdateWithStartWorkflowOptions) (client.WorkflowUpdateHandle, error) {
		req := opts.UpdateOptions.Args[0].(workflows.TurnRequest)
		res := workflows.TurnResult{TurnID: req.TurnID, Status: workflows.TurnCompleted, ActiveLeaf: req.Target}
		if req.Target == "nope" {
			res = workflows.TurnResult{TurnID: req.TurnID, Status: workflows.TurnRejected, ErrorCode: activities.CodeNotFound, Error: `branch: session default/s1 has no message "nope"`}
		}
		return handle{id: opts.UpdateOptions.UpdateID, val: encode(t, res)}, nil
	})
	h := treeServer(f, forked, "t2.a")

	w := do(h, http.MethodPost, "/v1/sessions/s1/branch", `{"fromMessageId":"t1.a"}`)
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"activeLeaf":"t1.a"`) {
		t.Fatalf("branch = %d %s", w.Code, w.Body)
	}
	u := (*got)[0]
	if r := u.UpdateOptions.Args[0].(workflows.TurnRequest); r.Kind != workflows.KindBranch || r.Target != "t1.a" || u.UpdateOptions.UpdateName != workflows.UpdateTurn {
		t.Errorf("branch turn %+v", r)
	}
	wantError(t, do(h, http.MethodPost, "/v1/sessions/s1/branch", `{"fromMessageId":"nope"}`), http.StatusNotFound, "not_found")
	wantError(t, do(h, http.MethodPost, "/v1/sessions/s1/branch", `{"fromMessageId":"a/b"}`), http.StatusBadRequest, "invalid_argument")
	wantError(t, do(h, http.MethodPost, "/v1/sessions/other/branch", `{"fromMessageId":"t0.a"}`), http.StatusNotFound, "not_found")

	if w := do(h, http.MethodPost, "/v1/sessions/s1/messages/t1.u/edit", `{"content":"second, again"}`); w.Code != http.StatusAccepted {
		t.Fatalf("edit = %d %s", w.Code, w.Body)
	}
	if r := (*got)[len(*got)-1].UpdateOptions.Args[0].(workflows.TurnRequest); r.EditOf != "t1.u" || r.Question != "second, again" || r.Kind != "" {
		t.Errorf("edit turn %+v", r)
	}
	wantError(t, do(h, http.MethodPost, "/v1/sessions/s1/messages/t1.u/edit", `{"question":"x"}`), http.StatusBadRequest, "invalid_argument")
	// An unknown message: 404 at once, no turn sent, no session started.
	sent := len(*got)
	wantError(t, do(h, http.MethodPost, "/v1/sessions/s1/messages/nope.u/edit", `{"content":"x"}`), http.StatusNotFound, "not_found")
	wantError(t, do(h, http.MethodPost, "/v1/sessions/s1/fork", `{"fromMessageId":"nope","sessionId":"s3"}`), http.StatusNotFound, "not_found")
	if len(*got) != sent {
		t.Errorf("%d turns sent for unknown messages", len(*got)-sent)
	}

	w = do(h, http.MethodPost, "/v1/sessions/s1/fork", `{"fromMessageId":"t0.a","sessionId":"s2"}`)
	if w.Code != http.StatusCreated || !strings.Contains(w.Body.String(), `"sessionId":"s2"`) {
		t.Fatalf("fork = %d %s", w.Code, w.Body)
	}
	u = (*got)[len(*got)-1]
	r := u.UpdateOptions.Args[0].(workflows.TurnRequest)
	op := u.StartWorkflowOperation.(*startOp)
	if op.opts.ID != "session/default/s2" || r.Kind != workflows.KindImport || r.Import == nil || r.Import.From == nil ||
		*r.Import.From != (activities.SessionKey{Tenant: "default", SessionID: "s1"}) || r.Import.Through != "t0.a" {
		t.Errorf("fork turn %+v to %s", r, op.opts.ID)
	}
}

// FuzzImport: whatever the body, an import answers 201 or a 4xx that says
// why — never a panic or a 5xx — and a transcript it accepts decodes.
func FuzzImport(f *testing.F) {
	var good bytes.Buffer
	_ = convo.EncodeJSONL(&good, forked)
	f.Add(good.Bytes())
	f.Add([]byte(`{"id":"a","type":"user","content":"x"}` + "\n" + `{"id":"b","parentId":"a","type":"tool_call","content":"","toolCall":{"id":"c","name":"n","args":{}}}`))
	f.Add([]byte("\n\n{}\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		fc := newFake(t)
		recordUpdate(t, fc, func(opts client.UpdateWithStartWorkflowOptions) (client.WorkflowUpdateHandle, error) {
			req := opts.UpdateOptions.Args[0].(workflows.TurnRequest)
			return handle{id: opts.UpdateOptions.UpdateID, val: encode(t, workflows.TurnResult{TurnID: req.TurnID, Status: workflows.TurnCompleted})}, nil
		})
		w := do(treeServer(fc, nil, ""), http.MethodPost, "/v1/sessions/import", string(body))
		switch {
		case w.Code == http.StatusCreated:
			if _, err := convo.DecodeJSONL(bytes.NewReader(body)); err != nil {
				t.Fatalf("accepted a transcript that does not decode: %v", err)
			}
		case w.Code == http.StatusBadRequest || w.Code == http.StatusRequestEntityTooLarge:
		default:
			t.Fatalf("import answered %d: %s", w.Code, w.Body)
		}
	})
}
