package convo

import (
	"errors"
	"slices"
	"testing"
)

func cfgOf(strategy string, rounds, tokens int, tokenStrategy, startOn string, system bool) WindowConfig {
	return WindowConfig{Strategy: strategy, MaxRounds: rounds, MaxTokens: tokens, TokenStrategy: tokenStrategy, StartOn: startOn, IncludeSystem: system}
}

func TestTrimTable(t *testing.T) {
	const (
		sw, tl, hy = StrategySlidingWindow, StrategyTokenLimit, StrategyHybrid
		h          = StartOnHuman
	)
	seven := "s10 u20 a20 u20 a20 u20 a20"
	tests := []struct {
		name        string
		branch      string
		cfg         WindowConfig
		want        []string
		before, aft int
		over        bool
	}{
		{"empty branch", "", cfgOf(sw, 2, 0, "", h, true), []string{}, 0, 0, false},
		{"sliding keeps last 2 rounds", "s10 u10 a10 u10 a10 u10 a10", cfgOf(sw, 2, 0, "", h, true),
			[]string{"s0", "u3", "a4", "u5", "a6"}, 73, 53, false},
		{"sliding, fewer rounds than max, start on human drops greeting", "s10 a10 u10 a10 u10 a10", cfgOf(sw, 3, 0, "", h, true),
			[]string{"s0", "u2", "a3", "u4", "a5"}, 63, 53, false},
		{"sliding, fewer rounds than max, greeting kept without start_on", "s10 a10 u10 a10 u10 a10", cfgOf(sw, 3, 0, "", "", true),
			[]string{"s0", "a1", "u2", "a3", "u4", "a5"}, 63, 63, false},
		{"token last", seven, cfgOf(tl, 0, 100, "last", "", true),
			[]string{"s0", "u3", "a4", "u5", "a6"}, 133, 93, false},
		{"token last, empty strategy means last", seven, cfgOf(tl, 0, 100, "", "", true),
			[]string{"s0", "u3", "a4", "u5", "a6"}, 133, 93, false},
		{"token last, start on human", seven, cfgOf(tl, 0, 90, "last", h, true),
			[]string{"s0", "u5", "a6"}, 133, 53, false},
		{"token last, no start_on may start on assistant", seven, cfgOf(tl, 0, 90, "last", "", true),
			[]string{"s0", "a4", "u5", "a6"}, 133, 73, false},
		{"token first keeps oldest plus newest round", seven, cfgOf(tl, 0, 100, "first", h, true),
			[]string{"s0", "u1", "a2", "u5", "a6"}, 133, 93, false},
		{"hybrid, rounds tighter", seven, cfgOf(hy, 2, 1000, "last", h, true),
			[]string{"s0", "u3", "a4", "u5", "a6"}, 133, 93, false},
		{"hybrid, tokens tighter", seven, cfgOf(hy, 10, 70, "last", h, true),
			[]string{"s0", "u5", "a6"}, 133, 53, false},
		{"hybrid first, within last 2 rounds", seven, cfgOf(hy, 2, 80, "first", h, true),
			[]string{"s0", "u3", "u5", "a6"}, 133, 73, false},
		{"tool pair kept whole", "s10 u10 a10 c10 r30 a10 u10 a10", cfgOf(tl, 0, 100, "last", "", true),
			[]string{"s0", "a2", "c3", "r4", "a5", "u6", "a7"}, 103, 93, false},
		{"tool result whose call does not fit is dropped with it", "s10 u10 a10 c10 r30 a10 u10 a10", cfgOf(tl, 0, 78, "last", "", true),
			[]string{"s0", "a5", "u6", "a7"}, 103, 43, false},
		{"parallel calls, one round", "u10 c10 c10 r10 r10 a10 u10", cfgOf(sw, 1, 0, "", h, true),
			[]string{"u6"}, 73, 13, false},
		{"parallel calls, two rounds", "u10 c10 c10 r10 r10 a10 u10", cfgOf(sw, 2, 0, "", h, true),
			[]string{"u0", "c1", "c2", "r3", "r4", "a5", "u6"}, 73, 73, false},
		{"include_system off trims the system prompt", "s10 u10 a10 u10 a10", cfgOf(sw, 1, 0, "", h, false),
			[]string{"u3", "a4"}, 53, 23, false},
		{"include_system off, start on human drops it even if all fits", "s10 u10 a10 u10 a10", cfgOf(sw, 5, 0, "", h, false),
			[]string{"u1", "a2", "u3", "a4"}, 53, 43, false},
		{"include_system off, no start_on keeps it as history", "s10 u10 a10 u10 a10", cfgOf(sw, 5, 0, "", "", false),
			[]string{"s0", "u1", "a2", "u3", "a4"}, 53, 53, false},
		{"newest round over budget is kept and flagged", "s10 u100 a10", cfgOf(tl, 0, 64, "last", h, true),
			[]string{"s0", "u1", "a2"}, 123, 123, true},
		{"no user message, start on human keeps only the system prompt", "s10 a10 a10", cfgOf(tl, 0, 64, "last", h, true),
			[]string{"s0"}, 33, 13, false},
		{"no user message, no start_on", "s10 a10 a10", cfgOf(tl, 0, 64, "last", "", true),
			[]string{"s0", "a1", "a2"}, 33, 33, false},
		{"summary records ride along at no cost", "s10 u10 a10 x0 u10 a10", cfgOf(sw, 2, 0, "", h, true),
			[]string{"s0", "u1", "a2", "x3", "u4", "a5"}, 53, 53, false},
		{"summary record before the window is trimmed", "s10 u10 a10 x0 u10 a10", cfgOf(sw, 1, 0, "", h, true),
			[]string{"s0", "u4", "a5"}, 53, 33, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			branch := spec(t, tt.branch)
			got, err := Trim(branch, tt.cfg)
			if err != nil {
				t.Fatalf("Trim: %v", err)
			}
			if !slices.Equal(ids(got.Messages), tt.want) {
				t.Errorf("ids = %v, want %v", ids(got.Messages), tt.want)
			}
			if got.TrimmedCount != len(branch)-len(tt.want) {
				t.Errorf("TrimmedCount = %d, want %d", got.TrimmedCount, len(branch)-len(tt.want))
			}
			if got.TokensBefore != tt.before || got.TokensAfter != tt.aft {
				t.Errorf("tokens before/after = %d/%d, want %d/%d", got.TokensBefore, got.TokensAfter, tt.before, tt.aft)
			}
			if got.OverBudget != tt.over {
				t.Errorf("OverBudget = %v, want %v", got.OverBudget, tt.over)
			}
			if len(branch) > 0 {
				tw, err := treeOf(t, branch).Window(branch[len(branch)-1].ID, tt.cfg)
				if err != nil {
					t.Fatalf("Window: %v", err)
				}
				if !slices.Equal(ids(tw.Messages), tt.want) || tw.TrimmedCount != got.TrimmedCount ||
					tw.TokensBefore != got.TokensBefore || tw.TokensAfter != got.TokensAfter || tw.OverBudget != got.OverBudget {
					t.Errorf("Window = %+v, want Trim's %+v", tw, got)
				}
			}
		})
	}
}

func TestTrimErrors(t *testing.T) {
	cfg := DefaultWindowConfig()
	orphan := spec(t, "u10 a10")
	orphan = append(orphan, Message{ID: "r2", ParentID: "a1", Role: RoleToolResult, ToolCallID: "nope"})
	if _, err := Trim(orphan, cfg); !errors.Is(err, ErrOrphanResult) {
		t.Errorf("orphan result: err = %v, want ErrOrphanResult", err)
	}
	pending := spec(t, "u10 c10")
	if _, err := Trim(pending, cfg); !errors.Is(err, ErrUnansweredCall) {
		t.Errorf("pending call: err = %v, want ErrUnansweredCall", err)
	}
	interrupted := spec(t, "u10 c10 a10")
	if _, err := Trim(interrupted, cfg); !errors.Is(err, ErrUnansweredCall) {
		t.Errorf("message after open call: err = %v, want ErrUnansweredCall", err)
	}
	if _, err := Trim(spec(t, "u10"), WindowConfig{Strategy: "fifo"}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("bad config: err = %v, want ErrInvalidConfig", err)
	}
	invalid := []Message{{ID: "", Role: RoleUser}}
	if _, err := Trim(invalid, cfg); !errors.Is(err, ErrInvalidMessage) {
		t.Errorf("empty id: err = %v, want ErrInvalidMessage", err)
	}
}

func TestWindowConfigValidate(t *testing.T) {
	ok := DefaultWindowConfig()
	if err := ok.Validate(); err != nil {
		t.Fatalf("default config invalid: %v", err)
	}
	tests := []struct {
		name string
		edit func(*WindowConfig)
	}{
		{"missing strategy", func(c *WindowConfig) { c.Strategy = "" }},
		{"unknown strategy", func(c *WindowConfig) { c.Strategy = "fifo" }},
		{"zero rounds for hybrid", func(c *WindowConfig) { c.MaxRounds = 0 }},
		{"too many rounds", func(c *WindowConfig) { c.MaxRounds = 1001 }},
		{"too few tokens", func(c *WindowConfig) { c.MaxTokens = 63 }},
		{"too many tokens", func(c *WindowConfig) { c.MaxTokens = 1_000_001 }},
		{"unknown token strategy", func(c *WindowConfig) { c.TokenStrategy = "middle" }},
		{"unknown start_on", func(c *WindowConfig) { c.StartOn = "ai" }},
		{"unused tokens out of range", func(c *WindowConfig) { c.Strategy = StrategySlidingWindow; c.MaxTokens = 5 }},
	}
	for _, tt := range tests {
		c := DefaultWindowConfig()
		tt.edit(&c)
		if err := c.Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: Validate() = %v, want ErrInvalidConfig", tt.name, err)
		}
	}
	sliding := WindowConfig{Strategy: StrategySlidingWindow, MaxRounds: 3}
	if err := sliding.Validate(); err != nil {
		t.Errorf("sliding without maxTokens: %v", err)
	}
}
