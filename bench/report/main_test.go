package main

import (
	"io"
	"slices"
	"strings"
	"testing"
)

func TestParseAndTable(t *testing.T) {
	out := `goos: linux
cpu: AMD EPYC
BenchmarkTurn-2            	     300	  34500000 ns/op	        20.5 p50-ms	        58.0 p99-ms
BenchmarkTurnPipeline-2    	    3000	    400000 ns/op	         0.4 p50-ms	         1.0 p99-ms
BenchmarkTurnSlowModel-2   	      10	2032739147 ns/op	      2040 p50-ms	      2044 p99-ms	         2.000 model-calls/turn
BenchmarkFourActivityWorkflow/server-defaults-2 	      20	 200000000 ns/op	       205 p50-ms
BenchmarkThroughput/sessions=10-2        	time=2026-11-26T16:20:36.098Z level=ERROR msg="Update workflow execution operation failed."
time=2026-11-26T16:20:36.453Z level=ERROR msg="Update workflow execution operation failed."
      1000	   1000000 ns/op	        120 turns/s	        80.5 worker-rss-MB	         3.5 worker-cpu-ms/turn	         6 server-api-cpu-ms/turn
BenchmarkHistory 	       1	 9000000000 ns/op	      3000 bytes/turn@10	      3300 bytes/turn@1000
PASS`
	m, cpu, err := parse(strings.NewReader(out), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if got := m["BenchmarkThroughput/sessions=10"]["turns/s"]; got != 120 {
		t.Errorf("turns/s = %v", got)
	}
	if cpu != "AMD EPYC" {
		t.Errorf("cpu = %q", cpu)
	}
	rows := table(m, map[string]any{"p50_ms": 59.0, "threads10_turns_per_s": 66.0, "checkpoint_bytes_per_turn": map[string]any{"10": 1000.0}})
	find := func(name string) row {
		for _, r := range rows {
			if r.Name == name {
				return r
			}
		}
		t.Fatalf("no row %q", name)
		return row{}
	}
	for _, tc := range []struct {
		name  string
		value float64
		met   bool
		peer  float64
	}{
		{"chat turn p50 (embedded stack, instant model)", 20.5, true, 59},
		{"chat turn p99", 58, true, 0},
		{"orchestration overhead p50 (turn − in process)", 20.1, false, 0},
		{"chat turn / reference turn", 0.1, true, 0},
		{"throughput, 10 sessions (HTTP API, ?wait=true)", 120, false, 66},
		{"history bytes per turn, turn 1,000 / turn 10", 1.1, true, 0},
		{"chat turn p50 / the peer's", 20.5 / 59, false, 0},
		{"overhead on a turn of 1 s model calls, p50", 2, false, 0},
		{"throughput, 10 sessions / the peer's (10 threads)", 120.0 / 66, false, 0},
		{"CPU a turn, all processes (10 sessions)", 9.5, false, 0},
		{"history bytes per turn at turn 10", 3000, false, 1000},
	} {
		r := find(tc.name)
		if r.Value == nil || abs(*r.Value-tc.value) > 1e-9 {
			t.Errorf("%s = %v, want %v", tc.name, r.Value, tc.value)
		}
		if (r.Met != nil && *r.Met != tc.met) || (r.Met == nil && r.Target != "") || (r.Met != nil && !tc.met && r.Target == "") {
			t.Errorf("%s: met %v, want %v (target %q)", tc.name, r.Met, tc.met, r.Target)
		}
		if (tc.peer != 0) != (r.Peer != nil) || (r.Peer != nil && *r.Peer != tc.peer) {
			t.Errorf("%s: peer %v, want %v", tc.name, r.Peer, tc.peer)
		}
	}
	if r := find("qa turn p50 (one corrective round, offline engine)"); r.Value != nil || r.Met != nil {
		t.Errorf("a figure not measured: %+v", r)
	}
}

func abs(x float64) float64 { return max(x, -x) }

// TestPeerRunsAreAveraged: the peer's figure is the mean of its runs,
// nested figures included; what is not a number comes from the first run.
func TestPeerRunsAreAveraged(t *testing.T) {
	runs := []map[string]any{
		{"peer": "langgraphjs", "p50_ms": 30.0, "threads10_turns_per_s": 90.0, "checkpoint_bytes_per_turn": map[string]any{"10": 1000.0}},
		{"peer": "langgraphjs", "p50_ms": 40.0, "threads10_turns_per_s": 80.0, "checkpoint_bytes_per_turn": map[string]any{"10": 3000.0}},
	}
	got := meanOf(runs)
	if got["p50_ms"] != 35.0 || got["threads10_turns_per_s"] != 85.0 || got["peer"] != "langgraphjs" ||
		got["checkpoint_bytes_per_turn"].(map[string]any)["10"] != 2000.0 {
		t.Errorf("mean = %v", got)
	}
	if meanOf(nil) != nil || meanOf(runs[:1])["p50_ms"] != 30.0 {
		t.Error("no runs must give no peer, one run itself")
	}
	if s := each(runs, "p50_ms"); s != "30 / 40" {
		t.Errorf("each = %q", s)
	}
	m := metrics{"BenchmarkTurn": {"p50-ms": 7}}
	rows := table(m, got)
	i := slices.IndexFunc(rows, func(r row) bool { return r.Name == "chat turn p50 / the peer's" })
	if r := rows[max(i, 0)]; i < 0 || r.Value == nil || *r.Value != 0.2 {
		t.Errorf("chat ratio row %d %v, want 7 / 35", i, r.Value)
	}
}
