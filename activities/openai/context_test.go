package openai_test

import (
	"errors"
	"net/http"
	"testing"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/activities/openai"
)

func TestContextLength(t *testing.T) {
	// vLLM lists each model with the context it serves (max_model_len);
	// other servers list models without it.
	models := func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/models" {
			http.NotFound(w, r)
			return
		}
		reply(w, map[string]any{"object": "list", "data": []any{
			map[string]any{"id": "Qwen/Qwen2.5-7B-Instruct", "object": "model", "owned_by": "vllm", "max_model_len": 32768},
			map[string]any{"id": "other", "object": "model", "owned_by": "llamacpp"},
		}})
	}
	ctx := t.Context()
	c := serve(t, openai.Config{}, models)
	for model, want := range map[string]int{"Qwen/Qwen2.5-7B-Instruct": 32768, "other": 0, "absent": 0} {
		if n, err := c.ContextLength(ctx, model); err != nil || n != want {
			t.Errorf("ContextLength(%q) = %d, %v; want %d", model, n, err, want)
		}
	}

	// The configured context is the answer: the server is not asked.
	asked := false
	c = serve(t, openai.Config{ContextLength: 4096}, func(w http.ResponseWriter, r *http.Request) { asked = true; models(w, r) })
	if n, err := c.ContextLength(ctx, "Qwen/Qwen2.5-7B-Instruct"); n != 4096 || err != nil || asked {
		t.Errorf("configured: %d, %v (server asked: %v); want 4096 without asking", n, err, asked)
	}

	// A server that fails says so as a model error.
	c = serve(t, openai.Config{}, func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, `{"error":{"message":"down"}}`, http.StatusServiceUnavailable)
	})
	_, err := c.ContextLength(ctx, "m")
	var me *activities.ModelError
	if !errors.As(err, &me) || !me.Retryable || me.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("503: got %v, want a retryable model error", err)
	}
}
