package devserver

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

func stepActivity(context.Context) error { return nil }

// fourStepWorkflow is a turn of four instant regular activities (DESIGN §9).
func fourStepWorkflow(ctx workflow.Context) error {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 10 * time.Second})
	for range 4 {
		if err := workflow.ExecuteActivity(ctx, stepActivity).Get(ctx, nil); err != nil {
			return err
		}
	}
	return nil
}

// BenchmarkFourActivityWorkflow measures starting a workflow of four
// sequential instant activities and waiting for its result, with this
// package's settings and with the server's defaults for the latency
// settings it changes and one history shard (as `temporal server
// start-dev`): the naive reference turn of `make bench`.
func BenchmarkFourActivityWorkflow(b *testing.B) {
	serverDefaults := map[string]any{
		"history.transferProcessorMaxPollRPS":  20,
		"history.longPollExpirationInterval":   20 * time.Second,
		"matching.numTaskqueueReadPartitions":  4,
		"matching.numTaskqueueWritePartitions": 4,
	}
	for _, bc := range []struct {
		name   string
		dc     map[string]any
		shards int32
	}{{"tuned", nil, 0}, {"server-defaults", serverDefaults, 1}} {
		b.Run(bc.name, func(b *testing.B) {
			ctx := context.Background()
			s, err := Start(ctx, Options{DynamicConfig: bc.dc, HistoryShards: bc.shards, Logger: quietLogger()})
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = s.Stop() }()
			c, err := client.DialContext(ctx, client.Options{HostPort: s.FrontendHostPort(), Logger: nopLogger{}})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			w := worker.New(c, "bench", worker.Options{})
			w.RegisterWorkflow(fourStepWorkflow)
			w.RegisterActivity(stepActivity)
			if err := w.Start(); err != nil {
				b.Fatal(err)
			}
			defer w.Stop()
			run := func(i int) time.Duration {
				begin := time.Now()
				r, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: fmt.Sprintf("bench-%d", i), TaskQueue: "bench"}, fourStepWorkflow)
				if err == nil {
					err = r.Get(ctx, nil)
				}
				if err != nil {
					b.Fatal(err)
				}
				return time.Since(begin)
			}
			run(-1) // warm up
			durations := make([]time.Duration, b.N)
			b.ResetTimer()
			for i := range b.N {
				durations[i] = run(i)
			}
			b.StopTimer()
			slices.Sort(durations)
			ms := func(q float64) float64 {
				return float64(durations[int(q*float64(len(durations)-1))]) / float64(time.Millisecond)
			}
			b.ReportMetric(ms(0.5), "p50-ms")
			b.ReportMetric(ms(0.99), "p99-ms")
			b.ReportMetric(ms(1), "max-ms")
		})
	}
}

type nopLogger struct{}

func (nopLogger) Debug(string, ...any) {}
func (nopLogger) Info(string, ...any)  {}
func (nopLogger) Warn(string, ...any)  {}
func (nopLogger) Error(string, ...any) {}
