// Package deploy holds the Dockerfile, the compose file and the Kubernetes
// manifests; its test checks that scripts/deploycheck.sh (make lint)
// passes them and fails broken copies of them.
package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDeploycheck runs scripts/deploycheck.sh on copies of deploy/: the
// unchanged copy passes; in broken copies every mistake is reported and the
// script fails. A compose file that breaks the Compose schema stops
// compose-go before the reference checks, so it is a copy of its own.
func TestDeploycheck(t *testing.T) {
	if out, err := deploycheck(t, copyDeploy(t)); err != nil {
		t.Fatalf("deploycheck on an unchanged copy of deploy/: %v\n%s", err, out)
	}

	broken := copyDeploy(t)
	mistakes := []struct{ file, old, new, want string }{
		// kubeconform: a removed apiVersion, a wrong type, an unknown field.
		{"k8s/worker.yaml", "apiVersion: autoscaling/v2", "apiVersion: autoscaling/v2beta2", "could not find schema for HorizontalPodAutoscaler"},
		{"k8s/api.yaml", "containerPort: 8080", `containerPort: "8080"`, "containerPort': got string, want integer"},
		{"k8s/register-job.yaml", "backoffLimit: 10", "backofLimit: 10", "additional properties 'backofLimit' not allowed"},
		// deploylint: a variable ctxflow does not read, a dangling reference.
		{"k8s/config.yaml", "  MILVUS_ADDRESS:", "  MILVUS_ADDR:", "ConfigMap key MILVUS_ADDR is not a variable ctxflow reads"},
		{"compose.yaml", "MILVUS_ADDRESS: milvus:19530", "MILVUS_ADRESS: milvus:19530", "service worker sets MILVUS_ADRESS, which ctxflow does not read"},
		{"compose.yaml", "depends_on: [etcd, minio]", "depends_on: [etcd, minio2]", "service milvus depends on minio2, which is not a service"},
		{"compose.yaml", "secrets: [api_keys]", "secrets: [api_key]", "service api uses secret api_key, which is not declared"},
		// deploylint: values ctxflow would refuse at start-up (internal/config.Check).
		{"k8s/config.yaml", "CTXFLOW_LOG_FORMAT: json", "CTXFLOW_LOG_FORMAT: xml", `k8s/config.yaml: ConfigMap: CTXFLOW_LOG_FORMAT "xml": want text or json`},
		{"k8s/secrets.yaml", `CTXFLOW_TOKEN_SECRET: "CHANGE-ME-to-32-random-bytes-in-hex"`, `CTXFLOW_TOKEN_SECRET: "short"`, "Secret: CTXFLOW_TOKEN_SECRET: 5 bytes, want at least 16"},
		{"compose.yaml", "CTXFLOW_TRANSCRIPT_STORE: postgres", "CTXFLOW_TRANSCRIPT_STORE: sqlite", `CTXFLOW_TRANSCRIPT_STORE "sqlite": want file or postgres`},
		// The Dockerfile: another Go than go.mod's, root.
		{"Dockerfile", "FROM golang:1.26-", "FROM golang:1.25-", "does not build FROM golang:1.26"},
		{"Dockerfile", "USER 65532:65532\n", "", "image runs as root"},
	}
	for _, m := range mistakes {
		edit(t, filepath.Join(broken, m.file), m.old, m.new)
	}
	out, err := deploycheck(t, broken)
	if err == nil {
		t.Errorf("deploycheck passed a broken copy:\n%s", out)
	}
	for _, m := range mistakes {
		if !strings.Contains(out, m.want) {
			t.Errorf("%s: %q → %q: the output lacks %q", m.file, m.old, m.new, m.want)
		}
	}
	if t.Failed() {
		t.Logf("output:\n%s", out)
	}

	schema := copyDeploy(t)
	edit(t, filepath.Join(schema, "compose.yaml"), "interval: 2s", "intervall: 2s")
	if out, err := deploycheck(t, schema); err == nil || !strings.Contains(out, "additional properties 'intervall' not allowed") {
		t.Errorf("deploycheck on a compose file with an unknown key: %v\n%s", err, out)
	}
}

// copyDeploy copies the files deploycheck reads into DIR/deploy (the
// compose file builds from its parent) and returns DIR/deploy.
func copyDeploy(t *testing.T) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "deploy")
	files, err := filepath.Glob("k8s/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("k8s manifests: %v %v", files, err)
	}
	for _, f := range append(files, "compose.yaml", "Dockerfile") {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dst, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

func edit(t *testing.T, path, old, new string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), old) {
		t.Fatalf("%s has no %q to break", path, old)
	}
	if err := os.WriteFile(path, []byte(strings.Replace(string(b), old, new, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}

func deploycheck(t *testing.T, dir string) (string, error) {
	t.Helper()
	out, err := exec.CommandContext(t.Context(), "bash", "../scripts/deploycheck.sh", dir).CombinedOutput()
	return string(out), err
}

// TestTemporalSchemaStepsAreOne: Kubernetes sets Temporal's schema up with
// the steps of make cluster and compose: the ConfigMap temporal-schema of
// k8s/temporal.yaml holds temporal-schema.sh as it is.
func TestTemporalSchemaStepsAreOne(t *testing.T) {
	script, err := os.ReadFile("temporal-schema.sh")
	if err != nil {
		t.Fatal(err)
	}
	manifest, err := os.ReadFile("k8s/temporal.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// The block scalar after "temporal-schema.sh: |", four spaces in.
	_, block, ok := strings.Cut(string(manifest), "  temporal-schema.sh: |\n")
	if !ok {
		t.Fatal("k8s/temporal.yaml has no temporal-schema.sh in a ConfigMap")
	}
	var got strings.Builder
	for line := range strings.Lines(block) {
		if rest, ok := strings.CutPrefix(line, "    "); ok {
			got.WriteString(rest)
		} else if strings.TrimSpace(line) == "" {
			got.WriteString("\n")
		} else {
			break
		}
	}
	if got.String() != string(script) {
		t.Errorf("the ConfigMap temporal-schema of k8s/temporal.yaml is not temporal-schema.sh: copy the file there\n--- ConfigMap ---\n%s--- file ---\n%s", got.String(), script)
	}
}
