package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/activities/pgtranscript"
	"github.com/ctxflow/ctxflow/internal/pgtest"
	"github.com/ctxflow/ctxflow/tests/fakeollama"
	"github.com/ctxflow/ctxflow/workflows"
)

// TestMultiWorker runs two `ctxflow worker` processes on one Temporal
// server and one PostgreSQL transcript store: 10 sessions × 10 turns
// spread over both, one worker killed with SIGKILL while it runs a turn's
// activity. Every turn is answered once, from the whole conversation, and
// every transcript, read from PostgreSQL, is gap-free.
func TestMultiWorker(t *testing.T) {
	const sessions, turns = 10, 10
	url := pgtest.Database(t)
	// A 200 ms model is slower than FastModel here: its calls stay regular
	// activities, which the other worker must retry. (Calls in a workflow
	// task lost with a worker: TestReliabilityWorkerKills.)
	s := startStack(t, stackOptions{modelDelay: 200 * time.Millisecond, limits: workflows.Limits{FastModel: 50 * time.Millisecond}})
	env := append(slices.Clone(s.env), "CTXFLOW_TRANSCRIPT_STORE=postgres", "DATABASE_URL="+url, "CTXFLOW_LOG_LEVEL=info")
	workers := []*namedWorker{startNamedWorker(t, s, env, "a"), startNamedWorker(t, s, env, "b")}
	logs := func() string {
		var b strings.Builder
		for _, w := range workers {
			data, _ := os.ReadFile(w.log)
			fmt.Fprintf(&b, "--- worker %s (pid %d) ---\n%s", w.name, w.pid(), tail(string(data), 3000))
		}
		return b.String()
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	for _, w := range workers { // both poll before the first turn
		for !strings.Contains(readFile(w.log), "worker started") {
			if ctx.Err() != nil {
				t.Fatalf("worker %s did not start\n%s", w.name, logs())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, sessions)
	for i := range sessions {
		wg.Go(func() {
			sid := fmt.Sprintf("multi-%02d", i)
			for j := range turns {
				q := fmt.Sprintf("question %d of session %d", j, i)
				res, _, err := s.turn(ctx, sid, fmt.Sprintf("t%d", j), q)
				if err != nil {
					errs <- fmt.Errorf("%s turn %d: %w", sid, j, err)
					return
				}
				// The fake model numbers its answer by the user messages it
				// saw: the whole conversation, whichever worker stored it.
				if want := fakeollama.Answer(j+1, q); res.Status != workflows.TurnCompleted || res.Answer != want {
					errs <- fmt.Errorf("%s turn %d: status %s answer %q, want %q", sid, j, res.Status, res.Answer, want)
					return
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()

	// Once a third of the model calls are made, kill worker a while it
	// runs an activity of some session (which worker b must then retry).
	victim := workers[0]
	var killedIn, killedActivity string
	for killedIn == "" {
		select {
		case <-done:
			t.Fatalf("all turns finished before the kill\n%s", logs())
		case <-ctx.Done():
			t.Fatalf("no progress before the kill\n%s", logs())
		case <-time.After(20 * time.Millisecond):
		}
		if s.model.Calls().Chat < sessions*turns/3 {
			continue
		}
		for i := range sessions {
			wid := workflows.SessionWorkflowID(workflows.DefaultTenant, fmt.Sprintf("multi-%02d", i))
			desc, err := s.client.DescribeWorkflowExecution(ctx, wid, "")
			if err != nil {
				continue
			}
			for _, a := range desc.GetPendingActivities() {
				if a.GetState() == enumspb.PENDING_ACTIVITY_STATE_STARTED && victim.is(a.GetLastWorkerIdentity()) {
					killedIn, killedActivity = wid, a.GetActivityId()
				}
			}
			if killedIn != "" {
				victim.kill()
				t.Logf("killed worker a at %s after %d model calls, mid-activity in %s",
					time.Since(start).Round(time.Millisecond), s.model.Calls().Chat, wid)
				break
			}
		}
	}
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatalf("turns did not finish: %v\n%s", ctx.Err(), logs())
	}
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.Fatalf("worker logs:\n%s", logs())
	}
	t.Logf("%d turns on 2 workers, one killed, in %s; %d model calls", sessions*turns, time.Since(start).Round(time.Millisecond), s.model.Calls().Chat)

	// Both workers ran turns' activities; the one cut off by the kill was
	// finished by worker b.
	ran := map[string]int{}
	// The activity the kill cut off: who ran its last attempt. (The kill can
	// land just after it completed on worker a: then nothing was cut off.)
	var cutScheduled int64
	cutBy, cutAttempt := "", int32(0)
	for i := range sessions {
		wid := workflows.SessionWorkflowID(workflows.DefaultTenant, fmt.Sprintf("multi-%02d", i))
		it := s.client.GetWorkflowHistory(ctx, wid, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				t.Fatal(err)
			}
			if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && wid == killedIn && a.GetActivityId() == killedActivity {
				cutScheduled = ev.GetEventId()
			}
			if a := ev.GetActivityTaskStartedEventAttributes(); a != nil {
				for _, w := range workers {
					if w.is(a.GetIdentity()) {
						ran[w.name]++
					}
				}
				if wid == killedIn && a.GetScheduledEventId() == cutScheduled {
					cutAttempt = a.GetAttempt()
					for _, w := range workers {
						if w.is(a.GetIdentity()) {
							cutBy = w.name
						}
					}
				}
			}
		}
	}
	t.Logf("activities completed by worker: %v", ran)
	if ran["a"] == 0 || ran["b"] == 0 {
		t.Errorf("activities completed by worker = %v, want some by each", ran)
	}
	switch {
	case cutBy == "a" && cutAttempt == 1:
		t.Logf("the kill landed just after activity %s of %s completed on worker a: nothing was cut off", killedActivity, killedIn)
	case cutBy != "b" || cutAttempt < 2:
		t.Errorf("activity %s of %s, cut off by the kill: last attempt %d by worker %q, want a retry by worker b", killedActivity, killedIn, cutAttempt, cutBy)
	}

	// Every transcript, read from PostgreSQL: t0.u, t0.a, t1.u, ... each the
	// parent of the next, and nothing else.
	store, err := pgtranscript.Open(ctx, pgtranscript.Options{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	for i := range sessions {
		k := activities.SessionKey{Tenant: workflows.DefaultTenant, SessionID: fmt.Sprintf("multi-%02d", i)}
		b, err := store.Branch(ctx, k, fmt.Sprintf("t%d.a", turns-1))
		if err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		if n, err := store.Len(ctx, k); err != nil || n != 2*turns || len(b) != 2*turns {
			t.Fatalf("%s: %d messages, branch of %d, %v; want %d", k, n, len(b), err, 2*turns)
		}
		parent := ""
		for j, m := range b {
			want := fmt.Sprintf("t%d.u", j/2)
			if j%2 == 1 {
				want = fmt.Sprintf("t%d.a", j/2)
			}
			if m.ID != want || m.ParentID != parent {
				t.Fatalf("%s: message %d is %s (parent %q), want %s (parent %q)", k, j, m.ID, m.ParentID, want, parent)
			}
			parent = m.ID
		}
	}

	// A `ctxflow api` process on the same store reads the transcripts.
	_, api := startAPI(t, append(env, "CTXFLOW_ALLOW_ANONYMOUS=true"), s.dataDir)
	var msgs struct {
		Messages []struct{ ID string } `json:"messages"`
	}
	if _, err := api.do(ctx, http.MethodGet, "/v1/sessions/multi-03/messages", nil, &msgs); err != nil || len(msgs.Messages) != 2*turns {
		t.Fatalf("messages through ctxflow api: %v, %d", err, len(msgs.Messages))
	}
	if leaf, nodes := api.shape(t, "multi-03"); leaf != fmt.Sprintf("t%d.a", turns-1) || len(nodes) != 2*turns {
		t.Errorf("tree through ctxflow api: leaf %s, %d nodes", leaf, len(nodes))
	}
	// A turn streamed through it: the worker's deltas reach the API
	// process through PostgreSQL (LISTEN/NOTIFY).
	var text strings.Builder
	final := ""
	for e := range api.openStream(ctx, t, http.MethodPost, "/v1/sessions/multi-03/turns", map[string]string{"question": "streamed?", "turnId": "s1"}) {
		switch e.name {
		case "token":
			var d struct{ Text string }
			_ = json.Unmarshal([]byte(e.data), &d)
			text.WriteString(d.Text)
		case "final":
			var r workflows.TurnResult
			_ = json.Unmarshal([]byte(e.data), &r)
			final = r.Answer
		}
	}
	if final == "" || strings.TrimSpace(text.String()) != final {
		t.Errorf("streamed through ctxflow api: tokens %q, final %q", text.String(), final)
	}
}

// namedWorker is a `ctxflow worker` process with its own data directory.
type namedWorker struct {
	name, log string
	cmd       *exec.Cmd
}

func startNamedWorker(t *testing.T, s *stack, env []string, name string) *namedWorker {
	t.Helper()
	dir := filepath.Join(s.dataDir, "worker-"+name)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	w := &namedWorker{name: name, log: filepath.Join(dir, "worker.log")}
	logf, err := os.Create(w.log)
	if err != nil {
		t.Fatal(err)
	}
	w.cmd = exec.Command(binary, "worker")
	w.cmd.Env = append(append(os.Environ(), env...), "CTXFLOW_DATA_DIR="+dir)
	w.cmd.Stdout, w.cmd.Stderr = logf, logf
	if err := w.cmd.Start(); err != nil {
		t.Fatalf("start worker %s: %v", name, err)
	}
	go func() { _ = w.cmd.Wait(); _ = logf.Close() }()
	t.Cleanup(w.kill)
	return w
}

func (w *namedWorker) pid() int { return w.cmd.Process.Pid }

// is reports whether a Temporal worker identity (pid@host@...) is w's.
func (w *namedWorker) is(identity string) bool {
	return strings.HasPrefix(identity, strconv.Itoa(w.pid())+"@")
}

func (w *namedWorker) kill() { _ = w.cmd.Process.Signal(syscall.SIGKILL) }

func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}
