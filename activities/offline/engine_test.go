package offline

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/convo"
	"github.com/ctxflow/ctxflow/internal/proptest/talk"
	"github.com/ctxflow/ctxflow/lexical"
)

func chat(t *testing.T, e *Engine, msgs ...convo.ModelMessage) activities.ChatResponse {
	t.Helper()
	var streamed strings.Builder
	resp, err := e.Chat(context.Background(), activities.ChatRequest{Model: "anything", Messages: msgs}, func(d string) { streamed.WriteString(d) })
	if err != nil {
		t.Fatal(err)
	}
	if resp.Model != ModelName {
		t.Errorf("Model = %q, want %q", resp.Model, ModelName)
	}
	if streamed.String() != resp.Content {
		t.Errorf("streamed %q, answered %q", streamed.String(), resp.Content)
	}
	if resp.PromptTokens <= 0 || resp.CompletionTokens <= 0 {
		t.Errorf("token counts %d, %d", resp.PromptTokens, resp.CompletionTokens)
	}
	again, err := e.Chat(context.Background(), activities.ChatRequest{Messages: msgs}, nil)
	if err != nil || !reflect.DeepEqual(again, resp) {
		t.Errorf("not deterministic: %+v, %v", again, err)
	}
	return resp
}

func msg(role, content string) convo.ModelMessage {
	return convo.ModelMessage{Role: role, Content: content}
}

func TestEngineSummaryPrompt(t *testing.T) {
	for _, budget := range []int{16, 30, 200} {
		cfg := convo.SummaryConfig{MaxTokens: budget}
		e := &Engine{Tokenizer: wordTok{}}
		resp := chat(t, e, convo.SummaryPrompt("User: lives in Berlin.", shopping, cfg)...)
		t.Logf("budget %d:\n%s", budget, resp.Content)
		if n := (wordTok{}).Count(resp.Content); n > budget {
			t.Errorf("budget %d: %d tokens", budget, n)
		}
		if !strings.Contains(resp.Content, "Pixel 8") {
			t.Errorf("budget %d: summary lacks the product", budget)
		}
		if strings.Contains(resp.Content, lexical.LabelEN) {
			t.Errorf("summary carries the answer label")
		}
		if budget >= 200 {
			for _, want := range []string{"lives in Berlin", "$700", "#4521", "Tool place_order:"} {
				if !strings.Contains(resp.Content, want) {
					t.Errorf("summary lacks %q", want)
				}
			}
		}
	}
}

func TestEngineSummaryPromptMultiline(t *testing.T) {
	fold := []convo.Message{
		{Role: convo.RoleUser, Content: "My order:\n- order #88 for 2 lamps\n- deliver to 5 Main St"},
		{Role: convo.RoleAssistant, Content: lexical.LabelEN + " From the knowledge base:\n- Lamps ship in 3 days. [kb/lamps]"},
	}
	resp := chat(t, &Engine{}, convo.SummaryPrompt("", fold, convo.DefaultSummaryConfig())...)
	for _, want := range []string{"order #88 for 2 lamps", "5 Main St", "Lamps ship in 3 days"} {
		if !strings.Contains(resp.Content, want) {
			t.Errorf("summary lacks %q:\n%s", want, resp.Content)
		}
	}
	if strings.Contains(resp.Content, lexical.LabelEN) {
		t.Errorf("summary keeps the offline label:\n%s", resp.Content)
	}
}

func TestEngineSummaryOfSmallTalk(t *testing.T) {
	resp := chat(t, &Engine{}, convo.SummaryPrompt("", talk.Turns("hi", "hello!"), convo.DefaultSummaryConfig())...)
	if resp.Content != noSummaryEN {
		t.Errorf("got %q, want %q (never empty)", resp.Content, noSummaryEN)
	}
}

func TestEngineReply(t *testing.T) {
	docs := msg("system", "Answer from these documents:\n"+FormatDocuments(kb))
	tests := []struct {
		name     string
		msgs     []convo.ModelMessage
		contains []string
	}{
		{"zh follow-up over documents", []convo.ModelMessage{
			msg("system", "你是一个助手。"), docs,
			msg("user", "华为Mate60多少钱"), msg("assistant", lexical.LabelZH+"知识库摘录：\n- 华为Mate60售价5999元起。 [phones/mate60]"),
			msg("user", "它的配置呢？"),
		}, []string{lexical.LabelZH, "12GB内存", "[phones/mate60]"}},
		{"en follow-up over documents", []convo.ModelMessage{
			docs, msg("user", "Tell me about the Pixel 8"), msg("assistant", "It is a phone."), msg("user", "how much is it?"),
		}, []string{lexical.LabelEN, "$699", "[phones/pixel8]"}},
		{"documents in a tool message", []convo.ModelMessage{
			msg("user", "How much is the Pixel 8?"),
			{Role: "assistant", ToolCalls: []convo.ToolCall{{ID: "1", Name: "knowledge_search"}}},
			{Role: "tool", ToolCallID: "1", ToolName: "knowledge_search", Content: FormatDocuments(kb[2:3])},
		}, []string{"$699", "[phones/pixel8]"}},
		{"nothing relevant", []convo.ModelMessage{docs, msg("user", "Who won the 1998 World Cup?")},
			[]string{lexical.LabelEN, "nothing on “Who won the 1998 World Cup”"}},
		{"no knowledge base names the rewritten question", []convo.ModelMessage{
			msg("system", "You are a helpful assistant."), msg("user", "我想买小米14"), msg("assistant", "好的"), msg("user", "它多少钱？"),
		}, []string{lexical.LabelZH, "「小米14多少钱」"}},
		{"the running summary gives the topic", []convo.ModelMessage{
			msg("system", convo.SummaryMessage("User: I want to buy a Pixel 8.").Content), msg("user", "what's the price?"),
		}, []string{"price of Pixel 8"}},
		{"greeting", []convo.ModelMessage{docs, msg("user", "hello")}, []string{lexical.LabelEN, "Hello!"}},
		{"zh greeting", []convo.ModelMessage{msg("user", "你好！")}, []string{lexical.LabelZH, "你好！"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp := chat(t, &Engine{}, tc.msgs...)
			for _, want := range tc.contains {
				if !strings.Contains(resp.Content, want) {
					t.Errorf("reply lacks %q:\n%s", want, resp.Content)
				}
			}
		})
	}
}

// TestEngineTrustsTheDocuments: the documents of a request passed the
// corrective loop; the answer is not graded again against the question
// (a comparison, which neither document answers alone).
func TestEngineTrustsTheDocuments(t *testing.T) {
	docs := msg("system", activities.DocumentsMessage([]activities.Doc{
		{ID: "mate60.md#0", Text: "# 华为Mate60\n\n## 屏幕\n\n采用6.69英寸OLED曲面屏，支持1-120Hz自适应刷新率。"},
		{ID: "iphone15.md#0", Text: "# iPhone 15\n\n## 屏幕\n\niPhone 15采用6.1英寸显示屏，刷新率为60Hz。"},
	}))
	resp := chat(t, &Engine{}, docs, msg("user", "Mate60和iPhone 15哪个屏幕刷新率更高？"))
	for _, want := range []string{"120Hz", "60Hz", "[mate60.md#0]", "[iphone15.md#0]"} {
		if !strings.Contains(resp.Content, want) {
			t.Errorf("reply lacks %q:\n%s", want, resp.Content)
		}
	}
}

func TestEngineAnswersInTheConversationsLanguage(t *testing.T) {
	docs := msg("system", FormatDocuments([]Document{{ID: "iphone15.md#0", Text: "# iPhone 15\n\n## 价格\n\niPhone 15售价5999元。"}}))
	for _, tc := range []struct {
		name  string
		msgs  []convo.ModelMessage
		label string
	}{
		{"a Latin name with a Chinese particle", []convo.ModelMessage{docs, msg("user", "华为Mate60多少钱？"), msg("assistant", "…"), msg("user", "iPhone 15 Pro Max呢？")}, lexical.LabelZH},
		{"alone", []convo.ModelMessage{docs, msg("user", "iPhone 15 Pro Max多少钱？")}, lexical.LabelZH},
		{"an English question naming a Chinese product", []convo.ModelMessage{docs, msg("user", "华为Mate60多少钱？"), msg("assistant", "…"), msg("user", "What is the price of iPhone 15?")}, lexical.LabelEN},
		{"English after Chinese", []convo.ModelMessage{docs, msg("user", "华为Mate60多少钱？"), msg("assistant", "…"), msg("user", "how much is the iPhone 15?")}, lexical.LabelEN},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if resp := chat(t, &Engine{}, tc.msgs...); !strings.HasPrefix(resp.Content, tc.label) {
				t.Errorf("reply not labelled %q:\n%s", tc.label, resp.Content)
			}
		})
	}
}

func TestEngineErrors(t *testing.T) {
	e := &Engine{}
	ctx := context.Background()
	for name, req := range map[string]activities.ChatRequest{
		"no messages":     {},
		"no user message": {Messages: []convo.ModelMessage{msg("system", "You are helpful.")}},
		"json format":     {Messages: []convo.ModelMessage{msg("user", "hi")}, Format: []byte("json")},
	} {
		_, err := e.Chat(ctx, req, nil)
		if !activities.IsPermanent(err) {
			t.Errorf("%s: err = %v, want a permanent model error", name, err)
		}
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := e.Chat(cancelled, activities.ChatRequest{Messages: []convo.ModelMessage{msg("user", "hi")}}, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: err = %v", err)
	}
	if _, err := e.Embed(cancelled, "", []string{"x"}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled embed: err = %v", err)
	}
}

func TestEngineEmbed(t *testing.T) {
	e := &Engine{Embedder: lexical.Embedder{Dim: 32}}
	vs, err := e.Embed(context.Background(), "ignored", []string{"a b", "华为"})
	if err != nil || len(vs) != 2 || len(vs[0]) != 32 {
		t.Fatalf("got %d vectors, err %v", len(vs), err)
	}
}

func TestParseDocuments(t *testing.T) {
	docs := []Document{{ID: "a", Text: "first line\nsecond line"}, {ID: "kb/x.md#2", Text: "其他内容"}}
	got := parseDocuments("Use these documents:\n" + FormatDocuments(docs) + "\n")
	if len(got) != 2 || got[0] != docs[0] || got[1] != docs[1] {
		t.Errorf("round trip: %+v", got)
	}
	if got := parseDocuments("You are a helpful assistant."); len(got) != 0 {
		t.Errorf("a plain system prompt holds documents: %+v", got)
	}
}

func TestEngineArbitraryInput(t *testing.T) {
	e := &Engine{}
	rapid.Check(t, func(t *rapid.T) {
		text := rapid.OneOf(rapid.String(), rapid.Map(rapid.SliceOf(rapid.Byte()), func(b []byte) string { return string(b) }), talk.Text(10))
		roles := rapid.SampledFrom([]string{"system", "user", "assistant", "tool"})
		n := rapid.IntRange(1, 6).Draw(t, "n")
		msgs := make([]convo.ModelMessage, n)
		for i := range msgs {
			msgs[i] = msg(roles.Draw(t, "role"), text.Draw(t, "content"))
		}
		msgs[n-1].Role = "user"
		if rapid.Bool().Draw(t, "summary") {
			msgs = convo.SummaryPrompt(text.Draw(t, "prev"), talk.Turns(text.Draw(t, "a"), text.Draw(t, "b")), convo.SummaryConfig{MaxTokens: rapid.IntRange(1, 100).Draw(t, "budget")})
		}
		resp, err := e.Chat(context.Background(), activities.ChatRequest{Messages: msgs}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(resp.Content) == "" || resp.Model != ModelName {
			t.Fatalf("response %+v", resp)
		}
	})
}
