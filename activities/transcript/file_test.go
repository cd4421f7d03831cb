package transcript

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/convo"
)

var key = activities.SessionKey{Tenant: "acme", SessionID: "s1"}

// open returns a store on dir that is closed when the test ends.
func open(tb testing.TB, opts Options) *FileStore {
	tb.Helper()
	if opts.Dir == "" {
		opts.Dir = tb.TempDir()
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	s, err := Open(opts)
	if err != nil {
		tb.Fatalf("Open: %v", err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// msg returns a message of the given role; its time survives the JSONL round
// trip exactly (UTC, whole microseconds).
func msg(id, parent string, role convo.Role, content string) convo.Message {
	return convo.Message{
		ID: id, ParentID: parent, Role: role, Content: content,
		Tokens:    len(strings.Fields(content)) + 4,
		CreatedAt: t0.Add(time.Duration(len(id)*1000+int(id[len(id)-1])) * time.Microsecond),
	}
}

func mustAppend(tb testing.TB, s *FileStore, k activities.SessionKey, m convo.Message) {
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

func ids(ms []convo.Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	return out
}

// fileLines returns the lines of a session's JSONL file.
func fileLines(tb testing.TB, dir string, k activities.SessionKey) []string {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(dir, k.Tenant, k.SessionID+".jsonl"))
	if err != nil {
		tb.Fatalf("read transcript file: %v", err)
	}
	if len(b) == 0 {
		return nil
	}
	if b[len(b)-1] != '\n' {
		tb.Fatalf("transcript file does not end with a newline: %q", b)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// conversation is a session with a system prompt, two rounds, a tool call
// and its result, and a fork of the second question.
func conversation() []convo.Message {
	call := msg("c1", "u2", convo.RoleToolCall, "")
	call.ToolCall = &convo.ToolCall{ID: "call-1", Name: "search", Args: json.RawMessage(`{"q":"go"}`)}
	res := msg("r1", "c1", convo.RoleToolResult, "3 results")
	res.ToolCallID = "call-1"
	a2 := msg("a2", "r1", convo.RoleAssistant, "Go is a language")
	a2.Meta = map[string]string{"engine": "offline", "model": "qwen2.5:0.5b"}
	return []convo.Message{
		msg("sys", "", convo.RoleSystem, "you are helpful"),
		msg("u1", "sys", convo.RoleUser, "hello there"),
		msg("a1", "u1", convo.RoleAssistant, "hi how can I help"),
		msg("u2", "a1", convo.RoleUser, "what is go"),
		call, res, a2,
		msg("u2b", "a1", convo.RoleUser, "what is rust"), // a fork of u2
		msg("a2b", "u2b", convo.RoleAssistant, "Rust is a language"),
	}
}

func TestAppendAndRead(t *testing.T) {
	ctx := context.Background()
	s := open(t, Options{})
	conv := conversation()
	for _, m := range conv {
		mustAppend(t, s, key, m)
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
	if want := []string{"a2", "sys", "u2b"}; !reflect.DeepEqual(ids(got), want) {
		t.Errorf("Messages ids = %v, want %v (the order asked for)", ids(got), want)
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
		if !reflect.DeepEqual(ids(b), want) {
			t.Errorf("Branch(%s) = %v, want %v", leaf, ids(b), want)
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
	if want := []string{"sys", "u2", "c1", "r1", "a2"}; !reflect.DeepEqual(ids(w.Messages), want) {
		t.Errorf("Window(a2, 1 round) = %v, want %v", ids(w.Messages), want)
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

func TestAppendIsIdempotent(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := open(t, Options{Dir: dir})
	first := msg("u1", "", convo.RoleUser, "first text")
	mustAppend(t, s, key, first)

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
	if lines := fileLines(t, dir, key); len(lines) != 1 {
		t.Errorf("file has %d lines, want 1: %q", len(lines), lines)
	}
	if m, _, _ := s.Get(ctx, key, "u1"); m.Content != "first text" {
		t.Errorf("stored content = %q, want the first", m.Content)
	}
}

func TestAppendRejectsBadMessages(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := open(t, Options{Dir: dir})
	mustAppend(t, s, key, msg("u1", "", convo.RoleUser, "hi"))

	orphan := msg("r1", "u1", convo.RoleToolResult, "result")
	orphan.ToolCallID = "call-x"
	for _, tc := range []struct {
		name string
		m    convo.Message
		want error
	}{
		{"missing parent", msg("a1", "ghost", convo.RoleAssistant, "x"), convo.ErrMissingParent},
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
	if lines := fileLines(t, dir, key); len(lines) != 1 {
		t.Errorf("file has %d lines after rejected appends, want 1: %q", len(lines), lines)
	}
	// The parent may come later: then the child is accepted.
	mustAppend(t, s, key, msg("a1", "u1", convo.RoleAssistant, "hello"))
}

func TestReopenReloadsMessages(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := open(t, Options{Dir: dir, Sync: true})
	conv := conversation()
	for _, m := range conv {
		mustAppend(t, s, key, m)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	s2 := open(t, Options{Dir: dir})
	for _, m := range conv {
		got, ok, err := s2.Get(ctx, key, m.ID)
		if err != nil || !ok {
			t.Fatalf("reopened Get(%s) = ok %v, err %v", m.ID, ok, err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Errorf("reopened Get(%s) = %+v, want %+v", m.ID, got, m)
		}
	}
	if n, err := s2.Len(ctx, key); err != nil || n != len(conv) {
		t.Errorf("reopened Len = %d, %v; want %d", n, err, len(conv))
	}
	b, err := s2.Branch(ctx, key, "a2b")
	if err != nil || !reflect.DeepEqual(ids(b), []string{"sys", "u1", "a1", "u2b", "a2b"}) {
		t.Errorf("reopened Branch(a2b) = %v, %v", ids(b), err)
	}
	// Appending after a reload continues the same tree and file.
	mustAppend(t, s2, key, msg("u3", "a2", convo.RoleUser, "and more"))
	if _, _, err := s2.Append(ctx, key, conv[3]); err != nil {
		t.Fatalf("re-append after reload: %v", err)
	}
	if lines := fileLines(t, dir, key); len(lines) != len(conv)+1 {
		t.Errorf("file has %d lines, want %d", len(lines), len(conv)+1)
	}
}

func TestTornLastLineIsCut(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	var logs bytes.Buffer
	s := open(t, Options{Dir: dir, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	conv := conversation()[:3]
	for _, m := range conv {
		mustAppend(t, s, key, m)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	path := filepath.Join(dir, key.Tenant, key.SessionID+".jsonl")
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// A SIGKILL in the middle of a write leaves part of a line.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(`{"id":"u2","parentId":"a1","type":"user","cont`); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	s2 := open(t, Options{Dir: dir, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if n, err := s2.Len(ctx, key); err != nil || n != 3 {
		t.Fatalf("Len after a torn line = %d, %v; want 3, nil", n, err)
	}
	if _, ok, _ := s2.Get(ctx, key, "u2"); ok {
		t.Error("the torn message was loaded")
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(after, before) {
		t.Errorf("file after load = %q, want the torn line cut off: %q", after, before)
	}
	if !strings.Contains(logs.String(), "torn") {
		t.Errorf("no warning logged about the torn line; logs: %s", logs.String())
	}

	// The same id can be appended again and the file stays valid.
	mustAppend(t, s2, key, msg("u2", "a1", convo.RoleUser, "what is go"))
	mustAppend(t, s2, key, msg("a2", "u2", convo.RoleAssistant, "a language"))
	lines := fileLines(t, dir, key)
	if len(lines) != 5 {
		t.Fatalf("file has %d lines, want 5: %q", len(lines), lines)
	}
	for i, l := range lines {
		if _, err := convo.UnmarshalEntry([]byte(l)); err != nil {
			t.Errorf("line %d %q: %v", i+1, l, err)
		}
	}
	if err := s2.Close(); err != nil {
		t.Fatal(err)
	}
	s3 := open(t, Options{Dir: dir})
	b, err := s3.Branch(ctx, key, "a2")
	if err != nil || !reflect.DeepEqual(ids(b), []string{"sys", "u1", "a1", "u2", "a2"}) {
		t.Errorf("Branch after repair and reopen = %v, %v", ids(b), err)
	}
}

func TestCorruptLineIsAnError(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		line2  string
		target error
	}{
		{"not json", `this is not json`, convo.ErrMalformedEntry},
		{"missing parent", `{"id":"x","parentId":"ghost","type":"user","content":"q"}`, convo.ErrMissingParent},
		{"unknown type", `{"id":"x","parentId":"u1","type":"robot","content":"q"}`, convo.ErrMalformedEntry},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			l1, _ := convo.MarshalEntry(msg("u1", "", convo.RoleUser, "hi"))
			l3, _ := convo.MarshalEntry(msg("a1", "u1", convo.RoleAssistant, "hello"))
			content := string(l1) + "\n" + tc.line2 + "\n" + string(l3) + "\n"
			path := filepath.Join(dir, key.Tenant, key.SessionID+".jsonl")
			if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(content), 0o640); err != nil {
				t.Fatal(err)
			}
			s := open(t, Options{Dir: dir})
			_, err := s.Len(ctx, key)
			if err == nil {
				t.Fatal("Len of a corrupt transcript did not fail")
			}
			if !strings.Contains(err.Error(), "line 2") || !errors.Is(err, tc.target) {
				t.Errorf("err = %v, want it to name line 2 and wrap %v", err, tc.target)
			}
			// Every later call reports it and nothing is written.
			if _, _, err := s.Append(ctx, key, msg("a2", "a1", convo.RoleAssistant, "x")); err == nil {
				t.Error("Append to a corrupt transcript did not fail")
			}
			if got, _ := os.ReadFile(path); string(got) != content {
				t.Errorf("corrupt file was changed: %q", got)
			}
		})
	}
}

func TestSnapshot(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := open(t, Options{Dir: dir})

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
	entries, err := os.ReadDir(filepath.Join(dir, key.Tenant))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".state-") {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}

	s2 := open(t, Options{Dir: dir})
	if b, ok, err := s2.LoadSnapshot(ctx, key); err != nil || !ok || string(b) != `{}` {
		t.Errorf("LoadSnapshot after reopen = %q, %v, %v", b, ok, err)
	}
}

// TestSnapshotReplaceIsAtomic reads the snapshot file while another
// goroutine replaces a large snapshot: every read sees one whole version,
// never a mix or a short file.
func TestSnapshotReplaceIsAtomic(t *testing.T) {
	ctx := context.Background()
	s := open(t, Options{})
	a := bytes.Repeat([]byte("a"), 256<<10)
	b := bytes.Repeat([]byte("b"), 300<<10)
	if err := s.SaveSnapshot(ctx, key, a); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(s.opts.Dir, key.Tenant, key.SessionID+".state.json")
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
			if loads == 0 {
				t.Log("no load overlapped a save")
			}
			return
		default:
		}
		// Read the file itself, not through the store's lock: a crash at
		// any moment must leave one whole version on disk.
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("read snapshot file: %v", err)
		}
		if !bytes.Equal(got, a) && !bytes.Equal(got, b) {
			t.Fatalf("the snapshot file held a partial snapshot of %d bytes", len(got))
		}
	}
}

func TestDelete(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := open(t, Options{Dir: dir})
	for _, m := range conversation()[:3] {
		mustAppend(t, s, key, m)
	}
	if err := s.SaveSnapshot(ctx, key, []byte(`{"turns":1}`)); err != nil {
		t.Fatal(err)
	}
	keep := activities.SessionKey{Tenant: key.Tenant, SessionID: "keep"}
	mustAppend(t, s, keep, msg("u1", "", convo.RoleUser, "stay"))

	if err := s.Delete(ctx, key); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	for _, ext := range []string{".jsonl", ".state.json"} {
		if _, err := os.Stat(filepath.Join(dir, key.Tenant, key.SessionID+ext)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s still there after Delete: %v", ext, err)
		}
	}
	if n, err := s.Len(ctx, key); err != nil || n != 0 {
		t.Errorf("Len after Delete = %d, %v; want 0, nil", n, err)
	}
	if _, ok, err := s.LoadSnapshot(ctx, key); ok || err != nil {
		t.Errorf("LoadSnapshot after Delete = ok %v, err %v", ok, err)
	}
	// A later append starts a fresh tree: the old parent is gone.
	if _, _, err := s.Append(ctx, key, msg("u2", "a1", convo.RoleUser, "again")); !errors.Is(err, convo.ErrMissingParent) {
		t.Errorf("Append under a deleted parent: err = %v, want ErrMissingParent", err)
	}
	mustAppend(t, s, key, msg("u1", "", convo.RoleUser, "new start"))
	if lines := fileLines(t, dir, key); len(lines) != 1 || !strings.Contains(lines[0], "new start") {
		t.Errorf("file after Delete and Append = %q, want the one new line", lines)
	}
	if n, _ := s.Len(ctx, keep); n != 1 {
		t.Errorf("Delete touched another session: Len = %d", n)
	}

	// Deleting an unknown session is not an error and leaves nothing behind.
	ghost := activities.SessionKey{Tenant: "ghosts", SessionID: "none"}
	if err := s.Delete(ctx, ghost); err != nil {
		t.Errorf("Delete of an unknown session: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, ghost.Tenant, ghost.SessionID+".jsonl")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Delete of an unknown session left a file: %v", err)
	}

	s2 := open(t, Options{Dir: dir})
	if n, _ := s2.Len(ctx, key); n != 1 {
		t.Errorf("Len after reopen = %d, want 1", n)
	}
}

func TestBadSessionKeys(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	dir := filepath.Join(root, "store")
	s := open(t, Options{Dir: dir})
	m := msg("u1", "", convo.RoleUser, "hi")
	for _, k := range []activities.SessionKey{
		{Tenant: "..", SessionID: "s1"},
		{Tenant: "acme", SessionID: ".."},
		{Tenant: ".", SessionID: "s1"},
		{Tenant: "a/b", SessionID: "s1"},
		{Tenant: "acme", SessionID: "a/b"},
		{Tenant: "acme", SessionID: "../../escape"},
		{Tenant: "", SessionID: "s1"},
		{Tenant: "acme", SessionID: ""},
		{},
	} {
		t.Run(k.Tenant+"|"+k.SessionID, func(t *testing.T) {
			calls := map[string]error{}
			_, _, calls["Append"] = s.Append(ctx, k, m)
			_, _, calls["Get"] = s.Get(ctx, k, "u1")
			_, calls["Messages"] = s.Messages(ctx, k, nil)
			_, calls["Assemble"] = s.Assemble(ctx, k, "u1", convo.DefaultWindowConfig(), convo.SummaryState{}, 0)
			_, calls["Branch"] = s.Branch(ctx, k, "u1")
			_, calls["Len"] = s.Len(ctx, k)
			calls["SaveSnapshot"] = s.SaveSnapshot(ctx, k, []byte("{}"))
			_, _, calls["LoadSnapshot"] = s.LoadSnapshot(ctx, k)
			calls["Delete"] = s.Delete(ctx, k)
			for name, err := range calls {
				if err == nil || !strings.Contains(err.Error(), "bad session key") {
					t.Errorf("%s: err = %v, want a bad session key error", name, err)
				}
			}
		})
	}
	// Nothing was written anywhere: not outside the store, not inside it.
	var files []string
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && p != root && p != dir {
			files = append(files, p)
		}
		return nil
	})
	if len(files) > 0 {
		t.Errorf("bad keys created files: %v", files)
	}
}

func TestLRUEviction(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := open(t, Options{Dir: dir, MaxOpen: 2})
	keys := make([]activities.SessionKey, 5)
	for i := range keys {
		keys[i] = activities.SessionKey{Tenant: "acme", SessionID: fmt.Sprintf("s%d", i)}
	}
	// Round robin, so that every session is evicted and reloaded between
	// its appends.
	for round := range 4 {
		for i, k := range keys {
			parent := ""
			if round > 0 {
				parent = fmt.Sprintf("m%d-%d", i, round-1)
			}
			mustAppend(t, s, k, msg(fmt.Sprintf("m%d-%d", i, round), parent, convo.RoleUser, fmt.Sprintf("session %d round %d", i, round)))
		}
	}
	if n := s.open(); n > 2 {
		t.Errorf("%d sessions in memory, want at most MaxOpen = 2", n)
	}
	for i, k := range keys {
		b, err := s.Branch(ctx, k, fmt.Sprintf("m%d-3", i))
		if err != nil {
			t.Fatalf("Branch of %s: %v", k, err)
		}
		want := []string{fmt.Sprintf("m%d-0", i), fmt.Sprintf("m%d-1", i), fmt.Sprintf("m%d-2", i), fmt.Sprintf("m%d-3", i)}
		if !reflect.DeepEqual(ids(b), want) {
			t.Errorf("Branch of %s = %v, want %v", k, ids(b), want)
		}
		if b[2].Content != fmt.Sprintf("session %d round 2", i) {
			t.Errorf("%s m2 content = %q", k, b[2].Content)
		}
		// Idempotency survives eviction: the reloaded tree knows the id.
		_, existed, err := s.Append(ctx, k, msg(fmt.Sprintf("m%d-1", i), fmt.Sprintf("m%d-0", i), convo.RoleUser, "dup"))
		if err != nil || !existed {
			t.Errorf("re-append to evicted %s = existed %v, err %v", k, existed, err)
		}
		if lines := fileLines(t, dir, k); len(lines) != 4 {
			t.Errorf("%s file has %d lines, want 4", k, len(lines))
		}
	}
	if n := s.open(); n > 2 {
		t.Errorf("%d sessions in memory, want at most MaxOpen = 2", n)
	}
}

// open returns the number of sessions kept in memory.
func (s *FileStore) open() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lru.Len()
}

// TestConcurrentAppends runs many writers on a few sessions, with and
// without eviction pressure. Pairs of writers append the same messages, so
// every id must be stored once, reported new to exactly one of them.
func TestConcurrentAppends(t *testing.T) {
	for _, maxOpen := range []int{0, 2} {
		t.Run(fmt.Sprintf("MaxOpen=%d", maxOpen), func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			s := open(t, Options{Dir: dir, MaxOpen: maxOpen})
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
								m := msg(id, parent, convo.RoleUser, fmt.Sprintf("%s %s", k.SessionID, id))
								got, existed, err := s.Append(ctx, k, m)
								if err != nil {
									errs <- fmt.Errorf("Append %s/%s: %w", k, id, err)
									return
								}
								if got.ID != id || got.Content != m.Content {
									errs <- fmt.Errorf("Append %s/%s returned %+v", k, id, got)
									return
								}
								if !existed {
									mu.Lock()
									fresh[k.SessionID+"/"+id]++
									mu.Unlock()
								}
								// Reads interleave with the writes.
								if _, ok, err := s.Get(ctx, k, id); err != nil || !ok {
									errs <- fmt.Errorf("Get %s/%s after Append = ok %v, err %v", k, id, ok, err)
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
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s2 := open(t, Options{Dir: dir})
			for si := range sessions {
				k := activities.SessionKey{Tenant: "acme", SessionID: fmt.Sprintf("s%d", si)}
				if lines := fileLines(t, dir, k); len(lines) != chains*perChain {
					t.Errorf("%s file has %d lines, want %d", k, len(lines), chains*perChain)
				}
				if n, err := s2.Len(ctx, k); err != nil || n != chains*perChain {
					t.Errorf("%s Len after reopen = %d, %v; want %d", k, n, err, chains*perChain)
				}
				for c := range chains {
					b, err := s2.Branch(ctx, k, fmt.Sprintf("c%d-%d", c, perChain-1))
					if err != nil || len(b) != perChain || b[0].ID != fmt.Sprintf("c%d-0", c) {
						t.Errorf("%s chain %d after reopen: %d messages, %v", k, c, len(b), err)
					}
				}
			}
		})
	}
}

// TestFailedWriteIsRolledBack makes the file write fail: the message must
// not stay in memory (a retry would be told it exists while the file lacks
// it) and the next append must land in a valid file.
func TestFailedWriteIsRolledBack(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := open(t, Options{Dir: dir})
	mustAppend(t, s, key, msg("u1", "", convo.RoleUser, "hi"))

	s.mu.Lock()
	ss := s.sessions[key].Value.(*session)
	s.mu.Unlock()
	ro, err := os.Open(filepath.Join(dir, key.Tenant, key.SessionID+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	ss.mu.Lock()
	rw := ss.file
	ss.file = ro // writes now fail
	ss.mu.Unlock()
	defer func() { _ = rw.Close() }()

	a1 := msg("a1", "u1", convo.RoleAssistant, "hello")
	if _, _, err := s.Append(ctx, key, a1); err == nil {
		t.Fatal("Append with a failing write did not fail")
	}
	if _, ok, err := s.Get(ctx, key, "a1"); ok || err != nil {
		t.Errorf("Get after a failed append = ok %v, err %v; want false, nil", ok, err)
	}
	if n, _ := s.Len(ctx, key); n != 1 {
		t.Errorf("Len after a failed append = %d, want 1", n)
	}
	mustAppend(t, s, key, a1) // the retry stores it
	lines := fileLines(t, dir, key)
	if len(lines) != 2 {
		t.Fatalf("file has %d lines, want 2: %q", len(lines), lines)
	}
	for i, l := range lines {
		if _, err := convo.UnmarshalEntry([]byte(l)); err != nil {
			t.Errorf("line %d: %v", i+1, err)
		}
	}
}

// TestDeleteDuringAppends deletes a session while writers append to it: the
// store must never keep writing to a removed file, so what it holds in
// memory at the end is what a reopened store reads from disk.
func TestDeleteDuringAppends(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := open(t, Options{Dir: dir, MaxOpen: 1})
	other := activities.SessionKey{Tenant: key.Tenant, SessionID: "other"}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 4 {
		wg.Go(func() {
			for i := range 100 {
				k := key
				if i%3 == 0 {
					k = other // eviction churn (MaxOpen 1)
				}
				_, _, err := s.Append(ctx, k, msg(fmt.Sprintf("w%d-%d", w, i), "", convo.RoleUser, "x"))
				if err != nil && !errors.Is(err, fs.ErrClosed) {
					errs <- err
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
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("Append: %v", err)
	}
	live, err := s.Len(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := open(t, Options{Dir: dir})
	if n, err := s2.Len(ctx, key); err != nil || n != live {
		t.Errorf("reopened Len = %d, %v; the store held %d", n, err, live)
	}
}

func TestContextCanceled(t *testing.T) {
	dir := t.TempDir()
	s := open(t, Options{Dir: dir})
	mustAppend(t, s, key, msg("u1", "", convo.RoleUser, "hi"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	calls := map[string]error{}
	_, _, calls["Append"] = s.Append(ctx, key, msg("a1", "u1", convo.RoleAssistant, "x"))
	_, _, calls["Get"] = s.Get(ctx, key, "u1")
	_, calls["Messages"] = s.Messages(ctx, key, []string{"u1"})
	_, calls["Assemble"] = s.Assemble(ctx, key, "u1", convo.DefaultWindowConfig(), convo.SummaryState{}, 0)
	_, calls["Branch"] = s.Branch(ctx, key, "u1")
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
	if lines := fileLines(t, dir, key); len(lines) != 1 {
		t.Errorf("file has %d lines, want 1", len(lines))
	}
}

func TestOpenNeedsDir(t *testing.T) {
	if _, err := Open(Options{}); err == nil {
		t.Error("Open without a directory did not fail")
	}
}

func BenchmarkAppend(b *testing.B) {
	for _, sync := range []bool{false, true} {
		b.Run(fmt.Sprintf("sync=%v", sync), func(b *testing.B) {
			s := open(b, Options{Sync: sync})
			ctx := context.Background()
			parent := ""
			i := 0
			for b.Loop() {
				id := fmt.Sprintf("m%d", i)
				m := convo.Message{ID: id, ParentID: parent, Role: convo.RoleUser, Content: "a question of about ten words for the benchmark", Tokens: 14}
				if _, _, err := s.Append(ctx, key, m); err != nil {
					b.Fatal(err)
				}
				parent = id
				i++
			}
		})
	}
}
