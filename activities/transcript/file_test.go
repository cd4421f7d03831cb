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
	"github.com/ctxflow/ctxflow/activities/transcript/transcripttest"
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
	call := transcripttest.Msg("c1", "u2", convo.RoleToolCall, "")
	call.ToolCall = &convo.ToolCall{ID: "call-1", Name: "search", Args: json.RawMessage(`{"q":"go"}`)}
	res := transcripttest.Msg("r1", "c1", convo.RoleToolResult, "3 results")
	res.ToolCallID = "call-1"
	a2 := transcripttest.Msg("a2", "r1", convo.RoleAssistant, "Go is a language")
	a2.Meta = map[string]string{"engine": "offline", "model": "qwen2.5:0.5b"}
	return []convo.Message{
		transcripttest.Msg("sys", "", convo.RoleSystem, "you are helpful"),
		transcripttest.Msg("u1", "sys", convo.RoleUser, "hello there"),
		transcripttest.Msg("a1", "u1", convo.RoleAssistant, "hi how can I help"),
		transcripttest.Msg("u2", "a1", convo.RoleUser, "what is go"),
		call, res, a2,
		transcripttest.Msg("u2b", "a1", convo.RoleUser, "what is rust"), // a fork of u2
		transcripttest.Msg("a2b", "u2b", convo.RoleAssistant, "Rust is a language"),
	}
}

// TestConformance runs the store-agnostic suite, also with every session
// evicted and reloaded between calls (MaxOpen 1).
func TestConformance(t *testing.T) {
	for _, maxOpen := range []int{0, 1} {
		t.Run(fmt.Sprintf("MaxOpen=%d", maxOpen), func(t *testing.T) {
			transcripttest.Run(t, func(t *testing.T) activities.TranscriptStore {
				return open(t, Options{MaxOpen: maxOpen})
			})
		})
	}
}

// TestDeleteRemovesFiles: Delete removes both files, and deleting an
// unknown session creates none.
func TestDeleteRemovesFiles(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := open(t, Options{Dir: dir})
	transcripttest.MustAppend(t, s, key, transcripttest.Msg("u1", "", convo.RoleUser, "hi"))
	if err := s.SaveSnapshot(ctx, key, []byte(`{"turns":1}`)); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, key); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	ghost := activities.SessionKey{Tenant: "ghosts", SessionID: "none"}
	if err := s.Delete(ctx, ghost); err != nil {
		t.Errorf("Delete of an unknown session: %v", err)
	}
	for _, p := range []string{
		filepath.Join(dir, key.Tenant, key.SessionID+".jsonl"),
		filepath.Join(dir, key.Tenant, key.SessionID+".state.json"),
		filepath.Join(dir, ghost.Tenant, ghost.SessionID+".jsonl"),
	} {
		if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s still there after Delete: %v", p, err)
		}
	}
	transcripttest.MustAppend(t, s, key, transcripttest.Msg("u1", "", convo.RoleUser, "new start"))
	if lines := fileLines(t, dir, key); len(lines) != 1 || !strings.Contains(lines[0], "new start") {
		t.Errorf("file after Delete and Append = %q, want the one new line", lines)
	}
}

func TestReopenReloadsMessages(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := open(t, Options{Dir: dir, Sync: true})
	conv := conversation()
	for _, m := range conv {
		transcripttest.MustAppend(t, s, key, m)
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
	if err != nil || !reflect.DeepEqual(transcripttest.IDs(b), []string{"sys", "u1", "a1", "u2b", "a2b"}) {
		t.Errorf("reopened Branch(a2b) = %v, %v", transcripttest.IDs(b), err)
	}
	// Appending after a reload continues the same tree and file.
	transcripttest.MustAppend(t, s2, key, transcripttest.Msg("u3", "a2", convo.RoleUser, "and more"))
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
		transcripttest.MustAppend(t, s, key, m)
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
	transcripttest.MustAppend(t, s2, key, transcripttest.Msg("u2", "a1", convo.RoleUser, "what is go"))
	transcripttest.MustAppend(t, s2, key, transcripttest.Msg("a2", "u2", convo.RoleAssistant, "a language"))
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
	if err != nil || !reflect.DeepEqual(transcripttest.IDs(b), []string{"sys", "u1", "a1", "u2", "a2"}) {
		t.Errorf("Branch after repair and reopen = %v, %v", transcripttest.IDs(b), err)
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
			l1, _ := convo.MarshalEntry(transcripttest.Msg("u1", "", convo.RoleUser, "hi"))
			l3, _ := convo.MarshalEntry(transcripttest.Msg("a1", "u1", convo.RoleAssistant, "hello"))
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
			if _, _, err := s.Append(ctx, key, transcripttest.Msg("a2", "a1", convo.RoleAssistant, "x")); err == nil {
				t.Error("Append to a corrupt transcript did not fail")
			}
			if got, _ := os.ReadFile(path); string(got) != content {
				t.Errorf("corrupt file was changed: %q", got)
			}
		})
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
			entries, _ := os.ReadDir(filepath.Dir(path))
			for _, e := range entries {
				if strings.HasPrefix(e.Name(), ".state-") {
					t.Errorf("temporary file %s left behind", e.Name())
				}
			}
			if got, ok, err := open(t, Options{Dir: s.opts.Dir}).LoadSnapshot(ctx, key); err != nil || !ok || !bytes.Equal(got, a) {
				t.Errorf("LoadSnapshot after reopen = %d bytes, %v, %v; want the last saved", len(got), ok, err)
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

func TestBadSessionKeys(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	dir := filepath.Join(root, "store")
	s := open(t, Options{Dir: dir})
	m := transcripttest.Msg("u1", "", convo.RoleUser, "hi")
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
			transcripttest.MustAppend(t, s, k, transcripttest.Msg(fmt.Sprintf("m%d-%d", i, round), parent, convo.RoleUser, fmt.Sprintf("session %d round %d", i, round)))
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
		if !reflect.DeepEqual(transcripttest.IDs(b), want) {
			t.Errorf("Branch of %s = %v, want %v", k, transcripttest.IDs(b), want)
		}
		if b[2].Content != fmt.Sprintf("session %d round 2", i) {
			t.Errorf("%s m2 content = %q", k, b[2].Content)
		}
		// Idempotency survives eviction: the reloaded tree knows the id.
		_, existed, err := s.Append(ctx, k, transcripttest.Msg(fmt.Sprintf("m%d-1", i), fmt.Sprintf("m%d-0", i), convo.RoleUser, "dup"))
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

// TestFailedWriteIsRolledBack makes the file write fail: the message must
// not stay in memory (a retry would be told it exists while the file lacks
// it) and the next append must land in a valid file.
func TestFailedWriteIsRolledBack(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := open(t, Options{Dir: dir})
	transcripttest.MustAppend(t, s, key, transcripttest.Msg("u1", "", convo.RoleUser, "hi"))

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

	a1 := transcripttest.Msg("a1", "u1", convo.RoleAssistant, "hello")
	if _, _, err := s.Append(ctx, key, a1); err == nil {
		t.Fatal("Append with a failing write did not fail")
	}
	if _, ok, err := s.Get(ctx, key, "a1"); ok || err != nil {
		t.Errorf("Get after a failed append = ok %v, err %v; want false, nil", ok, err)
	}
	if n, _ := s.Len(ctx, key); n != 1 {
		t.Errorf("Len after a failed append = %d, want 1", n)
	}
	transcripttest.MustAppend(t, s, key, a1) // the retry stores it
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
				_, _, err := s.Append(ctx, k, transcripttest.Msg(fmt.Sprintf("w%d-%d", w, i), "", convo.RoleUser, "x"))
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

// TestEraseTenantAndList: StoredSessions lists every session with a file
// (a task's transcript too), EraseTenant removes one tenant's folder and
// nothing of the others'.
func TestEraseTenantAndList(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := open(t, Options{Dir: dir})
	other := activities.SessionKey{Tenant: "beta", SessionID: "s1"}
	task := activities.TaskKey(key, "k1")
	for _, k := range []activities.SessionKey{key, other, task} {
		transcripttest.MustAppend(t, s, k, transcripttest.Msg("u1", "", convo.RoleUser, "hi"))
	}
	if err := s.SaveSnapshot(ctx, key, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	stored, err := s.StoredSessions(ctx)
	if err != nil || len(stored) != 3 {
		t.Fatalf("StoredSessions = %v, %v; want 3", stored, err)
	}
	for _, st := range stored {
		if st.Updated.IsZero() {
			t.Errorf("%v has no time", st.Key)
		}
	}
	if err := s.EraseTenant(ctx, key.Tenant); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, key.Tenant)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the tenant's folder is still there: %v", err)
	}
	if n, err := s.Len(ctx, other); err != nil || n != 1 {
		t.Errorf("beta's session after erasing acme: %d messages, %v", n, err)
	}
	if n, err := s.Len(ctx, key); err != nil || n != 0 {
		t.Errorf("acme's session after its erase: %d messages, %v", n, err)
	}
	if err := s.EraseTenant(ctx, "../x"); err == nil {
		t.Error("EraseTenant of a path: no error")
	}
}
