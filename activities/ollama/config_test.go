package ollama

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestParseHost(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"", "http://127.0.0.1:11434"},
		{"localhost", "http://localhost:11434"},
		{"0.0.0.0", "http://0.0.0.0:11434"},
		{"1.2.3.4:5678", "http://1.2.3.4:5678"},
		{":11435", "http://127.0.0.1:11435"},
		{"  ollama:1234  ", "http://ollama:1234"},
		{"http://ollama", "http://ollama:80"},
		{"https://ollama.example.com", "https://ollama.example.com:443"},
		{"http://ollama:8080/prefix/", "http://ollama:8080/prefix"},
		{"[::1]:9999", "http://[::1]:9999"},
		{"[::1]", "http://[::1]:11434"},
		{"::1", "http://[::1]:11434"},
	}
	for _, tt := range tests {
		u, err := parseHost(tt.in)
		if err != nil {
			t.Errorf("parseHost(%q): %v", tt.in, err)
			continue
		}
		if got := u.String(); got != tt.want {
			t.Errorf("parseHost(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
	for _, bad := range []string{"ftp://ollama", "ollama:abc", "ollama:0", "ollama:70000", "ollama:", "user@ollama:1", "ollama:1?x=y"} {
		if u, err := parseHost(bad); err == nil {
			t.Errorf("parseHost(%q) = %s, want an error", bad, u)
		}
	}
}

func TestNewConfig(t *testing.T) {
	// The environment is internal/config's to read: an empty Host is
	// DefaultHost whatever OLLAMA_HOST says.
	t.Setenv("OLLAMA_HOST", "example.com:1234")
	c, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Host() != DefaultHost || c.timeout != DefaultTimeout || c.keepAlive != nil {
		t.Errorf("defaults: host %s, timeout %v, keepAlive %v", c.Host(), c.timeout, c.keepAlive)
	}

	c, err = New(Config{Host: "other:1", Timeout: -1, KeepAlive: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if c.Host() != "http://other:1" || c.keepAlive == nil || c.keepAlive.Duration != time.Minute {
		t.Errorf("explicit: host %s, keepAlive %v", c.Host(), c.keepAlive)
	}
	ctx, _, cancel := c.begin(t.Context())
	defer cancel()
	if _, ok := ctx.Deadline(); ok {
		t.Error("negative Timeout: the call has a deadline")
	}

	if _, err := New(Config{Host: "ftp://x"}); err == nil || !strings.Contains(err.Error(), "ollama") {
		t.Errorf("New with a bad host: %v", err)
	}
}

type countingTransport struct{ n atomic.Int64 }

func (t *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	t.n.Add(1)
	return http.DefaultTransport.RoundTrip(r)
}

func TestNewUsesButDoesNotModifyHTTPClient(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, `{"version":"0"}`)
	}))
	defer srv.Close()
	tr := &countingTransport{}
	hc := &http.Client{Transport: tr}
	c, err := New(Config{Host: srv.URL, HTTPClient: hc})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Ping(t.Context()); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	if tr.n.Load() != 1 {
		t.Errorf("the given client's transport saw %d requests, want 1", tr.n.Load())
	}
	if hc.Transport != tr {
		t.Error("New modified the given client")
	}
}
