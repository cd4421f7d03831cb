package activities_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/activities/transcript"
	"github.com/ctxflow/ctxflow/convo"
	"github.com/ctxflow/ctxflow/lexical"
)

// mate60Window is the conversation as the offline engine answered
// it: a quoted sentence, then a bare heading.
var mate60Window = []convo.Message{
	{Role: convo.RoleUser, Content: "介绍下华为Mate60"},
	{Role: convo.RoleAssistant, Content: lexical.LabelZH + "知识库摘录：\n- 华为Mate60是华为的旗舰手机。 [mate60.md#0-aa]"},
	{Role: convo.RoleUser, Content: "它的续航怎么样？"},
	{Role: convo.RoleAssistant, Content: lexical.LabelZH + "知识库摘录：\n- ## 电池与续航 [mate60.md#2-cc]"},
}

func TestModelRewriterStructuredOutput(t *testing.T) {
	m := &scriptedModel{replies: []string{`{"rewritten": "华为Mate60的屏幕呢？", "topic": "华为Mate60"}`}}
	r := activities.ModelRewriter{Model: m, ModelName: "default-model", Fallback: lexical.Rewriter{}}
	q, topic, err := r.RewriteInContext(t.Context(), activities.RewriteRequest{
		Model: "qwen", Question: "屏幕呢？", History: mate60Window, Summary: "用户在比较手机。", Topic: "华为Mate60",
	})
	if err != nil || q != "华为Mate60的屏幕呢？" || topic != "华为Mate60" {
		t.Fatalf("RewriteInContext = %q, %q, %v", q, topic, err)
	}
	if len(m.reqs) != 1 {
		t.Fatalf("%d model calls, want 1", len(m.reqs))
	}
	req := m.reqs[0]
	if req.Model != "qwen" || !strings.Contains(string(req.Format), `"rewritten"`) || !strings.Contains(string(req.Format), `"topic"`) {
		t.Errorf("request model %q, format %s", req.Model, req.Format)
	}
	user := req.Messages[len(req.Messages)-1].Content
	for _, want := range []string{"用户在比较手机。", "Topic so far: 华为Mate60", "user: 介绍下华为Mate60", "华为Mate60是华为的旗舰手机", "Latest question: 屏幕呢？"} {
		if !strings.Contains(user, want) {
			t.Errorf("the model's input lacks %q:\n%s", want, user)
		}
	}
	for _, bad := range []string{lexical.LabelZH, "mate60.md#0-aa"} {
		if strings.Contains(user, bad) {
			t.Errorf("the model's input holds %q:\n%s", bad, user)
		}
	}
	if sys := req.Messages[0].Content; !strings.Contains(sys, "知识库摘录") || !strings.Contains(sys, "stays exactly as it is") {
		t.Errorf("the system prompt lacks the topic and self-contained rules:\n%s", sys)
	}
}

func TestModelRewriterDefaults(t *testing.T) {
	t.Run("the worker's model and the offline topic as the hint", func(t *testing.T) {
		m := &scriptedModel{replies: []string{`{"rewritten": "华为Mate60多少钱", "topic": "华为Mate60"}`}}
		q, _, err := activities.ModelRewriter{Model: m, ModelName: "default-model", Fallback: lexical.Rewriter{}}.Rewrite(t.Context(), "它多少钱", mate60Window)
		if err != nil || q != "华为Mate60多少钱" {
			t.Fatalf("Rewrite = %q, %v", q, err)
		}
		if m.reqs[0].Model != "default-model" || !strings.Contains(m.reqs[0].Messages[1].Content, "Topic so far: 华为Mate60") {
			t.Errorf("model %q, input %s", m.reqs[0].Model, m.reqs[0].Messages[1].Content)
		}
	})
	t.Run("no history: no model call", func(t *testing.T) {
		m := &scriptedModel{replies: []string{`{"rewritten": "x", "topic": ""}`}}
		q, _, err := activities.ModelRewriter{Model: m, ModelName: "m"}.Rewrite(t.Context(), "它多少钱", nil)
		if err != nil || q != "它多少钱" || len(m.reqs) != 0 {
			t.Fatalf("Rewrite = %q, %v after %d calls", q, err, len(m.reqs))
		}
	})
	t.Run("unchanged up to spaces is unchanged", func(t *testing.T) {
		m := &scriptedModel{replies: []string{`{"rewritten": " What is ctxflow? ", "topic": "华为Mate60"}`}}
		q, _, err := activities.ModelRewriter{Model: m, ModelName: "m"}.Rewrite(t.Context(), "What is ctxflow?", mate60Window)
		if err != nil || q != "What is ctxflow?" {
			t.Fatalf("Rewrite = %q, %v", q, err)
		}
	})
}

// blockingModel answers only when its context ends.
type blockingModel struct{}

func (blockingModel) Chat(ctx context.Context, _ activities.ChatRequest, _ func(string)) (activities.ChatResponse, error) {
	<-ctx.Done()
	return activities.ChatResponse{}, ctx.Err()
}

// TestModelRewriterFallsBack: whatever goes wrong with the model, the
// offline rewriter answers.
func TestModelRewriterFallsBack(t *testing.T) {
	answer := "华为Mate60的续航很好，电池容量为5000mAh，支持88W快充，一般使用可以坚持一整天，重度使用也能到晚上，此外还支持无线充电和反向充电，" +
		"屏幕为6.69英寸OLED，刷新率120Hz，搭载麒麟9000s芯片，支持卫星通话。售价5999元起，有雅川青、白沙银、南糯紫和雅丹黑四种颜色，" +
		"12GB内存加256GB或512GB存储，后置5000万像素主摄，前置1300万像素。"
	tests := []struct {
		name  string
		model activities.ChatModel
		calls int
	}{
		{"an error", &scriptedModel{err: errors.New("connection refused")}, 1},
		{"no JSON twice", &scriptedModel{replies: []string{"华为Mate60多少钱", "still prose"}}, 2},
		{"an empty rewrite twice", &scriptedModel{replies: []string{`{"rewritten": "", "topic": "x"}`}}, 2},
		{"an answer instead of a rewrite", &scriptedModel{replies: []string{`{"rewritten": "` + answer + `", "topic": "华为Mate60"}`}}, 2},
		{"a timeout", blockingModel{}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := activities.ModelRewriter{Model: tc.model, ModelName: "m", Fallback: lexical.Rewriter{}, Timeout: 50 * time.Millisecond}
			q, topic, err := r.Rewrite(t.Context(), "它多少钱", mate60Window)
			if err != nil || q != "华为Mate60多少钱" || topic != "华为Mate60" {
				t.Fatalf("Rewrite = %q, %q, %v; want the offline rewrite", q, topic, err)
			}
			if sm, ok := tc.model.(*scriptedModel); ok && len(sm.reqs) != tc.calls {
				t.Errorf("%d model calls, want %d", len(sm.reqs), tc.calls)
			}
		})
	}
	t.Run("a cancelled turn is not rewritten offline", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		r := activities.ModelRewriter{Model: blockingModel{}, ModelName: "m", Fallback: lexical.Rewriter{}}
		if _, _, err := r.Rewrite(ctx, "它多少钱", mate60Window); !errors.Is(err, context.Canceled) {
			t.Fatalf("error = %v, want context.Canceled", err)
		}
	})
}

// contextRewriter records what the session activity gives it.
type contextRewriter struct{ got activities.RewriteRequest }

func (c *contextRewriter) Rewrite(context.Context, string, []convo.Message) (string, string, error) {
	return "", "", errors.New("RewriteInContext expected")
}

func (c *contextRewriter) RewriteInContext(_ context.Context, req activities.RewriteRequest) (string, string, error) {
	c.got = req
	return "华为Mate60的屏幕呢？", "华为Mate60", nil
}

// TestRewriteQuestionInContext: the session's rewrite step gives a rewriter
// that reads them the session's model, running summary and topic.
func TestRewriteQuestionInContext(t *testing.T) {
	store, err := transcript.Open(transcript.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	key := activities.SessionKey{Tenant: "t", SessionID: "s"}
	now := time.Now()
	var ids []string
	parent := ""
	for i, m := range append(append([]convo.Message(nil), mate60Window...), convo.Message{Role: convo.RoleUser, Content: "屏幕呢？"}) {
		m.ID, m.ParentID, m.CreatedAt = "m"+string(rune('a'+i)), parent, now
		if _, _, err := store.Append(t.Context(), key, m); err != nil {
			t.Fatal(err)
		}
		ids, parent = append(ids, m.ID), m.ID
	}
	sum := convo.SummaryRecord("sum1", "mb", now, convo.SummaryState{Text: "用户在了解华为Mate60。", Tokens: 9, Folded: 2, Through: "mb", PathHash: "h"})
	if _, _, err := store.Append(t.Context(), key, sum); err != nil {
		t.Fatal(err)
	}
	cr := &contextRewriter{}
	s := &activities.Session{Transcript: store, Rewriter: cr}
	res, err := s.RewriteQuestion(t.Context(), activities.RewriteQuestionInput{
		Session: key, TurnID: "t3", WindowIDs: ids[2:], Model: "qwen", SummaryID: "sum1", Topic: "华为Mate60",
	})
	if err != nil || res.Question != "华为Mate60的屏幕呢？" || !res.Rewritten || res.Topic != "华为Mate60" {
		t.Fatalf("RewriteQuestion = %+v, %v", res, err)
	}
	g := cr.got
	if g.Model != "qwen" || g.Question != "屏幕呢？" || len(g.History) != 2 || g.Summary != "用户在了解华为Mate60。" || g.Topic != "华为Mate60" {
		t.Errorf("the rewriter got %+v", g)
	}
}
