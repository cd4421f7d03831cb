package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEvalCommand runs `ctxflow eval --data` on the samples: a set with a
// passages.jsonl beside it (mtrag), one with inline passages and gold
// answers, one without passages; every figure of the JSON is in 0..1 and
// each set has the figures its data allows.
func TestEvalCommand(t *testing.T) {
	out := filepath.Join(t.TempDir(), "eval.jsonl")
	var stdout, stderr bytes.Buffer
	args := []string{"eval",
		"--data", "../../internal/eval/testdata/mtrag/cases.jsonl",
		"--data", "../../internal/eval/testdata/answers/cases.jsonl",
		"--data", "../../lexical/testdata/eval/cqr-kvret.jsonl",
		"--json", out}
	if code := run(args, &stdout, &stderr); code != 0 {
		t.Fatalf("ctxflow eval = %d; stderr:\n%s", code, stderr.String())
	}
	t.Logf("\n%s", stdout.String())
	rewrite := []string{"rewrite_token_f1", "copy_token_f1", "rewrite_exact_match", "changed_when_needed"}
	retrieval := append(rewrite, "unchanged_when_self_contained", "recall_at_5", "mrr")
	want := map[string][]string{
		"mtrag":     retrieval,
		"answers":   append(retrieval, "answer_token_f1"),
		"cqr-kvret": rewrite,
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != len(want) {
		t.Fatalf("%d JSON lines, want one per set:\n%s", len(lines), b)
	}
	for _, line := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		name, _ := m["set"].(string)
		keys, ok := want[name]
		if !ok {
			t.Errorf("unexpected set %q", name)
			continue
		}
		for _, k := range keys {
			if m[k] == nil {
				t.Errorf("%s: no %s", name, k)
			}
		}
		for _, k := range []string{"recall_at_5", "mrr"} {
			if q, ok := m[k].(map[string]any); ok && (q["raw"] == nil || q["rewritten"] == nil || q["gold"] == nil) {
				t.Errorf("%s: %s = %v, want raw, rewritten and gold", name, k, q)
			}
		}
		checkFractions(t, name, m)
		if !strings.Contains(stdout.String(), "| "+name+" |") {
			t.Errorf("no table row for %s", name)
		}
	}
	if !strings.Contains(stderr.String(), "answers: 7/7 cases") || strings.Contains(stderr.String(), "\r") {
		t.Errorf("progress off a terminal: %q", stderr.String())
	}
}

// checkFractions fails for any number of v (at any depth) outside 0..1.
func checkFractions(t *testing.T, path string, v any) {
	t.Helper()
	switch v := v.(type) {
	case float64:
		if v < 0 || v > 1 {
			t.Errorf("%s = %v, out of 0..1", path, v)
		}
	case map[string]any:
		for k, x := range v {
			checkFractions(t, path+"."+k, x)
		}
	}
}

// A malformed case fails the run with its file and line; bad flags are
// refused before anything is read.
func TestEvalCommandErrors(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "s", "cases.jsonl")
	if err := os.MkdirAll(filepath.Dir(bad), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte(`{"id":"a","question":"q","gold_rewrite":"q"}`+"\n"+`{"id":"b","question":"q"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--data", bad}, bad + ":2: no gold_rewrite"},
		{[]string{"--data", bad, "--limit", "-1"}, "negative"},
		{nil, "--data"},
		{[]string{"../shared/evaldata/mtrag"}, "--data DIR/cases.jsonl"},
		{[]string{"--data", filepath.Join(t.TempDir(), "none.jsonl")}, "no such file"},
	} {
		err := runEval(t.Context(), tc.args, new(bytes.Buffer), new(bytes.Buffer))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ctxflow eval %q: %v, want …%s…", tc.args, err, tc.want)
		}
	}
	if code := run([]string{"eval", "--data", bad}, new(bytes.Buffer), new(bytes.Buffer)); code != 1 {
		t.Errorf("ctxflow eval on a malformed set = %d, want 1", code)
	}
}

// On a terminal the progress is a bar redrawn in place, ended with the
// time; elsewhere one count line at the end (and one every progressEvery).
func TestEvalProgress(t *testing.T) {
	var b bytes.Buffer
	p := &countProgress{w: &b, tty: true, name: "zh"}
	p.update(1, 4)
	p.update(4, 4)
	p.end(true)
	if s := b.String(); !strings.HasPrefix(s, "\r[######------------------] 1/4 zh\r[########################] 4/4 zh\r[########################] 4/4 zh in ") || !strings.HasSuffix(s, " s\n") {
		t.Errorf("bar %q", s)
	}
	b.Reset()
	p = newCountProgress(&b, "zh")
	for i := 1; i <= 4; i++ {
		p.update(i, 4)
	}
	p.end(false)
	if b.String() != "zh: 4/4 cases failed\n" {
		t.Errorf("plain progress %q", b.String())
	}
}
