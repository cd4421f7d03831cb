// Package broker carries answer deltas from the model activity, and step
// events from the session's workflow (Offer), to the API's streams
// ([activities.Broker]): Local within one process (`ctxflow
// dev`), Postgres between processes (LISTEN/NOTIFY on the transcripts'
// database, so a deployment that shares transcripts needs no other
// server).
package broker

import (
	"context"
	"log/slog"
	"sync"
	"time"

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

// offerQueue is how many deltas Offer holds for a broker that may block.
const offerQueue = 1024

// offerTimeout bounds one background publish.
const offerTimeout = 5 * time.Second

// Offer returns a function that publishes on b without ever blocking its
// caller — the session workflow's code, which must not wait on I/O: a
// Local publishes at once (it never blocks), any other broker in the
// background, in order, dropping what a full queue cannot hold (a stream
// then has it from its turn query). stop ends the background publishing.
func Offer(b activities.Broker, log *slog.Logger) (offer func(topic string, d activities.Delta), stop func()) {
	if l, ok := b.(*Local); ok {
		return func(topic string, d activities.Delta) { _ = l.Publish(context.Background(), topic, d) }, func() {}
	}
	type item struct {
		topic string
		d     activities.Delta
	}
	q, done := make(chan item, offerQueue), make(chan struct{})
	go func() {
		defer close(done)
		for it := range q {
			ctx, cancel := context.WithTimeout(context.Background(), offerTimeout)
			if err := b.Publish(ctx, it.topic, it.d); err != nil {
				log.Debug("broker: offered delta", "topic", it.topic, "error", err)
			}
			cancel()
		}
	}()
	var once sync.Once
	var mu sync.RWMutex
	closed := false
	offer = func(topic string, d activities.Delta) {
		mu.RLock()
		defer mu.RUnlock()
		if closed {
			return
		}
		select {
		case q <- item{topic, d}:
		default:
		}
	}
	stop = func() {
		once.Do(func() {
			mu.Lock()
			closed = true
			close(q)
			mu.Unlock()
			<-done
		})
	}
	return offer, stop
}
