package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
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

	post := func(tenant, path string, body any, out any) int {
		t.Helper()
		b, _ := json.Marshal(body)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, api.base+path, bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Tenant-ID", tenant)
		resp, err := httpClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		if out != nil {
			if err := json.Unmarshal(data, out); err != nil {
				t.Fatalf("%s %s: %d %s", tenant, path, resp.StatusCode, data)
			}
		}
		return resp.StatusCode
	}
	goal := map[string]any{"goal": "How many customers live in 'Berlin'?", "taskId": "berlin"}
	for _, tc := range []struct {
		tenant string
		want   string
	}{{"acme", workflows.TypeApproval}, {"other", workflows.TypeFinish}} {
		if code := post(tc.tenant, "/v1/sessions", map[string]any{"sessionId": "ops", "config": map[string]any{"approveTools": []string{}}}, nil); code != http.StatusCreated {
			t.Fatalf("%s: create session: %d", tc.tenant, code)
		}
		var res taskReply
		if code := post(tc.tenant, "/v1/sessions/ops/tasks?wait=true", goal, &res); code != http.StatusOK || res.Type != tc.want {
			t.Fatalf("%s: task: %d %+v, want type %s", tc.tenant, code, res, tc.want)
		}
		if tc.want == workflows.TypeApproval && (len(res.Pending) != 1 || res.Pending[0].Tool != "run_sql") {
			t.Errorf("%s: pending %+v, want the run_sql call", tc.tenant, res.Pending)
		}
	}
}
