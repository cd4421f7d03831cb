package activities

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ctxflow/ctxflow/convo"
)

// A tool result over the cap is cut before it is stored, and what is
// stored says what was cut; the model sees the same.
func TestToolResultsAreCapped(t *testing.T) {
	big := NewTool("big", "returns a lot", ToolPolicy{ReadOnly: true}, func(_ context.Context, a struct {
		N int `json:"n"`
	}) (any, error) {
		return map[string]string{"blob": strings.Repeat("数据", a.N)}, nil
	})
	a := &Agent{Tools: []Tool{big}, ResultMaxBytes: 1024}
	for _, tc := range []struct {
		n   int
		cut bool
	}{{10, false}, {150, false}, {200, true}, {5_000_000, true}} {
		args, _ := json.Marshal(map[string]int{"n": tc.n})
		content, _, ok, err := a.run(context.Background(), &convo.ToolCall{ID: "c", Name: "big", Args: args}, nil)
		if err != nil || !ok {
			t.Fatalf("n=%d: %v %v", tc.n, ok, err)
		}
		if !utf8.ValidString(content) || !json.Valid([]byte(content)) {
			t.Fatalf("n=%d: the stored result is not valid JSON text", tc.n)
		}
		var cut struct{ Cut, Partial string }
		_ = json.Unmarshal([]byte(content), &cut)
		switch {
		case !tc.cut && cut.Cut != "":
			t.Errorf("n=%d: a result under the cap was cut", tc.n)
		case tc.cut && (cut.Cut == "" || !strings.Contains(cut.Cut, "1024-byte limit") || len(cut.Partial) > 1024 || !strings.HasPrefix(cut.Partial, `{"blob":"数据`)):
			t.Errorf("n=%d: stored %d bytes: %.200s", tc.n, len(content), content)
		case len(content) > 2*1024:
			t.Errorf("n=%d: stored %d bytes, over twice the cap", tc.n, len(content))
		}
	}
}
