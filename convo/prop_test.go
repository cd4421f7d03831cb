package convo

// Property tests. Each property is its own test; run with at least 200 cases
// (TestMain sets -rapid.checks=200 unless told otherwise).

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"pgregory.net/rapid"
)

// naiveTrim is the window rules of Trim written the slow, obvious way: try
// every start position and keep the first that satisfies every rule.
func naiveTrim(branch []Message, cfg WindowConfig) []Message {
	out := []Message{}
	n := len(branch)
	if n == 0 {
		return out
	}
	lo, sysTokens := 0, 0
	if cfg.IncludeSystem && branch[0].Role == RoleSystem {
		out = append(out, branch[0])
		lo, sysTokens = 1, branch[0].Tokens
	}
	forced := n
	for i := n - 1; i >= lo; i-- {
		if branch[i].Role == RoleUser {
			forced = i
			break
		}
	}
	sum := func(a, b int) int {
		s := 0
		for _, m := range branch[a:b] {
			s += m.Tokens
		}
		return s
	}
	users := func(p int) int {
		c := 0
		for _, m := range branch[p:] {
			if m.Role == RoleUser {
				c++
			}
		}
		return c
	}
	validCut := func(p int) bool { return checkPairing(branch[p:]) == nil }
	isUser := func(p int) bool { return branch[p].Role == RoleUser }
	budget := cfg.MaxTokens - ReplyPrimingTokens - sysTokens
	human := cfg.StartOn == StartOnHuman
	if !(cfg.usesTokens() && cfg.TokenStrategy == TokenStrategyFirst) {
		start := forced
		for p := lo; p < forced; p++ {
			if !validCut(p) || (human && !isUser(p)) ||
				(cfg.usesRounds() && (users(p) > cfg.MaxRounds || (!isUser(p) && p != lo))) ||
				(cfg.usesTokens() && sum(p, n) > budget) {
				continue
			}
			start = p
			break
		}
		return append(out, branch[start:]...)
	}
	regionLo := lo
	if cfg.usesRounds() {
		regionLo = n
		for p := lo; p < n; p++ {
			if (isUser(p) || p == lo) && users(p) <= cfg.MaxRounds && validCut(p) {
				regionLo = p
				break
			}
		}
	}
	s := regionLo
	for s < forced && (!validCut(s) || (human && !isUser(s))) {
		s++
	}
	avail := budget - sum(forced, n)
	e := s
	for end := forced; end > s; end-- {
		if sum(s, end) <= avail && checkPairing(branch[s:end]) == nil {
			e = end
			break
		}
	}
	out = append(out, branch[s:e]...)
	return append(out, branch[forced:]...)
}

// sameMessages compares element by element (nil and empty are the same).
func sameMessages(a, b []Message) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !reflect.DeepEqual(a[i], b[i]) {
			return false
		}
	}
	return true
}

func mustTrim(t *rapid.T, branch []Message, cfg WindowConfig) Trimmed {
	got, err := Trim(branch, cfg)
	if err != nil {
		t.Fatalf("Trim: %v", err)
	}
	return got
}

func bodyOf(kept, branch []Message, cfg WindowConfig) []Message {
	if cfg.IncludeSystem && len(branch) > 0 && branch[0].Role == RoleSystem {
		return kept[1:]
	}
	return kept
}

func lastStrategy(cfg WindowConfig) bool {
	return !(cfg.usesTokens() && cfg.TokenStrategy == TokenStrategyFirst)
}

func TestPropTrimMatchesNaiveRules(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		branch, cfg := genBranch(t), genWindowConfig(t)
		got := mustTrim(t, branch, cfg)
		if want := naiveTrim(branch, cfg); !sameMessages(got.Messages, want) {
			t.Fatalf("Trim kept %v, the rules say %v", ids(got.Messages), ids(want))
		}
	})
}

func TestPropKeptHistoryIsSuffix(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		branch, cfg := genBranch(t), genWindowConfig(t)
		if !lastStrategy(cfg) {
			cfg.TokenStrategy = TokenStrategyLast
		}
		body := bodyOf(mustTrim(t, branch, cfg).Messages, branch, cfg)
		tail := branch[len(branch)-len(body):]
		for i := range body {
			if !reflect.DeepEqual(body[i], tail[i]) {
				t.Fatalf("kept[%d] = %+v, branch suffix has %+v", i, body[i], tail[i])
			}
		}
	})
}

func TestPropSystemPromptAndNewestUserKept(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		branch, cfg := genBranch(t), genWindowConfig(t)
		kept := mustTrim(t, branch, cfg).Messages
		lo := 0
		if cfg.IncludeSystem && len(branch) > 0 && branch[0].Role == RoleSystem {
			if len(kept) == 0 || kept[0].ID != branch[0].ID {
				t.Fatalf("system prompt %s dropped: %v", branch[0].ID, ids(kept))
			}
			lo = 1
		}
		for i := len(branch) - 1; i >= lo; i-- {
			if branch[i].Role == RoleUser {
				if !slices.Contains(ids(kept), branch[i].ID) {
					t.Fatalf("newest user message %s dropped: %v", branch[i].ID, ids(kept))
				}
				break
			}
		}
	})
}

func TestPropToolCallAndResultNeverSplit(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		branch, cfg := genBranch(t), genWindowConfig(t)
		kept := mustTrim(t, branch, cfg).Messages
		if err := checkPairing(kept); err != nil {
			t.Fatalf("kept %v: %v", ids(kept), err)
		}
		if _, err := ToModelMessages(kept); err != nil {
			t.Fatalf("model view of %v: %v", ids(kept), err)
		}
	})
}

func TestPropTrimIsIdempotent(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		branch, cfg := genBranch(t), genWindowConfig(t)
		once := mustTrim(t, branch, cfg)
		twice := mustTrim(t, once.Messages, cfg)
		if !sameMessages(twice.Messages, once.Messages) || twice.TrimmedCount != 0 {
			t.Fatalf("trim again: %v -> %v (trimmed %d)", ids(once.Messages), ids(twice.Messages), twice.TrimmedCount)
		}
	})
}

func TestPropTrimCountsAndBudget(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		branch, cfg := genBranch(t), genWindowConfig(t)
		got := mustTrim(t, branch, cfg)
		if got.TokensBefore != PromptTokens(branch) || got.TokensAfter != PromptTokens(got.Messages) ||
			got.TrimmedCount != len(branch)-len(got.Messages) {
			t.Fatalf("counts %+v for branch of %d", got, len(branch))
		}
		over := cfg.usesTokens() && got.TokensAfter > cfg.MaxTokens
		if got.OverBudget != over {
			t.Fatalf("OverBudget %v, tokens after %d, max %d", got.OverBudget, got.TokensAfter, cfg.MaxTokens)
		}
		if over { // only the always-kept parts may break the budget
			minimal := naiveTrim(branch, WindowConfig{Strategy: StrategyTokenLimit, MaxTokens: 1, IncludeSystem: cfg.IncludeSystem})
			if PromptTokens(minimal) <= cfg.MaxTokens {
				t.Fatalf("over budget (%d > %d) though the system prompt and newest round take %d", got.TokensAfter, cfg.MaxTokens, PromptTokens(minimal))
			}
		}
		if cfg.usesRounds() {
			users := 0
			for _, m := range got.Messages {
				if m.Role == RoleUser {
					users++
				}
			}
			if users > cfg.MaxRounds {
				t.Fatalf("%d rounds kept, max %d", users, cfg.MaxRounds)
			}
		}
	})
}

func TestPropWindowEqualsTrimOfBranch(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		tr, msgs := genTree(t)
		cfg := genWindowConfig(t)
		leaf := msgs[rapid.IntRange(0, len(msgs)-1).Draw(t, "leaf")].ID
		branch, err := tr.Branch(leaf)
		if err != nil {
			t.Fatal(err)
		}
		want, wantErr := Trim(branch, cfg)
		got, gotErr := tr.Window(leaf, cfg)
		if (wantErr == nil) != (gotErr == nil) || (wantErr != nil && !errors.Is(gotErr, ErrUnansweredCall)) {
			t.Fatalf("errors differ: Trim %v, Window %v", wantErr, gotErr)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("Window %+v\nTrim   %+v", got, want)
		}
	})
}

func TestPropBranchWalkEqualsNaiveWalk(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		tr, msgs := genTree(t)
		leaf := msgs[rapid.IntRange(0, len(msgs)-1).Draw(t, "leaf")].ID
		// Seed 004's buildBranchHistory: find each parent by a linear scan.
		var naive []Message
		for cur := leaf; cur != ""; {
			i := slices.IndexFunc(msgs, func(m Message) bool { return m.ID == cur })
			naive = append([]Message{msgs[i]}, naive...)
			cur = msgs[i].ParentID
		}
		got, err := tr.Branch(leaf)
		if err != nil || !reflect.DeepEqual(got, naive) {
			t.Fatalf("Branch(%s) = %v, %v; naive walk %v", leaf, ids(got), err, ids(naive))
		}
		k := rapid.IntRange(0, len(naive)+2).Draw(t, "tail")
		if want := naive[len(naive)-min(k, len(naive)):]; !reflect.DeepEqual(tr.tailOf(leaf, k), want) && k > 0 {
			t.Fatalf("Tail(%d) = %v, want %v", k, ids(tr.tailOf(leaf, k)), ids(want))
		}
		if h, _ := tr.PathHash(leaf); h != BranchHash(naive) {
			t.Fatal("PathHash differs from BranchHash of the walked branch")
		}
		if st, _ := tr.stats(leaf); st.Messages != len(naive) || st.Tokens != PromptTokens(naive) {
			t.Fatalf("Stats %+v for %d messages, %d tokens", st, len(naive), PromptTokens(naive))
		}
	})
}

func TestPropJSONLEntryRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := genMessage(t, "m")
		line, err := MarshalEntry(m)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		if bytes.ContainsRune(line, '\n') {
			t.Fatalf("entry spans lines: %s", line)
		}
		got, err := UnmarshalEntry(line)
		if err != nil {
			t.Fatalf("unmarshal %s: %v", line, err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Fatalf("round trip changed the message:\n got %#v\nwant %#v\nline %s", got, m, line)
		}
	})
}

func TestPropJSONLFileRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		_, msgs := genTree(t)
		for i := range msgs {
			extra := genMessage(t, "extra")
			msgs[i].Content, msgs[i].CreatedAt, msgs[i].Meta = extra.Content, extra.CreatedAt, extra.Meta
		}
		var buf bytes.Buffer
		if err := EncodeJSONL(&buf, msgs); err != nil {
			t.Fatal(err)
		}
		got, err := DecodeJSONL(&buf)
		if err != nil {
			t.Fatal(err)
		}
		if !sameMessages(got, msgs) {
			t.Fatal("file round trip changed the messages")
		}
		if _, err := buildTree(got); err != nil {
			t.Fatalf("decoded file does not rebuild the tree: %v", err)
		}
	})
}

// applySummaries runs the summary loop with a fake summariser until nothing
// is left to fold, returning the final state and the plans made.
func applySummaries(t *rapid.T, branch []Message, w WindowConfig, c SummaryConfig) (SummaryState, []SummaryPlan) {
	var s SummaryState
	var plans []SummaryPlan
	for range 50 {
		p, err := PlanSummary(branch, w, c, s)
		if err != nil {
			t.Fatalf("plan: %v", err)
		}
		plans = append(plans, p)
		if len(p.Fold) == 0 {
			return s, plans
		}
		words := rapid.IntRange(1, 2*c.MaxTokens).Draw(t, "summaryWords")
		s = NewSummaryState(wordTok{}, p, strings.Repeat("fact ", words), c)
	}
	t.Fatal("summary loop did not converge")
	return s, plans
}

func TestPropSummaryTriggersIffOverThreshold(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		branch, w, c := genBranch(t), genWindowConfig(t), genSummaryConfig(t)
		if c.ThresholdMessages == 0 && c.ThresholdTokens == 0 {
			c.ThresholdMessages = 1
		}
		_, plans := applySummaries(t, branch, w, c)
		for _, p := range plans {
			from := max(p.Prev.Folded, 0)
			if from == 0 && w.IncludeSystem && len(branch) > 0 && branch[0].Role == RoleSystem {
				from = 1
			}
			count, tokens := len(branch)-from, 0
			for _, m := range branch[from:] {
				tokens += m.Tokens
			}
			over := (c.ThresholdMessages > 0 && count > c.ThresholdMessages) || (c.ThresholdTokens > 0 && tokens > c.ThresholdTokens)
			if p.Triggered != over {
				t.Fatalf("triggered %v with %d messages / %d tokens unfolded, thresholds %d / %d",
					p.Triggered, count, tokens, c.ThresholdMessages, c.ThresholdTokens)
			}
			if len(p.Fold) > 0 && !p.Triggered {
				t.Fatal("folding without a trigger")
			}
		}
	})
}

func TestPropSummaryFoldsOldestWithoutSplittingPairs(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		branch, w, c := genBranch(t), genWindowConfig(t), genSummaryConfig(t)
		if c.ThresholdMessages == 0 && c.ThresholdTokens == 0 {
			c.ThresholdTokens = 1
		}
		_, plans := applySummaries(t, branch, w, c)
		for _, p := range plans {
			if len(p.Fold) == 0 {
				continue
			}
			from := p.Folded - len(p.Fold)
			if !sameMessages(p.Fold, branch[from:p.Folded]) || (p.Prev.Folded > 0 && from != p.Prev.Folded+p.Skipped) {
				t.Fatalf("fold %v is not the run after the previous summary (%d) and %d skipped", ids(p.Fold), p.Prev.Folded, p.Skipped)
			}
			if p.Skipped > 0 { // the backlog (up to the window, at most the rest of the branch) is over the bound
				backlog := 0
				for _, m := range branch[from-p.Skipped:] {
					backlog += m.Tokens
				}
				if backlog <= MaxBacklogFolds*c.MaxFoldTokens {
					t.Fatalf("skipped %d messages of a backlog of %d tokens (bound %d)", p.Skipped, backlog, MaxBacklogFolds*c.MaxFoldTokens)
				}
			}
			if err := checkPairing(p.Fold); err != nil {
				t.Fatalf("fold %v splits a tool pair: %v", ids(p.Fold), err)
			}
			if p.Key != SummaryCacheKey(BranchHash(branch[:p.Folded]), p.Folded, c.Hash()) {
				t.Fatal("cache key is not (path hash, folded count, config hash)")
			}
		}
	})
}

func TestPropSummaryPlusKeptWithinBudget(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		branch, w, c := genBranch(t), genWindowConfig(t), genSummaryConfig(t)
		w.TokenStrategy = TokenStrategyLast
		if c.ThresholdMessages == 0 && c.ThresholdTokens == 0 {
			c.ThresholdMessages = 2
		}
		s, _ := applySummaries(t, branch, w, c)
		ctx, err := Assemble(branch, w, s)
		if err != nil {
			t.Fatal(err)
		}
		if w.usesTokens() && !ctx.OverBudget && ctx.TokensAfter > w.MaxTokens {
			t.Fatalf("summary (%d) + kept = %d tokens > max %d", ctx.SummaryTokens, ctx.TokensAfter, w.MaxTokens)
		}
		if ctx.OverBudget && ctx.Summary != "" {
			t.Fatal("over budget while still showing a summary")
		}
		body := bodyOf(ctx.Messages, branch, w)
		if !sameMessages(body, branch[len(branch)-len(body):]) {
			t.Fatalf("kept %v is not a suffix", ids(body))
		}
		if ctx.Summary != "" && len(branch)-len(body) < s.Folded {
			t.Fatalf("kept messages overlap the summary (folded %d)", s.Folded)
		}
		if _, err := ctx.ModelMessages(View{}); err != nil {
			t.Fatal(err)
		}
	})
}

func TestPropFallbackKeepsExactlyLastN(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		branch := genBranch(t)
		n := rapid.IntRange(0, 50).Draw(t, "n")
		got := fallbackTruncate(branch, n)
		want := branch[len(branch)-min(n, len(branch)):]
		if len(got) != min(n, len(branch)) || !sameMessages(got, want) {
			t.Fatalf("fallbackTruncate(%d) = %v, want %v", n, ids(got), ids(want))
		}
		w := genWindowConfig(t)
		ctx, err := AssembleFallback(branch, w, max(n, 1))
		if err != nil {
			t.Fatal(err)
		}
		body := bodyOf(ctx.Messages, branch, w)
		if len(body) > max(n, 1) || !ctx.Degraded || checkPairing(body) != nil {
			t.Fatalf("degraded view %v for n=%d", ids(body), n)
		}
	})
}

func TestPropTreeAndSliceViewsAgree(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		tr, msgs := genTree(t)
		w, c := genWindowConfig(t), genSummaryConfig(t)
		c.ThresholdMessages = max(c.ThresholdMessages, 1)
		leaf := msgs[rapid.IntRange(0, len(msgs)-1).Draw(t, "leaf")].ID
		branch, _ := tr.Branch(leaf)
		if _, err := Trim(branch, w); err != nil {
			return // pending tool call at this leaf
		}
		sp, err1 := PlanSummary(branch, w, c, SummaryState{})
		tp, err2 := tr.PlanSummary(leaf, w, c, SummaryState{})
		if err1 != nil || err2 != nil || !reflect.DeepEqual(sp, tp) {
			t.Fatalf("plans differ: %+v %v / %+v %v", sp, err1, tp, err2)
		}
		var s SummaryState
		if len(sp.Fold) > 0 {
			s = NewSummaryState(wordTok{}, sp, "the summary", c)
		}
		sc, err1 := Assemble(branch, w, s)
		tc, err2 := tr.Assemble(leaf, w, s)
		if err1 != nil || err2 != nil || !reflect.DeepEqual(sc, tc) {
			t.Fatalf("contexts differ: %+v %v / %+v %v", sc, err1, tc, err2)
		}
		m1, err1 := sc.ModelMessages(View{})
		m2, err2 := tc.ModelMessages(View{})
		if err1 != nil || err2 != nil || !reflect.DeepEqual(m1, m2) {
			t.Fatal("model views differ for the same inputs")
		}
	})
}

func TestPropObservationWithinCap(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var s string
		if rapid.Bool().Draw(t, "json") {
			v := rapid.SliceOf(rapid.MapOf(rapid.StringN(0, 5, -1), rapid.String())).Draw(t, "rows")
			raw, _ := json.Marshal(v)
			s = string(raw)
		} else {
			s = rapid.String().Draw(t, "text")
		}
		maxChars := rapid.IntRange(1, 400).Draw(t, "max")
		got := CompressObservation(s, maxChars)
		if n := utf8.RuneCountInString(got); n > maxChars {
			t.Fatalf("%d chars > cap %d", n, maxChars)
		}
		if utf8.RuneCountInString(s) <= maxChars && got != s {
			t.Fatal("text within the cap was changed")
		}
		if CompressObservation(got, maxChars) != got {
			t.Fatal("compressing twice changed the text")
		}
	})
}
