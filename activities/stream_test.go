package activities_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/activities/transcript"
	"github.com/ctxflow/ctxflow/convo"
)

// deltaLog is a Broker that records what is published.
type deltaLog struct {
	mu     sync.Mutex
	deltas []activities.Delta
}

func (b *deltaLog) Publish(_ context.Context, _ string, d activities.Delta) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.deltas = append(b.deltas, d)
	return nil
}

func (b *deltaLog) Subscribe(context.Context, string) (<-chan activities.Delta, error) {
	return nil, nil
}

// twoTokens answers "Hel" "lo", streamed.
type twoTokens struct{}

func (twoTokens) Chat(_ context.Context, _ activities.ChatRequest, onDelta func(string)) (activities.ChatResponse, error) {
	onDelta("Hel")
	onDelta("lo")
	return activities.ChatResponse{Content: "Hello", Model: "m"}, nil
}

// TestGenerateNamesEachCallApart: two executions of the same turn's model
// call (a worker lost in a workflow task makes it again, at attempt 1) stream
// under two call ids, so that a stream starts the answer over instead of
// showing it twice.
func TestGenerateNamesEachCallApart(t *testing.T) {
	store, err := transcript.Open(transcript.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	key := activities.SessionKey{Tenant: "t", SessionID: "s"}
	if _, _, err := store.Append(t.Context(), key, convo.Message{ID: "t1.u", Role: convo.RoleUser, Content: "hi", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	b := &deltaLog{}
	s := &activities.Session{Transcript: store, Model: twoTokens{}, Broker: b}
	for range 2 {
		if _, err := s.Generate(t.Context(), activities.GenerateInput{Session: key, TurnID: "t1", WindowIDs: []string{"t1.u"}, Model: "m"}); err != nil {
			t.Fatal(err)
		}
	}
	d := b.deltas
	if len(d) != 4 || d[0].Call == 0 || d[0].Call != d[1].Call || d[2].Call != d[3].Call || d[0].Call == d[2].Call {
		t.Errorf("deltas %+v: want two calls of two deltas each, with ids of their own", d)
	}
}
