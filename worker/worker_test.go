package worker

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"

	"github.com/ctxflow/ctxflow/activities/tiktoken"
	"github.com/ctxflow/ctxflow/internal/config"
	"github.com/ctxflow/ctxflow/tests/fakeollama"
)

func TestChooseModel(t *testing.T) {
	withModel := httptest.NewServer(fakeollama.New(fakeollama.Options{}))
	defer withModel.Close()
	withoutModel := httptest.NewServer(fakeollama.New(fakeollama.Options{Models: []string{"llama3:latest"}}))
	defer withoutModel.Close()
	down := httptest.NewServer(nil)
	down.Close() // a closed port: connection refused

	tok, err := tiktoken.New("cl100k_base")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, provider, host, want string
	}{
		{"auto picks ollama with the model", "auto", withModel.URL, "ollama"},
		{"auto falls back without the model", "auto", withoutModel.URL, "offline"},
		{"auto falls back when ollama is down", "auto", down.URL, "offline"},
		{"offline is offline", "offline", withModel.URL, "offline"},
		{"ollama stays ollama even when down", "ollama", down.URL, "ollama"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := config.Load()
			if err != nil {
				t.Fatal(err)
			}
			cfg.ModelProvider, cfg.OllamaHost = tc.provider, tc.host
			_, engine, err := chooseModel(context.Background(), cfg, tok, slog.New(slog.NewTextHandler(io.Discard, nil)))
			if err != nil || engine != tc.want {
				t.Fatalf("engine = %q, %v; want %q", engine, err, tc.want)
			}
		})
	}
}
