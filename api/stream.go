package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/gin-gonic/gin"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/convo"
	"github.com/ctxflow/ctxflow/workflows"
)

// Streaming turns (server-sent events). POST .../turns with Accept:
// text/event-stream queues the turn and streams it: `accepted`, then each
// `step` as it starts (status "running") and as it ends, the answer's
// `token`s as the model writes them, and at the end `pause` (a paused
// task), `error` (a failed turn) and `final` (the whole turn result), or
// `cancelled` (a cancelled turn's result, its partial answer). The
// steps come from the broker as the session's workflow runs them, and
// from its turn query, which also has the end; the tokens come from the
// broker. Step and end events have ids, derived from the turn's
// steps, so GET .../turns/{turnId}/events with Last-Event-ID resumes a
// dropped stream where it was; tokens have none (the final event carries
// the whole answer), and a token with "reset" starts the answer again (a
// retried model call). The tokens add up to the answer before the final
// event (tokens.finish).

// pollEvery is how often a stream reads its turn's progress.
const pollEvery = 100 * time.Millisecond

// deltaGrace is how long a stream whose turn has ended waits for answer
// deltas still on their way: the broker delivers them apart from the turn's
// result (PostgreSQL's notifications on a connection of their own).
const deltaGrace = 300 * time.Millisecond

// wantsStream reports a request for server-sent events.
func wantsStream(c *gin.Context) bool {
	return strings.Contains(c.GetHeader("Accept"), "text/event-stream")
}

// sse writes server-sent events.
type sse struct{ c *gin.Context }

func startSSE(c *gin.Context) sse {
	h := c.Writer.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	c.Status(http.StatusOK)
	c.Writer.Flush()
	return sse{c}
}

// send writes one event (id "" for none) and flushes it.
func (w sse) send(event, id string, data any) {
	b, err := json.Marshal(data)
	if err != nil {
		b, _ = json.Marshal(gin.H{"error": gin.H{"code": activities.CodeInternal, "message": err.Error()}})
		event = "error"
	}
	if id != "" {
		fmt.Fprintf(w.c.Writer, "id: %s\n", id)
	}
	fmt.Fprintf(w.c.Writer, "event: %s\ndata: %s\n\n", event, b)
	w.c.Writer.Flush()
}

// streamTurn sends a turn and streams it. The stream starts when the
// session has accepted the turn, or earlier, when a step of the turn comes
// on the broker: the session accepts a fast model's turn only when the
// workflow task that runs the whole turn ends, and until then its steps
// and tokens would wait. A step means the session runs the turn; a
// submission that fails after all then ends the stream with an error
// event (before the stream, a plain JSON error).
func (s *Server) streamTurn(c *gin.Context, ref sessionRef, req workflows.TurnRequest) {
	if req.TurnID == "" {
		req.TurnID = newID("turn")
	}
	if err := workflows.ValidateTurn(req, s.opts.Defaults, s.opts.Limits); err != nil {
		writeError(c, errInvalid("%s", err))
		return
	}
	in, err := s.sessionInput(ref, "", s.opts.Defaults)
	if err != nil {
		writeError(c, err)
		return
	}
	// Listen before the turn is queued: no delta can come before it.
	deltas := s.subscribe(c, ref, req.TurnID)
	ctx, cancel := context.WithTimeout(c.Request.Context(), submitWait)
	defer cancel()
	opts := s.startOptions(ref, "", s.opts.Defaults)
	submitted := make(chan error, 1)
	var res workflows.TurnResult
	go func() {
		var err error
		res, err = s.sendTurn(ctx, ref, workflows.UpdateSubmit, req, opts, in)
		submitted <- err
	}()
	var early []activities.Delta // what came before the stream started
	status := ""
	for status == "" {
		select {
		case err := <-submitted:
			if err != nil {
				writeError(c, err)
				return
			}
			submitted, status = nil, res.Status
		case d, ok := <-deltas:
			if !ok { // the client left (its request's context ended)
				deltas = nil
				continue
			}
			if early = append(early, d); d.Step != nil {
				status = workflows.TurnRunning
			}
		}
	}
	w := startSSE(c)
	w.send("accepted", "0", gin.H{"sessionId": ref.id, "turnId": req.TurnID, "status": status})
	s.follow(c, ref, req.TurnID, w, deltas, 0, early, submitted)
}

// turnEvents answers GET /v1/sessions/{id}/turns/{turnId}/events: the
// stream of a turn, after the event named by Last-Event-ID.
func (s *Server) turnEvents(c *gin.Context) {
	ref, turnID, err := turnOf(c)
	if err != nil {
		writeError(c, err)
		return
	}
	after := 0
	if last := c.GetHeader("Last-Event-ID"); last != "" {
		if after, err = strconv.Atoi(last); err != nil || after < 0 {
			writeError(c, errInvalid("Last-Event-ID %q: want an event id of this stream", convo.Clip(last, 20)))
			return
		}
	}
	deltas := s.subscribe(c, ref, turnID)
	var res workflows.TurnResult
	if err := s.query(c.Request.Context(), ref, workflows.QueryTurn, &res, turnID); err != nil {
		writeError(c, err)
		return
	}
	s.follow(c, ref, turnID, startSSE(c), deltas, after, nil, nil)
}

// subscribe listens to a turn's deltas (nil without a broker, or if it
// fails: the stream then has no tokens, and says why in the log).
func (s *Server) subscribe(c *gin.Context, ref sessionRef, turnID string) <-chan activities.Delta {
	if s.opts.Broker == nil {
		return nil
	}
	ch, err := s.opts.Broker.Subscribe(c.Request.Context(), activities.TurnTopic(ref.key(), turnID))
	if err != nil {
		s.log.Warn("stream without tokens", "session", ref.id, "turn", turnID, "error", err, "requestId", c.GetString("requestID"))
		return nil
	}
	return ch
}

// follow streams a turn until it is done, skipping the events whose ids
// are at most after: first the deltas early (those that came before the
// stream started), then what comes. A turn whose submission is still on
// its way has it on submitted (nil: none): a failed one ends the stream. Steps come from two sources: the broker, on which the
// session's workflow publishes each step as it starts (with the end of the
// one before), and the turn query, read every pollEvery in a goroutine of
// its own (a query waits while the session's workflow task runs, and a
// fast model's whole turn is one: meanwhile tokens and steps go on). Step i
// has id 2i+1 when it starts and 2i+2 when it ends, and each is sent once,
// in that order, whichever source has it first.
func (s *Server) follow(c *gin.Context, ref sessionRef, turnID string, w sse, deltas <-chan activities.Delta, after int,
	early []activities.Delta, submitted <-chan error,
) {
	ctx, cancel := context.WithTimeout(c.Request.Context(), s.opts.TurnWaitTimeout)
	defer cancel()
	emit := func(event string, id int, data any) {
		if id > after {
			w.send(event, strconv.Itoa(id), data)
		}
	}
	// sent steps have ended in the stream; step started's start is sent.
	sent, started, failures := 0, -1, 0
	ended := func(i int, step any) {
		if i == sent {
			emit("step", 2*i+2, step)
			sent++
		}
	}
	starts := func(i int, name string) {
		if i == sent && started < i && name != "" {
			emit("step", 2*i+1, gin.H{"name": name, "status": "running"})
			started = i
		}
	}
	subscribed := deltas != nil
	var said tokens
	delta := func(d activities.Delta, ok bool) {
		switch {
		case !ok:
			deltas = nil
		case d.Step == nil:
			w.send("token", "", said.add(d))
		case d.Step.End != nil:
			ended(d.Step.Index, d.Step.End)
		default:
			starts(d.Step.Index, d.Step.Name)
		}
	}
	for _, d := range early {
		delta(d, true)
	}
	polls := s.poll(ctx, ref, turnID)
	for {
		select {
		case err := <-submitted:
			if submitted = nil; err != nil {
				w.send("error", "", gin.H{"error": gin.H{"code": codeOf(err), "message": err.Error()}})
				return
			}
		case <-ctx.Done():
			if c.Request.Context().Err() == nil {
				w.send("error", "", gin.H{"error": gin.H{"code": activities.CodeUnavailable,
					"message": fmt.Sprintf("turn %s is still running: follow it at GET /v1/sessions/%s/turns/%s", turnID, ref.id, turnID)}})
			}
			return
		case d, ok := <-deltas:
			delta(d, ok)
		case p := <-polls:
			for queued := true; queued && deltas != nil; { // what came before the reading goes first
				select {
				case d, ok := <-deltas:
					delta(d, ok)
				default:
					queued = false
				}
			}
			res, err := p.res, p.err
			if err != nil {
				var ae *apiError
				if failures++; (errors.As(err, &ae) && ae.code == activities.CodeNotFound) || failures > 50 {
					w.send("error", "", gin.H{"error": gin.H{"code": codeOf(err), "message": err.Error()}})
					return
				}
				continue
			}
			failures = 0
			for sent < len(res.Steps) {
				ended(sent, res.Steps[sent])
			}
			starts(len(res.Steps), res.RunningStep)
			if !res.Done() {
				continue
			}
			end := 2*sent + 1
			if res.Status == workflows.TurnCancelled { // the stream ends with it
				emit("cancelled", end+2, res)
				return
			}
			if res.Type == workflows.TypePause || res.Type == workflows.TypeApproval {
				emit(res.Type, end, res)
			}
			if res.Status != workflows.TurnCompleted {
				emit("error", end+1, gin.H{"error": gin.H{"code": turnCode(res), "message": res.Error}})
			} else if subscribed && after == 0 {
				said.finish(ctx, w, deltas, res.Answer)
			}
			emit("final", end+2, res)
			return
		}
	}
}

// polled is one reading of a turn query.
type polled struct {
	res workflows.TurnResult
	err error
}

// poll reads the turn's query every pollEvery until ctx ends, one query at
// a time, each reading handed over before the next query.
func (s *Server) poll(ctx context.Context, ref sessionRef, turnID string) <-chan polled {
	out := make(chan polled)
	go func() {
		t := time.NewTimer(pollEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			var p polled
			p.err = s.query(ctx, ref, workflows.QueryTurn, &p.res, turnID)
			select {
			case out <- p:
			case <-ctx.Done():
				return
			}
			t.Reset(pollEvery)
		}
	}()
	return out
}

// tokens is what a stream has sent of the answer: the model call its
// tokens came from, and their text.
type tokens struct {
	call int
	text strings.Builder
}

// add is d's token event; a delta of another call (a retried model call)
// starts the answer again.
func (t *tokens) add(d activities.Delta) gin.H {
	data := gin.H{"text": d.Text}
	if d.Call != t.call {
		if t.call != 0 {
			data["reset"] = true
		}
		t.call = d.Call
		t.text.Reset()
	}
	t.text.WriteString(d.Text)
	return data
}

// finish makes the tokens add up to the answer (trimmed, as the answer is)
// before the final event: it waits up to deltaGrace for deltas still on
// their way, and sends what never came (a slow subscriber drops deltas, a
// stored answer repeated has none) as one token.
func (t *tokens) finish(ctx context.Context, w sse, deltas <-chan activities.Delta, answer string) {
	grace := time.NewTimer(deltaGrace)
	defer grace.Stop()
	for deltas != nil && strings.TrimSpace(t.text.String()) != answer {
		select {
		case d, ok := <-deltas:
			if !ok {
				deltas = nil
				continue
			}
			if d.Step == nil { // (a step after the turn's end: its summary)
				w.send("token", "", t.add(d))
			}
		case <-grace.C:
			deltas = nil
		case <-ctx.Done():
			return
		}
	}
	got := strings.TrimLeftFunc(t.text.String(), unicode.IsSpace)
	switch {
	case strings.TrimSpace(got) == answer:
	case strings.HasPrefix(answer, got):
		w.send("token", "", gin.H{"text": answer[len(got):]})
	default:
		w.send("token", "", gin.H{"text": answer, "reset": true})
	}
}

// codeOf is an API error's code (internal for others).
func codeOf(err error) string {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae.code
	}
	return activities.CodeInternal
}
