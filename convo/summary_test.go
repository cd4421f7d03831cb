package convo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func summaryCfg(messages int) SummaryConfig {
	c := DefaultSummaryConfig()
	c.ThresholdMessages, c.ThresholdTokens, c.MaxTokens = messages, 0, 50
	return c
}

func sliding(rounds int) WindowConfig {
	return WindowConfig{Strategy: StrategySlidingWindow, MaxRounds: rounds, StartOn: StartOnHuman, IncludeSystem: true}
}

func TestPlanSummaryNotTriggered(t *testing.T) {
	branch := spec(t, "s10 u10 a10 u10 a10")
	p, err := PlanSummary(branch, sliding(1), summaryCfg(4), SummaryState{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Triggered || len(p.Fold) != 0 {
		t.Errorf("4 unfolded messages, threshold 4: plan %+v", p)
	}
}

func TestSummaryLifecycle(t *testing.T) {
	branch := spec(t, "s10 u10 a10 u10 a10 u10 a10 u10 a10")
	w, c := sliding(2), summaryCfg(4)
	p, err := PlanSummary(branch, w, c, SummaryState{})
	if err != nil {
		t.Fatal(err)
	}
	if !p.Triggered || !slices.Equal(ids(p.Fold), []string{"u1", "a2", "u3", "a4"}) || p.Through != "a4" || p.Folded != 5 || p.More {
		t.Fatalf("plan = %+v (fold %v)", p, ids(p.Fold))
	}
	if want := SummaryCacheKey(BranchHash(branch[:5]), 5, c.Hash()); p.Key != want {
		t.Errorf("Key = %s, want %s", p.Key, want)
	}

	cache := NewSummaryLRU(8)
	calls := 0
	fn := func(_ context.Context, prompt []ModelMessage) (string, error) {
		calls++
		if !strings.Contains(prompt[1].Content, "[user] text of u1") {
			t.Errorf("prompt misses the folded messages: %q", prompt[1].Content)
		}
		return "  user greeted twice  ", nil
	}
	s, hit, err := Summarize(context.Background(), wordTok{}, p, c, cache, fn)
	if err != nil || hit || calls != 1 {
		t.Fatalf("Summarize: %v, hit %v, calls %d", err, hit, calls)
	}
	if s.Text != "user greeted twice" || s.Through != "a4" || s.Folded != 5 || s.Key != p.Key {
		t.Errorf("state = %+v", s)
	}
	if want := MessageTokens(wordTok{}, SummaryMessage(s.Text)); s.Tokens != want {
		t.Errorf("state tokens %d, want %d", s.Tokens, want)
	}
	again, hit, err := Summarize(context.Background(), wordTok{}, p, c, cache, fn)
	if err != nil || !hit || calls != 1 || !reflect.DeepEqual(again, s) {
		t.Errorf("second Summarize: hit %v, calls %d, err %v", hit, calls, err)
	}

	ctx, err := Assemble(branch, w, s)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids(ctx.Messages), []string{"s0", "u5", "a6", "u7", "a8"}) || ctx.Summary != s.Text || ctx.Folded != 5 {
		t.Errorf("context = %v %+v", ids(ctx.Messages), ctx)
	}
	if want := 10 + 40 + s.Tokens + ReplyPrimingTokens; ctx.TokensAfter != want || ctx.TrimmedCount != 4 {
		t.Errorf("TokensAfter %d (want %d), TrimmedCount %d", ctx.TokensAfter, want, ctx.TrimmedCount)
	}
	mm, err := ctx.ModelMessages(View{})
	if err != nil {
		t.Fatal(err)
	}
	roles := []string{}
	for _, m := range mm {
		roles = append(roles, m.Role)
	}
	if !slices.Equal(roles, []string{"system", "system", "user", "assistant", "user", "assistant"}) || !strings.HasSuffix(mm[1].Content, s.Text) {
		t.Errorf("model view = %+v", mm)
	}

	// The conversation goes on: the next fold starts where the last ended.
	more := append(slices.Clone(branch), spec(t, "s0 u10 a10 u10 a10")[1:]...)
	more[9].ParentID = "a8"
	for i := 9; i < len(more); i++ {
		more[i].ID += "n"
		if i > 9 {
			more[i].ParentID = more[i-1].ID
		}
	}
	p2, err := PlanSummary(more, w, c, s)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids(p2.Fold), []string{"u5", "a6", "u7", "a8"}) || p2.Prev.Key != s.Key || p2.Folded != 9 {
		t.Errorf("incremental plan = %v %+v", ids(p2.Fold), p2)
	}
	if got := p2.Prompt(c)[1].Content; !strings.Contains(got, "user greeted twice") || strings.Contains(got, "text of u1") {
		t.Errorf("incremental prompt must carry the previous summary, not the old messages: %q", got)
	}

	// The same plan on a tree gives the same answer.
	tr := treeOf(t, more)
	tp, err := tr.PlanSummary(more[len(more)-1].ID, w, c, s)
	if err != nil || !reflect.DeepEqual(tp, p2) {
		t.Errorf("tree plan = %+v, %v; want %+v", tp, err, p2)
	}
}

func TestPlanSummaryChunks(t *testing.T) {
	branch := spec(t, "s10 u100 a100 u100 a100 u100 a100 u10 a10")
	c := summaryCfg(2)
	c.MaxFoldTokens = 256
	p, err := PlanSummary(branch, sliding(1), c, SummaryState{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids(p.Fold), []string{"u1", "a2"}) || !p.More {
		t.Errorf("fold %v, more %v", ids(p.Fold), p.More)
	}
}

func TestSummarizeFailures(t *testing.T) {
	branch := spec(t, "u10 a10 u10 a10 u10")
	c := summaryCfg(2)
	p, err := PlanSummary(branch, sliding(1), c, SummaryState{})
	if err != nil || len(p.Fold) == 0 {
		t.Fatalf("plan %+v, %v", p, err)
	}
	boom := errors.New("model down")
	_, _, err = Summarize(context.Background(), wordTok{}, p, c, nil, func(context.Context, []ModelMessage) (string, error) { return "", boom })
	if !errors.Is(err, boom) {
		t.Errorf("err = %v", err)
	}
	_, _, err = Summarize(context.Background(), wordTok{}, p, c, nil, func(context.Context, []ModelMessage) (string, error) { return " \n", nil })
	if !errors.Is(err, ErrEmptySummary) {
		t.Errorf("err = %v", err)
	}
	noop, hit, err := Summarize(context.Background(), wordTok{}, SummaryPlan{Prev: SummaryState{Text: "old", Folded: 1}}, c, nil, nil)
	if err != nil || hit || noop.Text != "old" {
		t.Errorf("empty plan: %+v %v %v", noop, hit, err)
	}

	// Degraded view: the last 4 messages, moved past a split tool pair.
	tools := spec(t, "s10 u10 c10 r10 a10 u10 a10")
	if got := ids(fallbackTruncate(tools, 4)); !slices.Equal(got, []string{"r3", "a4", "u5", "a6"}) {
		t.Errorf("FallbackTruncate = %v", got)
	}
	noStart := sliding(10)
	noStart.StartOn = ""
	fb, err := AssembleFallback(tools, noStart, 4)
	if err != nil || !fb.Degraded || !slices.Equal(ids(fb.Messages), []string{"s0", "a4", "u5", "a6"}) {
		t.Errorf("AssembleFallback = %v %+v %v", ids(fb.Messages), fb, err)
	}
	tfb, err := treeOf(t, tools).AssembleFallback("a6", noStart, 4)
	if err != nil || !reflect.DeepEqual(tfb, fb) {
		t.Errorf("tree AssembleFallback = %+v, %v", tfb, err)
	}
}

func TestAssembleSummaryDroppedOrIgnored(t *testing.T) {
	branch := spec(t, "s10 u10 a10 u10 a10 u30")
	s := SummaryState{Text: "t", Tokens: 30, Through: "a2", Folded: 3, PathHash: BranchHash(branch[:3])}
	w := WindowConfig{Strategy: StrategyTokenLimit, MaxTokens: 64, StartOn: StartOnHuman, IncludeSystem: true}
	ctx, err := Assemble(branch, w, s)
	if err != nil {
		t.Fatal(err)
	}
	if !ctx.SummaryDropped || ctx.Summary != "" || !slices.Equal(ids(ctx.Messages), []string{"s0", "u3", "a4", "u5"}) || ctx.TokensAfter != 63 {
		t.Errorf("context = %v %+v", ids(ctx.Messages), ctx)
	}
	other := s
	other.PathHash = "not this branch"
	ctx, err = Assemble(branch, w, other)
	if err != nil || !ctx.SummaryIgnored || ctx.Summary != "" {
		t.Errorf("foreign summary: %+v %v", ctx, err)
	}
	tctx, err := treeOf(t, branch).Assemble("u5", w, other)
	if err != nil || !reflect.DeepEqual(tctx, ctx) {
		t.Errorf("tree Assemble = %+v, want %+v", tctx, ctx)
	}
}

func TestNewSummaryStateEnforcesBudget(t *testing.T) {
	c := summaryCfg(2)
	c.MaxTokens = 16
	text := strings.Repeat("word ", 100)
	s := NewSummaryState(wordTok{}, SummaryPlan{Through: "x", Folded: 1}, text, c)
	if n := (wordTok{}).Count(s.Text); n != 16 {
		t.Errorf("summary has %d tokens, budget 16", n)
	}
}

func TestSummaryPromptContent(t *testing.T) {
	msgs := spec(t, "u1 c1 r1 a1")
	msgs[2].Content = "order #4521 shipped"
	got := SummaryPrompt("prefers email", msgs, summaryCfg(2))
	if len(got) != 2 || got[0].Role != "system" || got[1].Role != "user" {
		t.Fatalf("prompt shape %+v", got)
	}
	for _, want := range []string{"intents and needs", "named entities", "decisions", "preferences", "open questions", "at most 50 tokens"} {
		if !strings.Contains(got[0].Content, want) {
			t.Errorf("system prompt lacks %q", want)
		}
	}
	for _, want := range []string{"prefers email", "[tool call] search(", "[tool result search] order #4521 shipped", "[assistant] text of a3"} {
		if !strings.Contains(got[1].Content, want) {
			t.Errorf("user prompt lacks %q:\n%s", want, got[1].Content)
		}
	}
	if first := SummaryPrompt("", msgs, summaryCfg(2)); !strings.Contains(first[1].Content, "(none)") {
		t.Error("first summary prompt does not say there is no summary yet")
	}
}

func TestSummaryConfig(t *testing.T) {
	if err := DefaultSummaryConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	bad := DefaultSummaryConfig()
	bad.ThresholdMessages, bad.ThresholdTokens = 0, 0
	if err := bad.Validate(); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("no threshold: %v", err)
	}
	bad = DefaultSummaryConfig()
	bad.MaxTokens = 1
	if err := bad.Validate(); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("tiny budget: %v", err)
	}
	a, b := DefaultSummaryConfig(), DefaultSummaryConfig()
	b.ThresholdMessages = 99
	if a.Hash() != b.Hash() {
		t.Error("thresholds changed the config hash")
	}
	b.Model = "qwen2.5:7b"
	if a.Hash() == b.Hash() {
		t.Error("the model did not change the config hash")
	}
}

func TestSummaryLRU(t *testing.T) {
	c := NewSummaryLRU(2)
	c.Put("a", SummaryState{Text: "A"})
	c.Put("b", SummaryState{Text: "B"})
	c.Get("a")
	c.Put("c", SummaryState{Text: "C"})
	if _, ok := c.Get("b"); ok {
		t.Error("least recently used entry not evicted")
	}
	if s, ok := c.Get("a"); !ok || s.Text != "A" {
		t.Error("recently used entry evicted")
	}
	c.Put("a", SummaryState{Text: "A2"})
	if s, _ := c.Get("a"); s.Text != "A2" || c.Len() != 2 {
		t.Errorf("update: %+v, len %d", s, c.Len())
	}
}

func TestSummaryRecordRevival(t *testing.T) {
	branch := spec(t, "s10 u10 a10 u10 a10 u10 a10")
	w, c := sliding(1), summaryCfg(2)
	tr := treeOf(t, branch)
	p, err := tr.PlanSummary("a6", w, c, SummaryState{})
	if err != nil || len(p.Fold) == 0 {
		t.Fatalf("plan %+v, %v", p, err)
	}
	s := NewSummaryState(wordTok{}, p, "asked three times", c)
	rec := SummaryRecord("x7", "a6", time.UnixMilli(9).UTC(), s)
	if err := tr.Append(rec); err != nil {
		t.Fatal(err)
	}
	if err := tr.Append(Message{ID: "u8", ParentID: "x7", Role: RoleUser, Tokens: 10}); err != nil {
		t.Fatal(err)
	}
	// A restarted worker decodes the transcript and finds the summary again.
	var buf bytes.Buffer
	if err := EncodeJSONL(&buf, tr.Messages()); err != nil {
		t.Fatal(err)
	}
	msgs, err := DecodeJSONL(&buf)
	if err != nil {
		t.Fatal(err)
	}
	revived, err := buildTree(msgs)
	if err != nil {
		t.Fatal(err)
	}
	last, ok := revived.LastSummary("u8")
	if !ok {
		t.Fatal("no summary record on the branch")
	}
	got, err := SummaryFromRecord(last)
	if err != nil || !reflect.DeepEqual(got, s) {
		t.Fatalf("revived %+v, %v; want %+v", got, err, s)
	}
	ctx, err := revived.Assemble("u8", w, got)
	if err != nil || ctx.Summary != s.Text || ctx.SummaryIgnored {
		t.Fatalf("assemble with revived summary: %+v, %v", ctx, err)
	}
	mm, _ := ctx.ModelMessages(View{})
	for _, m := range mm {
		if m.Content == s.Text {
			t.Error("the summary record itself leaked into the model view")
		}
	}
	if _, err := SummaryFromRecord(branch[1]); !errors.Is(err, ErrInvalidMessage) {
		t.Errorf("non-record: %v", err)
	}
}

// TestPlanSummarySkipsALongBacklog: a backlog of far more than
// MaxBacklogFolds steps is folded from its newest part, and the prompt
// says how many messages it passed over.
func TestPlanSummarySkipsALongBacklog(t *testing.T) {
	var branch []Message
	for i := range 1000 {
		role := RoleUser
		if i%2 == 1 {
			role = RoleAssistant
		}
		branch = append(branch, Message{ID: fmt.Sprintf("m%d", i), Role: role, Content: "x", Tokens: 100})
	}
	c := DefaultSummaryConfig()
	c.MaxFoldTokens = 1000
	w := sliding(4)
	var s SummaryState
	steps := 0
	for ; steps < 20; steps++ {
		p, err := PlanSummary(branch, w, c, s)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Fold) == 0 {
			break
		}
		if steps == 0 {
			if p.Skipped == 0 || p.Folded-len(p.Fold) != p.Skipped {
				t.Fatalf("first fold: skipped %d, folds [%d, %d)", p.Skipped, p.Folded-len(p.Fold), p.Folded)
			}
			if prompt := p.Prompt(c); !strings.Contains(prompt[1].Content, fmt.Sprintf("(%d earlier messages were not summarised.)", p.Skipped)) {
				t.Fatalf("prompt does not note the skipped messages:\n%s", prompt[1].Content)
			}
		} else if p.Skipped != 0 {
			t.Fatalf("fold %d skipped %d more", steps, p.Skipped)
		}
		s = NewSummaryState(nil, p, "summary", c)
	}
	if steps > MaxBacklogFolds+1 {
		t.Errorf("the backlog took %d fold steps, want at most %d", steps, MaxBacklogFolds+1)
	}
}
