package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ctxflow/ctxflow/activities"
)

// Postgres is a broker on PostgreSQL's LISTEN/NOTIFY: a delta is a
// notification on one channel, its topic in the payload. Each process
// listens on one connection of its own, outside the pool that publishes,
// and fans the deltas out to its subscribers by topic (a Local). So a
// subscription holds no connection: 200 streams of one process need one,
// and never the one their own turn's Publish is waiting for.
type Postgres struct {
	pool   *pgxpool.Pool
	subs   *Local
	stop   context.CancelFunc
	done   chan struct{}
	logger *slog.Logger
}

var _ activities.Broker = (*Postgres)(nil)

// deltas is the notification channel of every delta.
const deltas = "ctxflow_deltas"

// wire is a notification's payload.
type wire struct {
	Topic string `json:"topic"`
	activities.Delta
}

// OpenPostgres connects to the database at url and listens.
func OpenPostgres(ctx context.Context, url string) (*Postgres, error) {
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("broker: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("broker: %w", err)
	}
	conn, err := listen(ctx, pool.Config().ConnConfig)
	if err != nil {
		pool.Close()
		return nil, err
	}
	lctx, stop := context.WithCancel(context.Background())
	p := &Postgres{pool: pool, subs: NewLocal(), stop: stop, done: make(chan struct{}), logger: slog.Default().With("component", "broker")}
	go p.run(lctx, conn)
	return p, nil
}

// listen opens the listening connection.
func listen(ctx context.Context, cfg *pgx.ConnConfig) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, cfg.Copy())
	if err != nil {
		return nil, fmt.Errorf("broker: listen: %w", err)
	}
	if _, err := conn.Exec(ctx, "LISTEN "+deltas); err != nil {
		_ = conn.Close(ctx)
		return nil, fmt.Errorf("broker: listen: %w", err)
	}
	return conn, nil
}

// run hands each notification to the topic's subscribers until ctx ends,
// connecting again when the connection breaks (the deltas meanwhile are
// lost: a stream then ends with its turn's result, which holds the answer).
func (p *Postgres) run(ctx context.Context, conn *pgx.Conn) {
	defer close(p.done)
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			_ = conn.Close(context.Background())
			for backoff := 100 * time.Millisecond; ; backoff = min(2*backoff, 5*time.Second) {
				if ctx.Err() != nil {
					return
				}
				p.logger.Warn("broker: listening again", "error", err)
				if conn, err = listen(ctx, p.pool.Config().ConnConfig); err == nil {
					break
				}
				select {
				case <-ctx.Done():
					return
				case <-time.After(backoff):
				}
			}
			continue
		}
		var w wire
		if json.Unmarshal([]byte(n.Payload), &w) == nil {
			_ = p.subs.Publish(ctx, w.Topic, w.Delta)
		}
	}
}

// Close stops listening and releases the connections.
func (p *Postgres) Close() error {
	p.stop()
	<-p.done
	p.pool.Close()
	return nil
}

// maxText keeps a notification under PostgreSQL's 8000-byte payload limit,
// with room for the topic.
const maxText = 5000

// maxPayload is PostgreSQL's limit on a notification's payload.
const maxPayload = 8000

// Publish implements [activities.Broker]; a long delta goes as several
// notifications, cut at rune boundaries. A step event goes as one, or not
// at all when it is too long for one (the stream has it from the turn
// query).
func (p *Postgres) Publish(ctx context.Context, topic string, d activities.Delta) error {
	if d.Step != nil {
		b, err := json.Marshal(wire{Topic: topic, Delta: d})
		if err != nil {
			return err
		}
		if len(b) >= maxPayload {
			return fmt.Errorf("broker: step %d on %s: %d bytes, more than a notification holds", d.Step.Index, topic, len(b))
		}
		if _, err := p.pool.Exec(ctx, "SELECT pg_notify($1, $2)", deltas, string(b)); err != nil {
			return fmt.Errorf("broker: publish on %s: %w", topic, err)
		}
		return nil
	}
	text := d.Text
	for first := true; first || text != ""; first = false {
		part := text
		if len(part) > maxText {
			cut := maxText
			for cut > 0 && !utf8.RuneStart(part[cut]) {
				cut--
			}
			part = part[:cut]
		}
		text = text[len(part):]
		b, err := json.Marshal(wire{Topic: topic, Delta: activities.Delta{Call: d.Call, Text: part}})
		if err != nil {
			return err
		}
		if _, err := p.pool.Exec(ctx, "SELECT pg_notify($1, $2)", deltas, string(b)); err != nil {
			return fmt.Errorf("broker: publish on %s: %w", topic, err)
		}
	}
	return nil
}

// Subscribe implements [activities.Broker]: the process already listens,
// so what is published after it returns is received.
func (p *Postgres) Subscribe(ctx context.Context, topic string) (<-chan activities.Delta, error) {
	return p.subs.Subscribe(ctx, topic)
}
