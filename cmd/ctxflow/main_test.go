package main

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/ctxflow/ctxflow/internal/pgtest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Stop()
	os.Exit(code)
}

// TestMigrate: `ctxflow migrate` applies the migrations once, then finds
// the schema up to date; without DATABASE_URL it fails.
func TestMigrate(t *testing.T) {
	t.Setenv("DATABASE_URL", pgtest.Database(t))
	for _, want := range []string{"applied 0001_", "up to date"} {
		var out, errb bytes.Buffer
		if code := run([]string{"migrate"}, &out, &errb); code != 0 || !strings.Contains(out.String(), want) {
			t.Fatalf("ctxflow migrate = %d, %q (stderr %q); want 0 and %q", code, out.String(), errb.String(), want)
		}
	}
	t.Setenv("DATABASE_URL", "")
	if code := run([]string{"migrate"}, new(bytes.Buffer), new(bytes.Buffer)); code != 1 {
		t.Errorf("ctxflow migrate without DATABASE_URL = %d, want 1", code)
	}
}
