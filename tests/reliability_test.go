package tests

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver

	"github.com/ctxflow/ctxflow/convo"
	"github.com/ctxflow/ctxflow/internal/devserver"
	"github.com/ctxflow/ctxflow/tests/fakeollama"
	"github.com/ctxflow/ctxflow/workflows"
)

// reliabilityKills is how many times TestReliabilityWorkerKills kills the
// worker: CTXFLOW_RELIABILITY_KILLS, 10 in `make test`, 100 in
// `make reliability`.
func reliabilityKills(t *testing.T) int {
	return envCount(t, "CTXFLOW_RELIABILITY_KILLS", 10, 1)
}

// envCount is the number in the environment variable name, def when it is
// unset; a value that is not a number of at least least fails tb.
func envCount(tb testing.TB, name string, def, least int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < least {
		tb.Fatalf("%s=%q: want a number ≥ %d", name, v, least)
	}
	return n
}

// TestReliabilityWorkerKills kills the worker with SIGKILL at random
// moments while 20 sessions send turns one after another, with busy loops
// on every core, until it has been killed CTXFLOW_RELIABILITY_KILLS times.
// Each kill comes 150 ms to 1.5 s after the new worker answered its first
// turn: the cadence follows the machine, so a loaded one slows the test
// down instead of starving it. Every turn the API accepted (202) must be
// answered exactly once, with the whole conversation before it seen by the
// model, and every transcript must hold each message once, in order. It
// prints "kills=N lost=L duplicated=D".
func TestReliabilityWorkerKills(t *testing.T) {
	const sessions = 20
	kills := reliabilityKills(t)
	startHog(t)
	s := startStack(t, stackOptions{modelDelay: 60 * time.Millisecond})
	s.startWorker()
	ctx, cancel := context.WithTimeout(t.Context(), time.Duration(10*kills+300)*time.Second)
	defer cancel()

	var (
		stop     atomic.Bool  // the killer is done: send no new turn
		inFlight atomic.Int64 // turns accepted and not yet answered
		answered atomic.Int64 // turns answered
		accepted [sessions]int
		wrong    = make(chan error, 1000)
		wg       sync.WaitGroup
	)
	question := func(i, j int) string { return fmt.Sprintf("question %d of session %d", j, i) }
	start := time.Now()
	for i := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sid := fmt.Sprintf("rel-%02d", i)
			for j := 0; !stop.Load(); j++ {
				turnID := fmt.Sprintf("t%d", j)
				if err := submitUntilAccepted(ctx, s.apiClient, sid, turnID, question(i, j)); err != nil {
					wrong <- fmt.Errorf("%s %s never accepted: %w", sid, turnID, err)
					return
				}
				accepted[i] = j + 1
				inFlight.Add(1)
				res, err := s.awaitTurn(ctx, sid, turnID)
				inFlight.Add(-1)
				if err != nil {
					return // counted as lost below
				}
				answered.Add(1)
				// The fake model numbers its answer by the user messages it
				// saw: the whole conversation, in order, while it fits the
				// window of 10 rounds (a summary then stands for older ones).
				want := fakeollama.Answer(j+1, question(i, j))
				if res.Status != workflows.TurnCompleted || (j < 10 && res.Answer != want) || !strings.HasSuffix(res.Answer, " to: "+question(i, j)) {
					wrong <- fmt.Errorf("%s %s: status %s (%s) answer %q, want %q", sid, turnID, res.Status, res.Error, res.Answer, want)
				}
			}
		}()
	}

	midTurn, working := 0, 0
	for k := range kills {
		// A turn answered since the worker started: the kills never outpace
		// the work, however slow the machine.
		for since := answered.Load(); answered.Load() == since; time.Sleep(10 * time.Millisecond) {
			if ctx.Err() != nil {
				t.Fatalf("kill %d: no turn answered since the worker started (%v)\n%s", k+1, ctx.Err(), s.workerLogs())
			}
		}
		before := s.model.Calls().Chat
		select {
		case <-time.After(time.Duration(150+rand.IntN(1350)) * time.Millisecond):
		case <-ctx.Done():
			t.Fatalf("kill %d: %v", k+1, ctx.Err())
		}
		if inFlight.Load() > 0 {
			midTurn++
		}
		if s.model.Calls().Chat > before {
			working++ // the worker was calling the model when it died
		}
		s.killWorker()
		s.startWorker()
	}
	stop.Store(true)
	killed := time.Since(start)
	wg.Wait()
	close(wrong)
	for err := range wrong {
		t.Error(err)
	}

	// Count what was lost or doubled, through the API and in the files.
	lost, duplicated, turns := 0, 0, 0
	for i := range sessions {
		sid := fmt.Sprintf("rel-%02d", i)
		turns += accepted[i]
		// The session keeps the last 32 turn results (older turns are in
		// the transcript, checked below; each client checked every answer
		// as it came).
		for j := max(0, accepted[i]-30); j < accepted[i]; j++ {
			res, err := s.awaitTurn(ctx, sid, fmt.Sprintf("t%d", j))
			if err != nil || res.Status != workflows.TurnCompleted {
				lost++
				t.Errorf("%s t%d: %v %+v", sid, j, err, res)
			}
		}
		var st workflows.SessionState
		if _, err := s.do(ctx, http.MethodGet, "/v1/sessions/"+sid, nil, &st); err != nil || st.Turns != accepted[i] {
			t.Errorf("%s: %v, %d turns, want %d", sid, err, st.Turns, accepted[i])
		}
		l, d := countTranscript(t, filepath.Join(s.dataDir, "transcripts", workflows.DefaultTenant, sid+".jsonl"), accepted[i])
		lost, duplicated = lost+l, duplicated+d
	}
	t.Logf("kills=%d lost=%d duplicated=%d", kills, lost, duplicated)
	t.Logf("%d turns accepted over %d sessions in %s (kills over %s); %d kills with turns in flight, %d while the model was being called; %d model calls",
		turns, sessions, time.Since(start).Round(time.Millisecond), killed.Round(time.Millisecond), midTurn, working, s.model.Calls().Chat)
	if lost > 0 || duplicated > 0 || t.Failed() {
		t.Fatalf("worker logs:\n%s", s.workerLogs())
	}

}

// reliabilityLoad is how long TestReliabilityAPILoad runs:
// CTXFLOW_RELIABILITY_LOAD, 10s in `make test`, 60s in `make reliability`.
func reliabilityLoad(t *testing.T) time.Duration {
	d := 10 * time.Second
	if v := os.Getenv("CTXFLOW_RELIABILITY_LOAD"); v != "" {
		var err error
		if d, err = time.ParseDuration(v); err != nil || d <= 0 {
			t.Fatalf("CTXFLOW_RELIABILITY_LOAD=%q: want a duration such as 60s", v)
		}
	}
	return d
}

// TestReliabilityAPILoad: 200 clients on loopback, each with its own
// session, send turns (`?wait=true`) and read their session for
// CTXFLOW_RELIABILITY_LOAD, against an API that serves 64 requests at
// once. The only failures allowed are the intended backpressure (429 with
// Retry-After, after which the client waits and sends the same turn
// again); every turn answered 200 is in its session once. It prints the
// counts and the latency of the answered requests.
func TestReliabilityAPILoad(t *testing.T) {
	hogIfAsked(t)
	const clients = 200
	d := reliabilityLoad(t)
	s := startStack(t, stackOptions{maxInFlight: 64})
	s.startWorker()
	ctx, cancel := context.WithTimeout(t.Context(), d+3*time.Minute)
	defer cancel()

	var (
		mu        sync.Mutex
		latencies []time.Duration
		statuses  = map[int]int{}
		answered  [clients]int
		wg        sync.WaitGroup
	)
	record := func(code int, took time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		statuses[code]++
		if code < 300 {
			latencies = append(latencies, took)
		}
	}
	end := time.Now().Add(d)
	for i := range clients {
		wg.Go(func() {
			sid := fmt.Sprintf("load-%03d", i)
			for j := 0; time.Now().Before(end); {
				path, body := "/v1/sessions/"+sid+"/turns?wait=true", any(map[string]string{"turnId": fmt.Sprintf("t%d", j), "question": fmt.Sprintf("question %d", j)})
				method := http.MethodPost
				if j > 0 && rand.IntN(4) == 0 {
					method, path, body = http.MethodGet, "/v1/sessions/"+sid, nil
				}
				start := time.Now()
				var out map[string]any
				code, retryAfter, err := s.doWithRetryAfter(ctx, method, path, body, &out)
				record(code, time.Since(start))
				switch {
				case code == http.StatusTooManyRequests:
					if retryAfter != "1" {
						t.Errorf("429 with Retry-After %q, want 1", retryAfter)
					}
					time.Sleep(time.Duration(500+rand.IntN(1000)) * time.Millisecond)
				case err != nil:
					t.Errorf("%s %s: %d %v", method, path, code, err)
					return
				case method == http.MethodPost:
					if out["status"] != string(workflows.TurnCompleted) {
						t.Errorf("%s t%d: %v", sid, j, out)
						return
					}
					j++
					answered[i] = j
				}
			}
		})
	}
	wg.Wait()
	slices.Sort(latencies)
	total := 0
	for i := range clients {
		total += answered[i]
		if answered[i] == 0 {
			continue
		}
		var st workflows.SessionState
		if _, err := s.do(ctx, http.MethodGet, fmt.Sprintf("/v1/sessions/load-%03d", i), nil, &st); err != nil || st.Turns != answered[i] {
			t.Errorf("load-%03d: %v, %d turns, want %d", i, err, st.Turns, answered[i])
		}
	}
	fiveXX := 0
	for code, n := range statuses {
		if code >= 500 || code == 0 {
			fiveXX += n
		}
	}
	p := func(q float64) time.Duration {
		if len(latencies) == 0 {
			return 0
		}
		return latencies[min(len(latencies)-1, int(q*float64(len(latencies))))].Round(time.Millisecond)
	}
	t.Logf("clients=%d for %s: %d turns answered (%.0f/s), statuses %v, 5xx=%d, p50 %s p99 %s",
		clients, d, total, float64(total)/d.Seconds(), statuses, fiveXX, p(0.5), p(0.99))
	if fiveXX > 0 {
		t.Errorf("%d answers were 5xx or no answer", fiveXX)
	}
	if total == 0 {
		t.Error("no turn answered")
	}
}

// doWithRetryAfter is do, also returning the Retry-After header.
func (s apiClient) doWithRetryAfter(ctx context.Context, method, path string, body, out any) (int, string, error) {
	var hdr http.Header
	code, err := s.doHeader(ctx, method, path, body, out, &hdr)
	return code, hdr.Get("Retry-After"), err
}

// submitUntilAccepted posts a turn until the API accepts it (202, or 200
// once it is done), retrying transport errors and 5xx with the same turn
// id, as a careful client would while no worker is there to accept it.
func submitUntilAccepted(ctx context.Context, s apiClient, session, turnID, question string) error {
	for {
		code, err := s.submit(ctx, session, turnID, question)
		if code == http.StatusAccepted || code == http.StatusOK {
			return nil
		}
		if (code != 0 && code < 500) || ctx.Err() != nil {
			return fmt.Errorf("%d: %w", code, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// countTranscript reads a transcript that should hold exactly t0.u, t0.a,
// t1.u … for turns turns, each message the child of the one before (a
// running summary's record may come between two turns), and returns how
// many of those messages are missing and how many are extra.
func countTranscript(t *testing.T, path string, turns int) (lost, duplicated int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Errorf("%s: %v", path, err)
		return 2 * turns, 0
	}
	defer f.Close()
	msgs, err := convo.DecodeJSONL(f)
	if err != nil {
		t.Errorf("%s: %v", path, err)
		return 2 * turns, 0
	}
	seen := map[string]int{}
	parent := ""
	i := 0
	for _, m := range msgs {
		if m.Role == convo.RoleSummary && m.ParentID == parent {
			parent = m.ID
			continue
		}
		seen[m.ID]++
		if seen[m.ID] > 1 {
			duplicated++
			continue
		}
		want := fmt.Sprintf("t%d.u", i/2)
		if i%2 == 1 {
			want = fmt.Sprintf("t%d.a", i/2)
		}
		if m.ID != want || m.ParentID != parent {
			t.Errorf("%s: message %d is %s (parent %q), want %s (parent %q)", path, i, m.ID, m.ParentID, want, parent)
		}
		parent = m.ID
		i++
	}
	for j := range turns {
		for _, id := range []string{fmt.Sprintf("t%d.u", j), fmt.Sprintf("t%d.a", j)} {
			if seen[id] == 0 {
				lost++
			}
		}
	}
	return lost, duplicated + max(0, len(seen)-2*turns)
}

// TestReliabilityServerRestart stops the embedded Temporal server while
// turns of 10 sessions wait on a slow model, and starts it again on the same
// port and data: the worker and the API reconnect, every accepted turn is
// answered once, and the sessions go on from where they were.
func TestReliabilityServerRestart(t *testing.T) {
	hogIfAsked(t)
	const sessions = 10
	s := startStack(t, stackOptions{modelDelay: 1500 * time.Millisecond})
	s.startWorker()
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	question := func(i, j int) string { return fmt.Sprintf("question %d of session %d", j, i) }
	sid := func(i int) string { return fmt.Sprintf("restart-%02d", i) }
	answer := func(i, j int) {
		t.Helper()
		res, err := s.awaitTurn(ctx, sid(i), fmt.Sprintf("t%d", j))
		if want := fakeollama.Answer(j+1, question(i, j)); err != nil || res.Answer != want {
			t.Fatalf("%s t%d: %v %q, want %q\n%s", sid(i), j, err, res.Answer, want, s.workerLogs())
		}
	}
	for i := range sessions {
		if res, _, err := s.turn(ctx, sid(i), "t0", question(i, 0)); err != nil || res.Status != workflows.TurnCompleted {
			t.Fatalf("%s t0: %v %+v", sid(i), err, res)
		}
	}
	calls := s.model.Calls().Chat
	for i := range sessions {
		if err := submitUntilAccepted(ctx, s.apiClient, sid(i), "t1", question(i, 1)); err != nil {
			t.Fatal(err)
		}
	}
	for s.model.Calls().Chat < calls+sessions { // every turn is in its model call
		if ctx.Err() != nil {
			t.Fatal("the turns did not reach the model")
		}
		time.Sleep(20 * time.Millisecond)
	}

	start := time.Now()
	s.restartServer()
	t.Logf("server restarted in %s with %d turns in their model calls", time.Since(start).Round(time.Millisecond), sessions)
	for i := range sessions {
		answer(i, 1)
		if err := submitUntilAccepted(ctx, s.apiClient, sid(i), "t2", question(i, 2)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range sessions {
		answer(i, 2)
		l, d := countTranscript(t, filepath.Join(s.dataDir, "transcripts", workflows.DefaultTenant, sid(i)+".jsonl"), 3)
		if l+d > 0 {
			t.Errorf("%s: lost=%d duplicated=%d", sid(i), l, d)
		}
	}
	t.Logf("all %d sessions answered every turn once, %s after the restart", sessions, time.Since(start).Round(time.Millisecond))
}

// restartServer stops the embedded Temporal server and starts it again on
// the same port and data directory.
func (s *stack) restartServer() {
	s.t.Helper()
	_, port, _ := strings.Cut(s.server.FrontendHostPort(), ":")
	p, err := strconv.Atoi(port)
	if err != nil {
		s.t.Fatalf("frontend address %q: %v", s.server.FrontendHostPort(), err)
	}
	if err := s.server.Stop(); err != nil {
		s.t.Fatalf("stop temporal: %v", err)
	}
	ctx, cancel := context.WithTimeout(s.t.Context(), 2*time.Minute)
	defer cancel()
	srv, err := devserver.Start(ctx, devserver.Options{
		DataDir: filepath.Join(s.dataDir, "temporal"), FrontendPort: p, SearchAttributes: workflows.SearchAttributes(), Logger: quietLogger(),
	})
	if err != nil {
		s.t.Fatalf("restart temporal: %v", err)
	}
	s.t.Cleanup(func() { _ = srv.Stop() })
	s.server = srv
}

// TestReliabilityModelDown stops the model server (connections refused)
// for longer than a turn's retries last: turns sent meanwhile wait through
// their retries and then end honestly — failed with errorCode unavailable,
// or answered by the offline engine and saying so — never lost or left
// pending; once the model is back, the same sessions go on.
func TestReliabilityModelDown(t *testing.T) {
	hogIfAsked(t)
	const sessions = 3
	fake := fakeollama.New(fakeollama.Options{})
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	var model *http.Server
	up := func() {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		model = &http.Server{Handler: fake}
		go func() { _ = model.Serve(ln) }()
	}
	up()
	t.Cleanup(func() { _ = model.Close() })
	s := startStack(t, stackOptions{extraEnv: []string{"OLLAMA_HOST=http://" + addr}})
	s.startWorker()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	sid := func(i int) string { return fmt.Sprintf("down-%d", i) }
	for i := range sessions {
		if res, _, err := s.turn(ctx, sid(i), "t0", "hello"); err != nil || res.Answer != "answer 1 to: hello" {
			t.Fatalf("%s t0: %v %+v", sid(i), err, res)
		}
	}

	_ = model.Close() // the model server is gone: connections are refused
	start := time.Now()
	for i := range sessions {
		if err := submitUntilAccepted(ctx, s.apiClient, sid(i), "t1", "are you there?"); err != nil {
			t.Fatal(err)
		}
	}
	outcomes := map[string]int{}
	var failed [sessions]bool
	for i := range sessions {
		res, err := s.awaitTurn(ctx, sid(i), "t1")
		switch {
		case err != nil:
			t.Fatalf("%s t1 never ended: %v\n%s", sid(i), err, s.workerLogs())
		case res.Status == workflows.TurnFailed && res.ErrorCode == "unavailable" && res.Error != "":
			outcomes["failed unavailable"]++
			failed[i] = true
		case res.Status == workflows.TurnCompleted && res.Engine == "offline" && res.Answer != "":
			outcomes["answered offline"]++
		default:
			t.Errorf("%s t1 with the model down: %+v", sid(i), res)
		}
	}
	t.Logf("model down: every turn ended after %s: %v", time.Since(start).Round(time.Millisecond), outcomes)

	up()
	for i := range sessions {
		res, _, err := s.turn(ctx, sid(i), "t2", "and now?")
		if err != nil || res.Status != workflows.TurnCompleted || !strings.HasSuffix(res.Answer, " to: and now?") {
			t.Fatalf("%s t2 with the model back: %v %+v", sid(i), err, res)
		}
		var st workflows.SessionState
		want := 3 // a failed turn is not a turn of the conversation
		if failed[i] {
			want = 2
		}
		if _, err := s.do(ctx, http.MethodGet, "/v1/sessions/"+sid(i), nil, &st); err != nil || st.Turns != want || len(st.Pending) != 0 {
			t.Errorf("%s: %v, %d turns (want %d), %d pending", sid(i), err, st.Turns, want, len(st.Pending))
		}
		if res, err := s.awaitTurn(ctx, sid(i), "t1"); err != nil || res.Status == "" {
			t.Errorf("%s t1 is no longer answered: %v %+v", sid(i), err, res)
		}
	}
}

// TestReliabilityStoreDown stops the PostgreSQL transcript store (an
// immediate shutdown) while turns are being sent, and starts it again
// 15 s later (longer than a store step's start-to-close timeout): the turns
// wait — their store steps are retried — and complete once it is back,
// every message stored once, nothing half-written.
func TestReliabilityStoreDown(t *testing.T) {
	hogIfAsked(t)
	const sessions = 3
	dir, err := os.MkdirTemp("", "ctxflow-pgdown-*")
	if err != nil {
		t.Fatal(err)
	}
	script, _ := filepath.Abs("../scripts/postgres.sh")
	pg := func(cmd string) string {
		t.Helper()
		c := exec.Command(script, cmd, dir)
		c.Env = append(os.Environ(), "PG_DURABLE=1") // an immediate shutdown keeps what was committed
		out, err := c.Output()
		if err != nil {
			var stderr []byte
			if exit, ok := err.(*exec.ExitError); ok {
				stderr = exit.Stderr
			}
			t.Fatalf("postgres.sh %s: %v\n%s", cmd, err, stderr)
		}
		return strings.TrimSpace(string(out))
	}
	url := pg("start")
	t.Cleanup(func() { pg("stop"); _ = os.RemoveAll(dir) })
	s := startStack(t, stackOptions{modelDelay: 200 * time.Millisecond, extraEnv: []string{"CTXFLOW_TRANSCRIPT_STORE=postgres", "DATABASE_URL=" + url}})
	s.startWorker()
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	sid := func(i int) string { return fmt.Sprintf("pgdown-%d", i) }
	for i := range sessions {
		if res, _, err := s.turn(ctx, sid(i), "t0", "hello"); err != nil || res.Status != workflows.TurnCompleted {
			t.Fatalf("%s t0: %v %+v\n%s", sid(i), err, res, s.workerLogs())
		}
	}

	for i := range sessions {
		if err := submitUntilAccepted(ctx, s.apiClient, sid(i), "t1", "still there?"); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(100 * time.Millisecond) // the turns are in their steps
	pg("stop")
	down := time.Now()
	time.Sleep(15 * time.Second)
	pg("start")
	for i := range sessions {
		res, err := s.awaitTurn(ctx, sid(i), "t1")
		if err != nil || res.Status != workflows.TurnCompleted || res.Answer != "answer 2 to: still there?" {
			t.Fatalf("%s t1 across the outage: %v %+v\n%s", sid(i), err, res, s.workerLogs())
		}
		if res, _, err := s.turn(ctx, sid(i), "t2", "and now?"); err != nil || res.Answer != "answer 3 to: and now?" {
			t.Fatalf("%s t2: %v %+v", sid(i), err, res)
		}
	}
	t.Logf("store down for 15s: every turn completed %s after it went down", time.Since(down).Round(time.Millisecond))

	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for i := range sessions {
		rows, err := db.QueryContext(ctx, `SELECT m.id, coalesce(m.parent_id, '') FROM transcript_messages m
			JOIN transcript_sessions s ON s.id = m.session WHERE s.session_id = $1 ORDER BY m.pos`, sid(i))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for rows.Next() {
			var id, parent string
			if err := rows.Scan(&id, &parent); err != nil {
				t.Fatal(err)
			}
			got = append(got, parent+"→"+id)
		}
		rows.Close()
		want := []string{"→t0.u", "t0.u→t0.a", "t0.a→t1.u", "t1.u→t1.a", "t1.a→t2.u", "t2.u→t2.a"}
		if !slices.Equal(got, want) {
			t.Errorf("%s stored %v, want %v", sid(i), got, want)
		}
	}
}
