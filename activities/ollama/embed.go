package ollama

import (
	"fmt"
	"strings"

	"context"

	"github.com/ollama/ollama/api"

	"github.com/ctxflow/ctxflow/activities"
)

// EmbedBatch is the most texts sent in one /api/embed request.
const EmbedBatch = 64

var _ activities.Embedder = (*Client)(nil)

// Embed returns one vector per text, in order, through /api/embed in batches
// of [EmbedBatch]. Every vector must have the model's dimension (learnt from
// its first answer and cached); a server that answers with another count or
// dimension is an error, never a silently wrong vector. Errors are
// classified as Chat's are.
func (c *Client) Embed(ctx context.Context, model string, texts []string) ([][]float32, error) {
	what := fmt.Sprintf("ollama embed %q", model)
	if strings.TrimSpace(model) == "" {
		return nil, &activities.ModelError{Message: what + ": invalid request", Err: errNoModel}
	}
	out := make([][]float32, 0, len(texts))
	for start := 0; start < len(texts); start += EmbedBatch {
		batch := texts[start:min(start+EmbedBatch, len(texts))]
		callCtx, pr, cancel := c.begin(ctx)
		resp, err := c.api.Embed(callCtx, &api.EmbedRequest{Model: model, Input: batch, KeepAlive: c.keepAlive})
		if err != nil {
			err = c.classify(ctx, callCtx, pr, what, err)
			cancel()
			return nil, err
		}
		cancel()
		if len(resp.Embeddings) != len(batch) {
			return nil, &activities.ModelError{Retryable: true,
				Message: fmt.Sprintf("%s: %d vectors for %d texts", what, len(resp.Embeddings), len(batch))}
		}
		for i, v := range resp.Embeddings {
			if err := c.dims.Check(model, len(v)); err != nil {
				return nil, &activities.ModelError{Message: fmt.Sprintf("%s: text %d", what, start+i), Err: err}
			}
		}
		out = append(out, resp.Embeddings...)
	}
	return out, nil
}

// Dimension returns the model's embedding dimension, embedding one probe text
// the first time and answering from the cache after.
func (c *Client) Dimension(ctx context.Context, model string) (int, error) {
	if n, ok := c.dims.Get(model); ok {
		return n, nil
	}
	vs, err := c.Embed(ctx, model, []string{"dimension probe"})
	if err != nil {
		return 0, err
	}
	return len(vs[0]), nil
}
