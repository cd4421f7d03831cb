package openai

import (
	"strings"
	"testing"
)

func TestThinkFilter(t *testing.T) {
	tests := []struct {
		name   string
		pieces []string
		want   string
	}{
		{"no thinking", []string{"Hello", ", world"}, "Hello, world"},
		{"a block first", []string{"<think>hmm</think>\n\nAnswer."}, "Answer."},
		{"tags split across pieces", []string{"<", "th", "ink>a", "b</", "think", ">", " ", "\n", "Ans", "wer."}, "Answer."},
		{"a block mid-answer", []string{"One. <think>x</think> Two."}, "One. Two."},
		{"two blocks", []string{"<think>a</think>A<think>b</think>B"}, "AB"},
		{"unclosed block", []string{"<think>still thinking when cut off"}, ""},
		{"a tag's start that is not a tag", []string{"a <", "b and <th", "e end <thi"}, "a <b and <the end <thi"},
		{"a close tag alone is text", []string{"x </think> y"}, "x </think> y"},
		{"white space inside the answer is kept", []string{"<think>t</think>", "  ", "Line 1\n\n", "Line 2"}, "Line 1\n\nLine 2"},
		{"multibyte text around tags", []string{"é<think>ü</think>ß"}, "éß"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var f thinkFilter
			var got strings.Builder
			for _, p := range tc.pieces {
				got.WriteString(f.write(p))
			}
			got.WriteString(f.flush())
			if got.String() != tc.want {
				t.Errorf("streamed: %q, want %q", got.String(), tc.want)
			}
			if whole := stripThinking(strings.Join(tc.pieces, "")); whole != tc.want {
				t.Errorf("whole: %q, want %q", whole, tc.want)
			}
		})
	}
}

func TestReadArguments(t *testing.T) {
	tests := []struct {
		in, want string
		ok       bool
	}{
		{"", `{}`, true},
		{"null", `{}`, true},
		{` { "a": 1, "b": [1, 2] } `, `{"a":1,"b":[1,2]}`, true},
		{`"{\"a\": 1}"`, `{"a":1}`, true},
		{`{"a": 1`, `"{\"a\": 1"`, false},
		{`[1]`, `"[1]"`, false},
		{`"text"`, `"\"text\""`, false},
		{`{"a":1} {"b":2}`, `"{\"a\":1} {\"b\":2}"`, false},
	}
	for _, tc := range tests {
		got, err := readArguments(tc.in)
		if string(got) != tc.want || (err == nil) != tc.ok {
			t.Errorf("readArguments(%q) = %s, %v; want %s, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}
