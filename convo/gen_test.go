package convo

import (
	"encoding/json"
	"fmt"
	"time"

	"pgregory.net/rapid"
)

// genBranch draws a valid branch (oldest first): an optional system prompt,
// then users, assistants, summary records, mid-history system messages and
// tool calls (sometimes parallel) each answered later by its result.
func genBranch(t *rapid.T) []Message {
	n := rapid.IntRange(0, 40).Draw(t, "n")
	var msgs []Message
	var open []string
	add := func(m Message) {
		m.ID = fmt.Sprintf("m%d", len(msgs))
		if len(msgs) > 0 {
			m.ParentID = msgs[len(msgs)-1].ID
		}
		if m.Role != RoleSummary {
			m.Tokens = rapid.IntRange(0, 120).Draw(t, "tokens")
		}
		m.Content = "content " + m.ID
		msgs = append(msgs, m)
	}
	call := func() {
		id := fmt.Sprintf("k%d", len(msgs))
		add(Message{Role: RoleToolCall, ToolCall: &ToolCall{ID: id, Name: "tool"}})
		open = append(open, id)
	}
	if rapid.Bool().Draw(t, "system") {
		add(Message{Role: RoleSystem})
	}
	for len(msgs) < n || len(open) > 0 {
		if len(open) > 0 {
			if len(msgs) < n && rapid.IntRange(0, 3).Draw(t, "parallel") == 0 {
				call()
				continue
			}
			k := rapid.IntRange(0, len(open)-1).Draw(t, "answer")
			add(Message{Role: RoleToolResult, ToolCallID: open[k]})
			open = append(open[:k], open[k+1:]...)
			continue
		}
		switch rapid.IntRange(0, 9).Draw(t, "role") {
		case 0, 1, 2, 3:
			add(Message{Role: RoleUser})
		case 4, 5, 6:
			add(Message{Role: RoleAssistant})
		case 7, 8:
			call()
		case 9:
			if rapid.Bool().Draw(t, "summaryOrSystem") {
				add(Message{Role: RoleSummary})
			} else {
				add(Message{Role: RoleSystem})
			}
		}
	}
	return msgs
}

// genWindowConfig draws a valid window configuration.
func genWindowConfig(t *rapid.T) WindowConfig {
	return WindowConfig{
		Strategy:      rapid.SampledFrom([]string{StrategySlidingWindow, StrategyTokenLimit, StrategyHybrid}).Draw(t, "strategy"),
		MaxRounds:     rapid.IntRange(1, 8).Draw(t, "maxRounds"),
		MaxTokens:     rapid.IntRange(64, 1500).Draw(t, "maxTokens"),
		TokenStrategy: rapid.SampledFrom([]string{"", TokenStrategyLast, TokenStrategyFirst}).Draw(t, "tokenStrategy"),
		StartOn:       rapid.SampledFrom([]string{"", StartOnHuman}).Draw(t, "startOn"),
		IncludeSystem: rapid.Bool().Draw(t, "includeSystem"),
	}
}

func genSummaryConfig(t *rapid.T) SummaryConfig {
	return SummaryConfig{
		ThresholdMessages: rapid.IntRange(0, 30).Draw(t, "thresholdMessages"),
		ThresholdTokens:   rapid.IntRange(0, 2000).Draw(t, "thresholdTokens"),
		MaxTokens:         rapid.IntRange(16, 200).Draw(t, "summaryMaxTokens"),
		MaxFoldTokens:     rapid.IntRange(256, 3000).Draw(t, "maxFoldTokens"),
		FallbackMessages:  rapid.IntRange(1, 20).Draw(t, "fallback"),
	}
}

// genMessage draws any message that passes Validate, with fields in the
// forms JSONL preserves exactly (UTF-8 text, UTC times, compact args).
func genMessage(t *rapid.T, label string) Message {
	role := rapid.SampledFrom([]Role{RoleSystem, RoleUser, RoleAssistant, RoleToolCall, RoleToolResult, RoleSummary}).Draw(t, label+".role")
	m := Message{
		ID:      rapid.StringN(1, 12, -1).Draw(t, label+".id"),
		Role:    role,
		Content: rapid.String().Draw(t, label+".content"),
		Tokens:  rapid.IntRange(0, 1<<20).Draw(t, label+".tokens"),
	}
	if rapid.Bool().Draw(t, label+".hasParent") {
		m.ParentID = rapid.StringN(1, 12, -1).Draw(t, label+".parent")
	}
	switch role {
	case RoleToolCall:
		tc := &ToolCall{ID: rapid.StringN(1, 8, -1).Draw(t, label+".callID"), Name: rapid.StringN(1, 8, -1).Draw(t, label+".name")}
		if rapid.Bool().Draw(t, label+".hasArgs") {
			args := rapid.MapOf(rapid.String(), rapid.OneOf(
				rapid.Map(rapid.Int(), func(i int) any { return i }),
				rapid.Map(rapid.String(), func(s string) any { return s }),
				rapid.Map(rapid.Bool(), func(b bool) any { return b }),
			)).Draw(t, label+".args")
			raw, err := json.Marshal(args)
			if err != nil {
				t.Fatalf("marshal args: %v", err)
			}
			tc.Args = raw
		}
		m.ToolCall = tc
	case RoleToolResult:
		m.ToolCallID = rapid.StringN(1, 8, -1).Draw(t, label+".toolCallID")
	}
	if rapid.Bool().Draw(t, label+".hasTime") {
		sec := rapid.Int64Range(-2_000_000_000, 7_000_000_000).Draw(t, label+".sec")
		nsec := rapid.Int64Range(0, 999_999_999).Draw(t, label+".nsec")
		m.CreatedAt = time.Unix(sec, nsec).UTC()
	}
	if rapid.Bool().Draw(t, label+".hasMeta") {
		m.Meta = rapid.MapOf(rapid.String(), rapid.String()).Draw(t, label+".meta")
	}
	return m
}

// genTree draws a tree with branches: each message goes under a random
// earlier one when the pairing rules allow it. It returns the tree and the
// messages in append order.
func genTree(t *rapid.T) (*Tree, []Message) {
	tr := NewTree()
	var msgs []Message
	n := rapid.IntRange(1, 60).Draw(t, "treeSize")
	for i := 0; i < n; i++ {
		m := Message{ID: fmt.Sprintf("n%d", i), Tokens: rapid.IntRange(0, 100).Draw(t, "tokens"), Content: "c"}
		if len(msgs) > 0 && rapid.IntRange(0, 9).Draw(t, "newRoot") > 0 {
			m.ParentID = msgs[rapid.IntRange(0, len(msgs)-1).Draw(t, "parent")].ID
		}
		open := openCalls(tr, m.ParentID)
		switch {
		case len(open) > 0 && rapid.IntRange(0, 3).Draw(t, "callMore") > 0:
			m.Role, m.ToolCallID = RoleToolResult, open[rapid.IntRange(0, len(open)-1).Draw(t, "answer")]
		case rapid.IntRange(0, 4).Draw(t, "call") == 0:
			m.Role, m.ToolCall = RoleToolCall, &ToolCall{ID: "k" + m.ID, Name: "f"}
		case len(open) > 0:
			continue // only tool messages may follow an open call
		default:
			m.Role = rapid.SampledFrom([]Role{RoleUser, RoleUser, RoleAssistant, RoleSystem, RoleSummary}).Draw(t, "role")
		}
		if err := tr.Append(m); err != nil {
			t.Fatalf("append %+v: %v", m, err)
		}
		msgs = append(msgs, m)
	}
	return tr, msgs
}

// openCalls lists the unanswered call ids at the end of the branch to id,
// the slow way.
func openCalls(tr *Tree, id string) []string {
	if id == "" {
		return nil
	}
	b, _ := tr.Branch(id)
	var open []string
	for _, m := range b {
		switch m.Role {
		case RoleToolCall:
			open = append(open, m.ToolCall.ID)
		case RoleToolResult:
			for i, o := range open {
				if o == m.ToolCallID {
					open = append(open[:i], open[i+1:]...)
					break
				}
			}
		}
	}
	return open
}
