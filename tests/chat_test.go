//go:build linux

package tests

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/ctxflow/ctxflow/workflows"
)

// startPTY starts cmd on a new pseudo-terminal of rows×cols, as its
// controlling terminal, and returns the terminal's other side. (Linux's
// /dev/ptmx, with the standard library only: go.mod does not require a
// pty module.)
func startPTY(cmd *exec.Cmd, rows, cols uint16) (*os.File, error) {
	ioctl := func(f *os.File, req uintptr, arg unsafe.Pointer) error {
		if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), req, uintptr(arg)); errno != 0 {
			return fmt.Errorf("ioctl %#x on %s: %w", req, f.Name(), errno)
		}
		return nil
	}
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	var unlock int32
	var n uint32
	err = ioctl(ptmx, syscall.TIOCSPTLCK, unsafe.Pointer(&unlock))
	if err == nil {
		err = ioctl(ptmx, syscall.TIOCGPTN, unsafe.Pointer(&n))
	}
	var tty *os.File
	if err == nil {
		tty, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	}
	if err == nil {
		defer tty.Close() // the child has its own copy
		size := [4]uint16{rows, cols, 0, 0}
		err = ioctl(tty, syscall.TIOCSWINSZ, unsafe.Pointer(&size))
	}
	if err == nil {
		cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
		err = cmd.Start()
	}
	if err != nil {
		ptmx.Close()
		return nil, err
	}
	return ptmx, nil
}

// terminal is what a pseudo-terminal showed, with "\r\n" as "\n".
type terminal struct {
	mu   sync.Mutex
	buf  strings.Builder
	seen int // where the next expect starts
}

func (s *terminal) text() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.ReplaceAll(s.buf.String(), "\r\n", "\n")
}

// expect waits until the terminal shows want after what the previous
// expect matched, and returns what came before it.
func (s *terminal) expect(t *testing.T, want string, within time.Duration) string {
	t.Helper()
	for deadline := time.Now().Add(within); ; time.Sleep(20 * time.Millisecond) {
		all := s.text()
		if i := strings.Index(all[s.seen:], want); i >= 0 {
			before := all[s.seen : s.seen+i]
			s.seen += i + len(want)
			return before
		}
		if time.Now().After(deadline) {
			t.Fatalf("the terminal did not show %q within %s; it shows:\n%s", want, within, all)
		}
	}
}

// TestChatTerminal runs `ctxflow chat` in a pseudo-terminal against
// `ctxflow dev` (offline engine, an API key from CTXFLOW_API_KEY): a
// question, a Chinese follow-up (answered about the conversation's topic),
// an API error, an agent task that pauses at --max-steps and finishes on
// /continue, /steps, /tree, /session, and /quit.
func TestChatTerminal(t *testing.T) {
	dir := t.TempDir()
	port := freePort(t)
	const key = "cfk_chat_test"
	sum := sha256.Sum256([]byte(key))
	api := apiClient{base: fmt.Sprintf("http://127.0.0.1:%d", port), key: key}
	startDev(t, []string{
		fmt.Sprintf("CTXFLOW_HTTP_ADDR=127.0.0.1:%d", port),
		fmt.Sprintf("CTXFLOW_UI_PORT=%d", freePort(t)),
		fmt.Sprintf("CTXFLOW_TEMPORAL_PORT=%d", freePort(t)),
		"CTXFLOW_DATA_DIR=" + dir,
		"CTXFLOW_MODEL_PROVIDER=offline",
		"CTXFLOW_TRANSCRIPT_FSYNC=false",
		"CTXFLOW_API_KEYS=acme:" + hex.EncodeToString(sum[:]),
	}, api, filepath.Join(dir, "dev.log"))

	start := time.Now()
	cmd := exec.Command(binary, "chat", "--session", "term", "--max-steps", "10")
	cmd.Env = append(os.Environ(), "CTXFLOW_API_URL="+api.base, "CTXFLOW_API_KEY="+key, "LANG=C.UTF-8")
	tty, err := startPTY(cmd, 40, 160)
	if err != nil {
		t.Fatal(err)
	}
	defer tty.Close()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	term := &terminal{}
	go func() {
		b := make([]byte, 4096)
		for {
			n, err := tty.Read(b)
			term.mu.Lock()
			term.buf.Write(b[:n])
			term.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	typeLine := func(line string) {
		t.Helper()
		if _, err := tty.Write([]byte(line + "\r")); err != nil {
			t.Fatal(err)
		}
		term.expect(t, line+"\n", 5*time.Second) // the terminal's echo
	}

	term.expect(t, "ctxflow chat: session term at "+api.base+" (/help for commands)\na new session\nterm> ", 10*time.Second)
	typeLine("What is Temporal?")
	term.expect(t, "(offline engine)", 30*time.Second)
	if got := term.expect(t, "\n  steps: load_context ", 10*time.Second); !strings.Contains(got, "What is Temporal") {
		t.Errorf("answer %q", got)
	}
	if got := term.expect(t, "\nterm> ", 10*time.Second); !strings.Contains(got, "→ generate ") || !strings.HasSuffix(got, "in all, offline)") {
		t.Errorf("steps line %q", got)
	}
	typeLine("它多少钱？")
	if got := term.expect(t, "\n  steps: ", 30*time.Second); !strings.HasPrefix(got, "（离线引擎）") || !strings.Contains(got, "Temporal多少钱") {
		t.Errorf("the Chinese follow-up's answer %q: want the offline engine's, about Temporal", got)
	}
	term.expect(t, "\nterm> ", 10*time.Second)
	typeLine("/branch nope")
	term.expect(t, "error not_found: ", 10*time.Second)
	term.expect(t, "\nterm> ", 10*time.Second)

	typeLine("/task How many rows does each table of the shop have?")
	if got := term.expect(t, " paused at step 10: /continue goes on\n", 60*time.Second); !strings.Contains(got, "Done: 10 steps (list_tables ×1, run_sql ×9).") {
		t.Errorf("the progress summary %q", got)
	}
	term.expect(t, "\nterm> ", 10*time.Second)
	typeLine("/continue")
	if got := term.expect(t, " finished at step 16\n", 60*time.Second); !strings.Contains(got, "14 tables, 12850 rows in all: addresses 650,") {
		t.Errorf("the task's answer %q", got)
	}
	term.expect(t, "\nterm> ", 10*time.Second)
	typeLine("/steps")
	term.expect(t, "\n  task            ok ", 10*time.Second)
	term.expect(t, "\nterm> ", 10*time.Second)
	typeLine("/tree")
	term.expect(t, " user: What is Temporal?\n", 10*time.Second)
	term.expect(t, " user: 它多少钱？\n", 10*time.Second)
	term.expect(t, "  ← active\nterm> ", 10*time.Second)
	typeLine("/session")
	term.expect(t, "session term (tenant acme): ", 10*time.Second)
	term.expect(t, "4 turns, 8 messages", 10*time.Second)
	term.expect(t, "\nterm> ", 10*time.Second)
	typeLine("/quit")
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("ctxflow chat exited with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ctxflow chat did not exit on /quit")
	}
	t.Logf("chat done in %s; the terminal showed:\n%s", time.Since(start).Round(time.Millisecond), term.text())

	var st workflows.SessionState
	if _, err := api.do(t.Context(), http.MethodGet, "/v1/sessions/term", nil, &st); err != nil || st.Turns != 4 || st.Tenant != "acme" {
		t.Errorf("the session through the API: %v, %d turns (want 4), tenant %q", err, st.Turns, st.Tenant)
	}
}
