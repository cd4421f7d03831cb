// Package transcript stores session transcripts on the local disk: one JSONL
// file per session in the seed's entry format, plus a JSON snapshot of the
// session's working state. It is the embedded default of the
// [activities.TranscriptStore] port, meant for a single worker process (the
// dev stack); each session's tree is loaded once and kept in memory.
package transcript

import (
	"bufio"
	"bytes"
	"container/list"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/convo"
)

// Options configure a [FileStore].
type Options struct {
	// Dir holds the files, one folder per tenant.
	Dir string
	// Sync makes every append wait for fsync. Without it an append survives
	// a crash of the process but not of the machine.
	Sync bool
	// MaxOpen bounds the sessions kept in memory (least recently used are
	// dropped); default 1024.
	MaxOpen int
	Logger  *slog.Logger
}

// FileStore is a [activities.TranscriptStore] on the local file system.
type FileStore struct {
	activities.TreeReads // over read
	opts                 Options

	mu       sync.Mutex
	sessions map[activities.SessionKey]*list.Element // of *session
	lru      *list.List
}

var _ activities.TranscriptStore = (*FileStore)(nil)

type session struct {
	key  activities.SessionKey
	refs int // calls in progress; guarded by FileStore.mu

	mu     sync.Mutex // guards the fields below
	loaded bool
	closed bool // by Delete or Close: calls that still hold it fail
	tree   *convo.Tree
	file   *os.File
	size   int64 // bytes of whole lines in file
}

// Open returns a store rooted at opts.Dir, creating it if needed.
func Open(opts Options) (*FileStore, error) {
	if opts.Dir == "" {
		return nil, errors.New("transcript store: no directory")
	}
	if err := os.MkdirAll(opts.Dir, 0o750); err != nil {
		return nil, fmt.Errorf("transcript store: %w", err)
	}
	if opts.MaxOpen <= 0 {
		opts.MaxOpen = 1024
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	s := &FileStore{opts: opts, sessions: map[activities.SessionKey]*list.Element{}, lru: list.New()}
	s.TreeReads.Read = s.read
	return s, nil
}

// Close closes every open file.
func (s *FileStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for e := s.lru.Front(); e != nil; e = e.Next() {
		errs = append(errs, e.Value.(*session).close())
	}
	s.sessions = map[activities.SessionKey]*list.Element{}
	s.lru.Init()
	return errors.Join(errs...)
}

func (s *FileStore) path(k activities.SessionKey, ext string) string {
	return filepath.Join(s.opts.Dir, k.Tenant, k.SessionID+ext)
}

// checkKey rejects a key whose parts are not plain file names.
func checkKey(k activities.SessionKey) error {
	for _, part := range []string{k.Tenant, k.SessionID} {
		if part == "" || part == "." || part == ".." || filepath.Base(part) != part {
			return fmt.Errorf("transcript store: bad session key %q", k)
		}
	}
	return nil
}

// with runs fn on the session, loaded, under its lock. While a call holds a
// session it is not evicted, so a session's file is never open twice.
func (s *FileStore) with(ctx context.Context, k activities.SessionKey, fn func(ss *session) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkKey(k); err != nil {
		return err
	}
	ss := s.acquire(k)
	defer s.release(ss)
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.closed {
		return fmt.Errorf("transcript %s: %w", k, fs.ErrClosed)
	}
	if !ss.loaded {
		if err := s.load(ss); err != nil {
			return err // tried again by the next call
		}
		ss.loaded = true
	}
	return fn(ss)
}

func (s *FileStore) acquire(k activities.SessionKey) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ss *session
	if e, ok := s.sessions[k]; ok {
		s.lru.MoveToFront(e)
		ss = e.Value.(*session)
	} else {
		ss = &session{key: k}
		s.sessions[k] = s.lru.PushFront(ss)
	}
	ss.refs++
	return ss
}

// release ends a call on ss and drops the least recently used sessions that
// no call holds while more than MaxOpen are in memory.
func (s *FileStore) release(ss *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss.refs--
	for e := s.lru.Back(); e != nil && s.lru.Len() > s.opts.MaxOpen; {
		prev := e.Prev()
		if victim := e.Value.(*session); victim.refs == 0 {
			s.lru.Remove(e)
			delete(s.sessions, victim.key)
			if err := victim.close(); err != nil { // unheld: does not block
				s.opts.Logger.Warn("transcript: close evicted session", "session", victim.key.String(), "error", err)
			}
		}
		e = prev
	}
}

// load reads a session's JSONL file into its tree. A torn last line (the
// process died mid-append) is cut off; any other damage is an error.
func (s *FileStore) load(ss *session) error {
	tree := convo.NewTree()
	p := s.path(ss.key, ".jsonl")
	if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
		return fmt.Errorf("load transcript %s: %w", ss.key, err)
	}
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		return fmt.Errorf("load transcript %s: %w", ss.key, err)
	}
	r := bufio.NewReaderSize(f, 64<<10)
	var good int64
	for line := 1; ; line++ {
		b, err := r.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			if len(b) > 0 {
				s.opts.Logger.Warn("transcript: dropping torn last line", "session", ss.key.String(), "line", line, "bytes", len(b))
				if err := f.Truncate(good); err != nil {
					_ = f.Close()
					return fmt.Errorf("load transcript %s: cut torn line %d: %w", ss.key, line, err)
				}
			}
			break
		}
		if err != nil {
			_ = f.Close()
			return fmt.Errorf("load transcript %s: %w", ss.key, err)
		}
		good += int64(len(b))
		if len(bytes.TrimSpace(b)) == 0 {
			continue
		}
		m, err := convo.UnmarshalEntry(b)
		if err == nil {
			err = tree.Append(m)
		}
		if err != nil {
			_ = f.Close()
			return fmt.Errorf("load transcript %s: line %d: %w", ss.key, line, err)
		}
	}
	if _, err := f.Seek(good, io.SeekStart); err != nil {
		_ = f.Close()
		return fmt.Errorf("load transcript %s: %w", ss.key, err)
	}
	ss.tree, ss.file, ss.size = tree, f, good
	return nil
}

// unload drops the session's tree and file; the next call reloads them.
// Called with ss.mu held.
func (ss *session) unload() {
	if ss.file != nil {
		_ = ss.file.Close()
	}
	ss.tree, ss.file, ss.size, ss.loaded = nil, nil, 0, false
}

func (ss *session) close() error {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.closed = true
	if ss.file == nil {
		return nil
	}
	err := ss.file.Close()
	ss.tree, ss.file = nil, nil
	return err
}

// Append implements [activities.TranscriptStore].
func (s *FileStore) Append(ctx context.Context, k activities.SessionKey, m convo.Message) (stored convo.Message, existed bool, err error) {
	return s.append(ctx, k, m, (*convo.Tree).Append)
}

// AppendLeaf implements [activities.TranscriptStore].
func (s *FileStore) AppendLeaf(ctx context.Context, k activities.SessionKey, m convo.Message) (stored convo.Message, existed bool, err error) {
	return s.append(ctx, k, m, (*convo.Tree).AppendLeaf)
}

// append stores m unless its id exists, with add's checks.
func (s *FileStore) append(ctx context.Context, k activities.SessionKey, m convo.Message, add func(*convo.Tree, convo.Message) error) (stored convo.Message, existed bool, err error) {
	err = s.with(ctx, k, func(ss *session) error {
		if old, ok := ss.tree.Get(m.ID); ok {
			stored, existed = old, true
			return nil
		}
		line, err := convo.MarshalEntry(m)
		if err != nil {
			return fmt.Errorf("append %s to %s: %w", m.ID, k, err)
		}
		if err := add(ss.tree, m); err != nil {
			return fmt.Errorf("append %s to %s: %w", m.ID, k, err)
		}
		line = append(line, '\n')
		_, err = ss.file.Write(line)
		if err == nil && s.opts.Sync {
			err = ss.file.Sync()
		}
		if err != nil {
			// The tree has m, the file may hold part of it: cut the file
			// back to its last whole line and reload from it next time.
			_ = ss.file.Truncate(ss.size)
			ss.unload()
			return fmt.Errorf("append %s to %s: %w", m.ID, k, err)
		}
		ss.size += int64(len(line))
		stored = m
		return nil
	})
	if err != nil {
		return convo.Message{}, false, err
	}
	return stored, existed, nil
}

// read runs fn with the session's tree under its lock.
func (s *FileStore) read(ctx context.Context, k activities.SessionKey, fn func(t *convo.Tree) error) error {
	return s.with(ctx, k, func(ss *session) error { return fn(ss.tree) })
}

// Get implements [activities.TranscriptStore].
func (s *FileStore) Get(ctx context.Context, k activities.SessionKey, id string) (m convo.Message, ok bool, err error) {
	err = s.read(ctx, k, func(t *convo.Tree) error {
		m, ok = t.Get(id)
		return nil
	})
	return m, ok, err
}

// Messages implements [activities.TranscriptStore].
func (s *FileStore) Messages(ctx context.Context, k activities.SessionKey, ids []string) ([]convo.Message, error) {
	out := make([]convo.Message, 0, len(ids))
	err := s.read(ctx, k, func(t *convo.Tree) error {
		for _, id := range ids {
			m, ok := t.Get(id)
			if !ok {
				return fmt.Errorf("message %s of %s: %w", id, k, activities.ErrNotFound)
			}
			out = append(out, m)
		}
		return nil
	})
	return out, err
}

// Branch implements [activities.TranscriptStore].
func (s *FileStore) Branch(ctx context.Context, k activities.SessionKey, leafID string) (b []convo.Message, err error) {
	err = s.read(ctx, k, func(t *convo.Tree) error {
		if leafID == "" {
			return nil
		}
		b, err = t.Branch(leafID)
		return err
	})
	return b, err
}

// Len implements [activities.TranscriptStore].
func (s *FileStore) Len(ctx context.Context, k activities.SessionKey) (n int, err error) {
	err = s.read(ctx, k, func(t *convo.Tree) error {
		n = t.Len()
		return nil
	})
	return n, err
}

// SaveSnapshot implements [activities.TranscriptStore]; the write is atomic.
func (s *FileStore) SaveSnapshot(ctx context.Context, k activities.SessionKey, snapshot []byte) error {
	return s.with(ctx, k, func(*session) error { // the folder exists once loaded
		p := s.path(k, ".state.json")
		tmp, err := os.CreateTemp(filepath.Dir(p), ".state-*")
		if err != nil {
			return fmt.Errorf("save snapshot of %s: %w", k, err)
		}
		_, err = tmp.Write(snapshot)
		if err == nil {
			err = tmp.Sync()
		}
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Rename(tmp.Name(), p)
		}
		if err != nil {
			_ = os.Remove(tmp.Name())
			return fmt.Errorf("save snapshot of %s: %w", k, err)
		}
		return nil
	})
}

// LoadSnapshot implements [activities.TranscriptStore].
func (s *FileStore) LoadSnapshot(ctx context.Context, k activities.SessionKey) (snapshot []byte, ok bool, err error) {
	err = s.with(ctx, k, func(*session) error {
		b, err := os.ReadFile(s.path(k, ".state.json"))
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("load snapshot of %s: %w", k, err)
		}
		snapshot, ok = b, true
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	return snapshot, ok, nil
}

// Delete implements [activities.TranscriptStore]. It waits for a call in
// progress on the session; calls that started before it and are still
// waiting fail with [fs.ErrClosed].
func (s *FileStore) Delete(ctx context.Context, k activities.SessionKey) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkKey(k); err != nil {
		return err
	}
	// Under s.mu, so that no call reopens the files before they are gone.
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.sessions[k]; ok {
		s.lru.Remove(e)
		delete(s.sessions, k)
		_ = e.Value.(*session).close()
	}
	var errs []error
	for _, ext := range []string{".jsonl", ".state.json"} {
		if err := os.Remove(s.path(k, ext)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("delete %s: %w", k, err)
	}
	return nil
}

// EraseTenant implements [activities.TenantEraser]: it removes the
// tenant's folder, every transcript and snapshot in it.
func (s *FileStore) EraseTenant(ctx context.Context, tenant string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkKey(activities.SessionKey{Tenant: tenant, SessionID: "x"}); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, e := range s.sessions {
		if k.Tenant == tenant {
			s.lru.Remove(e)
			delete(s.sessions, k)
			_ = e.Value.(*session).close()
		}
	}
	if err := os.RemoveAll(filepath.Join(s.opts.Dir, tenant)); err != nil {
		return fmt.Errorf("erase tenant %s: %w", tenant, err)
	}
	return nil
}

// StoredSessions implements [activities.SessionLister]: every session
// with a transcript or a snapshot, and when either was last written.
func (s *FileStore) StoredSessions(ctx context.Context) ([]activities.StoredSession, error) {
	tenants, err := os.ReadDir(s.opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	var out []activities.StoredSession
	for _, t := range tenants {
		if !t.IsDir() {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		files, err := os.ReadDir(filepath.Join(s.opts.Dir, t.Name()))
		if err != nil {
			return nil, fmt.Errorf("list sessions: %w", err)
		}
		at := map[string]int{}
		for _, f := range files {
			id, ok := strings.CutSuffix(f.Name(), ".jsonl")
			if !ok {
				id, ok = strings.CutSuffix(f.Name(), ".state.json")
			}
			if !ok || f.IsDir() || strings.HasPrefix(f.Name(), ".") {
				continue
			}
			info, err := f.Info()
			if err != nil {
				continue // removed meanwhile
			}
			k := activities.SessionKey{Tenant: t.Name(), SessionID: id}
			i, seen := at[id]
			if !seen {
				at[id] = len(out)
				out = append(out, activities.StoredSession{Key: k, Updated: info.ModTime()})
			} else if info.ModTime().After(out[i].Updated) {
				out[i].Updated = info.ModTime()
			}
		}
	}
	return out, nil
}
