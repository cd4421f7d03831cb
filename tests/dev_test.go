package tests

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ctxflow/ctxflow/convo"
	"github.com/ctxflow/ctxflow/internal/freeport"
	"github.com/ctxflow/ctxflow/tests/fakeollama"
	"github.com/ctxflow/ctxflow/workflows"
)

func freePort(t *testing.T) int {
	t.Helper()
	port, err := freeport.Port("127.0.0.1") // below the ephemeral range: see there
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// startDev runs `ctxflow dev` and waits for /readyz; it returns the time
// that took. The demo knowledge base is off unless env turns it on: the
// tests count model calls and documents of their own.
func startDev(t *testing.T, env []string, api apiClient, log string) (*exec.Cmd, time.Duration) {
	t.Helper()
	f, err := os.OpenFile(log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, "dev")
	cmd.Env = append(append(os.Environ(), "CTXFLOW_DEMO_DOCS=off"), env...) // the last of a name wins
	cmd.Stdout, cmd.Stderr = f, f
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = cmd.Wait(); _ = f.Close() }()
	t.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGKILL) })
	for time.Since(start) < 60*time.Second {
		if code, _ := api.do(t.Context(), http.MethodGet, "/readyz", nil, nil); code == http.StatusOK {
			return cmd, time.Since(start)
		}
		time.Sleep(100 * time.Millisecond)
	}
	out, _ := os.ReadFile(log)
	t.Fatalf("ctxflow dev not ready after 60s:\n%s", tail(string(out), 4000))
	return nil, 0
}

// killDev kills `ctxflow dev` with SIGKILL and returns once it has exited
// (startDev reaps it), so that its data dir is free for the next start
// however long a loaded machine takes.
func killDev(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	_ = cmd.Process.Signal(syscall.SIGKILL)
	for deadline := time.Now().Add(time.Minute); syscall.Kill(cmd.Process.Pid, 0) == nil; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("ctxflow dev still runs a minute after SIGKILL")
		}
	}
}

// TestDevRestartKeepsSessions is the README's quickstart as a test: `ctxflow
// dev` answers /readyz, serves the Temporal UI, holds a 3-turn
// conversation, is killed with SIGKILL, and after a restart the session
// still shows its 3 turns and goes on.
func TestDevRestartKeepsSessions(t *testing.T) {
	fake := httptest.NewServer(fakeollama.New(fakeollama.Options{}))
	defer fake.Close()
	dir := t.TempDir()
	httpPort, uiPort := freePort(t), freePort(t)
	env := []string{
		fmt.Sprintf("CTXFLOW_HTTP_ADDR=127.0.0.1:%d", httpPort),
		fmt.Sprintf("CTXFLOW_UI_PORT=%d", uiPort),
		fmt.Sprintf("CTXFLOW_TEMPORAL_PORT=%d", freePort(t)),
		"CTXFLOW_DATA_DIR=" + dir,
		"OLLAMA_HOST=" + fake.URL,
	}
	api := apiClient{base: fmt.Sprintf("http://127.0.0.1:%d", httpPort)}
	log := filepath.Join(dir, "dev.log")
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()

	cmd, took := startDev(t, env, api, log)
	t.Logf("cold data dir: ready in %s", took)
	if took > 15*time.Second {
		t.Errorf("ready after %s, want within 15s", took)
	}
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/", uiPort))
	if err != nil {
		t.Fatalf("temporal UI: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("temporal UI answered %d", resp.StatusCode)
	}

	questions := []string{"What is ctxflow?", "How do I run it?", "它多少钱？"}
	for i, q := range questions {
		res, _, err := api.turn(ctx, "demo", fmt.Sprintf("t%d", i), q)
		if err != nil {
			t.Fatal(err)
		}
		if want := fakeollama.Answer(i+1, q); res.Answer != want {
			t.Fatalf("turn %d answer %q, want %q", i, res.Answer, want)
		}
	}

	killDev(t, cmd)
	_, took = startDev(t, env, api, log)
	t.Logf("restart after SIGKILL: ready in %s", took)

	var st workflows.SessionState
	if _, err := api.do(ctx, http.MethodGet, "/v1/sessions/demo", nil, &st); err != nil {
		out, _ := os.ReadFile(log)
		t.Fatalf("%v\n%s", err, tail(string(out), 4000))
	}
	if st.Turns != 3 || st.Messages != 6 || len(st.Recent) != 3 {
		t.Fatalf("after restart: turns=%d messages=%d recent=%d", st.Turns, st.Messages, len(st.Recent))
	}
	for i, r := range st.Recent {
		if r.Question != questions[i] || !strings.HasPrefix(r.Answer, "answer ") {
			t.Errorf("recent turn %d = %q → %q", i, r.Question, r.Answer)
		}
	}
	res, _, err := api.turn(ctx, "demo", "t3", "and after the restart?")
	if err != nil || res.Answer != "answer 4 to: and after the restart?" {
		t.Fatalf("turn after restart: %v %q", err, res.Answer)
	}

	// `ctxflow bench` against it, as the README shows.
	out, err := exec.CommandContext(ctx, binary, "bench", "--api", api.base, "--sessions", "3", "--turns", "30").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "| 30 | 3 |") || !strings.Contains(string(out), "| 0 | 0 |") {
		t.Fatalf("ctxflow bench: %v\n%s", err, out)
	}
	t.Logf("ctxflow bench:\n%s", out)

	// An agent task with the model planner (the test model answers in
	// text, so the task ends at step 1); its step log through the API.
	var task struct {
		Type     string              `json:"type"`
		Task     workflows.TaskState `json:"task"`
		Messages []convo.Message     `json:"messages"`
	}
	if res, err := api.task(ctx, "demo", map[string]any{"goal": "How many orders are there?", "taskId": "k1"}); err != nil ||
		res.Type != workflows.TypeFinish || !strings.HasPrefix(res.Answer, "answer ") || res.Engine != "ollama" {
		t.Fatalf("task: %v %+v", err, res)
	}
	if _, err := api.do(ctx, http.MethodGet, "/v1/sessions/demo/tasks/k1", nil, &task); err != nil || task.Type != workflows.TypeFinish ||
		len(task.Messages) != 2 || task.Messages[0].Content != "How many orders are there?" || task.Messages[1].ID != "s1.answer" {
		t.Fatalf("GET task: %v %+v", err, task)
	}

	// The display list, and the running summary's text once compressed.
	var msgs struct {
		Leaf     string          `json:"leaf"`
		Messages []convo.Message `json:"messages"`
	}
	if _, err := api.do(ctx, http.MethodGet, "/v1/sessions/demo/messages", nil, &msgs); err != nil || len(msgs.Messages) != 10 || msgs.Leaf != "k1.a" {
		t.Fatalf("messages: %v, %d messages, leaf %q", err, len(msgs.Messages), msgs.Leaf)
	}
	if msgs.Messages[0].Content != questions[0] || msgs.Messages[7].ID != "t3.a" || msgs.Messages[8].Content != "How many orders are there?" {
		t.Errorf("messages = %+v", msgs.Messages)
	}
	if code, err := api.do(ctx, http.MethodPost, "/v1/sessions/demo/compress", nil, nil); code != http.StatusAccepted {
		t.Fatalf("compress: %d %v", code, err)
	}
	var view struct {
		workflows.SessionState
		SummaryText string `json:"summaryText"`
		MessagesURL string `json:"messagesUrl"`
	}
	for deadline := time.Now().Add(30 * time.Second); view.SummaryText == ""; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no summary text after compress: %+v", view)
		}
		if _, err := api.do(ctx, http.MethodGet, "/v1/sessions/demo", nil, &view); err != nil {
			t.Fatal(err)
		}
	}
	if view.MessagesURL != "/v1/sessions/demo/messages" || view.Summary == nil || view.Summary.Folded != 8 { // all but the newest round
		t.Errorf("session view = %+v", view)
	}
	if code, _ := api.do(ctx, http.MethodGet, "/v1/sessions/demo/messages?leaf=t0.a", nil, &msgs); code != http.StatusOK || len(msgs.Messages) != 2 {
		t.Errorf("messages of an older leaf: %d, %d messages", code, len(msgs.Messages))
	}
	if code, _ := api.do(ctx, http.MethodGet, "/v1/sessions/demo/messages?leaf=nope", nil, nil); code != http.StatusNotFound {
		t.Errorf("messages of an unknown leaf: %d", code)
	}
}

// startAPI runs `ctxflow api` with env and waits until it is ready.
func startAPI(t *testing.T, env []string, dir string) (*exec.Cmd, apiClient) {
	t.Helper()
	port := freePort(t)
	cmd := exec.Command(binary, "api")
	cmd.Env = append(os.Environ(), append(slices.Clone(env), fmt.Sprintf("CTXFLOW_HTTP_ADDR=127.0.0.1:%d", port))...)
	log := filepath.Join(dir, "api.log")
	f, err := os.Create(log)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait(); _ = f.Close() })
	api := apiClient{base: fmt.Sprintf("http://127.0.0.1:%d", port)}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if code, _ := api.do(t.Context(), http.MethodGet, "/readyz", nil, nil); code == http.StatusOK {
			return cmd, api
		}
		if time.Now().After(deadline) {
			out, _ := os.ReadFile(log)
			t.Fatalf("ctxflow api not ready:\n%s", tail(string(out), 3000))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestWorkerAndAPIProcesses runs the production shape: `ctxflow worker` and
// `ctxflow api` as separate processes against an external Temporal server.
func TestWorkerAndAPIProcesses(t *testing.T) {
	s := startStack(t, stackOptions{})
	s.startWorker()
	sum := sha256.Sum256([]byte("cfk_split"))
	cmd, api := startAPI(t, append(slices.Clone(s.env), "CTXFLOW_API_KEYS=acme:"+hex.EncodeToString(sum[:])), s.dataDir)
	if code, _ := api.do(t.Context(), http.MethodGet, "/v1/sessions", nil, nil); code != http.StatusUnauthorized {
		t.Errorf("a request without the key = %d, want 401", code)
	}
	api.key = "cfk_split"
	res, _, err := api.turn(t.Context(), "split", "t0", "hello from the api process")
	if err != nil || res.Answer != "answer 1 to: hello from the api process" {
		t.Fatalf("turn: %v %+v", err, res)
	}
	if _, err := s.client.DescribeWorkflowExecution(t.Context(), workflows.SessionWorkflowID("acme", "split"), ""); err != nil {
		t.Errorf("the session is not the key's tenant's: %v", err)
	}
	// SIGTERM drains and exits cleanly.
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("ctxflow api exited with %v after SIGTERM", err)
		}
	case <-time.After(20 * time.Second):
		t.Error("ctxflow api did not exit within 20s of SIGTERM")
	}
}
