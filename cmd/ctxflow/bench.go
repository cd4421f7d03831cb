package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ctxflow/ctxflow/workflows"
)

// benchOptions are what `ctxflow bench` sends and where.
type benchOptions struct {
	API      string
	Key      string
	Sessions int
	Turns    int
	JSON     string // also write the figures here ("" for none)
}

// benchResult is what `ctxflow bench` measured: whole turns through the
// API (?wait=true), as a client sees them.
type benchResult struct {
	API         string  `json:"api"`
	Sessions    int     `json:"sessions"`
	Turns       int     `json:"turns"`
	Failed      int     `json:"failed"`
	Refused     int     `json:"refused"` // 429 overloaded, retried
	Seconds     float64 `json:"seconds"`
	TurnsPerSec float64 `json:"turnsPerSecond"`
	P50MS       float64 `json:"p50Ms"`
	P99MS       float64 `json:"p99Ms"`
}

// runBench parses `ctxflow bench`'s flags, drives the API and prints a
// table (and the JSON file if asked).
func runBench(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(errOut)
	var o benchOptions
	fs.StringVar(&o.API, "api", apiURL(), "the API's base URL ($CTXFLOW_API_URL)")
	fs.StringVar(&o.Key, "key", os.Getenv("CTXFLOW_API_KEY"), "API key, sent as a bearer token ($CTXFLOW_API_KEY)")
	fs.IntVar(&o.Sessions, "sessions", 10, "sessions sending turns at once, each one turn after another")
	fs.IntVar(&o.Turns, "turns", 500, "turns in all")
	fs.StringVar(&o.JSON, "json", "", "also write the figures to this file")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 || o.Sessions < 1 || o.Turns < o.Sessions {
		return fmt.Errorf("bench: want --sessions ≥ 1 and --turns ≥ --sessions, no arguments")
	}
	res, err := bench(ctx, o)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "| turns | sessions | turns/s | p50 ms | p99 ms | failed | refused (429) |\n|---|---|---|---|---|---|---|\n")
	fmt.Fprintf(out, "| %d | %d | %.1f | %.1f | %.1f | %d | %d |\n", res.Turns, res.Sessions, res.TurnsPerSec, res.P50MS, res.P99MS, res.Failed, res.Refused)
	if o.JSON != "" {
		data, _ := json.MarshalIndent(res, "", "  ")
		if err := os.WriteFile(o.JSON, append(data, '\n'), 0o644); err != nil {
			return fmt.Errorf("bench: %w", err)
		}
	}
	if res.Failed > 0 {
		return fmt.Errorf("bench: %d of %d turns failed", res.Failed, res.Turns)
	}
	return nil
}

// bench sends o.Turns chat turns from o.Sessions new sessions at once, one
// turn after another in each, and times each whole turn. A 429 is waited
// out (Retry-After) and sent again with the same turn id.
func bench(ctx context.Context, o benchOptions) (benchResult, error) {
	run := newChatID("bench")
	hc := &http.Client{Timeout: 5 * time.Minute}
	var (
		next, refused, failed atomic.Int64
		mu                    sync.Mutex
		times                 []time.Duration
		firstErr              error
	)
	turn := func(c *chat, i int64) (time.Duration, error) {
		start := time.Now()
		for {
			var res workflows.TurnResult
			err := c.call(ctx, http.MethodPost, "/turns?wait=true",
				map[string]string{"turnId": fmt.Sprintf("t%d", i), "question": fmt.Sprintf("bench question %d", i)}, &res)
			var ce *chatError
			if errors.As(err, &ce) && ce.Code == "overloaded" {
				refused.Add(1)
				if !sleepCtx(ctx, time.Second) {
					return 0, ctx.Err()
				}
				continue
			}
			if err == nil && res.Status != workflows.TurnCompleted {
				err = fmt.Errorf("turn %s: %s %s", res.TurnID, res.Status, res.Error)
			}
			return time.Since(start), err
		}
	}
	start := time.Now()
	var wg sync.WaitGroup
	for s := range o.Sessions {
		c := &chat{o: chatOptions{API: o.API, Key: o.Key, Session: fmt.Sprintf("%s-%03d", run, s)}, base: o.API, hc: hc}
		wg.Go(func() {
			for i := next.Add(1); i <= int64(o.Turns) && ctx.Err() == nil; i = next.Add(1) {
				d, err := turn(c, i)
				mu.Lock()
				if err != nil {
					failed.Add(1)
					firstErr = cmp.Or(firstErr, err)
				} else {
					times = append(times, d)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	if len(times) == 0 {
		return benchResult{}, fmt.Errorf("bench: no turn answered: %w", firstErr)
	}
	slices.Sort(times)
	at := func(q float64) float64 {
		return float64(times[min(len(times)-1, int(q*float64(len(times))))]) / float64(time.Millisecond)
	}
	return benchResult{
		API: o.API, Sessions: o.Sessions, Turns: o.Turns, Failed: int(failed.Load()), Refused: int(refused.Load()),
		Seconds: took.Seconds(), TurnsPerSec: float64(len(times)) / took.Seconds(), P50MS: at(0.5), P99MS: at(0.99),
	}, nil
}
