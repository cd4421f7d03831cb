// Command profile reads a CPU profile of BenchmarkInProcess (the server,
// the API, the worker and the clients in one process) and prints where a
// turn's CPU goes, by component, as a Markdown table:
//
//	go run ./bench/profile -turns 3000 cpu.out
//
// Each sample counts once, for the first component of components whose
// pattern matches a function of its stack (so the visibility writes are
// not counted again as SQLite, nor the server's work as gRPC).
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"time"

	"github.com/google/pprof/profile"
)

// components are matched in order against the functions of a sample's
// stack.
var components = []struct{ name, pattern string }{
	{"start-up (dictionary, binary checksum)", `lexical\.loadSegmenter|initBinaryChecksum`},
	{"visibility writes (search attributes)", `visibilityQueueTaskExecutor`},
	{"SQLite: history, tasks, mutable state", `modernc\.org/sqlite`},
	{"Temporal history service", `server/service/history`},
	{"Temporal matching service", `server/service/matching`},
	{"Temporal frontend", `server/service/frontend`},
	{"Temporal server, other", `go\.temporal\.io/server`},
	{"worker: workflow code", `ctxflow/ctxflow/workflows\.`},
	{"worker: activities", `ctxflow/ctxflow/(activities|convo|lexical)`},
	{"worker: Temporal SDK", `go\.temporal\.io/sdk`},
	{"API (Gin, handlers)", `ctxflow/ctxflow/api\.|gin-gonic`},
	{"fake model", `fakeollama`},
	{"test clients", `tests\.apiClient|net/http\.\(\*Transport\)|net/http\.\(\*persistConn\)`},
	{"HTTP server (net/http)", `net/http\.`},
	{"gRPC transport", `google\.golang\.org/grpc`},
	{"GC and scheduler", `^runtime\.`},
}

func main() {
	turns := flag.Int("turns", 0, "turns the profile covers (the benchmark's b.N): figures a turn")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: profile [-turns N] cpu.out")
		os.Exit(2)
	}
	if err := run(flag.Arg(0), *turns, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "profile:", err)
		os.Exit(1)
	}
}

func run(path string, turns int, out io.Writer) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		return fmt.Errorf("parse %s: %w", path, err)
	}
	byName, total := classify(p)
	fmt.Fprintf(out, "| component | CPU | share |")
	if turns > 0 {
		fmt.Fprintf(out, " a turn |")
	}
	fmt.Fprintf(out, "\n|---|---|---|%s\n", map[bool]string{true: "---|"}[turns > 0])
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	slices.SortFunc(names, func(a, b string) int { return int(byName[b] - byName[a]) })
	for _, n := range append(names, "total") {
		d := byName[n]
		if n == "total" {
			d = total
		}
		fmt.Fprintf(out, "| %s | %.2f s | %.1f%% |", n, d.Seconds(), 100*float64(d)/float64(total))
		if turns > 0 {
			fmt.Fprintf(out, " %.2f ms |", float64(d)/float64(time.Millisecond)/float64(turns))
		}
		fmt.Fprintln(out)
	}
	return nil
}

// classify sums the CPU time of p's samples by component.
func classify(p *profile.Profile) (map[string]time.Duration, time.Duration) {
	cpu := slices.IndexFunc(p.SampleType, func(t *profile.ValueType) bool { return t.Type == "cpu" })
	if cpu < 0 {
		cpu = len(p.SampleType) - 1
	}
	res := make([]*regexp.Regexp, len(components))
	for i, c := range components {
		res[i] = regexp.MustCompile(c.pattern)
	}
	out := map[string]time.Duration{}
	var total time.Duration
	for _, s := range p.Sample {
		d := time.Duration(s.Value[cpu])
		total += d
		name := "other"
	find:
		for i, re := range res {
			for _, loc := range s.Location {
				for _, line := range loc.Line {
					if line.Function != nil && re.MatchString(line.Function.Name) {
						name = components[i].name
						break find
					}
				}
			}
		}
		out[name] += d
	}
	return out, total
}
