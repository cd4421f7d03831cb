package worker

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// The build ID read from the test binary is the one `go tool buildid`
// prints: the SDK's binary checksum without reading 300 MB.
func TestBuildIDIsGoBuildID(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	got := goBuildID()
	if got == "" {
		t.Skip("no ELF Go build ID on this platform")
	}
	out, err := exec.Command("go", "tool", "buildid", exe).Output()
	if err != nil {
		t.Skipf("go tool buildid: %v", err)
	}
	if want := strings.TrimSpace(string(out)); got != want {
		t.Fatalf("build ID %q, go tool buildid says %q", got, want)
	}
}
