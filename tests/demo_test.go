package tests

import (
	"context"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"github.com/ctxflow/ctxflow/demo"
	"github.com/ctxflow/ctxflow/lexical"
	"github.com/ctxflow/ctxflow/workflows"
)

// TestDevDemoKnowledgeBase is the first run of a newcomer: `ctxflow dev`
// on a new data dir, offline engine, CTXFLOW_DEMO_DOCS unset. The demo
// pages are in the knowledge base before the ready banner, each through
// one ingestion workflow; the seed's Mate60 conversation is answered from
// them (介绍下华为Mate60, then the follow-up 它多少钱？ rewritten to the
// Mate60 and answered with its price), and so is What is ctxflow?. A
// restart (after SIGKILL) ingests nothing again: the same ingestion run of
// every page, one log line of the demo's ingestion in both starts' log.
func TestDevDemoKnowledgeBase(t *testing.T) {
	pages, err := fs.Glob(demo.Pages, "*.md")
	if err != nil || len(pages) < 3 {
		t.Fatalf("demo pages %v: %v", pages, err)
	}
	dir := t.TempDir()
	httpPort, temporalPort := freePort(t), freePort(t)
	env := []string{
		fmt.Sprintf("CTXFLOW_HTTP_ADDR=127.0.0.1:%d", httpPort),
		"CTXFLOW_UI_PORT=0",
		fmt.Sprintf("CTXFLOW_TEMPORAL_PORT=%d", temporalPort),
		"CTXFLOW_DATA_DIR=" + dir,
		"CTXFLOW_MODEL_PROVIDER=offline",
		"CTXFLOW_DEMO_DOCS=", // blank: the default, builtin (startDev turns it off)
	}
	api := apiClient{base: fmt.Sprintf("http://127.0.0.1:%d", httpPort)}
	log := filepath.Join(dir, "dev.log")
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()

	cmd, _ := startDev(t, env, api, log)
	waitBanner(t, log, 1)
	c, err := client.DialContext(ctx, client.Options{
		HostPort: fmt.Sprintf("127.0.0.1:%d", temporalPort), Logger: sdklog.NewStructuredLogger(quietLogger()),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	runs := map[string]string{}
	for _, p := range pages {
		d, err := c.DescribeWorkflowExecution(ctx, workflows.IngestWorkflowID(p), "")
		if err != nil {
			t.Fatalf("page %s: no ingestion workflow: %v\n%s", p, err, tailFile(log, 4000))
		}
		if st := d.GetWorkflowExecutionInfo().GetStatus().String(); st != "Completed" {
			t.Errorf("page %s: ingestion %s", p, st)
		}
		runs[p] = d.GetWorkflowExecutionInfo().GetExecution().GetRunId()
		var doc struct {
			Status string `json:"status"`
		}
		if code, err := api.do(ctx, http.MethodGet, "/v1/documents/"+p, nil, &doc); code != http.StatusOK || doc.Status != "completed" {
			t.Errorf("GET /v1/documents/%s: %d %v %+v", p, code, err, doc)
		}
	}

	ask := func(session, turnID, question string, want ...string) workflows.TurnResult {
		t.Helper()
		res, _, err := api.turn(ctx, session, turnID, question)
		if err != nil || res.Status != workflows.TurnCompleted {
			t.Fatalf("%s %q: %v %+v\n%s", turnID, question, err, res, tailFile(log, 4000))
		}
		t.Logf("%s %q (rewritten %q) →\n%s", turnID, question, res.RewrittenQuery, res.Answer)
		for _, w := range want {
			if !strings.Contains(res.Answer, w) {
				t.Errorf("%s %q: the answer lacks %q:\n%s", turnID, question, w, res.Answer)
			}
		}
		return res
	}
	intro := ask("mate60", "t1", "介绍下华为Mate60", "麒麟9000s", "[huawei-mate60.md#")
	if !strings.HasPrefix(intro.Answer, lexical.LabelZH) {
		t.Errorf("not answered in Chinese:\n%s", intro.Answer)
	}
	price := ask("mate60", "t2", "它多少钱？", "5999元", "[huawei-mate60.md#")
	if !strings.Contains(price.RewrittenQuery, "Mate60") {
		t.Errorf("它多少钱？ rewritten %q, without the Mate60", price.RewrittenQuery)
	}
	if strings.Contains(price.Answer, "知识库中没有") || strings.Contains(price.Answer, "5499元") {
		t.Errorf("它多少钱？ not answered from the Mate60's page:\n%s", price.Answer)
	}
	ask("mate60", "t3", "它的续航怎么样？", "4750毫安时")
	ask("kb", "e1", "What is ctxflow?", "keeps the context of multi-turn conversations", "[ctxflow.md#")

	killDev(t, cmd)
	startDev(t, env, api, log)
	waitBanner(t, log, 2)
	for _, p := range pages {
		d, err := c.DescribeWorkflowExecution(ctx, workflows.IngestWorkflowID(p), "")
		if err != nil {
			t.Fatal(err)
		}
		if run := d.GetWorkflowExecutionInfo().GetExecution().GetRunId(); run != runs[p] {
			t.Errorf("page %s ingested again after the restart (run %s, then %s)", p, runs[p], run)
		}
	}
	out, _ := os.ReadFile(log)
	if n := strings.Count(string(out), "demo knowledge base ingested"); n != 1 {
		t.Errorf("the demo knowledge base was ingested %d times in two starts:\n%s", n, tail(string(out), 4000))
	}
	if _, err := os.Stat(filepath.Join(dir, "demo", "kb.pending")); err == nil {
		t.Error("kb.pending is still there")
	}
	ask("mate60", "t4", "它的屏幕多大？", "6.69英寸")
}

// waitBanner waits until the log holds n ready banners of `ctxflow dev`,
// which it prints once the demo knowledge base is in.
func waitBanner(t *testing.T, log string, n int) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
		out, _ := os.ReadFile(log)
		if strings.Count(string(out), "ctxflow dev ready in") >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no ready banner %d of ctxflow dev:\n%s", n, tail(string(out), 4000))
		}
	}
}
