package tests

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/converter"

	"github.com/ctxflow/ctxflow/workflows"
)

// TestIntentsRouteTurns drives seed 002's intents over HTTP with the
// offline engine: small talk is chitchat and skips retrieval, a question
// is qa through the corrective loop, a data request starts the agent, a
// vague one is answered with one question back; the state keeps the
// intent history (seed 002's entries) and the last intent, which is the CtxLastIntent search
// attribute too. (Every turn had "intent": null.)
func TestIntentsRouteTurns(t *testing.T) {
	s := startStack(t, stackOptions{extraEnv: []string{"CTXFLOW_MODEL_PROVIDER=offline"}})
	s.startWorker()
	s.ingestREADME(t)
	ctx := t.Context()
	for _, tc := range []struct {
		q, label, route, step string
	}{
		{"你好", "chitchat", "chat", "generate"},
		{"What is ctxflow?", "qa", "qa", "corrective_rag"},
		{"统计每个国家的客户数量", "task", "task", "task"},
		{"这个怎么办", "clarify", "clarify", "clarify"},
	} {
		res, _, err := s.turn(ctx, "intents", "t-"+tc.label, tc.q)
		if err != nil || res.Status != workflows.TurnCompleted {
			t.Fatalf("%q: %v %+v\n%s", tc.q, err, res, s.workerLogs())
		}
		it := res.Intent
		if it == nil || it.Label != tc.label || it.Route != tc.route || it.FellBack || it.Confidence < workflows.LeaveQAThreshold {
			t.Errorf("%q: intent %+v, want %s routed %s", tc.q, it, tc.label, tc.route)
		}
		if !stepsContain(res, tc.step) {
			t.Errorf("%q: steps %v, want a %s step", tc.q, stepNamesOf(res), tc.step)
		}
		if tc.route == "clarify" && !strings.HasSuffix(res.Answer, "？") {
			t.Errorf("%q: answered %q, want one question back", tc.q, res.Answer)
		}
		if tc.route == "task" && res.Task == nil {
			t.Errorf("%q: no task in %+v", tc.q, res)
		}
	}
	var st workflows.SessionState
	if _, err := s.do(ctx, http.MethodGet, "/v1/sessions/intents", nil, &st); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range st.Intents {
		got = append(got, r.Intent)
	}
	if strings.Join(got, ",") != "chitchat,qa,task,clarify" || st.LastIntent != "clarify" {
		t.Errorf("state intents %v, last %q", got, st.LastIntent)
	}
	// The search attribute follows within a second: a burst of fast turns
	// publishes its status once a second ("coalesce-status").
	var last string
	for deadline := time.Now().Add(10 * time.Second); last != "clarify" && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		desc, err := s.client.DescribeWorkflowExecution(ctx, workflows.SessionWorkflowID(workflows.DefaultTenant, "intents"), "")
		if err != nil {
			t.Fatal(err)
		}
		if p := desc.GetWorkflowExecutionInfo().GetSearchAttributes().GetIndexedFields()["CtxLastIntent"]; p != nil {
			_ = converter.GetDefaultDataConverter().FromPayload(p, &last)
		}
	}
	if last != "clarify" {
		t.Errorf("CtxLastIntent = %q", last)
	}
}

func stepNamesOf(r workflows.TurnResult) []string {
	var out []string
	for _, st := range r.Steps {
		out = append(out, st.Name)
	}
	return out
}

func stepsContain(r workflows.TurnResult, name string) bool {
	for _, st := range r.Steps {
		if st.Name == name {
			return true
		}
	}
	return false
}
