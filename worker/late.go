package worker

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/activities/ollama"
)

// lateModel is the chat model of a worker that started without its Ollama
// model (Ollama down, or the model not pulled): the offline engine answers
// until a probe, at most every interval, finds the model; from then on
// Ollama answers, and every answer says which engine gave it. Sessions move
// to the model without a restart; the offline grader and planner stay
// until one (they were chosen for the offline engine).
type lateModel struct {
	offline  activities.ChatModel
	client   *ollama.Client
	model    string
	interval time.Duration
	log      *slog.Logger

	live atomic.Bool
	mu   sync.Mutex // one probe at a time
	next time.Time
}

// probeTimeout bounds one probe: a turn never waits longer for it.
const probeTimeout = time.Second

// Chat implements [activities.ChatModel].
func (m *lateModel) Chat(ctx context.Context, req activities.ChatRequest, onDelta func(string)) (activities.ChatResponse, error) {
	if m.ready(ctx) {
		resp, err := m.client.Chat(ctx, req, onDelta)
		resp.Engine = "ollama"
		return resp, err
	}
	return m.offline.Chat(ctx, req, onDelta)
}

// ready reports whether Ollama serves the model, asking it at most every
// interval (and never again once it does).
func (m *lateModel) ready(ctx context.Context) bool {
	if m.live.Load() {
		return true
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.live.Load() || time.Now().Before(m.next) {
		return m.live.Load()
	}
	m.next = time.Now().Add(m.interval)
	pctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	if ok, err := m.client.HasModel(pctx, m.model); err != nil || !ok {
		m.log.Debug("ollama model still missing", "model", m.model, "error", err)
		return false
	}
	m.log.Info("model provider: ollama now serves the model; answers move from the offline engine", "model", m.model, "host", m.client.Host())
	m.live.Store(true)
	return true
}
