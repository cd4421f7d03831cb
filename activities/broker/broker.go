// Package broker carries answer deltas from the model activity to the
// API's streams ([activities.Broker]): Local within one process (`ctxflow
// dev`), Postgres between processes (LISTEN/NOTIFY on the transcripts'
// database, so a deployment that shares transcripts needs no other
// server).
package broker

import (
	"context"
	"sync"

	"github.com/ctxflow/ctxflow/activities"
)

// Local is an in-process broker.
type Local struct {
	mu   sync.Mutex
	subs map[string]map[chan activities.Delta]struct{}
}

var _ activities.Broker = (*Local)(nil)

// NewLocal returns an in-process broker.
func NewLocal() *Local { return &Local{subs: map[string]map[chan activities.Delta]struct{}{}} }

// subscriberBuffer is how many deltas a slow subscriber may lag before
// deltas are dropped for it (the final result still carries the answer).
const subscriberBuffer = 256

// Publish implements [activities.Broker]; it never blocks on a subscriber.
func (b *Local) Publish(_ context.Context, topic string, d activities.Delta) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for ch := range b.subs[topic] {
		select {
		case ch <- d:
		default:
		}
	}
	return nil
}

// Subscribe implements [activities.Broker].
func (b *Local) Subscribe(ctx context.Context, topic string) (<-chan activities.Delta, error) {
	ch := make(chan activities.Delta, subscriberBuffer)
	b.mu.Lock()
	if b.subs[topic] == nil {
		b.subs[topic] = map[chan activities.Delta]struct{}{}
	}
	b.subs[topic][ch] = struct{}{}
	b.mu.Unlock()
	go func() {
		<-ctx.Done()
		b.mu.Lock()
		delete(b.subs[topic], ch)
		if len(b.subs[topic]) == 0 {
			delete(b.subs, topic)
		}
		close(ch)
		b.mu.Unlock()
	}()
	return ch, nil
}
