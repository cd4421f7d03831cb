package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestIngestCommand runs `ctxflow ingest` against a worker process: a file,
// then the same file again (replaced, not doubled), then a directory.
func TestIngestCommand(t *testing.T) {
	s := startStack(t, stackOptions{})
	s.startWorker()
	dir := t.TempDir()
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := filepath.Join(dir, "README.md")
	if err := os.WriteFile(doc, readme, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "page.html"), []byte("<h1>Pricing</h1><p>华为Mate60的价格是5999元。</p>"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "skip.bin"), []byte{0, 1, 2}, 0o644); err != nil {
		t.Fatal(err)
	}
	ingest := func(args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), binary, append([]string{"ingest"}, args...)...)
		cmd.Env = append(os.Environ(), s.env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("ctxflow ingest %v: %v\n%s\n%s", args, err, out, s.workerLogs())
		}
		return string(out)
	}
	chunks := regexp.MustCompile(`README\.md: (\d+) chunks`)
	first := ingest(doc)
	m := chunks.FindStringSubmatch(first)
	if m == nil || m[1] == "0" {
		t.Fatalf("output %q", first)
	}
	if again := chunks.FindStringSubmatch(ingest(doc)); again == nil || again[1] != m[1] {
		t.Fatalf("re-ingest stored %v chunks, first time %s", again, m[1])
	}
	all := ingest(dir)
	if !strings.Contains(all, "README.md: "+m[1]+" chunks") || !strings.Contains(all, "page.html: 1 chunks") || strings.Contains(all, "skip.bin") {
		t.Fatalf("directory ingest output %q", all)
	}
}
