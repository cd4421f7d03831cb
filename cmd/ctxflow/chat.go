package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/ctxflow/ctxflow/convo"
	"github.com/ctxflow/ctxflow/workflows"
)

// ctxflow chat: a terminal REPL against the HTTP API. Each line is a turn
// of one session, streamed (server-sent events; a dropped stream resumes
// with Last-Event-ID); lines starting with / are commands (chatHelp).

const chatHelp = `  a line of text   a question: a turn of the session, its answer streamed
  /task GOAL       start an agent task and wait for its answer (or its pause)
  /continue        continue the session's paused task
  /steps           the steps of the last turn, with their details
  /branch ID       make message ID the active leaf: the next question follows it
  /tree            the session's messages as a tree (see /branch)
  /session         the session's state
  /help            this text
  /quit            leave (or Ctrl-D)
`

// chatOptions are what `ctxflow chat` talks to.
type chatOptions struct {
	API      string // the API's base URL
	Key      string // API key, sent as a bearer token ("" for none)
	Session  string
	MaxSteps int // maxSteps of the tasks /task starts (0: the session's)
}

// runChat parses `ctxflow chat`'s flags and runs the REPL on in and out.
func runChat(ctx context.Context, args []string, in io.Reader, out, errOut io.Writer) error {
	fs := flag.NewFlagSet("chat", flag.ContinueOnError)
	fs.SetOutput(errOut)
	var o chatOptions
	fs.StringVar(&o.API, "api", apiURL(), "the API's base URL ($CTXFLOW_API_URL)")
	fs.StringVar(&o.Key, "key", os.Getenv("CTXFLOW_API_KEY"), "API key, sent as a bearer token ($CTXFLOW_API_KEY)")
	fs.StringVar(&o.Session, "session", "", "session id (default: a new one)")
	fs.IntVar(&o.MaxSteps, "max-steps", 0, "maxSteps of the tasks /task starts (default: the session's)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("chat: unexpected argument %q", fs.Arg(0))
	}
	if o.Session == "" {
		o.Session = newChatID("chat")
	}
	chatREPL(ctx, o, in, out)
	return nil
}

// apiURL is the API the client commands talk to by default.
func apiURL() string { return cmp.Or(os.Getenv("CTXFLOW_API_URL"), "http://localhost:8080") }

// chatREPL reads questions and commands from in until /quit, the end of
// in or the end of ctx, and writes what the API at o.API answers to out.
// API errors are printed as one line, "error CODE: MESSAGE".
func chatREPL(ctx context.Context, o chatOptions, in io.Reader, out io.Writer) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c := &chat{base: strings.TrimRight(o.API, "/"), o: o, out: out, hc: &http.Client{}}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(in)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-ctx.Done():
				return
			}
		}
	}()

	fmt.Fprintf(out, "ctxflow chat: session %s at %s (/help for commands)\n", o.Session, c.base)
	var st workflows.SessionState
	var ce *chatError
	switch err := c.call(ctx, http.MethodGet, "", nil, &st); {
	case err == nil:
		fmt.Fprintf(out, "%d turns so far\n", st.Turns)
	case errors.As(err, &ce) && ce.Code == "not_found":
		fmt.Fprintln(out, "a new session")
	default:
		c.fail(err)
	}
	for {
		fmt.Fprintf(out, "%s> ", o.Session)
		var line string
		var ok bool
		select {
		case line, ok = <-lines:
		case <-ctx.Done():
		}
		if !ok {
			fmt.Fprintln(out)
			return
		}
		line = strings.TrimSpace(line)
		cmd, arg, _ := strings.Cut(line, " ")
		arg = strings.TrimSpace(arg)
		switch {
		case line == "":
		case !strings.HasPrefix(line, "/"):
			c.ask(ctx, line)
		case cmd == "/quit" || cmd == "/exit":
			return
		case cmd == "/help":
			fmt.Fprint(out, chatHelp)
		case cmd == "/continue":
			c.task(ctx, "/continue?wait=true", struct{}{})
		case cmd == "/task" && arg != "":
			body := map[string]any{"goal": arg}
			if o.MaxSteps > 0 {
				body["config"] = map[string]int{"maxSteps": o.MaxSteps}
			}
			c.task(ctx, "/tasks?wait=true", body)
		case cmd == "/steps":
			c.steps(ctx)
		case cmd == "/branch" && arg != "":
			var r struct{ ActiveLeaf string }
			if err := c.call(ctx, http.MethodPost, "/branch", map[string]string{"fromMessageId": arg}, &r); err != nil {
				c.fail(err)
			} else {
				fmt.Fprintf(out, "active leaf: %s (the next question follows it)\n", r.ActiveLeaf)
			}
		case cmd == "/tree":
			c.tree(ctx)
		case cmd == "/session":
			c.session(ctx)
		case cmd == "/task" || cmd == "/branch":
			fmt.Fprintf(out, "usage: %s\n", map[string]string{"/task": "/task GOAL", "/branch": "/branch MESSAGE_ID"}[cmd])
		default:
			fmt.Fprintf(out, "unknown command %s (/help lists them)\n", cmd)
		}
	}
}

// chat is a REPL's client of the API.
type chat struct {
	base string
	o    chatOptions
	out  io.Writer
	hc   *http.Client
	last string // the last turn this REPL asked
}

// chatError is an API error (or "network" when there was no answer).
type chatError struct{ Code, Message string }

func (e *chatError) Error() string { return e.Code + ": " + e.Message }

// fail prints err as one line.
func (c *chat) fail(err error) {
	var ce *chatError
	if !errors.As(err, &ce) {
		ce = &chatError{"internal", err.Error()}
	}
	fmt.Fprintf(c.out, "error %s: %s\n", ce.Code, strings.Join(strings.Fields(ce.Message), " "))
}

// request sends a request about the session (path under
// /v1/sessions/{id}); an answer that is not 2xx is a *chatError.
func (c *chat) request(ctx context.Context, method, path string, body any, header map[string]string) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+"/v1/sessions/"+url.PathEscape(c.o.Session)+path, rd)
	if err != nil {
		return nil, &chatError{"invalid_argument", err.Error()}
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	if c.o.Key != "" {
		req.Header.Set("Authorization", "Bearer "+c.o.Key)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, &chatError{"network", err.Error()}
	}
	if resp.StatusCode < 300 {
		return resp, nil
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var e struct{ Error chatError }
	if json.Unmarshal(data, &e) != nil || e.Error.Code == "" {
		e.Error = chatError{"http_" + strconv.Itoa(resp.StatusCode), convo.Clip(cmp.Or(string(data), resp.Status), 200)}
	}
	return nil, &e.Error
}

// call sends a JSON request and decodes the JSON answer into out.
func (c *chat) call(ctx context.Context, method, path string, body, out any) error {
	resp, err := c.request(ctx, method, path, body, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return &chatError{"internal", fmt.Sprintf("decode %s %s: %v", method, path, err)}
	}
	return nil
}

// ask sends a question as a streamed turn and shows it: the answer's
// tokens as they come, then the steps.
func (c *chat) ask(ctx context.Context, question string) {
	c.last = newChatID("cli")
	v := &turnView{out: c.out}
	stream := map[string]string{"Accept": "text/event-stream"}
	resp, err := c.request(ctx, http.MethodPost, "/turns", map[string]string{"question": question, "turnId": c.last}, stream)
	for drops := 0; ; drops++ {
		if err != nil {
			v.newline()
			c.fail(err)
			return
		}
		if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") || drops > 5 {
			// An answer without a stream: the result, or a queued turn.
			var res workflows.TurnResult
			if drops <= 5 {
				err = json.NewDecoder(resp.Body).Decode(&res)
			}
			resp.Body.Close()
			if err == nil && !res.Done() {
				res, err = c.await(ctx, c.last)
			}
			if err == nil {
				v.end(res, drops)
				return
			}
			continue
		}
		v.read(resp.Body)
		resp.Body.Close()
		switch {
		case v.final != nil:
			v.end(*v.final, drops)
			return
		case v.failure != nil:
			err = v.failure
			continue
		case ctx.Err() != nil:
			v.newline()
			return
		}
		// Dropped: resume after the last event seen. Tokens are not sent
		// again, so the rest of the answer comes from the final result.
		v.quiet = true
		resp, err = c.resume(ctx, v.lastID)
	}
}

// resume opens the turn's event stream after event lastID, retrying a
// few times while the API does not answer.
func (c *chat) resume(ctx context.Context, lastID string) (*http.Response, error) {
	h := map[string]string{"Accept": "text/event-stream"}
	if lastID != "" {
		h["Last-Event-ID"] = lastID
	}
	for i := 1; ; i++ {
		resp, err := c.request(ctx, http.MethodGet, "/turns/"+url.PathEscape(c.last)+"/events", nil, h)
		var ce *chatError
		if err == nil || i == 5 || !errors.As(err, &ce) || ce.Code != "network" || !sleepCtx(ctx, time.Duration(i)*300*time.Millisecond) {
			return resp, err
		}
	}
}

// await polls a turn until it is done.
func (c *chat) await(ctx context.Context, turnID string) (workflows.TurnResult, error) {
	for delay := 150 * time.Millisecond; ; delay = min(delay*3/2, time.Second) {
		var res workflows.TurnResult
		if err := c.call(ctx, http.MethodGet, "/turns/"+url.PathEscape(turnID), nil, &res); err != nil || res.Done() {
			return res, err
		}
		if !sleepCtx(ctx, delay) {
			return res, ctx.Err()
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	select {
	case <-time.After(d):
		return true
	case <-ctx.Done():
		return false
	}
}

// turnView shows one streamed turn.
type turnView struct {
	out     io.Writer
	text    strings.Builder // the answer shown so far
	quiet   bool            // tokens are no longer shown (the stream was resumed)
	lastID  string          // the last event id received
	final   *workflows.TurnResult
	failure *chatError
}

// read handles the events of one stream until its final event or its end.
func (v *turnView) read(body io.Reader) {
	r := bufio.NewReader(body)
	var event, id string
	var data strings.Builder
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return // the end of the stream, or a part of an event: not seen
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			if id != "" {
				v.lastID = id
			}
			if v.event(event, data.String()) {
				return
			}
			event, id = "", ""
			data.Reset()
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			event = value
		case "id":
			id = value
		case "data":
			if data.Len() > 0 {
				data.WriteByte('\n')
			}
			data.WriteString(value)
		}
	}
}

// event handles an event; true at the final one.
func (v *turnView) event(name, data string) bool {
	switch name {
	case "token":
		var t struct {
			Text  string
			Reset bool
		}
		if v.quiet || json.Unmarshal([]byte(data), &t) != nil {
			return false
		}
		if t.Reset && v.text.Len() > 0 {
			fmt.Fprint(v.out, "\n[the model call was retried: the answer starts again]\n")
			v.text.Reset()
		}
		v.text.WriteString(t.Text)
		io.WriteString(v.out, t.Text)
	case "error":
		var e struct{ Error chatError }
		if json.Unmarshal([]byte(data), &e) == nil {
			v.failure = &e.Error
		}
	case "final":
		var res workflows.TurnResult
		if err := json.Unmarshal([]byte(data), &res); err != nil {
			v.failure = &chatError{"internal", "decode the final event: " + err.Error()}
			return false
		}
		v.final = &res
		return true
	}
	return false
}

func (v *turnView) newline() {
	if v.text.Len() > 0 {
		fmt.Fprintln(v.out)
		v.text.Reset()
	}
}

// end shows the rest of the answer (what the tokens did not show), the
// turn's error or task, and its steps.
func (v *turnView) end(res workflows.TurnResult, drops int) {
	shown := strings.TrimLeft(v.text.String(), " \t\r\n")
	switch {
	case res.Answer == "" || strings.TrimSpace(shown) == strings.TrimSpace(res.Answer):
	case strings.HasPrefix(res.Answer, shown):
		fmt.Fprint(v.out, res.Answer[len(shown):])
	default:
		fmt.Fprint(v.out, "\n", res.Answer)
	}
	if v.text.Len() > 0 || res.Answer != "" {
		fmt.Fprintln(v.out)
	}
	v.text.Reset()
	showResult(v.out, res, v.failure, drops)
}

// showResult writes a turn's error, task and steps.
func showResult(out io.Writer, res workflows.TurnResult, failure *chatError, drops int) {
	if res.Status != workflows.TurnCompleted {
		e := chatError{res.ErrorCode, res.Error}
		if failure != nil {
			e = *failure
		}
		fmt.Fprintf(out, "error %s: %s\n", cmp.Or(e.Code, "unavailable"), strings.Join(strings.Fields(e.Message), " "))
	}
	if t := res.Task; t != nil {
		switch t.Status {
		case workflows.TaskPaused:
			fmt.Fprintf(out, "task %s paused at step %d: /continue goes on\n", t.TaskID, t.Step)
		default:
			fmt.Fprintf(out, "task %s %s at step %d\n", t.TaskID, t.Status, t.Step)
		}
	}
	parts := make([]string, 0, len(res.Steps))
	for _, s := range res.Steps {
		p := s.Name + " " + showMS(s.DurationMS)
		if s.Status != "ok" {
			p += " " + s.Status
		}
		parts = append(parts, p)
	}
	var notes []string
	if !res.ReceivedAt.IsZero() && res.CompletedAt.After(res.ReceivedAt) {
		notes = append(notes, showMS(res.CompletedAt.Sub(res.ReceivedAt).Milliseconds())+" in all")
	}
	engine := res.Engine
	if engine == "" && res.Task != nil {
		engine = res.Task.Engine
	}
	if engine != "offline" && res.Model != "" { // the offline engine has no model
		engine = strings.TrimSpace(engine + " " + res.Model)
	}
	if engine != "" {
		notes = append(notes, engine)
	}
	if drops > 0 {
		notes = append(notes, fmt.Sprintf("stream resumed %d×", drops))
	}
	if len(notes) > 0 {
		parts = append(parts, "("+strings.Join(notes, ", ")+")")
	}
	if len(parts) > 0 {
		fmt.Fprintf(out, "  steps: %s\n", strings.Replace(strings.Join(parts, " → "), " → (", " (", 1))
	}
}

func showMS(ms int64) string {
	if ms < 1000 {
		return strconv.FormatInt(ms, 10) + "ms"
	}
	return strconv.FormatFloat(float64(ms)/1000, 'f', 1, 64) + "s"
}

// task starts or continues the session's agent task and shows its answer
// (or progress summary).
func (c *chat) task(ctx context.Context, path string, body any) {
	var res workflows.TurnResult
	if err := c.call(ctx, http.MethodPost, path, body, &res); err != nil {
		c.fail(err)
		return
	}
	c.last = res.TurnID
	if res.Answer != "" {
		fmt.Fprintln(c.out, res.Answer)
	}
	showResult(c.out, res, nil, 0)
}

// steps shows the last turn's steps with their details.
func (c *chat) steps(ctx context.Context) {
	var r struct{ Turns []workflows.TurnSteps }
	if err := c.call(ctx, http.MethodGet, "/steps", nil, &r); err != nil {
		c.fail(err)
		return
	}
	if len(r.Turns) == 0 {
		fmt.Fprintln(c.out, "no turns yet")
		return
	}
	t := r.Turns[len(r.Turns)-1]
	for _, x := range r.Turns {
		if x.TurnID == c.last {
			t = x
		}
	}
	fmt.Fprintf(c.out, "turn %s (%s)\n", t.TurnID, t.Status)
	for _, s := range t.Steps {
		details := ""
		if len(s.Details) > 0 {
			b, _ := json.Marshal(s.Details)
			details = convo.Clip(string(b), 160)
		}
		fmt.Fprintf(c.out, "  %-15s %-8s %6s  %s\n", s.Name, s.Status, showMS(s.DurationMS), details)
	}
}

// tree shows the session's message tree: a chain of messages at one
// indent, the branches below a message indented and marked "+".
func (c *chat) tree(ctx context.Context) {
	type node struct {
		ID, Role, Preview string
		Children          []string
	}
	var t struct {
		ActiveLeaf string
		Roots      []string
		Nodes      []node
	}
	if err := c.call(ctx, http.MethodGet, "/tree", nil, &t); err != nil {
		c.fail(err)
		return
	}
	nodes := make(map[string]node, len(t.Nodes))
	for _, n := range t.Nodes {
		nodes[n.ID] = n
	}
	var walk func(id, indent, mark string)
	walk = func(id, indent, mark string) {
		for n, ok := nodes[id]; ok; n, ok = nodes[id] {
			active := ""
			if id == t.ActiveLeaf {
				active = "  ← active"
			}
			fmt.Fprintf(c.out, "%s%s%s %s: %s%s\n", indent, mark, n.ID, n.Role, convo.Clip(strings.Join(strings.Fields(n.Preview), " "), 60), active)
			if mark != "" {
				indent, mark = indent+"  ", ""
			}
			if len(n.Children) != 1 {
				for _, ch := range n.Children {
					walk(ch, indent, "+ ")
				}
				return
			}
			id = n.Children[0]
		}
	}
	for _, r := range t.Roots {
		walk(r, "", "")
	}
	if len(t.Nodes) == 0 {
		fmt.Fprintln(c.out, "no messages yet")
	}
}

// session shows the session's state.
func (c *chat) session(ctx context.Context) {
	var s struct {
		workflows.SessionState
		SummaryText string `json:"summaryText"`
	}
	if err := c.call(ctx, http.MethodGet, "", nil, &s); err != nil {
		c.fail(err)
		return
	}
	fmt.Fprintf(c.out, "session %s (tenant %s): %s, health %s\n  %d turns, %d messages, tokens %d → %d (%d trimmed), active leaf %s\n",
		s.SessionID, s.Tenant, s.Status, s.Health, s.Turns, s.Messages, s.TokensBefore, s.TokensAfter, s.TrimmedCount, cmp.Or(s.ActiveLeaf, "none"))
	if s.DegradedReason != "" {
		fmt.Fprintf(c.out, "  degraded: %s\n", s.DegradedReason)
	}
	if s.SummaryText != "" {
		fmt.Fprintf(c.out, "  summary: %s\n", convo.Clip(strings.Join(strings.Fields(s.SummaryText), " "), 200))
	}
	if t := s.Task; t != nil {
		fmt.Fprintf(c.out, "  task %s: %s at step %d, paused %d×\n", t.TaskID, t.Status, t.Step, t.Pauses)
	}
}

func newChatID(prefix string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}
