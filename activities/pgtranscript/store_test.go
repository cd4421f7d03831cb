package pgtranscript

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/activities/transcript/transcripttest"
	"github.com/ctxflow/ctxflow/convo"
	"github.com/ctxflow/ctxflow/internal/pgtest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Stop()
	os.Exit(code)
}

var key = activities.SessionKey{Tenant: "acme", SessionID: "s1"}

// open returns a store on url (a new database when url is "") that is
// closed when the test ends.
func open(tb testing.TB, url string, opts Options) *Store {
	tb.Helper()
	if url == "" {
		url = pgtest.Database(tb)
	}
	opts.URL, opts.Migrate = url, true
	s, err := Open(context.Background(), opts)
	if err != nil {
		tb.Fatalf("Open: %v", err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	for _, max := range []int{0, 1} {
		t.Run(fmt.Sprintf("MaxSessions=%d", max), func(t *testing.T) {
			transcripttest.Run(t, func(t *testing.T) activities.TranscriptStore {
				return open(t, "", Options{MaxSessions: max})
			})
		})
	}
}

func msg(id, parent, content string) convo.Message {
	return convo.Message{ID: id, ParentID: parent, Role: convo.RoleUser, Content: content, Tokens: 5,
		CreatedAt: time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)}
}

func ids(ms []convo.Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	return out
}

// TestTwoWorkers runs two stores on one database, as two workers do: what
// one appends or deletes, the other sees at its next call, whatever it
// has cached.
func TestTwoWorkers(t *testing.T) {
	ctx := context.Background()
	url := pgtest.Database(t)
	a, b := open(t, url, Options{}), open(t, url, Options{})
	win := convo.DefaultWindowConfig()

	for i, id := range []string{"m0", "m1", "m2"} {
		parent := ""
		if i > 0 {
			parent = fmt.Sprintf("m%d", i-1)
		}
		if _, _, err := a.Append(ctx, key, msg(id, parent, "first "+id)); err != nil {
			t.Fatal(err)
		}
	}
	if br, err := b.Branch(ctx, key, "m2"); err != nil || len(br) != 3 { // b caches the tree
		t.Fatalf("b.Branch(m2) = %v, %v", ids(br), err)
	}
	// b's tree lacks what a appends next.
	if _, _, err := a.Append(ctx, key, msg("m3", "m2", "first m3")); err != nil {
		t.Fatal(err)
	}
	if c, err := b.Assemble(ctx, key, "m3", win, convo.SummaryState{}, 0); err != nil || len(c.Messages) != 4 {
		t.Fatalf("b.Assemble(m3) = %v, %v", ids(c.Messages), err)
	}
	// b appends under a's message; a re-appends b's: existed, b's text.
	if _, _, err := b.Append(ctx, key, msg("m4", "m3", "from b")); err != nil {
		t.Fatal(err)
	}
	if got, existed, err := a.Append(ctx, key, msg("m4", "m3", "from a")); err != nil || !existed || got.Content != "from b" {
		t.Fatalf("a re-appends m4 = %+v, %v, %v; want b's, existed", got, existed, err)
	}
	if n, err := a.Len(ctx, key); err != nil || n != 5 {
		t.Fatalf("a.Len = %d, %v", n, err)
	}

	// a deletes the session and starts it again with the same ids: b must
	// not serve its cached messages, nor take the new ids for its old ones.
	if err := a.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Branch(ctx, key, "m2"); !errors.Is(err, convo.ErrNotFound) {
		t.Fatalf("b.Branch(m2) after a's Delete: err = %v, want ErrNotFound", err)
	}
	for _, m := range []convo.Message{msg("m0", "", "second m0"), msg("m1", "m0", "second m1")} {
		if _, existed, err := b.Append(ctx, key, m); err != nil || existed {
			t.Fatalf("b re-creates %s: existed %v, %v", m.ID, existed, err)
		}
	}
	if _, _, err := a.Append(ctx, key, msg("m2", "m1", "second m2")); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*Store{a, b} {
		br, err := s.Branch(ctx, key, "m2")
		if err != nil || len(br) != 3 || br[0].Content != "second m0" || br[2].Content != "second m2" {
			t.Fatalf("Branch(m2) of the new session = %+v, %v", br, err)
		}
		if c, err := s.Assemble(ctx, key, "m2", win, convo.SummaryState{}, 0); err != nil || c.Messages[0].Content != "second m0" {
			t.Fatalf("Assemble(m2) of the new session = %+v, %v", c.Messages, err)
		}
	}
	// Delete and start again between two calls of b that hit its cache at
	// the same length: the session row's id tells them apart.
	if err := b.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	for _, m := range []convo.Message{msg("m0", "", "third m0"), msg("m1", "m0", "third m1"), msg("m2", "m1", "third m2")} {
		if _, _, err := b.Append(ctx, key, m); err != nil {
			t.Fatal(err)
		}
	}
	if br, err := a.Branch(ctx, key, "m2"); err != nil || br[0].Content != "third m0" {
		t.Fatalf("a.Branch(m2) after b re-created the session = %+v, %v", br, err)
	}
}

// TestTwoWorkersConcurrentAppends: writers on two stores append the same
// chains; every id is new to exactly one of them.
func TestTwoWorkersConcurrentAppends(t *testing.T) {
	ctx := context.Background()
	url := pgtest.Database(t)
	stores := []*Store{open(t, url, Options{}), open(t, url, Options{})}
	const chains, perChain = 4, 30
	var fresh sync.Map
	var news atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, chains*2)
	for c := range chains {
		for _, s := range stores {
			wg.Go(func() {
				parent := ""
				for j := range perChain {
					id := fmt.Sprintf("c%d-%d", c, j)
					_, existed, err := s.Append(ctx, key, msg(id, parent, id))
					if err != nil {
						errs <- err
						return
					}
					if !existed {
						news.Add(1)
						if _, dup := fresh.LoadOrStore(id, true); dup {
							errs <- fmt.Errorf("%s reported new twice", id)
						}
					}
					if b, err := s.Branch(ctx, key, id); err != nil || len(b) != j+1 {
						errs <- fmt.Errorf("Branch(%s) = %d messages, %v", id, len(b), err)
						return
					}
					parent = id
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := news.Load(); n != chains*perChain {
		t.Errorf("%d appends reported new, want %d", n, chains*perChain)
	}
	for _, s := range stores {
		if n, err := s.Len(ctx, key); err != nil || n != chains*perChain {
			t.Errorf("Len = %d, %v", n, err)
		}
	}
}

// adminConn connects to url for the test's own statements.
func adminConn(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// checkCounts asserts that every session row counts exactly its message
// rows, numbered 1..n: nothing half-written.
func checkCounts(t *testing.T, admin *pgx.Conn) {
	t.Helper()
	rows, err := admin.Query(context.Background(), `
SELECT s.tenant || '/' || s.session_id, s.messages, count(m.pos), coalesce(max(m.pos), 0)
FROM transcript_sessions s LEFT JOIN transcript_messages m ON m.session = s.id GROUP BY s.id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		var want, n, max int64
		if err := rows.Scan(&name, &want, &n, &max); err != nil {
			t.Fatal(err)
		}
		if n != want || max != want {
			t.Errorf("%s counts %d messages, has %d numbered up to %d", name, want, n, max)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
}

// TestAppendKilledMidTransaction terminates an append's connection after
// it locked the session and put the message in its cached tree, before
// the insert: the append fails, nothing is written, and the retry stores
// the message.
func TestAppendKilledMidTransaction(t *testing.T) {
	ctx := context.Background()
	url := pgtest.Database(t)
	s := open(t, url, Options{})
	admin := adminConn(t, url)
	if _, _, err := s.Append(ctx, key, msg("m0", "", "hi")); err != nil {
		t.Fatal(err)
	}

	// Inserts into transcript_messages wait for this lock; reads do not.
	tx, err := admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "LOCK TABLE transcript_messages IN SHARE MODE"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, _, err := s.Append(ctx, key, msg("m1", "m0", "killed"))
		done <- err
	}()
	var pid int32
	for deadline := time.Now().Add(10 * time.Second); pid == 0; {
		err := tx.QueryRow(ctx, `SELECT pid FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()`).Scan(&pid)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the append never waited for the lock")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := tx.Exec(ctx, "SELECT pg_terminate_backend($1)", pid); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("an append whose connection was killed succeeded")
		}
		t.Logf("append with its connection killed: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the append did not return after its connection was killed")
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}

	if _, ok, err := s.Get(ctx, key, "m1"); ok || err != nil {
		t.Errorf("Get(m1) after the failed append = ok %v, %v", ok, err)
	}
	if _, err := s.Branch(ctx, key, "m1"); !errors.Is(err, convo.ErrNotFound) {
		t.Errorf("Branch(m1) after the failed append: err = %v, want ErrNotFound (not a stale tree)", err)
	}
	if n, err := s.Len(ctx, key); n != 1 || err != nil {
		t.Errorf("Len = %d, %v; want 1", n, err)
	}
	checkCounts(t, admin)
	if got, existed, err := s.Append(ctx, key, msg("m1", "m0", "retried")); err != nil || existed || got.Content != "retried" {
		t.Errorf("retried append = %+v, %v, %v", got, existed, err)
	}
	if b, err := s.Branch(ctx, key, "m1"); err != nil || !slices.Equal(ids(b), []string{"m0", "m1"}) {
		t.Errorf("Branch(m1) = %v, %v", ids(b), err)
	}
}

// TestConnectionsKilledUnderLoad terminates every connection of the store
// again and again while writers append and read: calls fail with errors
// (no panic), retries succeed, and in the end every chain is whole and
// every count matches its rows.
func TestConnectionsKilledUnderLoad(t *testing.T) {
	ctx := context.Background()
	const maxConns = 4 // each kill breaks at most this many of the store's connections
	url := pgtest.Database(t)
	s := open(t, url+fmt.Sprintf("&pool_max_conns=%d", maxConns), Options{})
	admin := adminConn(t, url)
	const writers, perChain = 4, 40
	// Every timing below follows how long an append and a read take on
	// this machine now, never a fixed guess: the kills come at a cadence
	// of four such calls, first as measured alone (a calibration) and then
	// as the writers' own calls take (a running average); and a kill waits
	// for some call to have succeeded since the last one, so that however
	// slow the machine is, kills never outpace every writer. A writer's
	// patience is counted in kills, not attempts: each kill breaks at most
	// maxConns connections, each failing one call (the kill's, or an idle
	// one's next use), so more failures than two kills explain, with no
	// kill in between, mean the store does not recover.
	took := opTimer{avg: calibrate(t, s)}
	var failures, successes, kills atomic.Int64
	var wg sync.WaitGroup
	writeStart := time.Now()
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			k := activities.SessionKey{Tenant: "acme", SessionID: fmt.Sprintf("s%d", w%2)}
			parent := ""
			for j := range perChain {
				id := fmt.Sprintf("w%d-%d", w, j)
				round, unexplained := kills.Load(), 0
				for {
					start := time.Now()
					_, _, err := s.Append(ctx, k, msg(id, parent, id))
					if err == nil {
						_, err = s.Branch(ctx, k, id)
					}
					if err == nil {
						took.observe(time.Since(start))
						successes.Add(1)
						break
					}
					if r := kills.Load(); r != round {
						round, unexplained = r, 0
					}
					if unexplained++; errors.Is(err, convo.ErrMissingParent) || unexplained > 2*maxConns+2 {
						errs <- fmt.Errorf("%s: %w (%d failures since the last kill)", id, err, unexplained)
						return
					}
					failures.Add(1)
					time.Sleep(took.average() / 2)
				}
				parent = id
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	killed, since := 0, int64(-1)
	for loop := true; loop; {
		select {
		case <-done:
			loop = false
		case <-time.After(4 * took.average()):
			if n := successes.Load(); n == since {
				continue // no call got through since the last kill: let one
			} else {
				since = n
			}
			kills.Add(1)
			var n int
			err := admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
				WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&n)
			if err != nil {
				t.Fatal(err)
			}
			killed += n
		}
	}
	t.Logf("writers took %s", time.Since(writeStart))
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	t.Logf("%d kills, %d connections killed, %d calls failed and were retried; an append and a read took %s on average at the end", kills.Load(), killed, failures.Load(), took.average())
	if failures.Load() == 0 {
		t.Error("no call failed: the kills did not hit")
	}
	checkCounts(t, admin)
	fresh := open(t, url, Options{}) // nothing cached
	for w := range writers {
		k := activities.SessionKey{Tenant: "acme", SessionID: fmt.Sprintf("s%d", w%2)}
		for _, st := range []*Store{s, fresh} {
			b, err := st.Branch(ctx, k, fmt.Sprintf("w%d-%d", w, perChain-1))
			// s's pool may still hold connections killed while idle: each
			// fails one call.
			for i := 0; err != nil && st == s && i < 2*maxConns; i++ {
				b, err = st.Branch(ctx, k, fmt.Sprintf("w%d-%d", w, perChain-1))
			}
			if err != nil || len(b) != perChain || b[0].ID != fmt.Sprintf("w%d-0", w) {
				t.Errorf("chain %d: %d messages, %v", w, len(b), err)
			}
		}
	}
	for _, k := range []string{"s0", "s1"} {
		if n, err := fresh.Len(ctx, activities.SessionKey{Tenant: "acme", SessionID: k}); err != nil || n != 2*perChain {
			t.Errorf("Len(%s) = %d, %v; want %d", k, n, err, 2*perChain)
		}
	}
}

// TestClosedStore: every call of a closed store is an error, not a panic.
func TestClosedStore(t *testing.T) {
	ctx := context.Background()
	s := open(t, "", Options{})
	if _, _, err := s.Append(ctx, key, msg("m0", "", "hi")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	calls := map[string]error{}
	_, _, calls["Append"] = s.Append(ctx, key, msg("m1", "m0", "x"))
	_, _, calls["Get"] = s.Get(ctx, key, "m0")
	_, calls["Messages"] = s.Messages(ctx, key, []string{"m0"})
	_, calls["Assemble"] = s.Assemble(ctx, key, "m0", convo.DefaultWindowConfig(), convo.SummaryState{}, 0)
	_, calls["Branch"] = s.Branch(ctx, key, "m0")
	_, calls["All"] = s.All(ctx, key)
	_, calls["Len"] = s.Len(ctx, key)
	calls["SaveSnapshot"] = s.SaveSnapshot(ctx, key, []byte("{}"))
	_, _, calls["LoadSnapshot"] = s.LoadSnapshot(ctx, key)
	calls["Delete"] = s.Delete(ctx, key)
	for name, err := range calls {
		if err == nil {
			t.Errorf("%s on a closed store did not fail", name)
		}
	}
}

// TestMigrate: migrations apply once, however many workers start at once,
// and a store refuses a database that was not migrated.
func TestMigrate(t *testing.T) {
	ctx := context.Background()
	url := pgtest.Database(t)
	if _, err := Open(ctx, Options{URL: url}); err == nil || !strings.Contains(err.Error(), "ctxflow migrate") {
		t.Errorf("Open of a database without the schema: err = %v, want one that says to run ctxflow migrate", err)
	}
	all, err := migrations()
	if err != nil || len(all) == 0 {
		t.Fatalf("migrations = %v, %v", all, err)
	}
	const starters = 6
	applied := make([][]string, starters)
	var wg sync.WaitGroup
	for i := range starters {
		wg.Go(func() {
			var err error
			if applied[i], err = Migrate(ctx, url); err != nil {
				t.Errorf("Migrate %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	var total []string
	for _, a := range applied {
		total = append(total, a...)
	}
	if len(total) != len(all) {
		t.Errorf("%d starters applied %v, want each of the %d migrations once", starters, total, len(all))
	}
	if again, err := Migrate(ctx, url); err != nil || len(again) != 0 {
		t.Errorf("Migrate of a migrated database = %v, %v; want nothing applied", again, err)
	}
	var n int
	if err := adminConn(t, url).QueryRow(ctx, "SELECT count(*) FROM schema_migrations").Scan(&n); err != nil || n != len(all) {
		t.Errorf("schema_migrations has %d rows, %v; want %d", n, err, len(all))
	}
	s, err := Open(ctx, Options{URL: url})
	if err != nil {
		t.Fatalf("Open of a migrated database: %v", err)
	}
	_ = s.Close()
	if _, err := Open(ctx, Options{URL: "postgres://nobody@127.0.0.1:1/none?connect_timeout=2"}); err == nil {
		t.Error("Open of a server that is not there did not fail")
	}
}

// calibrate returns how long an append and a read of it take on this
// machine now, alone: the median of a few, on a session of their own.
func calibrate(t *testing.T, s *Store) time.Duration {
	t.Helper()
	k := activities.SessionKey{Tenant: "acme", SessionID: "calibration"}
	var took []time.Duration
	parent := ""
	for i := range 9 {
		id := fmt.Sprintf("c%d", i)
		start := time.Now()
		if _, _, err := s.Append(context.Background(), k, msg(id, parent, id)); err != nil {
			t.Fatalf("calibration: %v", err)
		}
		if _, err := s.Branch(context.Background(), k, id); err != nil {
			t.Fatalf("calibration: %v", err)
		}
		took = append(took, time.Since(start))
		parent = id
	}
	slices.Sort(took)
	t.Logf("calibration: an append and a read take %s alone", took[len(took)/2])
	return took[len(took)/2]
}

// opTimer keeps a running average of how long an operation takes.
type opTimer struct {
	mu  sync.Mutex
	avg time.Duration
}

func (o *opTimer) observe(d time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.avg == 0 {
		o.avg = d
	} else {
		o.avg = (4*o.avg + d) / 5
	}
}

func (o *opTimer) average() time.Duration {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.avg
}
