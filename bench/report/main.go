// Command report turns the output of `go test -bench` (ctxflow's
// benchmarks, run side by side by `make bench`) and the peer's JSON (from
// scripts/peer.sh) into one table with the targets of issues 15 and 28 (the
// ratios to the peer among them), printed on stdout with the machine's CPU,
// and writes every figure to a JSON file.
//
//	go test -run '^$' -bench ... | go run ./bench/report -peer peer.json -json bench/results.json
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// metrics are the benchmarks' figures: benchmark name (without the -N CPU
// suffix) → unit → value.
type metrics map[string]map[string]float64

// benchLine is a result line: "BenchmarkX/sub-2  10  123 ns/op  4.5 p50-ms".
// A benchmark's logs (the embedded server's, on the same output) may come
// between its name and its figures: then the name stands alone
// (benchName) and the figures follow on a line of their own (benchRest).
var (
	benchLine = regexp.MustCompile(`^(Benchmark\S+?)(?:-\d+)?\s+\d+\s+(.*ns/op.*)$`)
	benchName = regexp.MustCompile(`^(Benchmark\S+?)(?:-\d+)?\s`)
	benchRest = regexp.MustCompile(`^\s+\d+\s+(.*ns/op.*)$`)
)

// cpuLine is go test's "cpu: AMD EPYC" line.
var cpuLine = regexp.MustCompile(`^cpu:\s*(.+?)\s*$`)

// parse reads `go test -bench` output, echoing it to echo: the figures
// and the CPU go test names ("" if none).
func parse(r io.Reader, echo io.Writer) (m metrics, cpu string, err error) {
	m = metrics{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	pending := "" // a benchmark whose name came without its figures
	for sc.Scan() {
		line := sc.Text()
		fmt.Fprintln(echo, line)
		if c := cpuLine.FindStringSubmatch(line); c != nil {
			cpu = c[1]
			continue
		}
		g := benchLine.FindStringSubmatch(line)
		if g == nil {
			if n := benchName.FindStringSubmatch(line); n != nil {
				pending = n[1]
			} else if r := benchRest.FindStringSubmatch(line); r != nil && pending != "" {
				g, pending = []string{line, pending, r[1]}, ""
			}
		}
		if g == nil {
			continue
		}
		f := strings.Fields(g[2])
		if m[g[1]] == nil {
			m[g[1]] = map[string]float64{}
		}
		for i := 0; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return nil, "", fmt.Errorf("%q: value %q: %w", line, f[i], err)
			}
			m[g[1]][f[i+1]] = v
		}
	}
	return m, cpu, sc.Err()
}

// row is a line of the table: a figure, how it compares with its target,
// and the peer's figure for the same thing.
type row struct {
	Name   string   `json:"name"`
	Value  *float64 `json:"value"` // nil: not measured in this run
	Unit   string   `json:"unit"`
	Target string   `json:"target,omitempty"`
	Met    *bool    `json:"met,omitempty"`
	Peer   *float64 `json:"peer,omitempty"`
}

// table builds the rows from ctxflow's metrics and the peer's.
func table(m metrics, peer map[string]any) []row {
	get := func(bench, unit string) *float64 {
		if v, ok := m[bench][unit]; ok {
			return &v
		}
		return nil
	}
	p := func(path ...string) *float64 {
		var v any = peer
		for _, k := range path {
			o, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = o[k]
		}
		if f, ok := v.(float64); ok {
			return &f
		}
		return nil
	}
	ratio := func(a, b *float64) *float64 {
		if a == nil || b == nil || *b == 0 {
			return nil
		}
		r := *a / *b
		return &r
	}
	var rows []row
	add := func(name string, v *float64, unit, target string, peer *float64) {
		r := row{Name: name, Value: v, Unit: unit, Target: target, Peer: peer}
		if v != nil && target != "" {
			limit, _ := strconv.ParseFloat(strings.TrimLeft(target, "≤≥ "), 64)
			met := *v <= limit
			if strings.HasPrefix(target, "≥") {
				met = *v >= limit
			}
			r.Met = &met
		}
		rows = append(rows, r)
	}
	turn, pipe := get("BenchmarkTurn", "p50-ms"), get("BenchmarkTurnPipeline", "p50-ms")
	add("chat turn p50 (embedded stack, instant model)", turn, "ms", "≤25", p("p50_ms"))
	add("chat turn p99", get("BenchmarkTurn", "p99-ms"), "ms", "≤60", p("p99_ms"))
	add("chat turn p50 in process, no Temporal", pipe, "ms", "", nil)
	if turn != nil && pipe != nil {
		d := *turn - *pipe
		add("orchestration overhead p50 (turn − in process)", &d, "ms", "", nil)
	}
	if slow := get("BenchmarkTurnSlowModel", "p50-ms"); slow != nil {
		// Each model call takes the second: the intent's and the answer's.
		calls := 1.0
		if c := get("BenchmarkTurnSlowModel", "model-calls/turn"); c != nil && *c >= 1 {
			calls = math.Round(*c)
			add("model calls a turn (intent, answer)", &calls, "calls", "", nil)
		}
		pct := (*slow - 1000*calls) / (10 * calls)
		add("overhead on a turn of 1 s model calls, p50", &pct, "%", "", nil)
	}
	add("chat turn p50 / the peer's", ratio(turn, p("p50_ms")), "×", "≤0.25", nil)
	add("qa turn p50 (one corrective round, offline engine)", get("BenchmarkQATurn", "p50-ms"), "ms", "≤30", nil)
	add("agent step p50 (think + SQL tool, offline planner)", get("BenchmarkAgentStep", "p50-ms"), "ms", "", nil)
	add("agent step p99", get("BenchmarkAgentStep", "p99-ms"), "ms", "", nil)
	ref := get("BenchmarkFourActivityWorkflow/server-defaults", "p50-ms")
	add("reference: four instant activities, server defaults p50", ref, "ms", "", nil)
	add("chat turn / reference turn", ratio(turn, ref), "×", "≤0.10", nil)
	for _, n := range []string{"1", "10", "100"} {
		target := ""
		if n == "10" {
			target = "≥150"
		}
		var peerTP *float64
		if n == "10" {
			peerTP = p("threads10_turns_per_s")
		}
		add("throughput, "+n+" sessions (HTTP API, ?wait=true)", get("BenchmarkThroughput/sessions="+n, "turns/s"), "turns/s", target, peerTP)
		if n == "10" {
			add("throughput, 10 sessions / the peer's (10 threads)", ratio(get("BenchmarkThroughput/sessions=10", "turns/s"), peerTP), "×", "≥2", nil)
		}
	}
	// The same load, in the same run, on make cluster and on the embedded stack.
	for _, topo := range []struct{ name, what string }{
		{"cluster", "make cluster (Temporal on PostgreSQL, 2 workers, API: processes)"},
		{"embedded", "embedded server (SQLite, 1 worker process), same run"},
	} {
		add("throughput, 10 sessions, "+topo.what, get("BenchmarkCluster/"+topo.name, "turns/s"), "turns/s", "", nil)
		add("chat turn p50 under that load, "+topo.what, get("BenchmarkCluster/"+topo.name, "p50-ms"), "ms", "", nil)
	}
	add("CPU a turn, worker process (10 sessions)", get("BenchmarkThroughput/sessions=10", "worker-cpu-ms/turn"), "ms", "", nil)
	add("CPU a turn, server + API + clients (10 sessions)", get("BenchmarkThroughput/sessions=10", "server-api-cpu-ms/turn"), "ms", "", nil)
	if w, sa := get("BenchmarkThroughput/sessions=10", "worker-cpu-ms/turn"), get("BenchmarkThroughput/sessions=10", "server-api-cpu-ms/turn"); w != nil && sa != nil {
		all := *w + *sa
		add("CPU a turn, all processes (10 sessions)", &all, "ms", "≤8", nil)
	}
	add("worker peak RSS after 100 sessions", get("BenchmarkThroughput/sessions=100", "worker-rss-MB"), "MB", "", nil)
	for _, at := range []string{"10", "100", "1000"} {
		add("history bytes per turn at turn "+at, get("BenchmarkHistory", "bytes/turn@"+at), "B", "", p("checkpoint_bytes_per_turn", at))
		add("history events per turn at turn "+at, get("BenchmarkHistory", "events/turn@"+at), "events", "", nil)
	}
	add("history bytes per turn, turn 1,000 / turn 10", ratio(get("BenchmarkHistory", "bytes/turn@1000"), get("BenchmarkHistory", "bytes/turn@10")), "×", "≤1.1", nil)
	add("history bytes per turn, turn 1,000 / turn 100", ratio(get("BenchmarkHistory", "bytes/turn@1000"), get("BenchmarkHistory", "bytes/turn@100")), "×", "", nil)
	add("continue-as-new in the run", get("BenchmarkHistory", "continue-as-new"), "runs", "", nil)
	add("largest history of a run (10,000 turns in the full run)", get("BenchmarkHistory", "largest-history-bytes"), "B", "", nil)
	for _, size := range []string{"100", "10k", "100k"} {
		ns := get("BenchmarkAssemble/"+size, "ns/op")
		var us *float64
		if ns != nil {
			v := *ns / 1000
			us = &v
		}
		add("context assembly, branch of "+size+" messages", us, "µs", "", nil)
	}
	short, long := get("BenchmarkLongSession", "short-p50-ms"), get("BenchmarkLongSession", "long-p50-ms")
	add("chat turn p50, 10-message session (steady)", short, "ms", "", nil)
	add("chat turn p50, 100k-message session (steady)", long, "ms", "", nil)
	add("100k-message turn / 10-message turn", ratio(long, short), "×", "≤1.2", nil)
	add("first turn on the 100k session after a worker restart (cold)", get("BenchmarkLongSession", "cold-after-restart-ms"), "ms", "≤1000", nil)
	add("first turn on the 100k session after a worker crash", get("BenchmarkLongSession", "cold-after-crash-ms"), "ms", "", nil)
	add("first turn after a worker kill (from the new worker's start, p50)", get("BenchmarkWorkerKill", "first-turn-after-kill-ms"), "ms", "≤1000", nil)
	add("first turn after a worker kill, slowest", get("BenchmarkWorkerKill", "first-turn-after-kill-max-ms"), "ms", "≤1000", nil)
	add("query after a worker kill (p50)", get("BenchmarkWorkerKill", "query-after-kill-ms"), "ms", "", nil)
	add("new worker polling, from its start (p50)", get("BenchmarkWorkerKill", "worker-ready-ms"), "ms", "", nil)
	add("prompt tokens a turn (200-turn session, summary + window)", get("BenchmarkPromptTokens", "prompt-tokens/turn"), "tokens", "", nil)
	add("full-history tokens a turn, same session", get("BenchmarkPromptTokens", "history-tokens/turn"), "tokens", "", nil)
	add("prompt / full history", get("BenchmarkPromptTokens", "prompt/history"), "×", "", nil)
	add("planted facts still in the model view", get("BenchmarkPromptTokens", "facts-in-view"), "share", "", nil)
	for _, v := range []string{"random", "clustered"} {
		for _, n := range []string{"10000", "100000"} {
			b := "BenchmarkSearch/" + v + "/chunks=" + n
			target, recall := "", ""
			if n == "100000" {
				target, recall = "≤10", "≥0.95"
			}
			what := fmt.Sprintf("%s chunks (%s vectors)", n, v)
			add("embedded dense search p50, "+what, get(b, "p50-ms"), "ms", target, nil)
			add("embedded dense search p99, "+what, get(b, "p99-ms"), "ms", "", nil)
			add("embedded dense search recall@10, "+what, get(b, "recall@10"), "", recall, nil)
		}
	}
	add("ingestion (read, chunk, embed, store)", get("BenchmarkIngest/pipeline", "MB/s"), "MB/s", "", nil)
	add("peer: first 10 turns mean", nil, "ms", "", p("first10_ms"))
	add("peer: last 10 turns mean", nil, "ms", "", p("last10_ms"))
	return rows
}

func show(v *float64) string {
	switch {
	case v == nil:
		return "—"
	case *v >= 100 || *v == float64(int64(*v)):
		return strconv.FormatFloat(*v, 'f', 0, 64)
	case *v >= 10:
		return strconv.FormatFloat(*v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(*v, 'f', 3, 64)
	}
}

func print(w io.Writer, rows []row) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "figure\tctxflow\tunit\ttarget\tmet\tpeer (LangGraph.js)")
	for _, r := range rows {
		met := ""
		if r.Met != nil {
			met = map[bool]string{true: "yes", false: "NO"}[*r.Met]
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Name, show(r.Value), r.Unit, r.Target, met, show(r.Peer))
	}
	tw.Flush()
}

// markdown writes rows as a Markdown table.
func markdown(w io.Writer, rows []row) {
	fmt.Fprintln(w, "| figure | ctxflow | unit | target | met | peer (LangGraph.js) |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|")
	for _, r := range rows {
		met := ""
		if r.Met != nil {
			met = map[bool]string{true: "yes", false: "**no**"}[*r.Met]
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", r.Name, show(r.Value), r.Unit, r.Target, met, show(r.Peer))
	}
}

func main() {
	peerFiles := flag.String("peer", "", "the peer's JSON (scripts/peer.sh), or several runs of it separated by commas (their mean is the peer's figure); empty: no peer rows")
	out := flag.String("json", "bench/results.json", "where to write the figures")
	md := flag.Bool("markdown", false, "print the table as Markdown (for bench/BASELINE.md)")
	flag.Parse()
	m, cpu, err := parse(os.Stdin, io.Discard)
	if err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
	var runs []map[string]any
	if *peerFiles != "" {
		for _, f := range strings.Split(*peerFiles, ",") {
			var run map[string]any
			data, err := os.ReadFile(f)
			if err == nil {
				err = json.Unmarshal(data, &run)
			}
			if err != nil {
				fmt.Fprintf(os.Stderr, "report: peer %s: %v\n", f, err)
				os.Exit(1)
			}
			runs = append(runs, run)
		}
	}
	peer := meanOf(runs)
	rows := table(m, peer)
	fmt.Printf("machine: %s, %d CPUs, %s\n", cpu, runtime.NumCPU(), runtime.Version())
	if len(runs) > 1 {
		fmt.Printf("peer: the mean of %d runs; chat p50 %s ms, 10 threads %s turns/s\n", len(runs),
			each(runs, "p50_ms"), each(runs, "threads10_turns_per_s"))
	}
	if *md {
		markdown(os.Stdout, rows)
	} else {
		print(os.Stdout, rows)
	}
	host, _ := os.Hostname()
	data, err := json.MarshalIndent(map[string]any{
		"at": time.Now().UTC().Format(time.RFC3339), "host": host, "cpu": cpu, "cpus": runtime.NumCPU(), "go": runtime.Version(),
		"rows": rows, "benchmarks": m, "peer": peer, "peerRuns": runs,
	}, "", "  ")
	if err == nil {
		err = os.WriteFile(*out, append(data, '\n'), 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
}

// meanOf is the peer's figures over its runs: each number the mean of
// the runs that have it, anything else as the first run has it. make bench
// runs the peer before ctxflow's turns and again after its throughput, so
// that the ratios compare the two over the same minutes of a machine
// whose speed drifts.
func meanOf(runs []map[string]any) map[string]any {
	if len(runs) == 0 {
		return nil
	}
	out := make(map[string]any, len(runs[0]))
	for k, v := range runs[0] {
		switch v.(type) {
		case float64:
			sum, n := 0.0, 0
			for _, r := range runs {
				if f, ok := r[k].(float64); ok {
					sum, n = sum+f, n+1
				}
			}
			out[k] = sum / float64(n)
		case map[string]any:
			var sub []map[string]any
			for _, r := range runs {
				if m, ok := r[k].(map[string]any); ok {
					sub = append(sub, m)
				}
			}
			out[k] = meanOf(sub)
		default:
			out[k] = v
		}
	}
	return out
}

// each lists a number of every run, " / " between them.
func each(runs []map[string]any, key string) string {
	var out []string
	for _, r := range runs {
		if f, ok := r[key].(float64); ok {
			out = append(out, strconv.FormatFloat(f, 'g', 4, 64))
		}
	}
	return strings.Join(out, " / ")
}
