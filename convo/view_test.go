package convo

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

func TestToModelMessages(t *testing.T) {
	msgs := []Message{
		{ID: "s", Role: RoleSystem, Content: "be brief"},
		{ID: "u", ParentID: "s", Role: RoleUser, Content: "weather?"},
		{ID: "c1", ParentID: "u", Role: RoleToolCall, Content: "checking", ToolCall: &ToolCall{ID: "k1", Name: "weather", Args: json.RawMessage(`{"city":"Oslo"}`)}},
		{ID: "c2", ParentID: "c1", Role: RoleToolCall, ToolCall: &ToolCall{ID: "k2", Name: "time"}},
		{ID: "r2", ParentID: "c2", Role: RoleToolResult, ToolCallID: "k2", Content: "12:00"},
		{ID: "r1", ParentID: "r2", Role: RoleToolResult, ToolCallID: "k1", Content: "rain"},
		{ID: "x", ParentID: "r1", Role: RoleSummary, Content: "a record"},
		{ID: "a", ParentID: "x", Role: RoleAssistant, Content: "Rain at noon."},
	}
	got, err := ToModelMessages(msgs)
	if err != nil {
		t.Fatal(err)
	}
	want := []ModelMessage{
		{Role: "system", Content: "be brief"},
		{Role: "user", Content: "weather?"},
		{Role: "assistant", Content: "checking", ToolCalls: []ToolCall{
			{ID: "k1", Name: "weather", Args: json.RawMessage(`{"city":"Oslo"}`)},
			{ID: "k2", Name: "time"},
		}},
		{Role: "tool", Content: "12:00", ToolCallID: "k2", ToolName: "time"},
		{Role: "tool", Content: "rain", ToolCallID: "k1", ToolName: "weather"},
		{Role: "assistant", Content: "Rain at noon."},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
}

func TestToModelMessagesPairingErrors(t *testing.T) {
	orphan := []Message{{ID: "r", Role: RoleToolResult, ToolCallID: "k"}}
	if _, err := ToModelMessages(orphan); !errors.Is(err, ErrOrphanResult) {
		t.Errorf("orphan: %v", err)
	}
	dangling := []Message{{ID: "c", Role: RoleToolCall, ToolCall: &ToolCall{ID: "k", Name: "f"}}}
	if _, err := ToModelMessages(dangling); !errors.Is(err, ErrUnansweredCall) {
		t.Errorf("dangling: %v", err)
	}
}

func TestViewCompressesToolResults(t *testing.T) {
	long := strings.Repeat("x", 100)
	msgs := []Message{
		{ID: "c", Role: RoleToolCall, ToolCall: &ToolCall{ID: "k", Name: "f"}},
		{ID: "r", Role: RoleToolResult, ToolCallID: "k", Content: long},
	}
	v := View{ObservationMaxChars: 50}
	got, err := v.ModelMessages(msgs)
	if err != nil {
		t.Fatal(err)
	}
	if n := len([]rune(got[1].Content)); n > 50 {
		t.Errorf("tool result has %d chars in the model view, cap 50", n)
	}
	if msgs[1].Content != long {
		t.Error("the transcript message was modified")
	}
	if v.Tokens(wordTok{}, msgs[1]) != MessageOverheadTokens+1+(wordTok{}).Count(got[1].Content)+ToolFieldOverheadTokens+1 {
		t.Error("Tokens does not count the compressed content")
	}
}

func TestMessageTokens(t *testing.T) {
	tok := wordTok{}
	user := Message{ID: "u", Role: RoleUser, Content: "one two three"}
	if got, want := MessageTokens(tok, user), MessageOverheadTokens+1+3; got != want {
		t.Errorf("user: %d, want %d", got, want)
	}
	call := Message{ID: "c", Role: RoleToolCall, Content: "", ToolCall: &ToolCall{ID: "k", Name: "search", Args: json.RawMessage(`{"q": "go"}`)}}
	// overhead + role + content 0 + field overhead + id 1 + name 1 + args 2
	if got, want := MessageTokens(tok, call), MessageOverheadTokens+1+0+ToolFieldOverheadTokens+1+1+2; got != want {
		t.Errorf("tool call: %d, want %d", got, want)
	}
	if got := MessageTokens(tok, Message{ID: "x", Role: RoleSummary, Content: "many words here"}); got != 0 {
		t.Errorf("summary record: %d, want 0", got)
	}
	if got := MessageTokens(nil, user); got != MessageOverheadTokens+EstimateTokens("user")+EstimateTokens("one two three") {
		t.Errorf("nil tokenizer: %d", got)
	}
	if got := PromptTokens(nil); got != 0 {
		t.Errorf("PromptTokens(nil) = %d", got)
	}
}

func TestEstimateTokens(t *testing.T) {
	tests := []struct {
		in   string
		want int
	}{{"", 0}, {"abc", 1}, {"abcd", 2}, {"你好", 2}, {"hi 你", 2}}
	for _, tt := range tests {
		if got := EstimateTokens(tt.in); got != tt.want {
			t.Errorf("EstimateTokens(%q) = %d, want %d", tt.in, got, tt.want)
		}
	}
}

// RequestTokens counts a branch's model view as the window counts the
// branch: the same total, or less where parallel tool calls share one
// assistant message (one frame instead of several).
func TestRequestTokensCountsAsTheWindow(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		msgs := genBranch(t)
		parallel := false
		for i := range msgs {
			msgs[i].Tokens = MessageTokens(wordTok{}, msgs[i])
			parallel = parallel || i > 0 && msgs[i].Role == RoleToolCall && msgs[i-1].Role == RoleToolCall
		}
		view, err := ToModelMessages(msgs)
		if err != nil {
			t.Fatal(err)
		}
		shown := slices.DeleteFunc(slices.Clone(msgs), func(m Message) bool { return m.Role == RoleSummary })
		got, want := RequestTokens(wordTok{}, view), PromptTokens(shown)
		if got > want || !parallel && got != want {
			t.Fatalf("RequestTokens = %d, PromptTokens = %d (parallel calls: %v)", got, want, parallel)
		}
	})
}

// A cancelled answer is left out of the model view, unless the user
// message right after it continues it: the model then sees what it wrote.
func TestCancelledAnswerInTheViewOnlyWhenContinued(t *testing.T) {
	stopped := Message{ID: "a1", ParentID: "u1", Role: RoleAssistant, Content: "Once upon", Meta: map[string]string{MetaStatus: StatusCancelled}}
	for _, tc := range []struct {
		name string
		next Message
		want []string
	}{
		{"a new question", Message{ID: "u2", ParentID: "a1", Role: RoleUser, Content: "A short one"}, []string{"Tell me a story", "A short one"}},
		{"continue", Message{ID: "u2", ParentID: "a1", Role: RoleUser, Content: "continue", Meta: map[string]string{MetaContinues: "a1"}}, []string{"Tell me a story", "Once upon", "continue"}},
		{"continue of another", Message{ID: "u2", ParentID: "a1", Role: RoleUser, Content: "continue", Meta: map[string]string{MetaContinues: "a0"}}, []string{"Tell me a story", "continue"}},
	} {
		view, err := ToModelMessages([]Message{{ID: "u1", Role: RoleUser, Content: "Tell me a story"}, stopped, tc.next})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, m := range view {
			got = append(got, m.Content)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: view %q, want %q", tc.name, got, tc.want)
		}
	}
}
