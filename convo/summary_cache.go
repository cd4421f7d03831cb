package convo

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
)

// SummaryCache stores summaries by [SummaryCacheKey]. Implementations must be
// safe for concurrent use.
type SummaryCache interface {
	// Get returns the summary stored under key.
	Get(key string) (SummaryState, bool)
	// Put stores s under key, replacing any previous value.
	Put(key string, s SummaryState)
}

// SummaryLRU is an in-memory [SummaryCache] that keeps the most recently used
// entries. Its zero value is not usable; call [NewSummaryLRU].
type SummaryLRU struct {
	mu    sync.Mutex
	cap   int
	order *list.List // front = most recent; values are *lruEntry
	items map[string]*list.Element
}

type lruEntry struct {
	key string
	val SummaryState
}

var _ SummaryCache = (*SummaryLRU)(nil)

// NewSummaryLRU returns a cache holding at most capacity entries (at least 1).
func NewSummaryLRU(capacity int) *SummaryLRU {
	return &SummaryLRU{cap: max(capacity, 1), order: list.New(), items: make(map[string]*list.Element)}
}

// Get returns the entry for key and marks it most recently used.
func (c *SummaryLRU) Get(key string) (SummaryState, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.items[key]
	if !ok {
		return SummaryState{}, false
	}
	c.order.MoveToFront(e)
	return e.Value.(*lruEntry).val, true
}

// Put stores s under key, evicting the least recently used entry when full.
func (c *SummaryLRU) Put(key string, s SummaryState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[key]; ok {
		e.Value.(*lruEntry).val = s
		c.order.MoveToFront(e)
		return
	}
	c.items[key] = c.order.PushFront(&lruEntry{key: key, val: s})
	if c.order.Len() > c.cap {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.items, last.Value.(*lruEntry).key)
	}
}

// Clear drops every entry (an erase: a cached summary holds the text of
// the conversations it summarised).
func (c *SummaryLRU) Clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.order.Init()
	clear(c.items)
}

// Len is the number of entries.
func (c *SummaryLRU) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}

// Summarizer calls a model with a summary prompt and returns its answer.
type Summarizer func(ctx context.Context, prompt []ModelMessage) (string, error)

// ErrEmptySummary is returned when the summariser answers with blank text.
var ErrEmptySummary = errors.New("summariser returned an empty summary")

// Summarize carries out plan p: with nothing to fold it returns p.Prev; on a
// cache hit it returns the cached summary without calling fn (hit = true);
// otherwise it calls fn with p's prompt, builds the new state with
// [NewSummaryState] and stores it in cache (which may be nil). On error the
// caller degrades to [AssembleFallback].
func Summarize(ctx context.Context, tok Tokenizer, p SummaryPlan, c SummaryConfig, cache SummaryCache, fn Summarizer) (s SummaryState, hit bool, err error) {
	if len(p.Fold) == 0 {
		return p.Prev, false, nil
	}
	if cache != nil {
		if s, ok := cache.Get(p.Key); ok {
			return s, true, nil
		}
	}
	text, err := fn(ctx, p.Prompt(c))
	if err != nil {
		return SummaryState{}, false, fmt.Errorf("summarize through %q: %w", p.Through, err)
	}
	if strings.TrimSpace(text) == "" {
		return SummaryState{}, false, fmt.Errorf("summarize through %q: %w", p.Through, ErrEmptySummary)
	}
	s = NewSummaryState(tok, p, text, c)
	if cache != nil {
		cache.Put(p.Key, s)
	}
	return s, false, nil
}
