package openai

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	oai "github.com/openai/openai-go/v3"

	"github.com/ctxflow/ctxflow/activities"
)

// errDimension is wrapped by the error of a vector whose dimension is not
// the model's.
var errDimension = errors.New("wrong dimension")

// EmbedBatch is the most texts sent in one /embeddings request.
const EmbedBatch = 64

// dims caches each model's embedding dimension, learnt from its first answer.
type dims struct {
	mu sync.Mutex
	m  map[string]int
}

func (d *dims) get(model string) (int, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	n, ok := d.m[model]
	return n, ok
}

func (d *dims) set(model string, n int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.m == nil {
		d.m = map[string]int{}
	}
	d.m[model] = n
}

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
			return nil, &activities.ModelError{Retryable: !errors.Is(err, errDimension),
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
		if err := c.checkDim(model, len(e.Embedding)); err != nil {
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
	if n, ok := c.dims.get(model); ok {
		return n, nil
	}
	vs, err := c.Embed(ctx, model, []string{"dimension probe"})
	if err != nil {
		return 0, err
	}
	return len(vs[0]), nil
}

func (c *Client) checkDim(model string, n int) error {
	if n == 0 {
		return fmt.Errorf("%w: empty vector", errDimension)
	}
	if want, ok := c.dims.get(model); ok && want != n {
		return fmt.Errorf("%w: vector of dimension %d, but %s has dimension %d", errDimension, n, model, want)
	}
	c.dims.set(model, n)
	return nil
}
