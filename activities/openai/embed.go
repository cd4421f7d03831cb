package openai

import (
	"context"
	"errors"
	"fmt"
	"strings"

	oai "github.com/openai/openai-go/v3"

	"github.com/ctxflow/ctxflow/activities"
)

// EmbedBatch is the most texts sent in one /embeddings request.
const EmbedBatch = 64

// Embed returns one vector per text, in order, through POST
// {base}/embeddings in batches of [EmbedBatch] (encoding_format float; the
// answer's vectors are placed by their index). Every vector must have the
// model's dimension (learnt from its first answer and cached); a server
// that answers with another count or dimension is an error, never a
// silently wrong vector. Errors are classified as Chat's are.
func (c *Client) Embed(ctx context.Context, model string, texts []string) ([][]float32, error) {
	what := fmt.Sprintf("openai embed %q", model)
	if strings.TrimSpace(model) == "" {
		return nil, &activities.ModelError{Message: what + ": invalid request", Err: errNoModel}
	}
	out := make([][]float32, 0, len(texts))
	for start := 0; start < len(texts); start += EmbedBatch {
		batch := texts[start:min(start+EmbedBatch, len(texts))]
		pr := &probe{}
		resp, err := c.embed.New(ctx, oai.EmbeddingNewParams{
			Model:          model,
			Input:          oai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: batch},
			EncodingFormat: oai.EmbeddingNewParamsEncodingFormatFloat,
		}, pr.option())
		if err != nil {
			return nil, c.classify(ctx, pr, what, err)
		}
		vs, err := c.vectors(model, resp.Data, len(batch))
		if err != nil {
			// A wrong dimension is the model's for good; a wrong count may
			// be a server's hiccup.
			return nil, &activities.ModelError{Retryable: !errors.Is(err, activities.ErrDimension),
				Message: fmt.Sprintf("%s: texts %d to %d", what, start, start+len(batch)-1), Err: err}
		}
		out = append(out, vs...)
	}
	return out, nil
}

// vectors places an answer's n vectors by their index and checks them.
func (c *Client) vectors(model string, data []oai.Embedding, n int) ([][]float32, error) {
	if len(data) != n {
		return nil, fmt.Errorf("%d vectors for %d texts", len(data), n)
	}
	out := make([][]float32, n)
	for _, e := range data {
		i := int(e.Index)
		if i < 0 || i >= n || out[i] != nil {
			return nil, fmt.Errorf("vector index %d is out of range or repeated", e.Index)
		}
		if err := c.dims.Check(model, len(e.Embedding)); err != nil {
			return nil, fmt.Errorf("text %d: %w", i, err)
		}
		v := make([]float32, len(e.Embedding))
		for j, x := range e.Embedding {
			v[j] = float32(x)
		}
		out[i] = v
	}
	return out, nil
}

// Dimension returns the model's embedding dimension, embedding one probe
// text the first time and answering from the cache after.
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
