package tests

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/tests/fakeollama"
	"github.com/ctxflow/ctxflow/worker"
	"github.com/ctxflow/ctxflow/workflows"
)

// BenchmarkTurn measures a whole turn through Temporal — update-with-start,
// load context, generate (an instant fake model), save — against the
// embedded server and a `ctxflow worker` process: the orchestration cost
// per turn (docs/architecture.md §9, target ≤ 25 ms p50). It reports p50 and p99.
func BenchmarkTurn(b *testing.B) {
	s := startStack(b, stackOptions{})
	s.startWorker()
	benchTurns(b, s, func(i int) string { return fmt.Sprintf("question %d", i) })
}

// BenchmarkQATurn measures a turn on the qa route over the ingested README
// with the offline engine: load context, rewrite the question, the
// corrective child workflow (retrieve, grade every document in parallel
// activities, generate), save. The question passes the grader in one
// round, so this is the loop's floor.
func BenchmarkQATurn(b *testing.B) {
	s := startStack(b, stackOptions{extraEnv: []string{"CTXFLOW_MODEL_PROVIDER=offline"}})
	s.startWorker()
	s.ingestREADME(b)
	benchTurns(b, s, func(int) string { return "Which vector stores can hold the knowledge base?" })
}

// warmTurns are the turns benchTurns runs before it measures.
const warmTurns = 5

// benchTurns runs turns of one session and reports their p50 and p99.
func benchTurns(b *testing.B, s *stack, question func(i int) string) {
	ctx := b.Context()
	in := workflows.SessionInput{Tenant: workflows.DefaultTenant, SessionID: "bench", Config: []byte(`{"enableSummarization": false}`),
		Limits: workflows.DefaultLimits()} // as the API starts sessions
	opts := client.StartWorkflowOptions{
		ID: workflows.SessionWorkflowID(in.Tenant, in.SessionID), TaskQueue: workflows.TaskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
	}
	turn := func(i int) time.Duration {
		start := time.Now()
		req := workflows.TurnRequest{TurnID: fmt.Sprintf("b%d", i), Question: question(i)}
		var res workflows.TurnResult
		send := func() error {
			h, err := s.client.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
				StartWorkflowOperation: s.client.NewWithStartWorkflowOperation(opts, workflows.SessionWorkflowName, in),
				UpdateOptions: client.UpdateWorkflowOptions{
					UpdateID: req.TurnID, UpdateName: workflows.UpdateTurn, Args: []any{req},
					WaitForStage: client.WorkflowUpdateStageCompleted,
				},
			})
			if err != nil {
				return err
			}
			return h.Get(ctx, &res)
		}
		// As the API does (whileNotReady), an update whose workflow task
		// failed is sent again, and said so.
		err := send()
		for try := 1; try < 10 && errors.As(err, new(*serviceerror.WorkflowNotReady)); try++ {
			b.Logf("turn %d sent again: %v", i, err)
			time.Sleep(50 * time.Millisecond)
			err = send()
		}
		if err != nil || res.Status != workflows.TurnCompleted {
			b.Fatalf("turn %d: %v %+v", i, err, res)
		}
		return time.Since(start)
	}
	for i := range warmTurns { // warm up: worker connections, sticky cache
		turn(-1 - i)
	}
	var durations []time.Duration
	for i := 0; b.Loop(); i++ {
		durations = append(durations, turn(i))
	}
	reportLatency(b, durations)
}

// BenchmarkTurnPipeline runs the chat turn's three steps — load context,
// generate (the same instant fake model as BenchmarkTurn), save — as the
// worker's own activities called in process, without Temporal:
// BenchmarkTurn's p50 over this one is the orchestration overhead.
func BenchmarkTurnPipeline(b *testing.B) {
	fake := httptest.NewServer(fakeollama.New(fakeollama.Options{}))
	b.Cleanup(fake.Close)
	ports := buildPorts(b, "OLLAMA_HOST="+fake.URL, "CTXFLOW_DATA_DIR="+b.TempDir(), "CTXFLOW_MODEL_PROVIDER=ollama",
		"CTXFLOW_TRANSCRIPT_FSYNC=false", "CTXFLOW_LOG_LEVEL=warn")
	var env testsuite.WorkflowTestSuite
	act := env.NewTestActivityEnvironment()
	act.RegisterActivity(ports.Session)
	sc := workflows.DefaultSessionConfig()
	sc.EnableSummarization = false
	key := activities.SessionKey{Tenant: workflows.DefaultTenant, SessionID: "bench"}
	parent := ""
	turn := func(i int) time.Duration {
		start := time.Now()
		id := fmt.Sprintf("b%d", i)
		var lc activities.LoadContextResult
		v, err := act.ExecuteActivity(ports.Session.LoadContext, activities.LoadContextInput{
			Session: key, TurnID: id, Question: fmt.Sprintf("question %d", i), ParentID: parent,
			Window: sc.Window(), SystemPrompt: sc.SystemPrompt, ReceivedAt: start,
		})
		if err == nil {
			err = v.Get(&lc)
		}
		var gen activities.GenerateResult
		if err == nil {
			v, err = act.ExecuteActivity(ports.Session.Generate, activities.GenerateInput{
				Session: key, TurnID: id, WindowIDs: lc.WindowIDs, SystemPrompt: sc.SystemPrompt, Model: sc.LLMModel,
			})
		}
		if err == nil {
			err = v.Get(&gen)
		}
		var saved activities.SaveAnswerResult
		if err == nil {
			v, err = act.ExecuteActivity(ports.Session.SaveAnswer, activities.SaveAnswerInput{
				Session: key, TurnID: id, ParentID: lc.UserMessageID, Answer: gen.Answer, Model: gen.Model, Engine: gen.Engine,
				CreatedAt: time.Now(), Window: sc.Window(), SummaryConfig: sc.Summary(),
			})
		}
		if err == nil {
			err = v.Get(&saved)
		}
		if err != nil || gen.Answer == "" {
			b.Fatalf("turn %d: %v %+v", i, err, gen)
		}
		parent = saved.MessageID
		return time.Since(start)
	}
	for i := range 5 {
		turn(-1 - i)
	}
	var durations []time.Duration
	for i := 0; b.Loop(); i++ {
		durations = append(durations, turn(i))
	}
	reportLatency(b, durations)
}

// reportLatency reports the p50 and p99 of durations in milliseconds.
func reportLatency(b *testing.B, durations []time.Duration) {
	b.ReportMetric(ms(quantile(durations, 0.5)), "p50-ms")
	b.ReportMetric(ms(quantile(durations, 0.99)), "p99-ms")
}

// quantile is the q-quantile of durations (sorted in place).
func quantile(durations []time.Duration, q float64) time.Duration {
	slices.Sort(durations)
	return durations[min(len(durations)-1, int(q*float64(len(durations))))]
}

// BenchmarkTurnSlowModel is BenchmarkTurn with a model that takes 1 s: the
// orchestration's share of a realistic turn.
func BenchmarkTurnSlowModel(b *testing.B) {
	s := startStack(b, stackOptions{modelDelay: time.Second})
	s.startWorker()
	before := s.model.Calls().Chat
	benchTurns(b, s, func(i int) string { return fmt.Sprintf("question %d", i) })
	// Every call waits the second: a turn's intent is a call of its own.
	b.ReportMetric(float64(s.model.Calls().Chat-before)/float64(warmTurns+b.N), "model-calls/turn")
}

// BenchmarkThroughput sends b.N chat turns (`?wait=true`, instant fake
// model) through the HTTP API from 1, 10 and 100 sessions at once, each
// session's turns one after another, and reports turns/s and the worker
// process's peak RSS.
func BenchmarkThroughput(b *testing.B) {
	for _, sessions := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("sessions=%d", sessions), func(b *testing.B) {
			s := startStack(b, stackOptions{})
			s.startWorker()
			startSessions(b, s, sessions)
			workerCPU, stackCPU := cpuTime(s.worker.Process.Pid), cpuTime(os.Getpid())
			b.ResetTimer()
			took := driveTurns(b, s, sessions)
			b.ReportMetric(float64(b.N)/took.Seconds(), "turns/s")
			// Where the CPU goes: the worker process, and this one (the
			// embedded server, the API, the fake model and the clients).
			b.ReportMetric(float64(cpuTime(s.worker.Process.Pid)-workerCPU)/float64(time.Millisecond)/float64(b.N), "worker-cpu-ms/turn")
			b.ReportMetric(float64(cpuTime(os.Getpid())-stackCPU)/float64(time.Millisecond)/float64(b.N), "server-api-cpu-ms/turn")
			b.ReportMetric(float64(peakRSS(s.worker.Process.Pid))/(1<<20), "worker-rss-MB")
		})
	}
}

// BenchmarkInProcess is BenchmarkThroughput's 10 sessions with the worker
// in this process, so that one CPU profile holds a turn's every part (the
// server, the API, the worker, the fake model and the clients): `make
// profile` runs it and tells the parts apart (bench/profile).
func BenchmarkInProcess(b *testing.B) {
	s := startStack(b, stackOptions{})
	w := worker.New(s.client, s.inProcessPorts(b), 0, worker.Version{})
	if err := w.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(w.Stop)
	startSessions(b, s, 10)
	cpu := cpuTime(os.Getpid())
	b.ResetTimer()
	took := driveTurns(b, s, 10)
	b.ReportMetric(float64(b.N)/took.Seconds(), "turns/s")
	b.ReportMetric(float64(cpuTime(os.Getpid())-cpu)/float64(time.Millisecond)/float64(b.N), "cpu-ms/turn")
}

// startSessions starts n sessions tp-000 … with a first turn each.
func startSessions(b *testing.B, s *stack, n int) {
	for i := range n {
		if _, _, err := s.turn(b.Context(), fmt.Sprintf("tp-%03d", i), "warm", "hello"); err != nil {
			b.Fatal(err)
		}
	}
}

// driveTurns sends b.N chat turns from the n sessions of startSessions at
// once, each session's one after another, and returns how long they took.
func driveTurns(b *testing.B, s *stack, n int) time.Duration {
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		wg.Go(func() {
			for j := 0; next.Add(1) <= int64(b.N); j++ {
				res, _, err := s.turn(b.Context(), fmt.Sprintf("tp-%03d", i), fmt.Sprintf("t%d", j), fmt.Sprintf("question %d", j))
				if err != nil || res.Status != workflows.TurnCompleted {
					b.Errorf("turn: %v %+v", err, res)
					return
				}
			}
		})
	}
	wg.Wait()
	return time.Since(start)
}

// peakRSS is a process's peak resident set size in bytes (VmHWM), 0 if
// unknown.
func peakRSS(pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// cpuTime is the user and system CPU a process has used (Linux
// /proc/PID/stat, clock ticks of 10 ms), 0 if unknown.
func cpuTime(pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	_, rest, ok := strings.Cut(string(data), ") ") // the command may hold spaces
	if !ok {
		return 0
	}
	f := strings.Fields(rest) // state is field 3 of stat; utime 14, stime 15
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// BenchmarkHistory drives one session through 1,000 turns
// (CTXFLOW_BENCH_HISTORY_TURNS; the sessions' default continue-as-new
// every 100 turns) and reports the history bytes and events a turn adds at
// turns 10, 100 and 1,000 (the mean over turns p-4 … p-1, within one run),
// the number of continue-as-new, and the largest run seen.
func BenchmarkHistory(b *testing.B) {
	turns := envCount(b, "CTXFLOW_BENCH_HISTORY_TURNS", 1000, 10)
	s := startStack(b, stackOptions{})
	s.startWorker()
	ctx := b.Context()
	wid := workflows.SessionWorkflowID(workflows.DefaultTenant, "hist")
	type point struct {
		run           string
		bytes, events int
	}
	measure := func() point {
		desc, err := s.client.DescribeWorkflowExecution(ctx, wid, "")
		if err != nil {
			b.Fatal(err)
		}
		n, run, err := historyBytes(ctx, s, wid)
		if err != nil {
			b.Fatal(err)
		}
		return point{run, n, int(desc.GetWorkflowExecutionInfo().GetHistoryLength())}
	}
	largest := 0
	for b.Loop() {
		before := map[int]point{}
		for i := 1; i <= turns; i++ {
			if res, _, err := s.turn(ctx, "hist", fmt.Sprintf("t%d", i), fmt.Sprintf("question number %d", i)); err != nil || res.Status != workflows.TurnCompleted {
				b.Fatalf("turn %d: %v %+v", i, err, res)
			}
			if i%100 == 99 { // the largest history of a run: the next turn may continue as new
				largest = max(largest, measure().bytes)
			}
			for _, at := range []int{10, 100, 1000} {
				switch i {
				case at - 5:
					before[at] = measure()
				case at - 1:
					p := measure()
					if p.run != before[at].run {
						b.Logf("turn %d: the session continued as new since turn %d; no figure at turn %d", i, at-5, at)
						continue
					}
					b.ReportMetric(float64(p.bytes-before[at].bytes)/4, "bytes/turn@"+strconv.Itoa(at))
					b.ReportMetric(float64(p.events-before[at].events)/4, "events/turn@"+strconv.Itoa(at))
				}
			}
		}
		var st workflows.SessionState
		if _, err := s.do(ctx, http.MethodGet, "/v1/sessions/hist", nil, &st); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(st.Runs), "continue-as-new") // runs after the first: no revive here
	}
	b.ReportMetric(float64(largest), "largest-history-bytes")
}
