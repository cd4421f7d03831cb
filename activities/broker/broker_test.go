package broker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/activities/broker"
	"github.com/ctxflow/ctxflow/internal/pgtest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Stop()
	os.Exit(code)
}

// receive reads n deltas or fails after a deadline.
func receive(t *testing.T, ch <-chan activities.Delta, n int) []activities.Delta {
	t.Helper()
	var got []activities.Delta
	for len(got) < n {
		select {
		case d, ok := <-ch:
			if !ok {
				t.Fatalf("channel closed after %v", got)
			}
			got = append(got, d)
		case <-time.After(5 * time.Second):
			t.Fatalf("got %v, want %d deltas", got, n)
		}
	}
	return got
}

// conformance: a subscriber gets what is published on its topic after it
// subscribed, in order, and nothing of other topics; its channel closes
// when its context ends.
func conformance(t *testing.T, b activities.Broker) {
	ctx, cancel := context.WithCancel(t.Context())
	ch, err := b.Subscribe(ctx, "acme/s1/t1")
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("长", 5000) // 15 KB: over one notification
	for _, d := range []struct {
		topic string
		delta activities.Delta
	}{
		{"acme/s1/t2", activities.Delta{Call: 1, Text: "other turn"}},
		{"acme/s1/t1", activities.Delta{Call: 1, Text: "Hello"}},
		{"acme/s1/t1", activities.Delta{Call: 1, Text: ", 世界"}},
		{"acme/s1/t1", activities.Delta{Call: 2, Text: long}},
	} {
		if err := b.Publish(t.Context(), d.topic, d.delta); err != nil {
			t.Fatal(err)
		}
	}
	got := receive(t, ch, 2)
	if got[0] != (activities.Delta{Call: 1, Text: "Hello"}) || got[1] != (activities.Delta{Call: 1, Text: ", 世界"}) {
		t.Fatalf("got %v", got)
	}
	var text strings.Builder
	for text.Len() < len(long) {
		d := receive(t, ch, 1)[0]
		if d.Call != 2 {
			t.Fatalf("delta %+v", d)
		}
		text.WriteString(d.Text)
	}
	if text.String() != long {
		t.Fatalf("the long delta came back as %d bytes", text.Len())
	}
	// Step events offered by a session's workflow code (never blocking
	// it) come in order, whole.
	offer, stop := broker.Offer(b, slog.Default())
	end := json.RawMessage(`{"name":"load_context","status":"ok","durationMs":3}`)
	offer("acme/s1/t1", activities.Delta{Step: &activities.StepDelta{Index: 0, End: end}})
	offer("acme/s1/t1", activities.Delta{Step: &activities.StepDelta{Index: 1, Name: "generate"}})
	stop()
	stop()                                                                                     // twice is fine
	offer("acme/s1/t1", activities.Delta{Step: &activities.StepDelta{Index: 2, Name: "save"}}) // after stop: dropped (Local: sent)
	got = receive(t, ch, 2)
	if s := got[0].Step; s == nil || s.Index != 0 || string(s.End) != string(end) || got[0].Text != "" {
		t.Fatalf("step end %+v", got[0])
	}
	if s := got[1].Step; s == nil || s.Index != 1 || s.Name != "generate" || s.End != nil {
		t.Fatalf("step start %+v", got[1])
	}
	if _, local := b.(*broker.Local); local {
		receive(t, ch, 1)
	}
	cancel()
	select {
	case _, ok := <-ch:
		if ok {
			t.Fatal("a delta after the end")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the channel did not close")
	}
	// Publishing with nobody listening is fine.
	if err := b.Publish(t.Context(), "acme/s1/t1", activities.Delta{Call: 1, Text: "late"}); err != nil {
		t.Fatal(err)
	}
}

func TestLocal(t *testing.T) { conformance(t, broker.NewLocal()) }

func TestPostgres(t *testing.T) {
	b, err := broker.OpenPostgres(t.Context(), pgtest.Database(t)+"&pool_max_conns=4")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	conformance(t, b)
	// A subscription holds no connection: 200 at once, on a pool of 4,
	// each get what is published on their topic while they wait.
	const streams = 200
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	chans := make([]<-chan activities.Delta, streams)
	for i := range streams {
		if chans[i], err = b.Subscribe(ctx, fmt.Sprintf("acme/burst-%d/t1", i)); err != nil {
			t.Fatalf("subscription %d: %v", i, err)
		}
	}
	var wg sync.WaitGroup
	for i := range streams {
		wg.Go(func() {
			if err := b.Publish(ctx, fmt.Sprintf("acme/burst-%d/t1", i), activities.Delta{Call: 1, Text: fmt.Sprint("answer ", i)}); err != nil {
				t.Error(err)
			}
		})
	}
	for i, ch := range chans {
		if d := receive(t, ch, 1)[0]; d.Text != fmt.Sprint("answer ", i) {
			t.Fatalf("stream %d got %+v", i, d)
		}
	}
	wg.Wait()
}
