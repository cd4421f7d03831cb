// Package pgtranscript stores session transcripts in PostgreSQL: the
// [activities.TranscriptStore] for any number of workers sharing one
// database. The schema is in migrations/ ([Migrate]).
//
// Messages are immutable rows, stored once per (tenant, session, id). An
// append locks its session's row, so a session's messages are numbered in
// commit order. Reads of single messages go to the database; the window
// and summary views, which walk the session's tree, use a tree cached in
// the process that every such read first brings up to date, in one round
// trip: the session row's id (new when the session was deleted and started
// again) and message count tell whether the tree is current, and the
// messages it lacks come with them. So no worker ever serves a message
// another worker deleted, or misses one another worker appended.
package pgtranscript

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/convo"
)

// Options configure a [Store].
type Options struct {
	// URL is the database, as a PostgreSQL URL or key=value string; the
	// pool's parameters (pool_max_conns=N, ...) are read from it too.
	URL string
	// Migrate applies the migrations the database lacks before the store
	// opens. Without it, a database whose schema is behind is an error.
	Migrate bool
	// MaxSessions bounds the session trees cached in memory (the least
	// recently used are dropped); default 1024.
	MaxSessions int
}

// Store is an [activities.TranscriptStore] in PostgreSQL.
type Store struct {
	activities.TreeReads // over read
	pool                 *pgxpool.Pool
	max                  int

	mu       sync.Mutex
	sessions map[activities.SessionKey]*list.Element // of *session
	lru      *list.List
}

var _ activities.TranscriptStore = (*Store)(nil)

// session is a cached tree of one session.
type session struct {
	key activities.SessionKey

	mu    sync.Mutex // guards the fields below, and is held across a refresh
	epoch int64      // id of the session row the tree was read from, 0 for none
	tree  *convo.Tree
}

// Open connects to the database, migrating it first if asked to.
func Open(ctx context.Context, opts Options) (*Store, error) {
	if opts.URL == "" {
		return nil, errors.New("transcript store: no database URL")
	}
	if opts.MaxSessions <= 0 {
		opts.MaxSessions = 1024
	}
	cfg, err := pgxpool.ParseConfig(opts.URL)
	if err != nil {
		return nil, fmt.Errorf("transcript store: %w", err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err == nil {
		err = pool.Ping(ctx)
		if err == nil && opts.Migrate {
			_, err = migrate(ctx, pool)
		} else if err == nil {
			err = checkSchema(ctx, pool)
		}
		if err != nil {
			pool.Close()
		}
	}
	if err != nil {
		return nil, fmt.Errorf("transcript store: %w", err)
	}
	s := &Store{pool: pool, max: opts.MaxSessions, sessions: map[activities.SessionKey]*list.Element{}, lru: list.New()}
	s.TreeReads.Read = s.read
	return s, nil
}

// checkSchema fails unless every migration of this build was applied.
func checkSchema(ctx context.Context, pool *pgxpool.Pool) error {
	all, err := migrations()
	if err != nil {
		return err
	}
	var n int
	err = pool.QueryRow(ctx, "SELECT count(*) FROM schema_migrations WHERE version <= $1", all[len(all)-1].version).Scan(&n)
	if err == nil && n < len(all) {
		err = fmt.Errorf("%d of %d migrations applied", n, len(all))
	}
	if err != nil {
		return fmt.Errorf("schema not up to date (run `ctxflow migrate`): %w", err)
	}
	return nil
}

// Close closes the connections; calls in progress finish first.
func (s *Store) Close() error {
	s.pool.Close()
	return nil
}

func check(ctx context.Context, k activities.SessionKey) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if k.Tenant == "" || k.SessionID == "" {
		return fmt.Errorf("transcript store: bad session key %q", k)
	}
	return nil
}

// session returns the cached tree of k, dropping the least recently used
// beyond MaxSessions (a call holding one goes on with it).
func (s *Store) session(k activities.SessionKey) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.sessions[k]; ok {
		s.lru.MoveToFront(e)
		return e.Value.(*session)
	}
	ss := &session{key: k}
	s.sessions[k] = s.lru.PushFront(ss)
	for s.lru.Len() > s.max {
		delete(s.sessions, s.lru.Remove(s.lru.Back()).(*session).key)
	}
	return ss
}

type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// refreshSQL reads the session's row and the messages after the first $4
// when the row is still $3, else all of them: one statement, one snapshot.
const refreshSQL = `
SELECT s.id, s.messages, m.pos, m.entry
FROM transcript_sessions s
LEFT JOIN transcript_messages m
  ON m.session = s.id AND m.pos > CASE WHEN s.id = $3 THEN $4::bigint ELSE 0 END
WHERE s.tenant = $1 AND s.session_id = $2
ORDER BY m.pos`

// refresh brings ss's tree up to date with the database. Called with
// ss.mu held; on an error the tree is dropped (the next call reads it all).
func (ss *session) refresh(ctx context.Context, q querier) error {
	if err := ss.load(ctx, q); err != nil {
		ss.epoch, ss.tree = 0, nil
		return fmt.Errorf("read transcript %s: %w", ss.key, err)
	}
	return nil
}

func (ss *session) load(ctx context.Context, q querier) error {
	have := 0
	if ss.tree != nil {
		have = ss.tree.Len()
	}
	rows, err := q.Query(ctx, refreshSQL, ss.key.Tenant, ss.key.SessionID, ss.epoch, have)
	if err != nil {
		return err
	}
	defer rows.Close()
	tree := ss.tree
	var epoch, count int64
	found := false
	for rows.Next() {
		var pos *int64
		var entry *string
		if err := rows.Scan(&epoch, &count, &pos, &entry); err != nil {
			return err
		}
		if !found && (epoch != ss.epoch || tree == nil) {
			tree = convo.NewTree() // deleted and started again, or never read
		}
		found = true
		if entry == nil {
			continue
		}
		if *pos != int64(tree.Len())+1 {
			return fmt.Errorf("message %d read after %d", *pos, tree.Len())
		}
		m, err := convo.UnmarshalEntry([]byte(*entry))
		if err == nil {
			err = tree.Append(m)
		}
		if err != nil {
			return fmt.Errorf("message %d: %w", *pos, err)
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if !found && (ss.epoch != 0 || tree == nil) {
		tree = convo.NewTree() // no such session (any more)
	}
	if int64(tree.Len()) != count {
		return fmt.Errorf("%d messages read, the session has %d", tree.Len(), count)
	}
	ss.epoch, ss.tree = epoch, tree
	return nil
}

// read runs fn on the session's tree, brought up to date.
func (s *Store) read(ctx context.Context, k activities.SessionKey, fn func(t *convo.Tree) error) error {
	if err := check(ctx, k); err != nil {
		return err
	}
	ss := s.session(k)
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if err := ss.refresh(ctx, s.pool); err != nil {
		return err
	}
	return fn(ss.tree)
}

// lockSQL creates the session's row if needed and locks it until the
// transaction ends: appends to a session take turns.
const lockSQL = `
INSERT INTO transcript_sessions AS s (tenant, session_id) VALUES ($1, $2)
ON CONFLICT (tenant, session_id) DO UPDATE SET messages = s.messages
RETURNING id, messages`

// insertSQL stores message number $2 and counts it, or does nothing if
// the id is taken.
const insertSQL = `
WITH m AS (
  INSERT INTO transcript_messages (session, pos, id, parent_id, role, entry)
  VALUES ($1, $2, $3, $4, $5, $6)
  ON CONFLICT DO NOTHING
  RETURNING 1)
UPDATE transcript_sessions SET messages = $2 WHERE id = $1 AND EXISTS (SELECT FROM m)`

// Append implements [activities.TranscriptStore]. In one transaction it
// locks the session, brings the cached tree up to date, returns the stored
// message if the id exists, else checks m against the tree (parent, tool
// pairing) and inserts it.
func (s *Store) Append(ctx context.Context, k activities.SessionKey, m convo.Message) (stored convo.Message, existed bool, err error) {
	return s.append(ctx, k, m, (*convo.Tree).Append)
}

// AppendLeaf implements [activities.TranscriptStore]: Append, refused
// under the same lock when m's parent has a child.
func (s *Store) AppendLeaf(ctx context.Context, k activities.SessionKey, m convo.Message) (stored convo.Message, existed bool, err error) {
	return s.append(ctx, k, m, (*convo.Tree).AppendLeaf)
}

func (s *Store) append(ctx context.Context, k activities.SessionKey, m convo.Message, add func(*convo.Tree, convo.Message) error) (stored convo.Message, existed bool, err error) {
	if err := check(ctx, k); err != nil {
		return convo.Message{}, false, err
	}
	entry, err := convo.MarshalEntry(m)
	var back convo.Message // m as every reader will see it
	if err == nil {
		back, err = convo.UnmarshalEntry(entry)
	}
	if err != nil {
		return convo.Message{}, false, fmt.Errorf("append %s to %s: %w", m.ID, k, err)
	}
	ss := s.session(k)
	ss.mu.Lock()
	defer ss.mu.Unlock()
	stored, existed, err = ss.append(ctx, s.pool, back, string(entry), add)
	if err != nil {
		return convo.Message{}, false, fmt.Errorf("append %s to %s: %w", m.ID, k, err)
	}
	return stored, existed, nil
}

func (ss *session) append(ctx context.Context, pool *pgxpool.Pool, m convo.Message, entry string, add func(*convo.Tree, convo.Message) error) (convo.Message, bool, error) {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return convo.Message{}, false, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }() // no-op once committed
	var id, n int64
	if err := tx.QueryRow(ctx, lockSQL, ss.key.Tenant, ss.key.SessionID).Scan(&id, &n); err != nil {
		return convo.Message{}, false, err
	}
	if err := ss.refresh(ctx, tx); err != nil { // under the lock: the whole session
		return convo.Message{}, false, err
	}
	if old, ok := ss.tree.Get(m.ID); ok {
		return old, true, nil
	}
	if err := add(ss.tree, m); err != nil { // the tree is unchanged
		return convo.Message{}, false, err
	}
	// The tree holds m: unless the commit succeeds, drop it.
	committed := false
	defer func() {
		if !committed {
			ss.epoch, ss.tree = 0, nil
		}
	}()
	var parent *string
	if m.ParentID != "" {
		parent = &m.ParentID
	}
	tag, err := tx.Exec(ctx, insertSQL, id, n+1, m.ID, parent, string(m.Role), entry)
	if err == nil && tag.RowsAffected() != 1 {
		err = fmt.Errorf("message %d or id %s taken under the session's lock", n+1, m.ID) // a bug
	}
	if err == nil {
		err = tx.Commit(ctx)
	}
	if err != nil {
		return convo.Message{}, false, err
	}
	committed = true
	return m, false, nil
}

const messagesSQL = `
SELECT m.entry FROM transcript_messages m JOIN transcript_sessions s ON s.id = m.session
WHERE s.tenant = $1 AND s.session_id = $2 AND m.id = ANY($3)`

// messages reads the messages with the given ids (those that exist).
func (s *Store) messages(ctx context.Context, k activities.SessionKey, ids []string) (map[string]convo.Message, error) {
	rows, err := s.pool.Query(ctx, messagesSQL, k.Tenant, k.SessionID, ids)
	if err != nil {
		return nil, err
	}
	entries, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	out := make(map[string]convo.Message, len(entries))
	for _, e := range entries {
		m, err := convo.UnmarshalEntry([]byte(e))
		if err != nil {
			return nil, err
		}
		out[m.ID] = m
	}
	return out, nil
}

// Get implements [activities.TranscriptStore].
func (s *Store) Get(ctx context.Context, k activities.SessionKey, id string) (convo.Message, bool, error) {
	if err := check(ctx, k); err != nil {
		return convo.Message{}, false, err
	}
	ms, err := s.messages(ctx, k, []string{id})
	if err != nil {
		return convo.Message{}, false, fmt.Errorf("message %s of %s: %w", id, k, err)
	}
	m, ok := ms[id]
	return m, ok, nil
}

// Messages implements [activities.TranscriptStore].
func (s *Store) Messages(ctx context.Context, k activities.SessionKey, ids []string) ([]convo.Message, error) {
	if err := check(ctx, k); err != nil {
		return nil, err
	}
	ms, err := s.messages(ctx, k, ids)
	if err != nil {
		return nil, fmt.Errorf("messages of %s: %w", k, err)
	}
	out := make([]convo.Message, 0, len(ids))
	for _, id := range ids {
		m, ok := ms[id]
		if !ok {
			return nil, fmt.Errorf("message %s of %s: %w", id, k, activities.ErrNotFound)
		}
		out = append(out, m)
	}
	return out, nil
}

// Branch implements [activities.TranscriptStore].
func (s *Store) Branch(ctx context.Context, k activities.SessionKey, leafID string) (b []convo.Message, err error) {
	if leafID == "" {
		return nil, check(ctx, k)
	}
	err = s.read(ctx, k, func(t *convo.Tree) error {
		b, err = t.Branch(leafID)
		return err
	})
	return b, err
}

// Len implements [activities.TranscriptStore].
func (s *Store) Len(ctx context.Context, k activities.SessionKey) (int, error) {
	if err := check(ctx, k); err != nil {
		return 0, err
	}
	var n int
	err := s.pool.QueryRow(ctx, "SELECT messages FROM transcript_sessions WHERE tenant = $1 AND session_id = $2", k.Tenant, k.SessionID).Scan(&n)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("count messages of %s: %w", k, err)
	}
	return n, nil
}

// SaveSnapshot implements [activities.TranscriptStore]; one statement
// replaces the snapshot, so a reader sees the old one or the new one.
func (s *Store) SaveSnapshot(ctx context.Context, k activities.SessionKey, snapshot []byte) error {
	if err := check(ctx, k); err != nil {
		return err
	}
	if snapshot == nil {
		snapshot = []byte{} // an empty snapshot, not none
	}
	_, err := s.pool.Exec(ctx, `
INSERT INTO transcript_sessions (tenant, session_id, snapshot) VALUES ($1, $2, $3)
ON CONFLICT (tenant, session_id) DO UPDATE SET snapshot = EXCLUDED.snapshot`, k.Tenant, k.SessionID, snapshot)
	if err != nil {
		return fmt.Errorf("save snapshot of %s: %w", k, err)
	}
	return nil
}

// LoadSnapshot implements [activities.TranscriptStore].
func (s *Store) LoadSnapshot(ctx context.Context, k activities.SessionKey) ([]byte, bool, error) {
	if err := check(ctx, k); err != nil {
		return nil, false, err
	}
	var b []byte
	var ok bool
	err := s.pool.QueryRow(ctx, "SELECT snapshot IS NOT NULL, coalesce(snapshot, '') FROM transcript_sessions WHERE tenant = $1 AND session_id = $2",
		k.Tenant, k.SessionID).Scan(&ok, &b)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && !ok) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("load snapshot of %s: %w", k, err)
	}
	return b, true, nil
}

// Delete implements [activities.TranscriptStore]: one statement removes the
// session's row, its snapshot and (cascading) its messages. It waits for an
// append in progress; a later append starts a new session.
func (s *Store) Delete(ctx context.Context, k activities.SessionKey) error {
	if err := check(ctx, k); err != nil {
		return err
	}
	if _, err := s.pool.Exec(ctx, "DELETE FROM transcript_sessions WHERE tenant = $1 AND session_id = $2", k.Tenant, k.SessionID); err != nil {
		return fmt.Errorf("delete %s: %w", k, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.sessions[k]; ok { // frees the memory; a stale tree would be refreshed anyway
		s.lru.Remove(e)
		delete(s.sessions, k)
	}
	return nil
}

// EraseTenant implements [activities.TenantEraser]: every transcript and
// snapshot of the tenant. (PostgreSQL keeps the deleted rows' bytes in
// its files until VACUUM reuses the space; see docs/operations.md.)
func (s *Store) EraseTenant(ctx context.Context, tenant string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if _, err := s.pool.Exec(ctx, "DELETE FROM transcript_sessions WHERE tenant = $1", tenant); err != nil {
		return fmt.Errorf("erase tenant %s: %w", tenant, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, e := range s.sessions {
		if k.Tenant == tenant {
			s.lru.Remove(e)
			delete(s.sessions, k)
		}
	}
	return nil
}
