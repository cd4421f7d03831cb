package offline

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/ctxflow/ctxflow/convo"
	"github.com/ctxflow/ctxflow/internal/proptest/talk"
	"github.com/ctxflow/ctxflow/lexical"
)

var shopping = []convo.Message{
	{Role: convo.RoleUser, Content: "Hi there!"},
	{Role: convo.RoleAssistant, Content: "Hello! How can I help you today?"},
	{Role: convo.RoleUser, Content: "I want to buy a Pixel 8. My budget is $700 and I prefer the black one."},
	{Role: convo.RoleAssistant, Content: "The Pixel 8 costs $699 in black. It is a nice phone. Shall I order it?"},
	{Role: convo.RoleUser, Content: "Yes, I decided to order it."},
	{Role: convo.RoleToolCall, ToolCall: &convo.ToolCall{ID: "c1", Name: "place_order", Args: json.RawMessage(`{"sku":"pixel-8-black"}`)}},
	{Role: convo.RoleToolResult, ToolCallID: "c1", Content: "order #4521 confirmed"},
	{Role: convo.RoleAssistant, Content: "Done, your order number is #4521."},
	{Role: convo.RoleUser, Content: "Thanks a lot!"},
	{Role: convo.RoleAssistant, Content: "You're welcome."},
}

func TestSummarize(t *testing.T) {
	got := Summarize("User: lives in Berlin.", shopping, 500, nil)
	t.Logf("\n%s", got)
	for _, want := range []string{"lives in Berlin", "Pixel 8", "$700", "prefer the black", "decided to order", "Tool place_order: order #4521 confirmed"} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks %q", want)
		}
	}
	for _, bad := range []string{"Hi there", "Hello", "Thanks a lot", "welcome"} {
		if strings.Contains(got, bad) {
			t.Errorf("summary keeps small talk %q", bad)
		}
	}
	if strings.Count(got, "#4521") != 2 {
		t.Errorf("want #4521 from the tool result and the answer:\n%s", got)
	}
}

func TestSummarizeBudget(t *testing.T) {
	for _, tok := range []convo.Tokenizer{nil, wordTok{}} {
		for _, budget := range []int{1, 5, 12, 20, 40, 80, 500} {
			got := Summarize("User: lives in Berlin.", shopping, budget, tok)
			if n := lexical.Tokens(tok, got); n > budget {
				t.Errorf("budget %d (%T): %d tokens:\n%s", budget, tok, n, got)
			}
			if got == "" {
				t.Errorf("budget %d (%T): empty summary", budget, tok)
			}
			if budget >= 20 && !strings.Contains(got, "Pixel 8") {
				t.Errorf("budget %d (%T): the most salient sentence was dropped:\n%s", budget, tok, got)
			}
		}
	}
	// A tight budget keeps sentences with numbers and entities first.
	got := Summarize("", shopping, 20, wordTok{})
	t.Logf("budget 20:\n%s", got)
	for _, line := range strings.Split(got, "\n") {
		_, body := splitHead(line)
		for _, s := range lexical.Sentences(body) {
			if !lexical.HasDigit(s) && len(lexical.SalientEntities(s)) == 0 {
				t.Errorf("tight budget keeps %q", s)
			}
		}
	}
}

func TestSummarizeChinese(t *testing.T) {
	msgs := talk.Turns("你好", "你好，有什么可以帮你？", "我想买华为Mate60，预算6000元，喜欢白色。", "华为Mate60售价5999元起，有白色款。", "好的，就要白色的，订单号是A123。", "好的，已为你下单。")
	got := Summarize("", msgs, 100, nil)
	t.Logf("\n%s", got)
	for _, want := range []string{"用户：", "华为Mate60", "6000元", "A123"} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks %q", want)
		}
	}
	if strings.Contains(got, "有什么可以帮你") {
		t.Errorf("summary keeps small talk")
	}
}

func TestSummarizeNothing(t *testing.T) {
	if got := Summarize("", talk.Turns("hi", "hello!", "thanks"), 100, nil); got != "" {
		t.Errorf("small talk only: %q", got)
	}
	if got := Summarize("User: wants a refund.", talk.Turns("ok thanks"), 100, nil); got != "User: wants a refund." {
		t.Errorf("previous summary not kept: %q", got)
	}
}

func TestSummarizeProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		prev := talk.Text(10).Draw(t, "prev")
		msgs := talk.History().Draw(t, "msgs")
		budget := rapid.IntRange(1, 200).Draw(t, "budget")
		tok := rapid.SampledFrom([]convo.Tokenizer{nil, wordTok{}}).Draw(t, "tokenizer")
		got := Summarize(prev, msgs, budget, tok)
		if n := lexical.Tokens(tok, got); n > budget {
			t.Fatalf("%d tokens over budget %d:\n%s", n, budget, got)
		}
		if again := Summarize(prev, msgs, budget, tok); again != got {
			t.Fatal("not deterministic")
		}
		// Every line is made of sentences of the input (when the budget
		// is large enough that nothing is cut).
		var in []string
		for _, line := range strings.Split(prev, "\n") {
			_, body := splitHead(line)
			in = append(in, lexical.Sentences(body)...)
		}
		for _, m := range msgs {
			in = append(in, lexical.Sentences(m.Content)...)
		}
		for _, line := range strings.Split(got, "\n") {
			if _, body := splitHead(line); budget > 100 && !madeOf(body, in) {
				t.Fatalf("line %q is not made of input sentences %q", line, in)
			}
		}
	})
}

// madeOf reports whether s is a sequence of the given sentences, separated
// by single spaces or nothing.
func madeOf(s string, sents []string) bool {
	ok := make([]bool, len(s)+1) // ok[i]: s[i:] is made of sentences
	ok[len(s)] = true
	for i := len(s) - 1; i >= 0; i-- {
		for _, x := range sents {
			if x == "" || !strings.HasPrefix(s[i:], x) {
				continue
			}
			j := i + len(x)
			if ok[j] || (j < len(s) && s[j] == ' ' && ok[j+1]) {
				ok[i] = true
				break
			}
		}
	}
	return ok[0]
}

// TestSummaryKeepsWhatTheUserAskedToRemember folds 200 turns of numbered
// filler, ten of them facts to remember, in steps of ten messages as the
// session does: every fact is in the last summary, and none of the
// engine's answers that it had no answer (they quote the question, digits
// and all).
func TestSummaryKeepsWhatTheUserAskedToRemember(t *testing.T) {
	var facts []string
	summary := ""
	var step []convo.Message
	for i := range 200 {
		q := fmt.Sprintf("Tell me something about subject %d, please, in a few words.", i)
		if i%20 == 3 {
			code := fmt.Sprintf("%d", 7000+i*37)
			facts = append(facts, code)
			q = fmt.Sprintf("Please remember this: the code of locker %d is %s.", i, code)
		}
		step = append(step, talk.Turns(q, AnswerIn(q, nil, false).Text)...)
		if len(step) == 10 {
			summary, step = Summarize(summary, step, 500, nil), nil
		}
	}
	for _, f := range facts {
		if !strings.Contains(summary, f) {
			t.Errorf("fact %s lost from the summary:\n%s", f, summary)
		}
	}
	if strings.Contains(summary, cannotAnswerEN) {
		t.Errorf("the summary keeps the engine's non-answers:\n%s", summary)
	}
}
