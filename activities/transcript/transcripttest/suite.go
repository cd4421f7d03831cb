// Package transcripttest is the conformance suite every
// activities.TranscriptStore implementation runs: the same assertions for
// the file store, PostgreSQL and any test double.
package transcripttest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/convo"
)

// Run runs the suite. open must return a new, empty store and arrange for
// it to be released when t ends.
//
// A store may fail a call that overlaps a Delete of the same session with
// an error wrapping [fs.ErrClosed]; any other error fails the suite.
func Run(t *testing.T, open func(t *testing.T) activities.TranscriptStore) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, s activities.TranscriptStore)
	}{
		{"AppendAndRead", testAppendAndRead},
		{"AppendIsIdempotent", testAppendIsIdempotent},
		{"AppendRejectsBadMessages", testAppendRejectsBadMessages},
		{"ViewsMatchTree", testViewsMatchTree},
		{"Snapshot", testSnapshot},
		{"SnapshotReplace", testSnapshotReplace},
		{"Delete", testDelete},
		{"ConcurrentAppends", testConcurrentAppends},
		{"AppendLeafIsLinear", testAppendLeafIsLinear},
		{"DeleteDuringAppends", testDeleteDuringAppends},
		{"ContextCanceled", testContextCanceled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open(t)) })
	}
}

var key = activities.SessionKey{Tenant: "acme", SessionID: "s1"}

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// Msg returns a message of the given role; its time survives the JSONL round
// trip exactly (UTC, whole microseconds).
func Msg(id, parent string, role convo.Role, content string) convo.Message {
	return convo.Message{
		ID: id, ParentID: parent, Role: role, Content: content,
		Tokens:    len(strings.Fields(content)) + 4,
		CreatedAt: t0.Add(time.Duration(len(id)*1000+int(id[len(id)-1])) * time.Microsecond),
	}
}

// MustAppend appends a new message and checks the store returns it as is.
func MustAppend(tb testing.TB, s activities.TranscriptStore, k activities.SessionKey, m convo.Message) {
	tb.Helper()
	got, existed, err := s.Append(context.Background(), k, m)
	if err != nil {
		tb.Fatalf("Append(%s): %v", m.ID, err)
	}
	if existed {
		tb.Fatalf("Append(%s): existed = true for a new message", m.ID)
	}
	if !reflect.DeepEqual(got, m) {
		tb.Fatalf("Append(%s) returned %+v, want %+v", m.ID, got, m)
	}
}

// IDs are the ids of messages.
func IDs(ms []convo.Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	return out
}

// conversation is a session with a system prompt, two rounds, a tool call
// and its result, and a fork of the second question.
func conversation() []convo.Message {
	call := Msg("c1", "u2", convo.RoleToolCall, "")
	call.ToolCall = &convo.ToolCall{ID: "call-1", Name: "search", Args: json.RawMessage(`{"q":"go"}`)}
	res := Msg("r1", "c1", convo.RoleToolResult, "3 results")
	res.ToolCallID = "call-1"
	a2 := Msg("a2", "r1", convo.RoleAssistant, "Go is a language")
	a2.Meta = map[string]string{"engine": "offline", "model": "qwen2.5:0.5b"}
	return []convo.Message{
		Msg("sys", "", convo.RoleSystem, "you are helpful"),
		Msg("u1", "sys", convo.RoleUser, "hello there"),
		Msg("a1", "u1", convo.RoleAssistant, "hi how can I help"),
		Msg("u2", "a1", convo.RoleUser, "what is go"),
		call, res, a2,
		Msg("u2b", "a1", convo.RoleUser, "what is rust"), // a fork of u2
		Msg("a2b", "u2b", convo.RoleAssistant, "Rust is a language"),
	}
}

func testAppendAndRead(t *testing.T, s activities.TranscriptStore) {
	ctx := context.Background()
	conv := conversation()
	for _, m := range conv {
		MustAppend(t, s, key, m)
	}

	for _, m := range conv {
		got, ok, err := s.Get(ctx, key, m.ID)
		if err != nil || !ok {
			t.Fatalf("Get(%s) = ok %v, err %v", m.ID, ok, err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Errorf("Get(%s) = %+v, want %+v", m.ID, got, m)
		}
	}
	if _, ok, err := s.Get(ctx, key, "nope"); ok || err != nil {
		t.Errorf("Get(unknown) = ok %v, err %v; want false, nil", ok, err)
	}

	got, err := s.Messages(ctx, key, []string{"a2", "sys", "u2b"})
	if err != nil {
		t.Fatalf("Messages: %v", err)
	}
	if want := []string{"a2", "sys", "u2b"}; !reflect.DeepEqual(IDs(got), want) {
		t.Errorf("Messages ids = %v, want %v (the order asked for)", IDs(got), want)
	}
	if !reflect.DeepEqual(got[0], conv[6]) {
		t.Errorf("Messages[0] = %+v, want %+v", got[0], conv[6])
	}
	if _, err := s.Messages(ctx, key, []string{"u1", "nope"}); !errors.Is(err, activities.ErrNotFound) {
		t.Errorf("Messages with a missing id: err = %v, want ErrNotFound", err)
	}

	for leaf, want := range map[string][]string{
		"a2":  {"sys", "u1", "a1", "u2", "c1", "r1", "a2"},
		"a2b": {"sys", "u1", "a1", "u2b", "a2b"},
		"u1":  {"sys", "u1"},
	} {
		b, err := s.Branch(ctx, key, leaf)
		if err != nil {
			t.Fatalf("Branch(%s): %v", leaf, err)
		}
		if !reflect.DeepEqual(IDs(b), want) {
			t.Errorf("Branch(%s) = %v, want %v", leaf, IDs(b), want)
		}
	}
	if b, err := s.Branch(ctx, key, ""); err != nil || b != nil {
		t.Errorf("Branch(\"\") = %v, %v; want nil, nil", b, err)
	}
	if _, err := s.Branch(ctx, key, "nope"); !errors.Is(err, convo.ErrNotFound) {
		t.Errorf("Branch(unknown) err = %v, want ErrNotFound", err)
	}

	if n, err := s.Len(ctx, key); err != nil || n != len(conv) {
		t.Errorf("Len = %d, %v; want %d", n, err, len(conv))
	}
	if all, err := s.All(ctx, key); err != nil || !reflect.DeepEqual(all, conv) {
		t.Errorf("All = %v, %v; want %v (the order added)", IDs(all), err, IDs(conv))
	}
	if all, err := s.All(ctx, activities.SessionKey{Tenant: "acme", SessionID: "other"}); err != nil || len(all) != 0 {
		t.Errorf("All of another session = %v, %v; want none", IDs(all), err)
	}
	if n, err := s.Len(ctx, activities.SessionKey{Tenant: "acme", SessionID: "other"}); err != nil || n != 0 {
		t.Errorf("Len of another session = %d, %v; want 0", n, err)
	}

	cfg := convo.DefaultWindowConfig()
	cfg.Strategy = convo.StrategySlidingWindow
	cfg.MaxRounds = 1
	view, err := s.Assemble(ctx, key, "a2", cfg, convo.SummaryState{}, 0)
	if err != nil {
		t.Fatalf("Assemble: %v", err)
	}
	w := view.Trimmed
	if want := []string{"sys", "u2", "c1", "r1", "a2"}; !reflect.DeepEqual(IDs(w.Messages), want) {
		t.Errorf("Window(a2, 1 round) = %v, want %v", IDs(w.Messages), want)
	}
	if w.TrimmedCount != 2 {
		t.Errorf("Window TrimmedCount = %d, want 2 (u1, a1)", w.TrimmedCount)
	}
	branch, _ := s.Branch(ctx, key, "a2")
	want, err := convo.Trim(branch, cfg)
	if err != nil {
		t.Fatalf("Trim: %v", err)
	}
	if !reflect.DeepEqual(w, want) {
		t.Errorf("Window = %+v, want Trim(Branch) = %+v", w, want)
	}
	if _, err := s.Assemble(ctx, key, "nope", cfg, convo.SummaryState{}, 0); err == nil {
		t.Error("Window(unknown leaf) did not fail")
	}
	bad := cfg
	bad.MaxRounds = 0
	if _, err := s.Assemble(ctx, key, "a2", bad, convo.SummaryState{}, 0); !errors.Is(err, convo.ErrInvalidConfig) {
		t.Errorf("Window(bad config) err = %v, want ErrInvalidConfig", err)
	}

	// Sessions are separate: same ids, other tenant.
	other := activities.SessionKey{Tenant: "globex", SessionID: key.SessionID}
	if _, ok, err := s.Get(ctx, other, "u1"); ok || err != nil {
		t.Errorf("Get from another tenant = ok %v, err %v; want false, nil", ok, err)
	}
}

func testAppendIsIdempotent(t *testing.T, s activities.TranscriptStore) {
	ctx := context.Background()
	first := Msg("u1", "", convo.RoleUser, "first text")
	MustAppend(t, s, key, first)

	again := first
	again.Content = "a retried activity with other text"
	again.Tokens = 99
	got, existed, err := s.Append(ctx, key, again)
	if err != nil {
		t.Fatalf("second Append: %v", err)
	}
	if !existed {
		t.Error("second Append: existed = false, want true")
	}
	if !reflect.DeepEqual(got, first) {
		t.Errorf("second Append returned %+v, want the stored %+v", got, first)
	}
	if n, _ := s.Len(ctx, key); n != 1 {
		t.Errorf("Len = %d, want 1", n)
	}
	if m, _, _ := s.Get(ctx, key, "u1"); m.Content != "first text" {
		t.Errorf("stored content = %q, want the first", m.Content)
	}
	// An id that exists is reported even when the retry would not be
	// valid any more (its parent differs).
	again.ParentID = "ghost"
	if got, existed, err := s.Append(ctx, key, again); err != nil || !existed || got.Content != "first text" {
		t.Errorf("Append of an existing id with another parent = %+v, %v, %v", got, existed, err)
	}
}

func testAppendRejectsBadMessages(t *testing.T, s activities.TranscriptStore) {
	ctx := context.Background()
	MustAppend(t, s, key, Msg("u1", "", convo.RoleUser, "hi"))

	orphan := Msg("r1", "u1", convo.RoleToolResult, "result")
	orphan.ToolCallID = "call-x"
	for _, tc := range []struct {
		name string
		m    convo.Message
		want error
	}{
		{"missing parent", Msg("a1", "ghost", convo.RoleAssistant, "x"), convo.ErrMissingParent},
		{"empty id", convo.Message{Role: convo.RoleUser, Content: "x"}, convo.ErrInvalidMessage},
		{"unknown role", convo.Message{ID: "x1", Role: "robot", Content: "x"}, convo.ErrInvalidMessage},
		{"orphan tool result", orphan, convo.ErrOrphanResult},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := s.Append(ctx, key, tc.m)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Append err = %v, want %v", err, tc.want)
			}
			if n, _ := s.Len(ctx, key); n != 1 {
				t.Errorf("Len = %d after a rejected append, want 1", n)
			}
			if _, ok, _ := s.Get(ctx, key, tc.m.ID); ok && tc.m.ID != "" {
				t.Errorf("rejected message %s is readable", tc.m.ID)
			}
		})
	}
	// A rejected first message leaves no session behind.
	fresh := activities.SessionKey{Tenant: key.Tenant, SessionID: "fresh"}
	if _, _, err := s.Append(ctx, fresh, Msg("a1", "ghost", convo.RoleAssistant, "x")); !errors.Is(err, convo.ErrMissingParent) {
		t.Errorf("Append to a new session under a missing parent: err = %v", err)
	}
	if n, err := s.Len(ctx, fresh); n != 0 || err != nil {
		t.Errorf("Len of a session whose only append was rejected = %d, %v", n, err)
	}
	// The parent may come later: then the child is accepted.
	MustAppend(t, s, key, Msg("a1", "u1", convo.RoleAssistant, "hello"))
}

// testViewsMatchTree checks the store's model views (window, fallback,
// summary plan) against a convo.Tree of the same messages: a long session
// with a summary record on its branch and a fork.
func testViewsMatchTree(t *testing.T, s activities.TranscriptStore) {
	ctx := context.Background()
	tree := convo.NewTree()
	add := func(m convo.Message) {
		t.Helper()
		if err := tree.Append(m); err != nil {
			t.Fatal(err)
		}
		MustAppend(t, s, key, m)
	}
	add(Msg("sys", "", convo.RoleSystem, "you are a helpful assistant"))
	parent := "sys"
	for i := range 14 {
		u := fmt.Sprintf("u%d", i)
		add(Msg(u, parent, convo.RoleUser, strings.Repeat(fmt.Sprintf("question %d ", i), 5)))
		parent = fmt.Sprintf("a%d", i)
		add(Msg(parent, u, convo.RoleAssistant, strings.Repeat(fmt.Sprintf("answer %d ", i), 9)))
		if i == 5 { // a summary of the branch through a3
			b, err := tree.Branch("a3")
			if err != nil {
				t.Fatal(err)
			}
			hash, err := tree.PathHash("a3")
			if err != nil {
				t.Fatal(err)
			}
			st := convo.SummaryState{Text: "the first four rounds", Tokens: 6, Through: "a3", Folded: len(b), PathHash: hash, Key: "k"}
			rec := convo.SummaryRecord(parent+".s", parent, t0, st)
			add(rec)
			parent = rec.ID
		}
	}
	add(Msg("u3b", "a3", convo.RoleUser, "a fork"))

	win := convo.DefaultWindowConfig()
	win.MaxRounds, win.MaxTokens = 4, 300
	sumCfg := convo.DefaultSummaryConfig()
	sumCfg.ThresholdMessages = 8
	for _, leaf := range []string{"a13", "a5.s", "a2", "u3b"} {
		var sum convo.SummaryState
		if rec, ok := tree.LastSummary(leaf); ok {
			var err error
			if sum, err = convo.SummaryFromRecord(rec); err != nil {
				t.Fatal(err)
			}
		}
		for _, fallback := range []int{0, 3} {
			var want convo.Context
			var wantErr error
			if fallback > 0 {
				want, wantErr = tree.AssembleFallback(leaf, win, fallback)
			} else {
				want, wantErr = tree.Assemble(leaf, win, sum)
			}
			got, err := s.Assemble(ctx, key, leaf, win, sum, fallback)
			if err != nil || wantErr != nil || !reflect.DeepEqual(got, want) {
				t.Errorf("Assemble(%s, fallback %d) = %+v, %v; want %+v, %v", leaf, fallback, got, err, want, wantErr)
			}
		}
		want, wantErr := tree.PlanSummary(leaf, win, sumCfg, sum)
		got, err := s.PlanSummary(ctx, key, leaf, win, sumCfg, sum)
		if err != nil || wantErr != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("PlanSummary(%s) = %+v, %v; want %+v, %v", leaf, got, err, want, wantErr)
		}
	}
	if _, err := s.PlanSummary(ctx, key, "nope", win, sumCfg, convo.SummaryState{}); !errors.Is(err, convo.ErrNotFound) {
		t.Errorf("PlanSummary(unknown leaf) err = %v, want ErrNotFound", err)
	}
	bad := sumCfg
	bad.MaxTokens = 0
	if _, err := s.PlanSummary(ctx, key, "a13", win, bad, convo.SummaryState{}); !errors.Is(err, convo.ErrInvalidConfig) {
		t.Errorf("PlanSummary(bad config) err = %v, want ErrInvalidConfig", err)
	}
}

func testSnapshot(t *testing.T, s activities.TranscriptStore) {
	ctx := context.Background()
	if b, ok, err := s.LoadSnapshot(ctx, key); err != nil || ok || b != nil {
		t.Fatalf("LoadSnapshot of a new session = %q, %v, %v; want nil, false, nil", b, ok, err)
	}
	for _, v := range []string{`{"turns":1}`, `{"turns":2,"summary":"longer than the first one"}`, `{}`} {
		if err := s.SaveSnapshot(ctx, key, []byte(v)); err != nil {
			t.Fatalf("SaveSnapshot: %v", err)
		}
		b, ok, err := s.LoadSnapshot(ctx, key)
		if err != nil || !ok || string(b) != v {
			t.Fatalf("LoadSnapshot = %q, %v, %v; want %q", b, ok, err, v)
		}
	}
	other := activities.SessionKey{Tenant: key.Tenant, SessionID: "s2"}
	if _, ok, _ := s.LoadSnapshot(ctx, other); ok {
		t.Error("another session sees the snapshot")
	}
	// A snapshot does not count as a message, nor hides them.
	if n, err := s.Len(ctx, key); n != 0 || err != nil {
		t.Errorf("Len of a session with only a snapshot = %d, %v", n, err)
	}
	MustAppend(t, s, key, Msg("u1", "", convo.RoleUser, "hi"))
	if b, ok, err := s.LoadSnapshot(ctx, key); err != nil || !ok || string(b) != `{}` {
		t.Errorf("LoadSnapshot after an append = %q, %v, %v", b, ok, err)
	}
}

// testSnapshotReplace loads the snapshot while another goroutine replaces
// a large one: every load sees one whole version, never a mix.
func testSnapshotReplace(t *testing.T, s activities.TranscriptStore) {
	ctx := context.Background()
	a := bytes.Repeat([]byte("a"), 256<<10)
	b := bytes.Repeat([]byte("b"), 300<<10)
	if err := s.SaveSnapshot(ctx, key, a); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		for i := range 20 {
			v := a
			if i%2 == 0 {
				v = b
			}
			if err := s.SaveSnapshot(ctx, key, v); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	for loads := 0; ; loads++ {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("SaveSnapshot: %v", err)
			}
			if got, ok, err := s.LoadSnapshot(ctx, key); err != nil || !ok || !bytes.Equal(got, a) {
				t.Errorf("last LoadSnapshot = %d bytes, %v, %v; want the last saved", len(got), ok, err)
			}
			return
		default:
		}
		got, ok, err := s.LoadSnapshot(ctx, key)
		if err != nil || !ok {
			t.Fatalf("LoadSnapshot = ok %v, err %v", ok, err)
		}
		if !bytes.Equal(got, a) && !bytes.Equal(got, b) {
			t.Fatalf("LoadSnapshot returned a partial snapshot of %d bytes", len(got))
		}
	}
}

func testDelete(t *testing.T, s activities.TranscriptStore) {
	ctx := context.Background()
	for _, m := range conversation()[:3] {
		MustAppend(t, s, key, m)
	}
	if err := s.SaveSnapshot(ctx, key, []byte(`{"turns":1}`)); err != nil {
		t.Fatal(err)
	}
	keep := activities.SessionKey{Tenant: key.Tenant, SessionID: "keep"}
	MustAppend(t, s, keep, Msg("u1", "", convo.RoleUser, "stay"))
	if err := s.SaveSnapshot(ctx, keep, []byte(`{"keep":true}`)); err != nil {
		t.Fatal(err)
	}

	if err := s.Delete(ctx, key); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if n, err := s.Len(ctx, key); err != nil || n != 0 {
		t.Errorf("Len after Delete = %d, %v; want 0, nil", n, err)
	}
	if _, ok, err := s.Get(ctx, key, "u1"); ok || err != nil {
		t.Errorf("Get after Delete = ok %v, err %v; want false, nil", ok, err)
	}
	if _, err := s.Branch(ctx, key, "a1"); !errors.Is(err, convo.ErrNotFound) {
		t.Errorf("Branch after Delete: err = %v, want ErrNotFound", err)
	}
	if _, ok, err := s.LoadSnapshot(ctx, key); ok || err != nil {
		t.Errorf("LoadSnapshot after Delete = ok %v, err %v", ok, err)
	}
	// A later append starts a fresh tree: the old parent is gone, and the
	// old ids are free for new messages.
	if _, _, err := s.Append(ctx, key, Msg("u2", "a1", convo.RoleUser, "again")); !errors.Is(err, convo.ErrMissingParent) {
		t.Errorf("Append under a deleted parent: err = %v, want ErrMissingParent", err)
	}
	MustAppend(t, s, key, Msg("u1", "", convo.RoleUser, "new start"))
	if b, err := s.Branch(ctx, key, "u1"); err != nil || len(b) != 1 || b[0].Content != "new start" {
		t.Errorf("Branch(u1) after Delete and Append = %+v, %v; want the new message", b, err)
	}
	if n, _ := s.Len(ctx, key); n != 1 {
		t.Errorf("Len after Delete and Append = %d, want 1", n)
	}
	if n, _ := s.Len(ctx, keep); n != 1 {
		t.Errorf("Delete touched another session: Len = %d", n)
	}
	if b, ok, _ := s.LoadSnapshot(ctx, keep); !ok || string(b) != `{"keep":true}` {
		t.Errorf("Delete touched another session's snapshot: %q, %v", b, ok)
	}

	// Deleting an unknown session is not an error and leaves nothing behind.
	ghost := activities.SessionKey{Tenant: "ghosts", SessionID: "none"}
	if err := s.Delete(ctx, ghost); err != nil {
		t.Errorf("Delete of an unknown session: %v", err)
	}
	if n, err := s.Len(ctx, ghost); n != 0 || err != nil {
		t.Errorf("Len of a deleted unknown session = %d, %v", n, err)
	}
}

// testConcurrentAppends runs many writers on a few sessions. Pairs of
// writers append the same messages, so every id must be stored once,
// reported new to exactly one of them.
func testConcurrentAppends(t *testing.T, s activities.TranscriptStore) {
	ctx := context.Background()
	const sessions, chains, perChain = 5, 6, 20
	var (
		mu    sync.Mutex
		fresh = map[string]int{} // session/id → appends that reported it new
		wg    sync.WaitGroup
		errs  = make(chan error, sessions*chains*2)
	)
	for si := range sessions {
		k := activities.SessionKey{Tenant: "acme", SessionID: fmt.Sprintf("s%d", si)}
		for c := range chains {
			for range 2 { // two writers per chain
				wg.Go(func() {
					parent := ""
					for j := range perChain {
						id := fmt.Sprintf("c%d-%d", c, j)
						m := Msg(id, parent, convo.RoleUser, fmt.Sprintf("%s %s", k.SessionID, id))
						got, existed, err := s.Append(ctx, k, m)
						if err != nil {
							errs <- fmt.Errorf("append %s/%s: %w", k, id, err)
							return
						}
						if got.ID != id || got.Content != m.Content {
							errs <- fmt.Errorf("append %s/%s returned %+v", k, id, got)
							return
						}
						if !existed {
							mu.Lock()
							fresh[k.SessionID+"/"+id]++
							mu.Unlock()
						}
						// Reads interleave with the writes.
						if _, ok, err := s.Get(ctx, k, id); err != nil || !ok {
							errs <- fmt.Errorf("get %s/%s after append = ok %v, err %v", k, id, ok, err)
							return
						}
						if b, err := s.Branch(ctx, k, id); err != nil || len(b) != j+1 {
							errs <- fmt.Errorf("branch %s/%s after append = %d messages, err %v", k, id, len(b), err)
							return
						}
						parent = id
					}
				})
			}
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}
	if len(fresh) != sessions*chains*perChain {
		t.Errorf("%d ids reported new, want %d", len(fresh), sessions*chains*perChain)
	}
	for id, n := range fresh {
		if n != 1 {
			t.Errorf("%s reported new %d times", id, n)
		}
	}
	for si := range sessions {
		k := activities.SessionKey{Tenant: "acme", SessionID: fmt.Sprintf("s%d", si)}
		if n, err := s.Len(ctx, k); err != nil || n != chains*perChain {
			t.Errorf("%s Len = %d, %v; want %d", k, n, err, chains*perChain)
		}
		for c := range chains {
			b, err := s.Branch(ctx, k, fmt.Sprintf("c%d-%d", c, perChain-1))
			if err != nil || len(b) != perChain || b[0].ID != fmt.Sprintf("c%d-0", c) {
				t.Errorf("%s chain %d: %d messages, %v", k, c, len(b), err)
			}
		}
	}
}

// testAppendLeafIsLinear: writers race to hang their message below what
// each believes is the leaf, as two executions of a session do when one's
// workflow task was lost. At each step exactly one wins; the others are
// refused with convo.ErrNotLeaf, read what grew, and go on below it. The
// session stays one chain, and Grown reads it from any message.
func testAppendLeafIsLinear(t *testing.T, s activities.TranscriptStore) {
	ctx := context.Background()
	const writers, steps = 4, 15
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			leaf := ""
			for j := range steps {
				m := Msg(fmt.Sprintf("w%d-%d", w, j), leaf, convo.RoleUser, "step")
				for {
					_, _, err := s.AppendLeaf(ctx, key, m)
					if err == nil {
						leaf = m.ID
						break
					}
					if !errors.Is(err, convo.ErrNotLeaf) {
						errs <- fmt.Errorf("AppendLeaf(%s): %w", m.ID, err)
						return
					}
					grown, err := s.Grown(ctx, key, leaf)
					if err != nil || len(grown) == 0 {
						errs <- fmt.Errorf("refused below %q, yet Grown = %v, %v", leaf, IDs(grown), err)
						return
					}
					leaf = grown[len(grown)-1].ID
					m.ParentID = leaf
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	all, err := s.All(ctx, key)
	if err != nil || len(all) != writers*steps {
		t.Fatalf("All = %d messages, %v; want %d", len(all), err, writers*steps)
	}
	chain, err := s.Grown(ctx, key, "")
	if err != nil || len(chain) != len(all) {
		t.Fatalf("the session is not one chain: Grown from the root holds %d of %d messages (%v)", len(chain), len(all), err)
	}
	for i, m := range chain {
		want := ""
		if i > 0 {
			want = chain[i-1].ID
		}
		if m.ParentID != want {
			t.Fatalf("message %d (%s) hangs below %q, want %q", i, m.ID, m.ParentID, want)
		}
	}
	if got, err := s.Grown(ctx, key, chain[len(chain)-1].ID); err != nil || len(got) != 0 {
		t.Errorf("Grown below the leaf = %v, %v", IDs(got), err)
	}
}

// testDeleteDuringAppends deletes a session while writers append to it
// (and to another session): what the store holds at the end is
// consistent, and the session goes on after the deletes.
func testDeleteDuringAppends(t *testing.T, s activities.TranscriptStore) {
	ctx := context.Background()
	other := activities.SessionKey{Tenant: key.Tenant, SessionID: "other"}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	stop := make(chan struct{})
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				k := key
				if i%3 == 0 {
					k = other
				}
				_, _, err := s.Append(ctx, k, Msg(fmt.Sprintf("w%d-%d", w, i), "", convo.RoleUser, "x"))
				if err != nil && !errors.Is(err, fs.ErrClosed) {
					errs <- err
					return
				}
				if i >= 100 && k == key {
					return
				}
			}
		})
	}
	for range 10 {
		if err := s.Delete(ctx, key); err != nil {
			t.Fatalf("Delete: %v", err)
		}
		time.Sleep(time.Millisecond)
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("Append: %v", err)
	}
	// Appends after the deletes are all kept.
	MustAppend(t, s, key, Msg("after", "", convo.RoleUser, "after the deletes"))
	live := 0
	for w := range 4 {
		for i := range 200 {
			if _, ok, err := s.Get(ctx, key, fmt.Sprintf("w%d-%d", w, i)); err != nil {
				t.Fatal(err)
			} else if ok {
				live++
			}
		}
	}
	if n, err := s.Len(ctx, key); err != nil || n != live+1 {
		t.Errorf("Len = %d, %v; %d messages readable", n, err, live+1)
	}
	if b, err := s.Branch(ctx, key, "after"); err != nil || len(b) != 1 {
		t.Errorf("Branch(after) = %d messages, %v", len(b), err)
	}
}

func testContextCanceled(t *testing.T, s activities.TranscriptStore) {
	MustAppend(t, s, key, Msg("u1", "", convo.RoleUser, "hi"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	calls := map[string]error{}
	_, _, calls["Append"] = s.Append(ctx, key, Msg("a1", "u1", convo.RoleAssistant, "x"))
	_, _, calls["Get"] = s.Get(ctx, key, "u1")
	_, calls["Messages"] = s.Messages(ctx, key, []string{"u1"})
	_, calls["Assemble"] = s.Assemble(ctx, key, "u1", convo.DefaultWindowConfig(), convo.SummaryState{}, 0)
	_, calls["PlanSummary"] = s.PlanSummary(ctx, key, "u1", convo.DefaultWindowConfig(), convo.DefaultSummaryConfig(), convo.SummaryState{})
	_, calls["Branch"] = s.Branch(ctx, key, "u1")
	_, calls["All"] = s.All(ctx, key)
	_, calls["Len"] = s.Len(ctx, key)
	calls["SaveSnapshot"] = s.SaveSnapshot(ctx, key, []byte("{}"))
	_, _, calls["LoadSnapshot"] = s.LoadSnapshot(ctx, key)
	calls["Delete"] = s.Delete(ctx, key)
	for name, err := range calls {
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%s with a canceled context: err = %v, want context.Canceled", name, err)
		}
	}
	// Nothing happened.
	if n, err := s.Len(context.Background(), key); err != nil || n != 1 {
		t.Errorf("Len = %d, %v; want 1", n, err)
	}
	if _, ok, _ := s.LoadSnapshot(context.Background(), key); ok {
		t.Error("a canceled SaveSnapshot stored a snapshot")
	}
	if _, ok, _ := s.Get(context.Background(), key, "a1"); ok {
		t.Error("a canceled Append stored its message")
	}
}
