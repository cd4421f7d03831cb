package cpuhog

import (
	"runtime"
	"syscall"
	"testing"
)

func TestFromEnv(t *testing.T) {
	for _, tt := range []struct {
		v    string
		want int
		bad  bool
	}{
		{"", 0, false}, {"0", 0, false}, {"off", 0, false},
		{"1", runtime.NumCPU(), false}, {"on", runtime.NumCPU(), false},
		{"8", 8, false}, {"-1", 0, true}, {"65", 0, true}, {"lots", 0, true},
	} {
		t.Setenv(EnvVar, tt.v)
		got, err := FromEnv()
		if (err != nil) != tt.bad || got != tt.want {
			t.Errorf("%s=%q: FromEnv = %d, %v; want %d (error %v)", EnvVar, tt.v, got, err, tt.want, tt.bad)
		}
	}
}

func TestStartAndStop(t *testing.T) {
	h, err := Start(2)
	if err != nil {
		t.Fatal(err)
	}
	if h.Loops() != 2 {
		t.Fatalf("Loops = %d, want 2", h.Loops())
	}
	pids := []int{h.procs[0].Pid, h.procs[1].Pid}
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); err != nil {
			t.Errorf("loop %d is not running: %v", pid, err)
		}
	}
	h.Stop()
	h.Stop() // twice is fine
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); err == nil {
			t.Errorf("loop %d still runs after Stop", pid)
		}
	}
}
