package ollama_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/activities/ollama"
	"github.com/ctxflow/ctxflow/convo"
)

func TestChatOffersToolsAndReturnsToolCalls(t *testing.T) {
	var got map[string]any
	c := serve(t, ollama.Config{}, func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewDecoder(r.Body).Decode(&got)
		line(w, map[string]any{"model": "m", "message": map[string]any{"role": "assistant", "content": "",
			"tool_calls": []any{
				map[string]any{"function": map[string]any{"name": "list_tables", "arguments": map[string]any{}}},
				map[string]any{"id": "c7", "function": map[string]any{"name": "query", "arguments": map[string]any{"sql": "select 1", "limit": 5}}},
			}}, "done": true, "done_reason": "stop"})
	})
	resp, err := c.Chat(context.Background(), activities.ChatRequest{
		Model:    "m",
		Messages: []convo.ModelMessage{{Role: "user", Content: "what tables are there?"}},
		Tools: []activities.ToolSpec{{Name: "query", Description: "run read-only SQL",
			Parameters: json.RawMessage(`{"type":"object","properties":{"sql":{"type":"string","description":"the query"}},"required":["sql"]}`)}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tools, _ := json.Marshal(got["tools"])
	if want := `[{"function":{"description":"run read-only SQL","name":"query","parameters":{"properties":{"sql":{"description":"the query","type":"string"}},"required":["sql"],"type":"object"}},"type":"function"}]`; string(tools) != want {
		t.Errorf("tools sent = %s\nwant %s", tools, want)
	}
	want := []convo.ToolCall{
		{ID: "call_0", Name: "list_tables", Args: json.RawMessage(`{}`)},
		{ID: "c7", Name: "query", Args: json.RawMessage(`{"limit":5,"sql":"select 1"}`)}, // the order the server sent
	}
	if !reflect.DeepEqual(resp.ToolCalls, want) {
		t.Errorf("tool calls = %s, want %s", fmtCalls(resp.ToolCalls), fmtCalls(want))
	}
}

func fmtCalls(cs []convo.ToolCall) string {
	var b strings.Builder
	for _, c := range cs {
		fmt.Fprintf(&b, "%s %s %s; ", c.ID, c.Name, c.Args)
	}
	return b.String()
}

func TestChatRejectsBadToolSchema(t *testing.T) {
	c := serve(t, ollama.Config{}, func(w http.ResponseWriter, r *http.Request) { t.Error("server called") })
	for _, spec := range []activities.ToolSpec{
		{Name: "", Parameters: json.RawMessage(`{}`)},
		{Name: "q", Parameters: json.RawMessage(`[1, 2]`)},
	} {
		_, err := c.Chat(context.Background(), activities.ChatRequest{Model: "m", Messages: []convo.ModelMessage{{Role: "user", Content: "x"}}, Tools: []activities.ToolSpec{spec}}, nil)
		if !activities.IsPermanent(err) {
			t.Errorf("tool %+v: err = %v, want a permanent error", spec, err)
		}
	}
}

func TestChatReportsCutOffAnswer(t *testing.T) {
	c := serve(t, ollama.Config{}, func(w http.ResponseWriter, r *http.Request) {
		line(w, map[string]any{"model": "m", "message": map[string]any{"role": "assistant", "content": `{"a": `}, "done": true, "done_reason": "length"})
	})
	resp, err := c.Chat(context.Background(), activities.ChatRequest{Model: "m", Messages: []convo.ModelMessage{{Role: "user", Content: "x"}}}, nil)
	if err != nil || resp.DoneReason != "length" {
		t.Fatalf("resp = %+v, err = %v", resp, err)
	}
}

// embedServer answers /api/embed with vectors of dim (per batch: dims[i]).
func embedServer(t *testing.T, requests *atomic.Int32, dim func(batch int) int) *ollama.Client {
	return serve(t, ollama.Config{}, func(w http.ResponseWriter, r *http.Request) {
		n := int(requests.Add(1))
		var req struct {
			Model string   `json:"model"`
			Input []string `json:"input"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || r.URL.Path != "/api/embed" {
			http.Error(w, `{"error":"bad request"}`, http.StatusBadRequest)
			return
		}
		vs := make([][]float32, len(req.Input))
		for i, in := range req.Input {
			vs[i] = make([]float32, dim(n))
			vs[i][0] = float32(len(in))
		}
		line(w, map[string]any{"model": req.Model, "embeddings": vs})
	})
}

func TestEmbedBatchesInOrderAndCachesDimension(t *testing.T) {
	var requests atomic.Int32
	c := embedServer(t, &requests, func(int) int { return 8 })
	texts := make([]string, 150)
	for i := range texts {
		texts[i] = strings.Repeat("x", i)
	}
	vs, err := c.Embed(context.Background(), "bge", texts)
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 150 || requests.Load() != 3 {
		t.Fatalf("%d vectors in %d requests, want 150 in 3", len(vs), requests.Load())
	}
	for i, v := range vs {
		if len(v) != 8 || v[0] != float32(i) {
			t.Fatalf("vector %d = %v: out of order or wrong dimension", i, v)
		}
	}
	d, err := c.Dimension(context.Background(), "bge")
	if err != nil || d != 8 || requests.Load() != 3 {
		t.Errorf("Dimension = %d, %v after %d requests; want 8 from the cache", d, err, requests.Load())
	}
}

func TestEmbedRefusesAChangedDimension(t *testing.T) {
	var requests atomic.Int32
	c := embedServer(t, &requests, func(batch int) int { return 4 + batch }) // 5, then 6
	if _, err := c.Embed(context.Background(), "m", []string{"a"}); err != nil {
		t.Fatal(err)
	}
	_, err := c.Embed(context.Background(), "m", []string{"b"})
	if !activities.IsPermanent(err) || !strings.Contains(err.Error(), "dimension 6") {
		t.Fatalf("err = %v, want a permanent dimension error", err)
	}
}

func TestEmbedErrorsAreClassified(t *testing.T) {
	c := serve(t, ollama.Config{}, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"error":"model \"nope\" not found, try pulling it first"}`))
	})
	_, err := c.Embed(context.Background(), "nope", []string{"a"})
	if !activities.IsPermanent(err) || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("err = %v", err)
	}
	if _, err := c.Embed(context.Background(), "", []string{"a"}); !activities.IsPermanent(err) {
		t.Fatalf("empty model: err = %v", err)
	}
}
