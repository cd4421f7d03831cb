package openai_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/activities/openai"
)

// embedServer answers /v1/embeddings with vectors of dim(batch) whose first
// value is the text's length, in reverse order (the index places them).
func embedServer(t *testing.T, requests *atomic.Int32, dim func(batch int) int, count func(n int) int) *openai.Client {
	return serve(t, openai.Config{}, func(w http.ResponseWriter, r *http.Request) {
		n := int(requests.Add(1))
		body := decode(t, r)
		input, _ := body["input"].([]any)
		if r.URL.Path != "/v1/embeddings" || body["encoding_format"] != "float" || len(input) == 0 {
			status(400, `{"error":{"message":"bad request"}}`)(w, r)
			return
		}
		var data []any
		for i := count(len(input)) - 1; i >= 0; i-- {
			v := make([]float64, dim(n))
			v[0] = float64(len(input[i%len(input)].(string)))
			data = append(data, map[string]any{"object": "embedding", "index": i, "embedding": v})
		}
		reply(w, map[string]any{"object": "list", "model": body["model"], "data": data, "usage": map[string]any{"prompt_tokens": 1, "total_tokens": 1}})
	})
}

func same(n int) int { return n }

func TestEmbedBatchesInOrderAndCachesDimension(t *testing.T) {
	var requests atomic.Int32
	c := embedServer(t, &requests, func(int) int { return 8 }, same)
	texts := make([]string, 150)
	for i := range texts {
		texts[i] = strings.Repeat("x", i)
	}
	vs, err := c.Embed(context.Background(), "bge", texts)
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 150 || requests.Load() != 3 {
		t.Fatalf("%d vectors in %d requests, want 150 in 3", len(vs), requests.Load())
	}
	for i, v := range vs {
		if len(v) != 8 || v[0] != float32(i) {
			t.Fatalf("vector %d = %v: out of order or wrong dimension", i, v)
		}
	}
	d, err := c.Dimension(context.Background(), "bge")
	if err != nil || d != 8 || requests.Load() != 3 {
		t.Errorf("Dimension = %d, %v after %d requests; want 8 from the cache", d, err, requests.Load())
	}
	if vs, err := c.Embed(context.Background(), "bge", nil); err != nil || len(vs) != 0 || requests.Load() != 3 {
		t.Errorf("no texts: %v, %v after %d requests", vs, err, requests.Load())
	}
}

func TestEmbedRefusesWrongVectors(t *testing.T) {
	var requests atomic.Int32
	c := embedServer(t, &requests, func(batch int) int { return 4 + batch }, same) // 5, then 6
	if _, err := c.Embed(context.Background(), "m", []string{"a"}); err != nil {
		t.Fatal(err)
	}
	_, err := c.Embed(context.Background(), "m", []string{"b"})
	if !activities.IsPermanent(err) || !strings.Contains(err.Error(), "dimension 6") {
		t.Errorf("changed dimension: err = %v, want a permanent dimension error", err)
	}

	c = embedServer(t, &requests, func(int) int { return 4 }, func(n int) int { return n + 1 })
	_, err = c.Embed(context.Background(), "m", []string{"a", "b"})
	if me, ok := errors.AsType[*activities.ModelError](err); !ok || !me.Retryable || !strings.Contains(err.Error(), "3 vectors for 2 texts") {
		t.Errorf("wrong count: err = %v, want a retryable count error", err)
	}
}

func TestEmbedErrorsAreClassified(t *testing.T) {
	c := serve(t, openai.Config{}, status(404, `{"error":{"message":"model \"nope\" not found, try pulling it first"}}`))
	_, err := c.Embed(context.Background(), "nope", []string{"a"})
	me, ok := errors.AsType[*activities.ModelError](err)
	if !ok || me.Retryable || me.StatusCode != 404 || !strings.Contains(err.Error(), `openai embed "nope": HTTP 404: model "nope" not found`) {
		t.Fatalf("err = %v", err)
	}
	if _, err := c.Embed(context.Background(), " ", []string{"a"}); !activities.IsPermanent(err) {
		t.Fatalf("empty model: err = %v", err)
	}
}
