package openai_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/activities/openai"
)

// status answers with an HTTP error status and body.
func status(code int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(body, "{") {
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(code)
		_, _ = w.Write([]byte(body))
	}
}

func TestErrorsAreClassified(t *testing.T) {
	const unknownModel = `{"error":{"message":"model \"nope\" not found, try pulling it first","type":"api_error","param":null,"code":null}}`
	tests := []struct {
		name      string
		h         func(t *testing.T) http.HandlerFunc
		retryable bool
		status    int
		// msg is in the error's message.
		msg string
	}{
		{"unknown model", func(*testing.T) http.HandlerFunc { return status(404, unknownModel) }, false, 404, `HTTP 404: model "nope" not found, try pulling it first (does the server at http://`},
		{"bad request", func(*testing.T) http.HandlerFunc {
			return status(400, `{"error":{"message":"ctxflow-tiny does not support tools","type":"invalid_request_error","code":"bad"}}`)
		}, false, 400, "HTTP 400: ctxflow-tiny does not support tools"},
		{"unauthorized", func(*testing.T) http.HandlerFunc {
			return status(401, `{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}`)
		}, false, 401, "Incorrect API key"},
		{"forbidden, plain text", func(*testing.T) http.HandlerFunc { return status(403, "go away\n") }, false, 403, "HTTP 403: go away"},
		{"unprocessable, FastAPI's detail", func(*testing.T) http.HandlerFunc {
			return status(422, `{"detail":[{"loc":["body","messages"],"msg":"field required"}]}`)
		}, false, 422, "field required"},
		{"error as a string", func(*testing.T) http.HandlerFunc { return status(400, `{"error":"context too long"}`) }, false, 400, "HTTP 400: context too long"},
		{"vLLM's old shape", func(*testing.T) http.HandlerFunc {
			return status(404, `{"object":"error","message":"The model `+"`nope`"+` does not exist.","type":"NotFoundError","code":404}`)
		}, false, 404, "The model `nope` does not exist."},
		{"not implemented", func(*testing.T) http.HandlerFunc { return status(501, "") }, false, 501, "HTTP 501: Not Implemented"},
		{"request timeout", func(*testing.T) http.HandlerFunc { return status(408, "") }, true, 408, "HTTP 408"},
		{"too early", func(*testing.T) http.HandlerFunc { return status(425, "") }, true, 425, "HTTP 425"},
		{"rate limited", func(*testing.T) http.HandlerFunc {
			return status(429, `{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`)
		}, true, 429, "Rate limit reached"},
		{"client closed request", func(*testing.T) http.HandlerFunc { return status(499, "") }, true, 499, "HTTP 499"},
		{"server error", func(*testing.T) http.HandlerFunc { return status(500, `{"error":{"message":"model runner crashed"}}`) }, true, 500, "model runner crashed"},
		{"bad gateway, HTML", func(*testing.T) http.HandlerFunc { return status(502, "<html>502 Bad Gateway</html>") }, true, 502, "<html>502 Bad Gateway</html>"},
		{"unavailable, empty", func(*testing.T) http.HandlerFunc { return status(503, "") }, true, 503, "HTTP 503: Service Unavailable"},
		{"hang-up before the answer", func(t *testing.T) http.HandlerFunc {
			return func(w http.ResponseWriter, r *http.Request) { hangUp(t, w) }
		}, true, 0, `openai chat "m"`},
		{"answer without a choice", func(*testing.T) http.HandlerFunc {
			return func(w http.ResponseWriter, r *http.Request) {
				reply(w, map[string]any{"id": "x", "object": "chat.completion", "model": "m", "choices": []any{}})
			}
		}, true, 0, "no choice"},
	}
	for _, tc := range tests {
		for _, stream := range []bool{false, true} {
			if stream && tc.name == "answer without a choice" {
				continue
			}
			t.Run(fmt.Sprintf("%s/stream=%v", tc.name, stream), func(t *testing.T) {
				var calls atomic.Int32
				h := tc.h(t)
				c := serve(t, openai.Config{}, func(w http.ResponseWriter, r *http.Request) { calls.Add(1); h(w, r) })
				var onDelta func(string)
				if stream {
					onDelta = func(string) {}
				}
				_, err := c.Chat(context.Background(), activities.ChatRequest{Model: "m", Messages: userMsg("hi")}, onDelta)
				me, ok := errors.AsType[*activities.ModelError](err)
				if !ok {
					t.Fatalf("error %T %v is not a *activities.ModelError", err, err)
				}
				if me.Retryable != tc.retryable || me.StatusCode != tc.status || !strings.Contains(me.Error(), tc.msg) {
					t.Errorf("got retryable=%v status=%d %q\nwant retryable=%v status=%d, a message with %q", me.Retryable, me.StatusCode, me.Error(), tc.retryable, tc.status, tc.msg)
				}
				if activities.IsPermanent(err) == tc.retryable {
					t.Errorf("IsPermanent = %v", activities.IsPermanent(err))
				}
				if n := calls.Load(); n != 1 {
					t.Errorf("server called %d times: the SDK retried (Temporal does)", n)
				}
			})
		}
	}
}

func TestStreamFailuresAreRetryable(t *testing.T) {
	tests := []struct {
		name string
		h    func(t *testing.T) http.HandlerFunc
		msg  string
	}{
		{"hang-up mid-stream", func(t *testing.T) http.HandlerFunc {
			return func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Length", "100000") // a body that ends early is an error
				event(w, chunk(map[string]any{"content": "Hel"}, ""))
				hangUp(t, w)
			}
		}, "unexpected EOF"},
		{"ends without a finish reason", func(*testing.T) http.HandlerFunc {
			return func(w http.ResponseWriter, r *http.Request) {
				event(w, chunk(map[string]any{"content": "Hel"}, ""))
			}
		}, "before its finish reason"},
		{"error event", func(*testing.T) http.HandlerFunc {
			return func(w http.ResponseWriter, r *http.Request) {
				event(w, chunk(map[string]any{"content": "Hel"}, ""))
				event(w, map[string]any{"error": map[string]any{"message": "model runner has unexpectedly stopped"}})
			}
		}, "model runner has unexpectedly stopped"},
		{"unreadable chunk", func(*testing.T) http.HandlerFunc {
			return func(w http.ResponseWriter, r *http.Request) { event(w, "{not json") }
		}, `openai chat "m"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := serve(t, openai.Config{}, tc.h(t))
			_, err := c.Chat(context.Background(), activities.ChatRequest{Model: "m", Messages: userMsg("hi")}, func(string) {})
			me, ok := errors.AsType[*activities.ModelError](err)
			if !ok || !me.Retryable || me.StatusCode != 0 || !strings.Contains(me.Error(), tc.msg) {
				t.Errorf("err = %v, want a retryable ModelError with %q", err, tc.msg)
			}
		})
	}
}

func TestConnectionRefusedIsRetryable(t *testing.T) {
	srv := httptest.NewServer(nil)
	srv.Close() // a closed port
	c, err := openai.New(openai.Config{BaseURL: srv.URL + "/v1"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Chat(context.Background(), activities.ChatRequest{Model: "m", Messages: userMsg("hi")}, nil)
	if me, ok := errors.AsType[*activities.ModelError](err); !ok || !me.Retryable || !strings.Contains(err.Error(), "refused") {
		t.Errorf("err = %v, want a retryable connection error", err)
	}
	_, err = c.Embed(context.Background(), "e", []string{"x"})
	if me, ok := errors.AsType[*activities.ModelError](err); !ok || !me.Retryable {
		t.Errorf("Embed: err = %v, want a retryable connection error", err)
	}
}

// TestTheContextIsTheOnlyTimeout: a slow server is waited for as long as
// the caller's context allows, and a call the caller's context ended
// returns the context's error, not a model error.
func TestTheContextIsTheOnlyTimeout(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			c := serve(t, openai.Config{}, func(w http.ResponseWriter, r *http.Request) {
				if stream {
					event(w, chunk(map[string]any{"content": "Hel"}, ""))
				}
				waitForClient(r)
			})
			var onDelta func(string)
			if stream {
				onDelta = func(string) {}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			start := time.Now()
			_, err := c.Chat(ctx, activities.ChatRequest{Model: "m", Messages: userMsg("hi")}, onDelta)
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("err = %v, want the context's deadline", err)
			}
			if _, ok := errors.AsType[*activities.ModelError](err); ok {
				t.Errorf("err = %v is a ModelError; the caller's own deadline is not the model's failure", err)
			}
			if d := time.Since(start); d < 250*time.Millisecond || d > 5*time.Second {
				t.Errorf("returned after %s, want the context's 300ms", d)
			}
		})
	}
	c := serve(t, openai.Config{}, func(w http.ResponseWriter, r *http.Request) { waitForClient(r) })
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	if _, err := c.Embed(ctx, "e", []string{"x"}); !errors.Is(err, context.Canceled) {
		t.Errorf("Embed: err = %v, want context.Canceled", err)
	}
}
