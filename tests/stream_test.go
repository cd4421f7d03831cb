package tests

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctxflow/ctxflow/internal/pgtest"
	"github.com/ctxflow/ctxflow/tests/fakeollama"
	"github.com/ctxflow/ctxflow/workflows"
)

type sseEvent struct{ id, name, data string }

// openStream posts a streamed turn and returns its events as they come.
func (s apiClient) openStream(ctx context.Context, t *testing.T, method, path string, body any, header ...string) <-chan sseEvent {
	t.Helper()
	var rd *bytes.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	req, _ := http.NewRequestWithContext(ctx, method, s.base+path, rd)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("%s %s: %d %v", method, path, resp.StatusCode, resp.Header)
	}
	out := make(chan sseEvent, 256)
	go func() {
		defer close(out)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var e sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if e.name != "" {
					out <- e
				}
				e = sseEvent{}
			case strings.HasPrefix(line, "id: "):
				e.id = line[4:]
			case strings.HasPrefix(line, "event: "):
				e.name = line[7:]
			case strings.HasPrefix(line, "data: "):
				e.data = line[6:]
			}
		}
	}()
	return out
}

// TestStreamedTurns runs `ctxflow dev` with a model that streams its
// answer in fragments: the tokens come before the final event and make
// its answer; a stream dropped mid-turn loses nothing (the turn query has
// the whole result) and Last-Event-ID resumes it.
func TestStreamedTurns(t *testing.T) {
	model := fakeollama.New(fakeollama.Options{ChunkDelay: 30 * time.Millisecond})
	fake := httptest.NewServer(model)
	defer fake.Close()
	dir := t.TempDir()
	port := freePort(t)
	api := apiClient{base: fmt.Sprintf("http://127.0.0.1:%d", port)}
	startDev(t, []string{
		fmt.Sprintf("CTXFLOW_HTTP_ADDR=127.0.0.1:%d", port),
		fmt.Sprintf("CTXFLOW_UI_PORT=%d", freePort(t)),
		fmt.Sprintf("CTXFLOW_TEMPORAL_PORT=%d", freePort(t)),
		"CTXFLOW_DATA_DIR=" + dir,
		"OLLAMA_HOST=" + fake.URL,
	}, api, filepath.Join(dir, "dev.log"))
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	var names []string
	var text strings.Builder
	var final workflows.TurnResult
	tokensBeforeFinal := 0
	for e := range api.openStream(ctx, t, http.MethodPost, "/v1/sessions/live/turns", map[string]string{"question": "讲一个关于持久化工作流的故事", "turnId": "t1"}) {
		names = append(names, e.name)
		switch e.name {
		case "token":
			addToken(&text, e.data)
			tokensBeforeFinal++
		case "final":
			_ = json.Unmarshal([]byte(e.data), &final)
		}
	}
	if final.Status != workflows.TurnCompleted || final.Answer == "" {
		t.Fatalf("final %+v; events %v", final, names)
	}
	if tokensBeforeFinal < 2 || strings.TrimSpace(text.String()) != final.Answer {
		t.Errorf("%d tokens making %q; final answer %q", tokensBeforeFinal, text.String(), final.Answer)
	}
	if names[0] != "accepted" || !strings.Contains(strings.Join(names, " "), "step step") {
		t.Errorf("events %v", names)
	}

	// Dropped after the first token: the turn still completes, whole.
	sctx, drop := context.WithCancel(ctx)
	lastID := ""
	for e := range api.openStream(sctx, t, http.MethodPost, "/v1/sessions/live/turns", map[string]string{"question": "and then?", "turnId": "t2"}) {
		if e.id != "" {
			lastID = e.id
		}
		if e.name == "token" {
			drop()
		}
	}
	drop()
	res, err := api.awaitTurn(ctx, "live", "t2")
	if err != nil || res.Status != workflows.TurnCompleted || res.Answer == "" {
		t.Fatalf("the dropped turn: %v %+v", err, res)
	}
	var resumed []string
	for e := range api.openStream(ctx, t, http.MethodGet, "/v1/sessions/live/turns/t2/events", nil, "Last-Event-ID", lastID) {
		resumed = append(resumed, e.id+":"+e.name)
		if e.name == "final" && !strings.Contains(e.data, res.Answer) {
			t.Errorf("resumed final %s", e.data)
		}
	}
	if len(resumed) == 0 || !strings.HasSuffix(resumed[len(resumed)-1], ":final") {
		t.Errorf("resumed after %s: %v", lastID, resumed)
	}
	last, _ := strconv.Atoi(lastID)
	for _, r := range resumed {
		if id, err := strconv.Atoi(strings.Split(r, ":")[0]); err == nil && id <= last {
			t.Errorf("event %s resent after Last-Event-ID %s", r, lastID)
		}
	}
}

// TestDevStreamsOnPostgres: 200 streamed turns at once on `ctxflow dev` with
// PostgreSQL transcripts all finish with their answers. Each stream used to
// hold a connection of the pool for its LISTEN, and the turns' own
// publishing waited for one: 32 of 40 got no byte for 60 s.
func TestDevStreamsOnPostgres(t *testing.T) {
	const streams = 200
	fake := httptest.NewServer(fakeollama.New(fakeollama.Options{}))
	defer fake.Close()
	dir := t.TempDir()
	port := freePort(t)
	env := []string{
		fmt.Sprintf("CTXFLOW_HTTP_ADDR=127.0.0.1:%d", port), "CTXFLOW_UI_PORT=0",
		fmt.Sprintf("CTXFLOW_TEMPORAL_PORT=%d", freePort(t)), "CTXFLOW_DATA_DIR=" + dir, "OLLAMA_HOST=" + fake.URL,
		"CTXFLOW_TRANSCRIPT_STORE=postgres", "DATABASE_URL=" + pgtest.Database(t),
	}
	api := apiClient{base: fmt.Sprintf("http://127.0.0.1:%d", port)}
	startDev(t, env, api, filepath.Join(dir, "dev.log"))
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	errs := make(chan error, streams)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range streams {
		wg.Go(func() {
			q := fmt.Sprintf("streamed question %d", i)
			answer, err := api.streamToEnd(ctx, fmt.Sprintf("stream-%d", i), q)
			if err == nil && !strings.HasSuffix(answer, " to: "+q) {
				err = fmt.Errorf("answer %q", answer)
			}
			if err != nil {
				errs <- fmt.Errorf("stream %d: %w", i, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	n := 0
	for err := range errs {
		if n++; n <= 5 {
			t.Error(err)
		}
	}
	if n > 0 {
		t.Fatalf("%d of %d streams failed; dev log:\n%s", n, streams, tailFile(filepath.Join(dir, "dev.log"), 4000))
	}
	t.Logf("%d streams finished in %s", streams, time.Since(start).Round(time.Millisecond))
}

// streamToEnd posts a streamed turn and reads it to its final event,
// returning the answer the final result holds.
func (s apiClient) streamToEnd(ctx context.Context, session, question string) (string, error) {
	b, _ := json.Marshal(map[string]string{"question": question})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.base+"/v1/sessions/"+session+"/turns", bytes.NewReader(b))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := httpClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("status %d", resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	event := ""
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			event = line[7:]
		case strings.HasPrefix(line, "data: ") && event == "final":
			var res workflows.TurnResult
			if err := json.Unmarshal([]byte(line[6:]), &res); err != nil {
				return "", err
			}
			return res.Answer, nil
		case strings.HasPrefix(line, "data: ") && event == "error":
			return "", fmt.Errorf("error event: %s", line[6:])
		}
	}
	return "", fmt.Errorf("the stream ended without a final event (%v)", sc.Err())
}
