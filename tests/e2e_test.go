package tests

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ctxflow/ctxflow/convo"
	"github.com/ctxflow/ctxflow/tests/fakeollama"
	"github.com/ctxflow/ctxflow/workflows"
)

// TestKillWorkerMidTurns runs 20 sessions × 5 turns concurrently against a
// model that takes 300 ms, kills the worker process with SIGKILL three times
// while turns are in flight, and checks that every turn has exactly one
// answer and every transcript is complete: no gap, no duplicate. Busy loops
// run on every core meanwhile.
func TestKillWorkerMidTurns(t *testing.T) {
	const sessions, turns = 20, 5
	startHog(t)
	s := startStack(t, stackOptions{modelDelay: 300 * time.Millisecond})
	s.startWorker()

	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()

	var wg sync.WaitGroup
	errs := make(chan error, sessions*turns)
	var retries safeCounter
	start := time.Now()
	for i := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sid := fmt.Sprintf("kill-%02d", i)
			for j := range turns {
				q := fmt.Sprintf("question %d of session %d", j, i)
				res, r, err := s.turn(ctx, sid, fmt.Sprintf("t%d", j), q)
				retries.add(r)
				if err != nil {
					errs <- fmt.Errorf("%s turn %d: %w", sid, j, err)
					return
				}
				// The fake model numbers its answer by the user messages it
				// saw: the whole conversation, in order, every time.
				if want := fakeollama.Answer(j+1, q); res.Status != workflows.TurnCompleted || res.Answer != want {
					errs <- fmt.Errorf("%s turn %d: status %s answer %q, want %q", sid, j, res.Status, res.Answer, want)
					return
				}
			}
		}()
	}

	// Kill the worker three times while turns are in flight: when the model
	// has answered 15, 45 and 75 calls (20 sessions keep ~20 calls open).
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	kills := s.killWhileRunning(t, ctx, done, start, 15, 45, 75)
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() || os.Getenv("CTXFLOW_E2E_WORKER_LOG_LEVEL") != "" {
		t.Logf("worker logs:\n%s", s.workerLogs())
	}
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("%d turns in %s with %d kills; %d model calls (repeats are turns cut off mid-call), %d client retries: %v",
		sessions*turns, time.Since(start).Round(time.Millisecond), kills, s.model.Calls().Chat, retries.n, retries.reasons())

	for i := range sessions {
		sid := fmt.Sprintf("kill-%02d", i)
		var st workflows.SessionState
		for attempt := 0; ; attempt++ { // a careful client retries a 503
			code, err := s.do(ctx, http.MethodGet, "/v1/sessions/"+sid, nil, &st)
			if err == nil {
				break
			}
			if code != http.StatusServiceUnavailable || attempt == 2 {
				t.Fatal(err)
			}
			t.Logf("GET %s: %v; retrying", sid, err)
		}
		if st.Turns != turns || st.Messages != 2*turns || len(st.Pending) != 0 {
			t.Errorf("%s: turns=%d messages=%d pending=%d", sid, st.Turns, st.Messages, len(st.Pending))
		}
		checkTranscript(t, filepath.Join(s.dataDir, "transcripts", workflows.DefaultTenant, sid+".jsonl"), turns)
	}
}

// checkTranscript asserts the transcript is exactly t0.u, t0.a, t1.u, ...
// each message the child of the one before: no gap, no duplicate.
func checkTranscript(t *testing.T, path string, turns int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	msgs, err := convo.DecodeJSONL(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if len(msgs) != 2*turns {
		t.Fatalf("%s: %d messages, want %d", path, len(msgs), 2*turns)
	}
	parent := ""
	for i, m := range msgs {
		want := fmt.Sprintf("t%d.u", i/2)
		if i%2 == 1 {
			want = fmt.Sprintf("t%d.a", i/2)
		}
		if m.ID != want || m.ParentID != parent {
			t.Fatalf("%s: message %d is %s (parent %q), want %s (parent %q)", path, i, m.ID, m.ParentID, want, parent)
		}
		parent = m.ID
	}
}

// TestKillWorkerMidCorrectiveTurns kills the worker while qa turns are in
// their corrective child workflows (grading documents in parallel with a
// model that takes 200 ms and answers in the requested JSON schema). Every
// turn must still complete once, through the corrective step, with a
// gap-free transcript.
func TestKillWorkerMidCorrectiveTurns(t *testing.T) {
	const sessions, turns = 4, 3
	s := startStack(t, stackOptions{modelDelay: 200 * time.Millisecond})
	s.startWorker()
	s.ingestREADME(t)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()

	questions := []string{"What is ctxflow?", "How do I run it?", "Which vector stores does it support?"}
	var wg sync.WaitGroup
	errs := make(chan error, sessions*turns)
	for i := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sid := fmt.Sprintf("crag-%d", i)
			for j, q := range questions[:turns] {
				res, _, err := s.turn(ctx, sid, fmt.Sprintf("t%d", j), q)
				if err != nil {
					errs <- fmt.Errorf("%s turn %d: %w", sid, j, err)
					return
				}
				k := slices.IndexFunc(res.Steps, func(s workflows.Step) bool { return s.Name == "corrective_rag" })
				if res.Status != workflows.TurnCompleted || k < 0 || res.Steps[k].Status != "ok" || res.Answer == "" {
					errs <- fmt.Errorf("%s turn %d: %+v", sid, j, res)
					return
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	s.killWhileRunning(t, ctx, done, time.Now(), 20, 60)
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("%d qa turns with 2 kills; %d model calls", sessions*turns, s.model.Calls().Chat)
	for i := range sessions {
		checkTranscript(t, filepath.Join(s.dataDir, "transcripts", workflows.DefaultTenant, fmt.Sprintf("crag-%d.jsonl", i)), turns)
	}
}

// killWhileRunning SIGKILLs the worker (and starts a new one) each time the
// model has answered the next of the given numbers of calls, failing if
// the turns finish first; then it waits for done. It returns the kills.
func (s *stack) killWhileRunning(t *testing.T, ctx context.Context, done <-chan struct{}, start time.Time, atCalls ...int64) int {
	t.Helper()
	for i, at := range atCalls {
		for s.model.Calls().Chat < at {
			select {
			case <-done:
				t.Fatalf("all turns finished before kill %d", i+1)
			case <-ctx.Done():
				t.Fatalf("no progress before kill %d\n%s", i+1, s.workerLogs())
			case <-time.After(20 * time.Millisecond):
			}
		}
		s.killWorker()
		t.Logf("kill %d at %s after %d model calls", i+1, time.Since(start).Round(time.Millisecond), s.model.Calls().Chat)
		time.Sleep(300 * time.Millisecond)
		s.startWorker()
	}
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatalf("turns did not finish: %v\n%s", ctx.Err(), s.workerLogs())
	}
	return len(atCalls)
}
