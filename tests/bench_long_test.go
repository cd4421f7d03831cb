package tests

import (
	"bytes"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/activities/transcript"
	"github.com/ctxflow/ctxflow/convo"
	"github.com/ctxflow/ctxflow/workflows"
)

// BenchmarkAgentStep runs the README's agent task (count the rows of every
// table of the demo shop: 16 steps of planning and a SQL tool, offline
// planner) to its end, b.N times, each in a new session, and reports the
// time a step takes: think (the model) and act (the tool), each an
// activity, with the task's own workflow around them.
func BenchmarkAgentStep(b *testing.B) {
	s := startStack(b, stackOptions{extraEnv: []string{"CTXFLOW_MODEL_PROVIDER=offline"}})
	s.startWorker()
	ctx := b.Context()
	var perStep []time.Duration
	for i := 0; b.Loop(); i++ {
		start := time.Now()
		res, err := s.task(ctx, fmt.Sprintf("agent-%d", i), map[string]any{
			"goal": "How many rows does each table of the shop have?", "config": map[string]int{"maxSteps": 30},
		})
		took := time.Since(start)
		if err != nil || res.Task == nil || res.Task.Status != workflows.TaskFinished || res.Task.Step == 0 {
			b.Fatalf("task %d: %v %+v", i, err, res.Task)
		}
		perStep = append(perStep, took/time.Duration(res.Task.Step))
		b.ReportMetric(float64(res.Task.Step), "steps")
	}
	reportLatency(b, perStep)
}

// BenchmarkLongSession measures whole chat turns on a session of 100,000
// messages (CTXFLOW_BENCH_LONG_MESSAGES), imported as JSONL, against a
// session of 10, both steady (p50 of b.N turns each), then the first turn
// on the long one after the worker is restarted, and after it crashed:
// its transcript read cold.
func BenchmarkLongSession(b *testing.B) {
	n := envCount(b, "CTXFLOW_BENCH_LONG_MESSAGES", 100_000, 10)
	s := startStack(b, stackOptions{})
	s.startWorker()
	ctx := b.Context()
	for _, sess := range []struct {
		id string
		n  int
	}{{"short", 10}, {"long", n}} {
		start := time.Now()
		code, err := s.do(ctx, http.MethodPost, "/v1/sessions/import?sessionId="+sess.id, syntheticTranscript(b, sess.n), nil)
		if err != nil || code != http.StatusCreated {
			b.Fatalf("import %d messages: %d %v", sess.n, code, err)
		}
		b.Logf("imported %d messages in %s", sess.n, time.Since(start).Round(time.Millisecond))
	}
	steady := func(id string) []time.Duration {
		for i := range 3 { // warm up: the session's summary catches up with the import
			if _, _, err := s.turn(ctx, id, fmt.Sprintf("w%d", i), "hello again"); err != nil {
				b.Fatal(err)
			}
		}
		var out []time.Duration
		for i := range b.N {
			start := time.Now()
			if res, _, err := s.turn(ctx, id, fmt.Sprintf("s%d", i), fmt.Sprintf("question %d", i)); err != nil || res.Status != workflows.TurnCompleted {
				b.Fatalf("%s turn %d: %v %+v", id, i, err, res)
			}
			out = append(out, time.Since(start))
		}
		return out
	}
	b.ResetTimer()
	short, long := quantile(steady("short"), 0.5), quantile(steady("long"), 0.5)
	b.StopTimer()
	// After a restart the transcript is read cold. A deploy stops the
	// worker (SIGTERM), which hands the session back at once; after a
	// crash (SIGKILL) the new worker unloads the dead one's sticky queue
	// (worker.StickyQueues; else the server waits out its 5 s timeout).
	cold := func(stop func(), id string) time.Duration {
		stop()
		s.startWorker()
		s.waitWorkerReady()
		start := time.Now()
		if res, _, err := s.turn(ctx, "long", id, "after a restart"); err != nil || res.Status != workflows.TurnCompleted {
			b.Fatalf("turn %s: %v %+v", id, err, res)
		}
		return time.Since(start)
	}
	restart, crash := cold(s.stopWorker, "restart"), cold(s.killWorker, "crash")
	b.ReportMetric(ms(short), "short-p50-ms")
	b.ReportMetric(ms(long), "long-p50-ms")
	b.ReportMetric(ms(long)/ms(short), "long/short")
	b.ReportMetric(ms(restart), "cold-after-restart-ms")
	b.ReportMetric(ms(crash), "cold-after-crash-ms")
}

// syntheticTranscript is a linear conversation of n messages as JSONL.
func syntheticTranscript(b *testing.B, n int) []byte {
	msgs := make([]convo.Message, n)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range msgs {
		m := convo.Message{ID: fmt.Sprintf("m%d", i), Role: convo.RoleUser, CreatedAt: t0.Add(time.Duration(i) * time.Second),
			Content: fmt.Sprintf("user message %d: what about item %d of the catalogue?", i, i)}
		if i%2 == 1 {
			m.Role, m.Content = convo.RoleAssistant, fmt.Sprintf("assistant message %d: item %d costs %d euros.", i, i-1, i%97)
		}
		if i > 0 {
			m.ParentID = msgs[i-1].ID
		}
		msgs[i] = m
	}
	var buf bytes.Buffer
	if err := convo.EncodeJSONL(&buf, msgs); err != nil {
		b.Fatal(err)
	}
	return buf.Bytes()
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// BenchmarkPromptTokens drives one session (offline engine, the default
// window and summary) through 200 turns (CTXFLOW_BENCH_FACT_TURNS), ten of
// them planting a fact ("the code of locker N is M"), and reports the
// prompt tokens a turn sends against what the whole history would cost,
// and the share of the planted facts still in the model view at the end
// (the running summary and the window, read from the transcript).
func BenchmarkPromptTokens(b *testing.B) {
	turns := envCount(b, "CTXFLOW_BENCH_FACT_TURNS", 200, 20)
	s := startStack(b, stackOptions{extraEnv: []string{"CTXFLOW_MODEL_PROVIDER=offline"}})
	s.startWorker()
	for n := 0; b.Loop(); n++ {
		promptTokens(b, s, fmt.Sprintf("facts-%d", n), turns)
	}
}

func promptTokens(b *testing.B, s *stack, id string, turns int) {
	ctx := b.Context()
	var facts []string
	var prompt, full, window float64
	for i := range turns {
		q := fmt.Sprintf("Tell me something about subject %d, please, in a few words.", i)
		if i%(turns/10) == 3 {
			code := fmt.Sprintf("%d", 7000+i*37)
			facts = append(facts, code)
			q = fmt.Sprintf("Please remember this: the code of locker %d is %s.", i, code)
		}
		res, _, err := s.turn(ctx, id, fmt.Sprintf("f%d", i), q)
		if err != nil || res.Status != workflows.TurnCompleted {
			b.Fatalf("turn %d: %v %+v", i, err, res)
		}
		for _, st := range res.Steps {
			if st.Name == "load_context" {
				prompt += num(st.Details["tokensAfter"])
				full += num(st.Details["tokensBefore"])
				window = num(st.Details["windowMessages"])
			}
		}
	}
	var st workflows.SessionState
	if _, err := s.do(ctx, http.MethodGet, "/v1/sessions/"+id, nil, &st); err != nil {
		b.Fatal(err)
	}
	s.stopWorker() // the transcript files are the worker's while it runs
	store, err := transcript.Open(transcript.Options{Dir: filepath.Join(s.dataDir, "transcripts")})
	if err != nil {
		b.Fatal(err)
	}
	branch, err := store.Branch(ctx, activities.SessionKey{Tenant: workflows.DefaultTenant, SessionID: id}, st.ActiveLeaf)
	_ = store.Close()
	s.startWorker()
	if err != nil {
		b.Fatal(err)
	}
	// The model view: the newest running summary and the window's messages.
	var view strings.Builder
	for i := len(branch) - 1; i >= 0; i-- {
		if branch[i].Role == convo.RoleSummary {
			view.WriteString(branch[i].Content)
			break
		}
	}
	kept := 0
	for _, m := range branch[max(0, len(branch)-int(window)):] {
		view.WriteString("\n" + m.Content)
	}
	for _, f := range facts {
		if strings.Contains(view.String(), f) {
			kept++
		}
	}
	b.ReportMetric(prompt/float64(turns), "prompt-tokens/turn")
	b.ReportMetric(full/float64(turns), "history-tokens/turn")
	b.ReportMetric(prompt/full, "prompt/history")
	b.ReportMetric(float64(kept)/float64(len(facts)), "facts-in-view")
}

func num(v any) float64 {
	f, _ := v.(float64)
	return f
}
