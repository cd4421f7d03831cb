package tests

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/ctxflow/ctxflow/workflows"
)

// TestTenantApproveTools: CTXFLOW_APPROVE_TOOLS names tools whose calls
// wait for approval for every session of a tenant, whatever the session's
// own approveTools (an empty list does not remove them); another tenant's
// same task runs the call at once. Through `ctxflow dev` on the offline
// engine, whose planner answers the shop question with run_sql.
func TestTenantApproveTools(t *testing.T) {
	dir := t.TempDir()
	httpPort := freePort(t)
	env := []string{
		fmt.Sprintf("CTXFLOW_HTTP_ADDR=127.0.0.1:%d", httpPort),
		fmt.Sprintf("CTXFLOW_UI_PORT=%d", freePort(t)),
		fmt.Sprintf("CTXFLOW_TEMPORAL_PORT=%d", freePort(t)),
		"CTXFLOW_DATA_DIR=" + dir,
		"CTXFLOW_MODEL_PROVIDER=offline",
		"CTXFLOW_APPROVE_TOOLS=acme=run_sql, mcp:*",
	}
	api := apiClient{base: fmt.Sprintf("http://127.0.0.1:%d", httpPort)}
	startDev(t, env, api, filepath.Join(dir, "dev.log"))
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	goal := map[string]any{"goal": "How many customers live in 'Berlin'?", "taskId": "berlin"}
	for _, tc := range []struct {
		tenant string
		want   string
	}{{"acme", workflows.TypeApproval}, {"other", workflows.TypeFinish}} {
		as := api
		as.tenant = tc.tenant
		if code, err := as.do(ctx, http.MethodPost, "/v1/sessions", map[string]any{"sessionId": "ops", "config": map[string]any{"approveTools": []string{}}}, nil); code != http.StatusCreated {
			t.Fatalf("%s: create session: %d %v", tc.tenant, code, err)
		}
		var res taskReply
		if code, err := as.do(ctx, http.MethodPost, "/v1/sessions/ops/tasks?wait=true", goal, &res); code != http.StatusOK || res.Type != tc.want {
			t.Fatalf("%s: task: %d %v %+v, want type %s", tc.tenant, code, err, res, tc.want)
		}
		if tc.want == workflows.TypeApproval && (len(res.Pending) != 1 || res.Pending[0].Tool != "run_sql") {
			t.Errorf("%s: pending %+v, want the run_sql call", tc.tenant, res.Pending)
		}
	}
}
