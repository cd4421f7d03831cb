// Package cpuhog loads every core of the machine with busy loops, the way
// other work on a shared machine does, so that tests can show what a turn
// does when the processes it needs get a fraction of a core: workflow tasks
// that time out, queries that wait, clients that retry.
//
// The loops are separate processes (sh's `while :; do :; done`), not
// goroutines: they compete with every process of the test (the embedded
// server, the worker, the API) through the kernel's scheduler, as a
// neighbour's workload would, rather than through the test's own Go
// scheduler.
package cpuhog

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"
)

// EnvVar turns the hog on for the tests that honour it (`make reliability`
// sets it; `CTXFLOW_CPU_HOG=1 go test ./tests/` does by hand). Its value is
// the number of busy loops, or 1 (or "on") for one a core.
const EnvVar = "CTXFLOW_CPU_HOG"

// FromEnv returns the number of loops EnvVar asks for: 0 when it is unset or
// "0", runtime.NumCPU() for "1" or "on", else the number it holds.
func FromEnv() (int, error) {
	v := os.Getenv(EnvVar)
	switch v {
	case "", "0", "off":
		return 0, nil
	case "1", "on":
		return runtime.NumCPU(), nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > 64 {
		return 0, fmt.Errorf("%s=%q: want 0, 1 (a loop a core) or a number of loops up to 64", EnvVar, v)
	}
	return n, nil
}

// Hog is a set of running busy loops.
type Hog struct{ procs []*os.Process }

// Start starts n busy loops (n ≤ 0: one a core). Stop ends them.
func Start(n int) (*Hog, error) {
	if n <= 0 {
		n = runtime.NumCPU()
	}
	h := &Hog{}
	for range n {
		cmd := exec.Command("/bin/sh", "-c", "while :; do :; done")
		// Its own process group: a test that dies leaves no loop behind
		// when the group is killed, and the loops get no terminal signals.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			h.Stop()
			return nil, fmt.Errorf("start busy loop: %w", err)
		}
		h.procs = append(h.procs, cmd.Process)
	}
	return h, nil
}

// Loops is the number of busy loops running.
func (h *Hog) Loops() int { return len(h.procs) }

// Stop kills the loops and reaps them. It is safe to call more than once.
func (h *Hog) Stop() {
	for _, p := range h.procs {
		_ = p.Kill()
		_, _ = p.Wait()
	}
	h.procs = nil
}
