package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/ctxflow/ctxflow/internal/eval"
)

// evalOptions are what `ctxflow eval` measures and where it writes.
type evalOptions struct {
	Data   []string // cases files, one set each
	Limit  int      // the first Limit cases of each set (0: all)
	JSON   string   // also write the figures here, one object per line ("-": stdout, no table)
	Detail bool     // recall@5 per search mode and the corrective judges, for sets with passages
}

// runEval parses `ctxflow eval`'s flags, measures each set and prints a
// table (and the JSON if asked); progress goes to errOut.
func runEval(ctx context.Context, args []string, out, errOut io.Writer) error {
	o, err := parseEval(args, errOut)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	var all []eval.Metrics
	for _, path := range o.Data {
		m, err := evalSet(ctx, path, o, out, errOut)
		if err != nil {
			return err
		}
		all = append(all, m)
	}
	if o.JSON != "-" {
		eval.WriteTable(out, all)
	}
	if o.JSON != "" {
		return writeEvalJSON(o.JSON, all, out)
	}
	return nil
}

// parseEval parses `ctxflow eval`'s flags.
func parseEval(args []string, errOut io.Writer) (evalOptions, error) {
	var o evalOptions
	fs := flag.NewFlagSet("eval", flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.Func("data", "a set's cases.jsonl (repeat for more sets)", func(s string) error {
		o.Data = append(o.Data, s)
		return nil
	})
	fs.IntVar(&o.Limit, "limit", 0, "measure the first N cases of each set (default all)")
	fs.StringVar(&o.JSON, "json", "", "also write the figures to this file, one JSON object per set and line (- for stdout instead of the table)")
	fs.BoolVar(&o.Detail, "detail", false, "also print, for sets with passages, recall@5 per search mode and the corrective loop's judges")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch {
	case fs.NArg() > 0:
		return o, fmt.Errorf("eval: unexpected argument %q (a set is named with --data DIR/cases.jsonl)", fs.Arg(0))
	case len(o.Data) == 0:
		return o, errors.New("eval: name at least one set with --data FILE")
	case o.Limit < 0:
		return o, fmt.Errorf("eval: --limit %d is negative", o.Limit)
	}
	return o, nil
}

// evalSet loads, indexes and measures one set, with its detail tables on
// out when asked (on errOut when the JSON goes to stdout).
func evalSet(ctx context.Context, path string, o evalOptions, out, errOut io.Writer) (eval.Metrics, error) {
	start := time.Now()
	set, err := eval.Load(ctx, path, o.Limit)
	if err != nil {
		return eval.Metrics{}, fmt.Errorf("eval: %w", err)
	}
	defer set.Close()
	slog.Debug("eval: set loaded", "set", set.Name, "cases", len(set.Cases), "passages", set.Passages, "seconds", time.Since(start).Seconds())
	p := newCountProgress(errOut, set.Name)
	m, err := set.Evaluate(ctx, p.update)
	p.end(err == nil)
	if err != nil {
		return m, fmt.Errorf("eval: %w", err)
	}
	if o.Detail && len(set.Gold) > 0 {
		if o.JSON == "-" { // stdout is the JSON's
			out = errOut
		}
		if err := writeDetail(ctx, set, out); err != nil {
			return m, fmt.Errorf("eval: %w", err)
		}
	}
	return m, nil
}

// writeDetail prints recall@5 per search mode and query form, and the
// corrective loop's judges on the retrieved passages.
func writeDetail(ctx context.Context, set *eval.Set, out io.Writer) error {
	rep, err := set.Retrieval(ctx, eval.RecallK)
	if err != nil {
		return err
	}
	rep.Write(out)
	g, err := set.Grading(ctx, eval.RecallK)
	if err != nil {
		return err
	}
	fmt.Fprintln(out)
	g.Write(out)
	fmt.Fprintln(out)
	return nil
}

// writeEvalJSON writes one JSON object per set and line to path ("-":
// stdout).
func writeEvalJSON(path string, sets []eval.Metrics, stdout io.Writer) error {
	var b strings.Builder
	for _, m := range sets {
		line, err := json.Marshal(m)
		if err != nil {
			return fmt.Errorf("eval: %w", err)
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	if path == "-" {
		_, err := io.WriteString(stdout, b.String())
		return err
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("eval: %w", err)
	}
	return nil
}

// countProgress shows how many cases of a set are measured: on a terminal
// a bar redrawn in place; elsewhere (a log, a pipe) a count line every
// progressEvery and one at the end, so that logs stay short.
type countProgress struct {
	w     io.Writer
	tty   bool
	name  string
	start time.Time // of the set
	last  time.Time // of the last count line
	done  int
	total int
}

// progressEvery is how often a count line is written off a terminal.
const progressEvery = 10 * time.Second

func newCountProgress(w io.Writer, name string) *countProgress {
	now := time.Now()
	return &countProgress{w: w, tty: isTerminal(w), name: name, start: now, last: now}
}

func (p *countProgress) update(done, total int) {
	p.done, p.total = done, total
	switch {
	case p.tty:
		fmt.Fprintf(p.w, "\r%s %s", bar(done, total), p.name)
	case time.Since(p.last) >= progressEvery && done < total:
		p.last = time.Now()
		fmt.Fprintf(p.w, "%s: %d/%d cases\n", p.name, done, total)
	}
}

// end finishes the bar's line on a terminal, or writes the last count.
func (p *countProgress) end(ok bool) {
	status := fmt.Sprintf("in %.1f s", time.Since(p.start).Seconds())
	if !ok {
		status = "failed"
	}
	if p.tty {
		fmt.Fprintf(p.w, "\r%s %s %s\n", bar(p.done, p.total), p.name, status)
		return
	}
	fmt.Fprintf(p.w, "%s: %d/%d cases %s\n", p.name, p.done, p.total, status)
}
