package tests

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ctxflow/ctxflow/internal/freeport"
	"github.com/ctxflow/ctxflow/workflows"
)

// cluster is `make cluster` (scripts/cluster.sh) in a temporary directory,
// on free ports: PostgreSQL, a Temporal server on it with its Web UI, two
// `ctxflow worker` processes and `ctxflow api`, each a process of its own.
type cluster struct {
	t   testing.TB
	dir string
	env []string
	apiClient
	uiURL string
}

// clusterProcs are the processes the script starts, by the names of their
// logs and pid files.
var clusterProcs = []string{"temporal", "worker-a", "worker-b", "api"}

// startCluster starts a cluster whose processes see env too, and stops it
// when the test ends. It fails the test if any part cannot start.
func startCluster(t testing.TB, env ...string) *cluster {
	t.Helper()
	var ports [3]int
	for i := range ports {
		p, err := freeport.Port("127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = p
	}
	// Not t.TempDir: PostgreSQL runs as another user when the tests run
	// as root, and must reach the directory (t.TempDir's parent is 0700).
	dir, err := os.MkdirTemp("", "ctxflow-cluster-*")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	c := &cluster{t: t, dir: dir, uiURL: fmt.Sprintf("http://127.0.0.1:%d", ports[1])}
	c.apiClient = apiClient{base: fmt.Sprintf("http://127.0.0.1:%d", ports[2])}
	c.env = append(os.Environ(), "CTXFLOW_BIN="+binary,
		"CLUSTER_TEMPORAL_PORT="+strconv.Itoa(ports[0]), "CLUSTER_UI_PORT="+strconv.Itoa(ports[1]), "CLUSTER_API_PORT="+strconv.Itoa(ports[2]))
	c.env = append(c.env, env...)
	t.Cleanup(func() {
		if out, err := c.script("stop"); err != nil {
			t.Errorf("cluster.sh stop: %v\n%s", err, out)
		}
	})
	c.start()
	return c
}

// start runs cluster.sh start: everything that does not run is started.
func (c *cluster) start() {
	c.t.Helper()
	if out, err := c.script("start"); err != nil {
		c.t.Fatalf("cluster.sh start: %v\n%s\n%s", err, out, c.logs())
	}
}

func (c *cluster) script(verb string) ([]byte, error) {
	_, self, _, _ := runtime.Caller(0)
	cmd := exec.Command(filepath.Join(filepath.Dir(filepath.Dir(self)), "scripts", "cluster.sh"), verb, c.dir)
	cmd.Env = c.env
	return cmd.CombinedOutput()
}

// pid is the process id of one of clusterProcs.
func (c *cluster) pid(name string) int {
	pid, err := strconv.Atoi(strings.TrimSpace(readFile(filepath.Join(c.dir, name+".pid"))))
	if err != nil {
		c.t.Fatalf("pid of %s: %v", name, err)
	}
	return pid
}

// kill sends SIGKILL to one of clusterProcs.
func (c *cluster) kill(name string) {
	c.t.Helper()
	if err := syscall.Kill(c.pid(name), syscall.SIGKILL); err != nil {
		c.t.Fatalf("kill %s: %v", name, err)
	}
}

// logs is the end of every process's log.
func (c *cluster) logs() string {
	var b strings.Builder
	for _, name := range clusterProcs {
		fmt.Fprintf(&b, "--- %s ---\n%s", name, tail(readFile(filepath.Join(c.dir, name+".log")), 2000))
	}
	return b.String()
}

// TestClusterKill is the bounded kill test of `make cluster`: turns of a
// few sessions run while one worker is killed (SIGKILL) and then the
// Temporal server is killed and started again (cluster.sh start, which
// also brings the worker back); an agent task paused at its step limit
// before both continues after them. Every turn is answered, and stored,
// exactly once, and the task's steps run once each.
func TestClusterKill(t *testing.T) {
	const sessions, turns = 4, 8
	begin := time.Now()
	c := startCluster(t, "CTXFLOW_MODEL_PROVIDER=offline")
	t.Logf("cluster up in %s", time.Since(begin).Round(time.Millisecond))
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if code, err := c.do(ctx, http.MethodGet, "/readyz", nil, nil); err != nil {
		t.Fatalf("API /readyz: %d %v", code, err)
	}
	if resp, err := http.Get(c.uiURL); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("Temporal UI at %s: %v %v", c.uiURL, resp, err)
	} else {
		_ = resp.Body.Close()
	}

	const goal = "How many rows does each table of the shop have?"
	res, err := c.task(ctx, "shop", map[string]any{"goal": goal, "taskId": "rows"})
	if err != nil || res.Type != workflows.TypePause || res.Task == nil || res.Task.Step != 12 {
		t.Fatalf("task: %v %+v\n%s", err, res, c.logs())
	}

	var done atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, sessions)
	for i := range sessions {
		wg.Go(func() {
			sid := fmt.Sprintf("kill-%d", i)
			for j := range turns {
				res, _, err := c.turn(ctx, sid, fmt.Sprintf("t%d", j), fmt.Sprintf("question %d of session %d", j, i))
				if err != nil || res.Status != workflows.TurnCompleted || res.Answer == "" {
					errs <- fmt.Errorf("%s turn %d: %v %+v", sid, j, err, res)
					return
				}
				done.Add(1)
				time.Sleep(100 * time.Millisecond) // spread the turns over the kills
			}
		})
	}
	await := func(n int64) {
		for done.Load() < n {
			if ctx.Err() != nil {
				t.Fatalf("%d turns answered, waiting for %d\n%s", done.Load(), n, c.logs())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	await(sessions)
	c.kill("worker-a")
	t.Logf("killed worker-a after %d turns", done.Load())
	await(2 * sessions)
	old := c.pid("temporal")
	c.kill("temporal")
	t.Logf("killed the Temporal server after %d turns", done.Load())
	time.Sleep(500 * time.Millisecond) // turns fail and are retried meanwhile
	restart := time.Now()
	c.start()
	t.Logf("cluster.sh start brought the server and worker-a back in %s", time.Since(restart).Round(time.Millisecond))
	if c.pid("temporal") == old {
		t.Fatal("the Temporal server was not restarted")
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.Fatal(c.logs())
	}

	// Each turn once in each transcript (PostgreSQL, read through the API):
	// t0.u t0.a t1.u ... and nothing else.
	for i := range sessions {
		sid := fmt.Sprintf("kill-%d", i)
		var msgs struct {
			Messages []struct{ ID string } `json:"messages"`
		}
		if _, err := c.do(ctx, http.MethodGet, "/v1/sessions/"+sid+"/messages", nil, &msgs); err != nil {
			t.Fatalf("%s messages: %v", sid, err)
		}
		var got, want []string
		for j := range turns {
			want = append(want, fmt.Sprintf("t%d.u", j), fmt.Sprintf("t%d.a", j))
		}
		for _, m := range msgs.Messages {
			got = append(got, m.ID)
		}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("%s transcript %v, want %v", sid, got, want)
		}
	}

	// The paused task survived both and finishes, each step run once.
	res, _, err = c.turn(ctx, "shop", "go-on", "continue")
	if err != nil || res.Type != workflows.TypeFinish || !strings.Contains(res.Answer, "14 tables") {
		t.Fatalf("continue: %v %+v\n%s", err, res, c.logs())
	}
	st, err := c.taskState(ctx, "shop", "rows")
	if err != nil || st.Status != workflows.TaskFinished {
		t.Fatalf("task after continue: %v %+v", err, st)
	}
	checkSteps(t, st)
}
