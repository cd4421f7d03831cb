package tests

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctxflow/ctxflow/convo"
	"github.com/ctxflow/ctxflow/workflows"
)

// TestBurstOfTurnsQueues sends 25 turns to one session at once, more than
// the server's 10 in-flight updates per workflow: every caller still gets
// its answer (the API queues the overflow as signals), and the turns run
// one at a time: the transcript is one chain, question → answer → question.
func TestBurstOfTurnsQueues(t *testing.T) {
	const n = 25
	s := startStack(t, stackOptions{modelDelay: 100 * time.Millisecond})
	s.startWorker()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()

	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			q := fmt.Sprintf("burst question %d", i)
			res, retries, err := s.turn(ctx, "burst", fmt.Sprintf("b%d", i), q)
			switch {
			case err != nil:
				errs <- fmt.Errorf("turn %d: %w", i, err)
			case len(retries) > 0:
				errs <- fmt.Errorf("turn %d needed client retries: %v", i, retries)
			case res.Status != workflows.TurnCompleted || !strings.HasSuffix(res.Answer, " to: "+q):
				errs <- fmt.Errorf("turn %d: %s %q", i, res.Status, res.Answer)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}

	var st workflows.SessionState
	if _, err := s.do(ctx, http.MethodGet, "/v1/sessions/burst", nil, &st); err != nil {
		t.Fatal(err)
	}
	if st.Turns != n {
		t.Errorf("turns = %d, want %d", st.Turns, n)
	}
	f, err := os.Open(filepath.Join(s.dataDir, "transcripts", workflows.DefaultTenant, "burst.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	msgs, err := convo.DecodeJSONL(f)
	if err != nil {
		t.Fatal(err)
	}
	var chain []convo.Message
	for _, m := range msgs {
		if m.Role != convo.RoleSummary {
			chain = append(chain, m)
		}
	}
	if len(chain) != 2*n {
		t.Fatalf("transcript has %d messages, want %d", len(chain), 2*n)
	}
	seen := map[string]bool{}
	for i := 0; i < len(chain); i += 2 {
		u, a := chain[i], chain[i+1]
		turn := strings.TrimSuffix(u.ID, ".u")
		if u.Role != convo.RoleUser || a.ID != turn+".a" || a.ParentID != u.ID || seen[turn] {
			t.Fatalf("messages %d-%d are %s, %s (parent %s): not one question then its answer", i, i+1, u.ID, a.ID, a.ParentID)
		}
		seen[turn] = true
	}
}
