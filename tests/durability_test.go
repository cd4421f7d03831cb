package tests

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctxflow/ctxflow/activities/vecstore"
	"github.com/ctxflow/ctxflow/api"
	"github.com/ctxflow/ctxflow/workflows"
)

// submit posts a turn without waiting (202) and returns the status code.
func (s apiClient) submit(ctx context.Context, session, turnID, question string) (int, error) {
	var out map[string]any
	return s.do(ctx, http.MethodPost, "/v1/sessions/"+session+"/turns",
		map[string]string{"turnId": turnID, "question": question}, &out)
}

// awaitTurn polls a turn until it is done or ctx ends.
func (s apiClient) awaitTurn(ctx context.Context, session, turnID string) (workflows.TurnResult, error) {
	for {
		var res workflows.TurnResult
		code, err := s.do(ctx, http.MethodGet, "/v1/sessions/"+session+"/turns/"+turnID, nil, &res)
		if err == nil && res.Done() {
			return res, nil
		}
		select {
		case <-ctx.Done():
			return res, fmt.Errorf("turn %s/%s not done (last: %d %v, status %q): %w", session, turnID, code, err, res.Status, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// TestIdleTTLRaceLosesNoTurn sends turns to sessions whose idle TTL is one
// second, pausing around the TTL between turns, so that turns keep arriving
// while runs end: every turn answered 202 is run exactly once.
func TestIdleTTLRaceLosesNoTurn(t *testing.T) {
	const sessions, turns = 30, 6
	s := startStack(t, stackOptions{limits: workflows.Limits{IdleTTL: time.Second}})
	s.startWorker()
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()

	var wg sync.WaitGroup
	errs := make(chan error, sessions*turns)
	for i := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sid := fmt.Sprintf("ttl-%02d", i)
			for j := range turns {
				if code, err := s.submit(ctx, sid, fmt.Sprintf("t%d", j), fmt.Sprintf("question %d", j)); err != nil || code != http.StatusAccepted {
					errs <- fmt.Errorf("%s turn %d: %d %v", sid, j, code, err)
					return
				}
				// Wait for the answer, then idle for about the TTL.
				if _, err := s.awaitTurn(ctx, sid, fmt.Sprintf("t%d", j)); err != nil {
					errs <- err
					return
				}
				time.Sleep(time.Duration(800+rand.IntN(500)) * time.Millisecond)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.Fatalf("worker logs:\n%s", s.workerLogs())
	}
	for i := range sessions {
		sid := fmt.Sprintf("ttl-%02d", i)
		for j := range turns {
			res, err := s.awaitTurn(ctx, sid, fmt.Sprintf("t%d", j))
			if err != nil || res.Status != workflows.TurnCompleted {
				t.Errorf("%s t%d: %+v %v", sid, j, res, err)
			}
		}
		checkTranscript(t, filepath.Join(s.dataDir, "transcripts", workflows.DefaultTenant, sid+".jsonl"), turns)
	}
}

// TestTurnAfterDeleteIsAnsweredOrRefused: DELETE answers once the session
// is gone, and a turn sent right after it starts a fresh session or is
// refused, never accepted and dropped.
func TestTurnAfterDeleteIsAnsweredOrRefused(t *testing.T) {
	s := startStack(t, stackOptions{})
	s.startWorker()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	for i := range 5 {
		sid := fmt.Sprintf("del-%d", i)
		if _, _, err := s.turn(ctx, sid, "t0", "before the delete"); err != nil {
			t.Fatal(err)
		}
		if code, err := s.do(ctx, http.MethodDelete, "/v1/sessions/"+sid, nil, nil); code != http.StatusNoContent {
			t.Fatalf("DELETE %s: %d %v", sid, code, err)
		}
		code, err := s.submit(ctx, sid, "t1", "after the delete")
		switch code {
		case http.StatusAccepted:
			res, err := s.awaitTurn(ctx, sid, "t1")
			if err != nil || res.Status != workflows.TurnCompleted {
				t.Fatalf("%s: a turn accepted after the delete = %+v %v\n%s", sid, res, err, s.workerLogs())
			}
			if res.SessionInfo.Turns != 1 || res.Answer != "answer 1 to: after the delete" {
				t.Errorf("%s: the turn after the delete did not start a fresh session: %+v", sid, res)
			}
		case http.StatusConflict:
		default:
			t.Fatalf("%s: turn after the delete: %d %v", sid, code, err)
		}
	}
	if code, _ := s.do(ctx, http.MethodDelete, "/v1/sessions/never-was", nil, nil); code != http.StatusNotFound {
		t.Errorf("DELETE of an unknown session: %d", code)
	}
}

// TestTurnIDsStayIdempotent: after 35 turns and several continue-as-new,
// an old turn id with its question returns its first answer and changes
// nothing; with another question it is 409.
func TestTurnIDsStayIdempotent(t *testing.T) {
	s := startStack(t, stackOptions{limits: workflows.Limits{ContinueAsNewEvery: 10}})
	s.startWorker()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	for i := range 35 {
		if _, _, err := s.turn(ctx, "ids", fmt.Sprintf("t%d", i), fmt.Sprintf("question %d", i)); err != nil {
			t.Fatal(err)
		}
	}
	var before workflows.SessionState
	if _, err := s.do(ctx, http.MethodGet, "/v1/sessions/ids", nil, &before); err != nil {
		t.Fatal(err)
	}
	calls := s.model.Calls().Chat

	res, _, err := s.turn(ctx, "ids", "t2", "question 2")
	if err != nil || res.Answer != "answer 3 to: question 2" {
		t.Errorf("repeat of t2: %+v %v", res, err)
	}
	for _, wait := range []string{"?wait=true", ""} {
		code, err := s.do(ctx, http.MethodPost, "/v1/sessions/ids/turns"+wait, map[string]string{"turnId": "t2", "question": "another question"}, nil)
		if code != http.StatusConflict {
			t.Errorf("t2 reused for another question (%q): %d %v", wait, code, err)
		}
	}
	if code, err := s.submit(ctx, "ids", "t3", "question 3"); code != http.StatusAccepted {
		t.Errorf("async repeat of t3: %d %v", code, err)
	}
	var after workflows.SessionState
	if _, err := s.do(ctx, http.MethodGet, "/v1/sessions/ids", nil, &after); err != nil {
		t.Fatal(err)
	}
	if after.Turns != 35 || after.ActiveLeaf != before.ActiveLeaf || after.Messages != before.Messages || s.model.Calls().Chat != calls {
		t.Errorf("after the repeats: turns %d leaf %s messages %d model calls +%d; want 35, %s, %d, +0",
			after.Turns, after.ActiveLeaf, after.Messages, s.model.Calls().Chat-calls, before.ActiveLeaf, before.Messages)
	}
	if after.Runs < 3 {
		t.Errorf("runs = %d: the session did not continue as new", after.Runs)
	}
}

// TestSessionAPIRefusesWhatItCannotDo covers the small promises: an
// existing session is not created again, a garbled page token is refused
// at once, control characters and a ?wait that is neither true nor false
// are refused, a turn option the session cannot run is 400 before it is
// queued, errors do not echo huge ids, and a deleted session is not listed.
func TestSessionAPIRefusesWhatItCannotDo(t *testing.T) {
	s := startStack(t, stackOptions{})
	s.startWorker()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	if code, err := s.do(ctx, http.MethodPost, "/v1/sessions", map[string]any{"sessionId": "small", "config": map[string]any{"maxRounds": 1}}, nil); code != http.StatusCreated {
		t.Fatalf("create: %d %v", code, err)
	}
	if code, _ := s.do(ctx, http.MethodPost, "/v1/sessions", map[string]any{"sessionId": "small"}, nil); code != http.StatusConflict {
		t.Errorf("creating a running session again: %d", code)
	}
	var out struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	start := time.Now()
	if code, _ := s.do(ctx, http.MethodGet, "/v1/sessions?pageToken=bm90LWEtdG9rZW4", nil, &out); code != http.StatusBadRequest || time.Since(start) > 2*time.Second {
		t.Errorf("garbled page token: %d after %s", code, time.Since(start))
	}
	for _, tc := range []struct {
		path string
		body map[string]any
	}{
		{"/v1/sessions/small/turns", map[string]any{"question": "a\x00b"}},
		{"/v1/sessions/small/turns", map[string]any{"question": "bell\x07"}},
		{"/v1/sessions/small/turns?wait=maybe", map[string]any{"question": "hi"}},
		{"/v1/sessions/small/turns", map[string]any{"question": "hi", "config": map[string]any{"maxRounds": 0}}},
		{"/v1/sessions/" + strings.Repeat("x", 10000) + "/turns", map[string]any{"question": "hi"}},
	} {
		code, _ := s.do(ctx, http.MethodPost, tc.path, tc.body, &out)
		if code != http.StatusBadRequest || len(out.Error.Message) > 400 {
			t.Errorf("POST %.60s %v: %d %q", tc.path, tc.body, code, out.Error.Message)
		}
	}
	// A turn with the smallest budget runs, and the session stays healthy.
	var res workflows.TurnResult
	if code, err := s.do(ctx, http.MethodPost, "/v1/sessions/small/turns?wait=true",
		map[string]any{"question": "What is ctxflow and how does it trim a long conversation?", "config": map[string]any{"maxTokens": 64}}, &res); code != http.StatusOK {
		t.Fatalf("maxTokens 64: %d %v", code, err)
	}
	if res.Status != workflows.TurnCompleted || res.SessionInfo.Health != workflows.HealthOK {
		t.Errorf("maxTokens 64: %+v", res)
	}

	if code, _ := s.do(ctx, http.MethodDelete, "/v1/sessions/small", nil, nil); code != http.StatusNoContent {
		t.Fatalf("DELETE: %d", code)
	}
	var list struct {
		Sessions []struct{ SessionID string } `json:"sessions"`
	}
	deadline := time.Now().Add(20 * time.Second) // visibility is eventually consistent
	for {
		if _, err := s.do(ctx, http.MethodGet, "/v1/sessions", nil, &list); err != nil {
			t.Fatal(err)
		}
		listed := false
		for _, r := range list.Sessions {
			listed = listed || r.SessionID == "small"
		}
		if !listed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a deleted session is still listed: %+v", list)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if code, _ := s.do(ctx, http.MethodGet, "/v1/sessions/small", nil, nil); code != http.StatusNotFound {
		t.Errorf("GET of the deleted session: %d", code)
	}
	if code, err := s.do(ctx, http.MethodPost, "/v1/sessions", map[string]any{"sessionId": "small"}, nil); code != http.StatusCreated {
		t.Errorf("creating a deleted session again: %d %v", code, err)
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatal("out of time")
	}
}

// TestDocumentWritesDuringIngestionConflict: while a document is being
// ingested, deleting it or uploading a new version is 409 (never a false
// 204 or 200); once it is done, the delete removes every chunk.
func TestDocumentWritesDuringIngestionConflict(t *testing.T) {
	s := startStack(t, stackOptions{extraEnv: []string{"CTXFLOW_MODEL_PROVIDER=offline"}})
	s.startWorker()
	docs := httptest.NewServer(api.New(s.client, api.Options{
		Defaults: workflows.DefaultSessionConfig(), UploadDir: filepath.Join(s.dataDir, "uploads"), Logger: quietLogger(),
	}).Handler())
	t.Cleanup(docs.Close)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	send := func(method, path string, body []byte) int {
		req, err := http.NewRequestWithContext(ctx, method, docs.URL+path, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-ndjson")
		resp, err := httpClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	corpus := syntheticPassages(3000)
	if code := send(http.MethodPost, "/v1/documents?id=big", corpus); code != http.StatusAccepted {
		t.Fatalf("upload: %d", code)
	}
	if code := send(http.MethodDelete, "/v1/documents/big", nil); code != http.StatusConflict {
		t.Errorf("DELETE during the ingestion: %d, want 409", code)
	}
	if code := send(http.MethodPost, "/v1/documents?id=big", syntheticPassages(100)); code != http.StatusConflict {
		t.Errorf("a new version during the ingestion: %d, want 409", code)
	}
	run := s.client.GetWorkflow(ctx, workflows.IngestWorkflowID("big"), "")
	var p workflows.IngestProgress
	if err := run.Get(ctx, &p); err != nil || p.Stored != p.Chunks || p.Chunks < 3000 {
		t.Fatalf("ingestion: %+v %v\n%s", p, err, s.workerLogs())
	}
	if code := send(http.MethodDelete, "/v1/documents/big", nil); code != http.StatusNoContent {
		t.Fatalf("DELETE after the ingestion: %d", code)
	}
	if code := send(http.MethodDelete, "/v1/documents/big", nil); code != http.StatusNotFound {
		t.Errorf("second DELETE: %d, want 404", code)
	}
	s.killWorker() // release the store
	store, err := vecstore.Open(vecstore.Options{Dir: filepath.Join(s.dataDir, "vectors"), Collection: "rag_documents"})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if info, _ := store.Info(ctx); info.Count != 0 {
		t.Errorf("%d chunks left after the delete", info.Count)
	}
}
