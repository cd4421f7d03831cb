package offline

import (
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/ctxflow/ctxflow/lexical"
)

var kb = []Document{
	{ID: "phones/mate60", Text: "华为Mate60搭载麒麟9000s芯片，配备12GB内存。华为Mate60售价5999元起。它支持卫星通话。"},
	{ID: "phones/iphone15", Text: "iPhone 15 的价格是5999元。"},
	{ID: "phones/pixel8", Text: "The Pixel 8 costs $699. It has a Tensor G3 chip and 8 GB of RAM. Google released it in October 2023."},
	{ID: "food/cambridge", Text: "The Golden Wok is a Chinese restaurant in the north part of town. Its phone number is 01223 350688."},
}

func TestAnswer(t *testing.T) {
	tests := []struct {
		name     string
		question string
		docs     []Document
		kind     AnswerKind
		sources  []string
		contains []string
		lacks    []string
	}{
		{"zh extractive", "华为Mate60多少钱", kb, AnswerExtractive, []string{"phones/mate60"},
			[]string{lexical.LabelZH, "华为Mate60售价5999元起。 [phones/mate60]"}, []string{"iPhone"}},
		{"en extractive", "How much is the Pixel 8?", kb, AnswerExtractive, []string{"phones/pixel8"},
			[]string{lexical.LabelEN, "The Pixel 8 costs $699. [phones/pixel8]"}, []string{"Golden Wok"}},
		{"en two sentences", "phone number of the Golden Wok restaurant", kb, AnswerExtractive, []string{"food/cambridge"},
			[]string{"01223 350688", "[food/cambridge]"}, nil},
		{"not found", "What is the weather in Paris?", kb, AnswerNotFound, nil,
			[]string{lexical.LabelEN, "nothing on “What is the weather in Paris”"}, nil},
		{"zh not found", "北京今天天气怎么样", kb, AnswerNotFound, nil,
			[]string{lexical.LabelZH, "知识库中没有关于「北京今天天气怎么样」的内容"}, nil},
		{"no knowledge base", "How much is the Pixel 8?", nil, AnswerNoKnowledge, nil,
			[]string{lexical.LabelEN, "“How much is the Pixel 8”"}, nil},
		{"greeting", "Hello!", kb, AnswerGreeting, nil, []string{lexical.LabelEN, "Hello"}, nil},
		{"zh greeting", "你好", nil, AnswerGreeting, nil, []string{lexical.LabelZH, "你好"}, nil},
		{"thanks", "Thank you so much!", kb, AnswerGreeting, nil, []string{"You're welcome"}, nil},
		{"zh goodbye", "好的，再见", kb, AnswerGreeting, nil, []string{"再见"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Answer(tc.question, tc.docs)
			if got.Kind != tc.kind {
				t.Errorf("Kind = %s, want %s\n%s", got.Kind, tc.kind, got.Text)
			}
			if !slices.Equal(got.Sources, tc.sources) {
				t.Errorf("Sources = %q, want %q", got.Sources, tc.sources)
			}
			for _, want := range tc.contains {
				if !strings.Contains(got.Text, want) {
					t.Errorf("answer lacks %q:\n%s", want, got.Text)
				}
			}
			for _, bad := range tc.lacks {
				if strings.Contains(got.Text, bad) {
					t.Errorf("answer has %q:\n%s", bad, got.Text)
				}
			}
		})
	}
}

func TestAnswerProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		q := genText(6).Draw(t, "question")
		docs := rapid.SliceOfN(rapid.Custom(func(t *rapid.T) Document {
			return Document{ID: rapid.StringMatching(`[a-z0-9/]{1,8}`).Draw(t, "id"), Text: genText(12).Draw(t, "text")}
		}), 0, 4).Draw(t, "docs")
		got := Answer(q, docs)
		if !strings.HasPrefix(got.Text, lexical.LabelEN) && !strings.HasPrefix(got.Text, lexical.LabelZH) {
			t.Fatalf("answer not labelled: %q", got.Text)
		}
		again := Answer(q, docs)
		if got.Text != again.Text || !slices.Equal(got.Sources, again.Sources) {
			t.Fatal("not deterministic")
		}
		if (got.Kind == AnswerExtractive) != (len(got.Sources) > 0) {
			t.Fatalf("kind %s with sources %q", got.Kind, got.Sources)
		}
		for _, id := range got.Sources {
			if !strings.Contains(got.Text, "["+id+"]") {
				t.Fatalf("source %q not cited in %q", id, got.Text)
			}
		}
	})
}
