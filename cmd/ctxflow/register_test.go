package main

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/ctxflow/ctxflow/internal/devserver"
	"github.com/ctxflow/ctxflow/workflows"
)

// TestRegister: `ctxflow register` (the Kubernetes Job of deploy/k8s) adds
// the session search attributes to a namespace that has none of them, with
// their types; run again, it finds them and succeeds. A namespace that does
// not exist it creates.
func TestRegister(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	srv, err := devserver.Start(ctx, devserver.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("start temporal: %v", err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	t.Setenv("TEMPORAL_ADDRESS", srv.FrontendHostPort())
	t.Setenv("TEMPORAL_NAMESPACE", srv.Namespace())
	c, err := client.DialContext(ctx, client.Options{HostPort: srv.FrontendHostPort(), Namespace: srv.Namespace()})
	if err != nil {
		t.Fatalf("dial temporal: %v", err)
	}
	defer c.Close()
	custom := func(namespace string) map[string]string {
		resp, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
		if err != nil {
			t.Fatalf("list search attributes: %v", err)
		}
		out := map[string]string{}
		for name, typ := range resp.GetCustomAttributes() {
			out[name] = typ.String()
		}
		return out
	}
	want := workflows.SearchAttributes()
	for name := range want {
		if _, ok := custom(srv.Namespace())[name]; ok {
			t.Fatalf("%s exists before ctxflow register", name)
		}
	}
	for i := range 2 {
		var out, errb bytes.Buffer
		if code := run([]string{"register"}, &out, &errb); code != 0 || !strings.Contains(out.String(), "registered in namespace "+srv.Namespace()) {
			t.Fatalf("ctxflow register #%d = %d, %q (stderr %q)", i+1, code, out.String(), errb.String())
		}
	}
	got := custom(srv.Namespace())
	for name, typ := range want {
		if got[name] != typ.String() {
			t.Errorf("search attribute %s = %q, want %s", name, got[name], typ)
		}
	}

	// A namespace that does not exist (a new cluster's) is created first.
	t.Setenv("TEMPORAL_NAMESPACE", "fresh")
	var out, errb bytes.Buffer
	if code := run([]string{"register"}, &out, &errb); code != 0 {
		t.Fatalf("ctxflow register in a new namespace = %d, %q (stderr %q)", code, out.String(), errb.String())
	}
	if got := custom("fresh"); len(got) < len(want) {
		t.Errorf("search attributes of the new namespace: %v", got)
	}
}
