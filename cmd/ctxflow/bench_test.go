package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ctxflow/ctxflow/workflows"
)

// TestBench: `ctxflow bench` sends every turn once (a 429 is retried with
// the same turn id), from the sessions asked for, with the key, and prints
// and writes what it measured; a failed turn fails the run.
func TestBench(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]int{} // session/turn → answers
	sessions := map[string]bool{}
	var refusedOnce atomic.Bool
	fail := ""
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer k1" || r.URL.Query().Get("wait") != "true" {
			http.Error(w, `{"error":{"code":"unauthenticated","message":"no"}}`, http.StatusUnauthorized)
			return
		}
		var req struct{ TurnID, Question string }
		_ = json.NewDecoder(r.Body).Decode(&req)
		if refusedOnce.CompareAndSwap(false, true) {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write([]byte(`{"error":{"code":"overloaded","message":"busy"}}`))
			return
		}
		session := strings.Split(r.URL.Path, "/")[3]
		mu.Lock()
		seen[session+"/"+req.TurnID]++
		sessions[session] = true
		mu.Unlock()
		res := workflows.TurnResult{TurnID: req.TurnID, Status: workflows.TurnCompleted, Answer: "ok"}
		if req.TurnID == fail {
			res.Status, res.Error = workflows.TurnFailed, "model unavailable"
		}
		_ = json.NewEncoder(w).Encode(res)
	}))
	defer srv.Close()

	path := filepath.Join(t.TempDir(), "bench.json")
	var out, errOut bytes.Buffer
	err := runBench(t.Context(), []string{"--api", srv.URL, "--key", "k1", "--sessions", "3", "--turns", "30", "--json", path}, &out, &errOut)
	if err != nil {
		t.Fatalf("bench: %v (%s)", err, errOut.String())
	}
	if len(seen) != 30 || len(sessions) != 3 {
		t.Errorf("%d turns answered over %d sessions, want 30 over 3", len(seen), len(sessions))
	}
	for k, n := range seen {
		if n != 1 {
			t.Errorf("%s answered %d times", k, n)
		}
	}
	var res benchResult
	data, _ := os.ReadFile(path)
	if err := json.Unmarshal(data, &res); err != nil || res.Turns != 30 || res.Refused != 1 || res.Failed != 0 || res.TurnsPerSec <= 0 || res.P99MS < res.P50MS {
		t.Errorf("figures %+v (%v)", res, err)
	}
	if !strings.Contains(out.String(), "| 30 | 3 |") {
		t.Errorf("table:\n%s", out.String())
	}

	fail = "t2"
	if err := runBench(t.Context(), []string{"--api", srv.URL, "--key", "k1", "--sessions", "1", "--turns", "3"}, new(bytes.Buffer), new(bytes.Buffer)); err == nil || !strings.Contains(err.Error(), "1 of 3 turns failed") {
		t.Errorf("a failed turn: %v", err)
	}
	if err := runBench(t.Context(), []string{"--api", srv.URL, "--key", "nope", "--turns", "10"}, new(bytes.Buffer), new(bytes.Buffer)); err == nil || !strings.Contains(err.Error(), "unauthenticated") {
		t.Errorf("a refused key: %v", err)
	}
}
