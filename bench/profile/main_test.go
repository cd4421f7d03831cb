package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/pprof/profile"
)

// TestClassify: a sample counts once, for the first component a function
// of its stack matches, whatever the order of the frames.
func TestClassify(t *testing.T) {
	p := &profile.Profile{}
	fn := map[string]*profile.Function{}
	loc := func(names ...string) []*profile.Location {
		var out []*profile.Location
		for _, n := range names {
			if fn[n] == nil {
				fn[n] = &profile.Function{ID: uint64(len(fn) + 1), Name: n}
				p.Function = append(p.Function, fn[n])
			}
			l := &profile.Location{ID: uint64(len(p.Location) + 1), Line: []profile.Line{{Function: fn[n]}}}
			p.Location = append(p.Location, l)
			out = append(out, l)
		}
		return out
	}
	p.SampleType = []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}}
	p.Sample = []*profile.Sample{
		{Value: []int64{1, 30e6}, Location: loc("modernc.org/sqlite/lib._sqlite3VdbeExec", "go.temporal.io/server/service/history.(*visibilityQueueTaskExecutor).Execute")},
		{Value: []int64{1, 20e6}, Location: loc("modernc.org/sqlite/lib._sqlite3VdbeExec", "go.temporal.io/server/service/history.(*Handler).RespondWorkflowTaskCompleted")},
		{Value: []int64{1, 10e6}, Location: loc("runtime.gcBgMarkWorker")},
		{Value: []int64{1, 5e6}, Location: loc("main.elsewhere")},
	}
	got, total := classify(p)
	want := map[string]float64{
		"visibility writes (search attributes)": 30, "SQLite: history, tasks, mutable state": 20, "GC and scheduler": 10, "other": 5,
	}
	if total.Milliseconds() != 65 || len(got) != len(want) {
		t.Fatalf("classify = %v (total %v)", got, total)
	}
	for name, ms := range want {
		if float64(got[name].Milliseconds()) != ms {
			t.Errorf("%s = %v, want %v ms", name, got[name], ms)
		}
	}
	// The table, from a profile file.
	path := filepath.Join(t.TempDir(), "cpu.out")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Write(f); err != nil {
		t.Fatal(err)
	}
	f.Close()
	var out bytes.Buffer
	if err := run(path, 10, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "| visibility writes (search attributes) | 0.03 s | 46.2% | 3.00 ms |") ||
		!strings.Contains(out.String(), "| total | 0.07 s | 100.0% | 6.50 ms |") {
		t.Errorf("table:\n%s", out.String())
	}
}
