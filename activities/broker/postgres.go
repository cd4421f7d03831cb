package broker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ctxflow/ctxflow/activities"
)

// Postgres is a broker on PostgreSQL's LISTEN/NOTIFY: a delta is a
// notification on the topic's channel, and each subscriber listens on a
// connection of its own.
type Postgres struct{ pool *pgxpool.Pool }

var _ activities.Broker = (*Postgres)(nil)

// OpenPostgres connects to the database at url.
func OpenPostgres(ctx context.Context, url string) (*Postgres, error) {
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("broker: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("broker: %w", err)
	}
	return &Postgres{pool: pool}, nil
}

// Close releases the connections.
func (p *Postgres) Close() error { p.pool.Close(); return nil }

// channel is a topic's notification channel: an identifier whatever the
// topic holds.
func channel(topic string) string {
	sum := sha256.Sum256([]byte(topic))
	return "ctxflow_" + hex.EncodeToString(sum[:12])
}

// maxText keeps a notification under PostgreSQL's 8000-byte payload limit.
const maxText = 6000

// Publish implements [activities.Broker]; a long delta goes as several
// notifications, cut at rune boundaries.
func (p *Postgres) Publish(ctx context.Context, topic string, d activities.Delta) error {
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
		b, err := json.Marshal(activities.Delta{Call: d.Call, Text: part})
		if err != nil {
			return err
		}
		if _, err := p.pool.Exec(ctx, "SELECT pg_notify($1, $2)", channel(topic), string(b)); err != nil {
			return fmt.Errorf("broker: publish on %s: %w", topic, err)
		}
	}
	return nil
}

// Subscribe implements [activities.Broker]: it returns once the
// connection listens, so what is published after it is received.
func (p *Postgres) Subscribe(ctx context.Context, topic string) (<-chan activities.Delta, error) {
	conn, err := p.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("broker: subscribe to %s: %w", topic, err)
	}
	ch := channel(topic) // an identifier: [a-z0-9_]
	if _, err := conn.Exec(ctx, "LISTEN "+ch); err != nil {
		conn.Release()
		return nil, fmt.Errorf("broker: subscribe to %s: %w", topic, err)
	}
	out := make(chan activities.Delta, subscriberBuffer)
	go func() {
		defer close(out)
		for {
			n, err := conn.Conn().WaitForNotification(ctx)
			if err != nil {
				// ctx ended (or the connection broke): this connection's
				// LISTEN must not outlive the subscription.
				uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
				if _, uerr := conn.Exec(uctx, "UNLISTEN "+ch); uerr != nil {
					_ = conn.Hijack().Close(uctx) // a connection in an unknown state is dropped
				} else {
					conn.Release()
				}
				cancel()
				return
			}
			var d activities.Delta
			if json.Unmarshal([]byte(n.Payload), &d) != nil {
				continue
			}
			select {
			case out <- d:
			default: // a slow subscriber loses deltas, never blocks the connection
			}
		}
	}()
	return out, nil
}
