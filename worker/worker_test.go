package worker

import (
	"cmp"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/activities/offline"
	"github.com/ctxflow/ctxflow/activities/openai"
	"github.com/ctxflow/ctxflow/activities/tiktoken"
	"github.com/ctxflow/ctxflow/convo"
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
	pullable := httptest.NewServer(fakeollama.New(fakeollama.Options{Models: []string{"llama3:latest"}}))
	defer pullable.Close()
	tests := []struct {
		name, provider, host, want string
		pull                       string
	}{
		{name: "auto pulls a missing model when asked", provider: "auto", host: pullable.URL, want: "ollama", pull: "missing"},
		{name: "auto picks ollama with the model", provider: "auto", host: withModel.URL, want: "ollama"},
		{name: "auto falls back without the model", provider: "auto", host: withoutModel.URL, want: "offline"},
		{name: "auto falls back when ollama is down", provider: "auto", host: down.URL, want: "offline", pull: "missing"},
		{name: "offline is offline", provider: "offline", host: withModel.URL, want: "offline"},
		{name: "ollama stays ollama even when down", provider: "ollama", host: down.URL, want: "ollama"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := config.Load()
			if err != nil {
				t.Fatal(err)
			}
			cfg.ModelProvider, cfg.OllamaHost, cfg.OllamaPull = tc.provider, tc.host, cmp.Or(tc.pull, "never")
			_, engine, err := chooseModel(context.Background(), cfg, tok, slog.New(slog.NewTextHandler(io.Discard, nil)))
			if err != nil || engine != tc.want {
				t.Fatalf("engine = %q, %v; want %q", engine, err, tc.want)
			}
		})
	}
}

// TestChooseOpenAI: provider openai is the OpenAI-compatible server, not
// asked anything to be chosen; it embeds there when the server embeds with
// the embedding model, offline otherwise, and serves the alternatives.
func TestChooseOpenAI(t *testing.T) {
	var chats atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Model string `json:"model"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		if r.URL.Path != "/v1/embeddings" || body.Model != "bge-m3:latest" {
			chats.Add(1)
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"error":{"message":"no such model"}}`))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"object":"list","model":"bge-m3:latest","data":[{"object":"embedding","index":0,"embedding":[0.6,0.8,0]}]}`))
	}))
	defer srv.Close()
	tok, err := tiktoken.New("cl100k_base")
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	cfg, err := config.Load()
	if err != nil {
		t.Fatal(err)
	}
	cfg.ModelProvider, cfg.OpenAIBaseURL = "openai", srv.URL+"/v1"

	model, engine, err := chooseModel(context.Background(), cfg, tok, log)
	client, ok := model.(*openai.Client)
	if err != nil || engine != "openai" || !ok || client.BaseURL() != srv.URL+"/v1" {
		t.Fatalf("chooseModel = %T %q, %v; want the openai adapter on %s/v1", model, engine, err, srv.URL)
	}
	if n := chats.Load(); n != 0 {
		t.Errorf("choosing the provider sent %d requests", n)
	}

	emb, name := chooseEmbedder(context.Background(), model, cfg, log)
	if emb != activities.Embedder(client) || name != "bge-m3:latest" {
		t.Errorf("chooseEmbedder = %T %q, want the server's bge-m3:latest", emb, name)
	}
	embs := embedders(model, emb, name, []string{"offline", "nomic-embed-text"})
	if len(embs) != 3 || embs[2].Embedder != activities.Embedder(client) || embs[2].Model != "nomic-embed-text" {
		t.Errorf("embedders = %+v, want the server, offline, then the server's nomic-embed-text", embs)
	}

	cfg.Session.EmbeddingModel = "not-served"
	if emb, name := chooseEmbedder(context.Background(), model, cfg, log); name != offline.ModelName {
		t.Errorf("a server without the embedding model: chooseEmbedder = %T %q, want offline", emb, name)
	}

	cfg.OpenAIBaseURL = "not a URL"
	if _, _, err := chooseModel(context.Background(), cfg, tok, log); err == nil {
		t.Error("a bad base URL was accepted")
	}
}

// A late model asks Ollama at most once an interval, whatever the calls,
// and answers offline until the model is there.
func TestLateModelProbesAtMostOnceAnInterval(t *testing.T) {
	fake := fakeollama.New(fakeollama.Options{Models: []string{"llama3:latest"}})
	srv := httptest.NewServer(fake)
	defer srv.Close()
	cfg, err := config.Load()
	if err != nil {
		t.Fatal(err)
	}
	cfg.OllamaHost = srv.URL
	client, err := OllamaClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	m := &lateModel{offline: &offline.Engine{}, client: client, model: fakeollama.DefaultModel, interval: time.Hour,
		log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	req := activities.ChatRequest{Model: fakeollama.DefaultModel, Messages: []convo.ModelMessage{{Role: "user", Content: "hi"}}}
	for range 5 {
		resp, err := m.Chat(t.Context(), req, nil)
		if err != nil || resp.Engine != "" {
			t.Fatalf("before the model: %+v, %v", resp, err)
		}
	}
	if n := fake.Calls().Show; n != 1 {
		t.Errorf("%d probes within the interval, want 1", n)
	}
	m.interval, m.next = 0, time.Time{}
	if _, err := http.Post(srv.URL+"/api/pull", "application/json", strings.NewReader(`{"model":"`+fakeollama.DefaultModel+`"}`)); err != nil {
		t.Fatal(err)
	}
	if resp, err := m.Chat(t.Context(), req, nil); err != nil || resp.Engine != "ollama" {
		t.Fatalf("after the pull: %+v, %v", resp, err)
	}
}
