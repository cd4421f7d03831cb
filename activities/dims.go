package activities

import (
	"fmt"
	"sync"
)

// Dims caches each embedding model's dimension, learnt from its first
// answer, so that an embedder never returns a vector of another dimension
// silently. The zero value is ready; it is safe for concurrent use.
type Dims struct {
	mu sync.Mutex
	m  map[string]int
}

// Get returns model's dimension, if known.
func (d *Dims) Get(model string) (int, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	n, ok := d.m[model]
	return n, ok
}

// Check accepts a vector of n dimensions from model: the first one sets
// the model's dimension, every later one must have it. Its error wraps
// [ErrDimension].
func (d *Dims) Check(model string, n int) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch want, ok := d.m[model]; {
	case n == 0:
		return fmt.Errorf("%w: empty vector", ErrDimension)
	case ok && want != n:
		return fmt.Errorf("%w: vector of dimension %d, but %s has dimension %d", ErrDimension, n, model, want)
	case !ok:
		if d.m == nil {
			d.m = map[string]int{}
		}
		d.m[model] = n
	}
	return nil
}
