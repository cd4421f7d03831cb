package activities_test

import (
	"strings"
	"testing"

	"github.com/ctxflow/ctxflow/activities"
)

func TestStepsSummary(t *testing.T) {
	facts := activities.KnownFacts{
		Tables:     []string{"customers", "orders"},
		Schemas:    []activities.TableFact{{Table: "orders", Text: "id INTEGER pk (2000 rows)"}},
		SQLHistory: []string{"q1 → = 1", "q2 → = 2", "q3 → = 3", "q4 → = 4"},
	}
	steps := []activities.StepRecord{
		{N: 11, Tool: "run_sql", OK: true},
		{N: 12, Tool: "run_sql", OK: false, Observation: `{"error":"no such column: nope"}`},
		{N: 13, Tool: "describe_table", OK: true},
	}
	for _, tc := range []struct {
		goal string
		want []string
	}{
		{"How many orders?", []string{
			"Goal: How many orders?\nDone: 13 steps (run_sql ×2, describe_table ×1).",
			"Found: 2 tables (customers, orders); described: orders; latest queries: q2 → = 2; q3 → = 3; q4 → = 4.",
			`Problems: 12: {"error":"no such column: nope"}.`,
			"Continue? (say \"continue\")",
		}},
		{"有多少订单？", []string{"目标: 有多少订单？\n已完成：13 步", "发现: 2 张表（customers, orders）", "问题: 12:", "请说「继续」"}},
	} {
		got := activities.StepsSummary(tc.goal, facts, 13, steps)
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("summary of %q misses %q:\n%s", tc.goal, w, got)
			}
		}
	}
	if got := activities.StepsSummary("Count rows", activities.KnownFacts{}, 0, nil); !strings.Contains(got, "Found: nothing yet.") || strings.Contains(got, "Problems") {
		t.Errorf("empty summary:\n%s", got)
	}
}
