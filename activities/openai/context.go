package openai

import (
	"context"
	"encoding/json"
	"fmt"
)

// ContextLength is the context, in tokens, that model is served with. This
// API has no num_ctx: the context is the server's own (vLLM's
// --max-model-len, llama.cpp's -c, a Modelfile's num_ctx or
// OLLAMA_CONTEXT_LENGTH behind Ollama's /v1). It is Config.ContextLength
// when set; else the max_model_len that vLLM adds to the model's entry in
// GET {base}/models; else 0, unknown. Errors are classified as Chat's are.
func (c *Client) ContextLength(ctx context.Context, model string) (int, error) {
	if c.contextLength > 0 {
		return c.contextLength, nil
	}
	what := fmt.Sprintf("openai models %q", model)
	pr := &probe{}
	page, err := c.models.List(ctx, pr.option())
	if err != nil {
		return 0, c.classify(ctx, pr, what, err)
	}
	for _, m := range page.Data {
		if m.ID != model {
			continue
		}
		var n int
		if f, ok := m.JSON.ExtraFields["max_model_len"]; ok && json.Unmarshal([]byte(f.Raw()), &n) == nil && n > 0 {
			return n, nil
		}
		return 0, nil
	}
	return 0, nil
}
