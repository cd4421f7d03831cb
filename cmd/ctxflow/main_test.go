package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"testing"

	"go.temporal.io/sdk/client"

	"github.com/ctxflow/ctxflow/internal/config"
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

// TestKey: `ctxflow key` prints a key and its entry, which the
// configuration reads back as the key's tenant; `ctxflow api` refuses to
// start without keys unless told.
func TestKey(t *testing.T) {
	var out bytes.Buffer
	if code := run([]string{"key", "acme"}, &out, new(bytes.Buffer)); code != 0 {
		t.Fatalf("ctxflow key = %d", code)
	}
	var key, entry string
	if _, err := fmt.Sscanf(out.String(), "key: %s\nentry: %s\n", &key, &entry); err != nil || !strings.HasPrefix(key, "cfk_") {
		t.Fatalf("output %q: %v", out.String(), err)
	}
	keys, err := config.Config{APIKeys: entry}.Keys()
	sum := sha256.Sum256([]byte(key))
	if err != nil || keys[hex.EncodeToString(sum[:])] != "acme" {
		t.Fatalf("entry %q reads as %v, %v", entry, keys, err)
	}
	if code := run([]string{"key", "../x"}, new(bytes.Buffer), new(bytes.Buffer)); code != 1 {
		t.Errorf("a bad tenant = %d, want 1", code)
	}

	t.Setenv("CTXFLOW_API_KEYS", "")
	t.Setenv("CTXFLOW_ALLOW_ANONYMOUS", "false")
	if code := run([]string{"api"}, new(bytes.Buffer), new(bytes.Buffer)); code != 1 {
		t.Errorf("ctxflow api without keys = %d, want 1", code)
	}
}

// TestGRPCCompression: "auto" compresses only connections that leave the
// host.
func TestGRPCCompression(t *testing.T) {
	for _, tc := range []struct {
		mode, addr string
		gzip       bool
	}{
		{"auto", "127.0.0.1:7233", false},
		{"auto", "localhost:7233", false},
		{"auto", "[::1]:7233", false},
		{"auto", "temporal.example.com:7233", true},
		{"auto", "10.0.0.5:7233", true},
		{"gzip", "127.0.0.1:7233", true},
		{"none", "temporal.example.com:7233", false},
	} {
		_, gzip := grpcCompression(tc.mode, tc.addr).(*client.GrpcCompressionGzip)
		if gzip != tc.gzip {
			t.Errorf("grpcCompression(%q, %q) gzip = %v, want %v", tc.mode, tc.addr, gzip, tc.gzip)
		}
	}
}
