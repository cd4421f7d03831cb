package activities_test

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/activities/transcript"
	"github.com/ctxflow/ctxflow/convo"
)

func TestStepsSummary(t *testing.T) {
	facts := activities.KnownFacts{
		Tables:     []string{"customers", "orders"},
		Schemas:    []activities.TableFact{{Table: "orders", Text: "id INTEGER pk (2000 rows)"}},
		SQLHistory: []string{"q1 → = 1", "q2 → = 2", "q3 → = 3", "q4 → = 4"},
	}
	uses := []activities.ToolUse{{Tool: "list_tables", Calls: 1}, {Tool: "run_sql", Calls: 10}, {Tool: "describe_table", Calls: 2}}
	recent := []activities.StepRecord{
		{N: 11, Tool: "run_sql", OK: true},
		{N: 12, Tool: "run_sql", OK: false, Observation: `{"error":"no such column: nope"}`},
		{N: 13, Tool: "describe_table", OK: true},
	}
	for _, tc := range []struct {
		goal string
		want []string
	}{
		{"How many orders?", []string{
			"Goal: How many orders?\nDone: 13 steps (list_tables ×1, run_sql ×10, describe_table ×2).",
			"Found: 2 tables (customers, orders); described: orders; latest queries: q2 → = 2; q3 → = 3; q4 → = 4.",
			`Problems: 12: {"error":"no such column: nope"}.`,
			"Continue? (say \"continue\")",
		}},
		{"有多少订单？", []string{
			"目标：有多少订单？\n已完成：13 步（list_tables ×1、run_sql ×10、describe_table ×2）。",
			"发现：2 张表（customers、orders）；已查看结构：orders；最近的查询：q2 → = 2；q3 → = 3；q4 → = 4。",
			`问题：第 12 步：{"error":"no such column: nope"}。`,
			"请说「继续」",
		}},
	} {
		got := activities.StepsSummary(tc.goal, facts, 13, uses, recent)
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("summary of %q misses %q:\n%s", tc.goal, w, got)
			}
		}
	}
	if got := activities.StepsSummary("Count rows", activities.KnownFacts{}, 0, nil, nil); !strings.Contains(got, "Found: nothing yet.") || strings.Contains(got, "Problems") {
		t.Errorf("empty summary:\n%s", got)
	}
}

// englishWord is a run of Latin letters that is not a tool or table name
// (those have underscores or are quoted from the data).
var englishWord = regexp.MustCompile(`\b[A-Za-z]{3,}\b`)

// TestStepsSummaryStaysInTheGoalsLanguage: a Chinese goal gets a summary
// whose every word outside the data (tool names, tables, queries) is
// Chinese.
func TestStepsSummaryStaysInTheGoalsLanguage(t *testing.T) {
	facts := activities.KnownFacts{Tables: []string{"t"}, Schemas: []activities.TableFact{{Table: "t"}}, SQLHistory: []string{"q"}}
	got := activities.StepsSummary("统计每个客户的订单数", facts, 3, []activities.ToolUse{{Tool: "run_sql", Calls: 3}},
		[]activities.StepRecord{{N: 3, Tool: "run_sql", Observation: "x"}})
	if words := englishWord.FindAllString(got, -1); len(words) > 0 {
		t.Errorf("English words %q in a Chinese summary:\n%s", words, got)
	}
}

// TestProgressCountsTheWholeTask: after three pauses of five steps the
// summary counts every tool call of the task, not only the last stretch's.
func TestProgressCountsTheWholeTask(t *testing.T) {
	store, err := transcript.Open(transcript.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ctx := t.Context()
	key := activities.TaskKey(activities.SessionKey{Tenant: "t", SessionID: "s"}, "task1")
	a := &activities.Agent{Transcript: store}
	leaf, err := a.StartTask(ctx, activities.StartTaskInput{Task: key, Goal: "有多少订单？"})
	if err != nil {
		t.Fatal(err)
	}
	add := func(m convo.Message) {
		t.Helper()
		m.ParentID, m.CreatedAt = leaf, time.Now()
		if _, _, err := store.Append(ctx, key, m); err != nil {
			t.Fatal(err)
		}
		leaf = m.ID
	}
	var last []activities.StepRecord
	for n := 1; n <= 15; n++ {
		tool := "run_sql"
		if n == 1 {
			tool = "list_tables"
		}
		id := fmt.Sprintf("s%d.c1", n)
		add(convo.Message{ID: id, Role: convo.RoleToolCall, ToolCall: &convo.ToolCall{ID: id, Name: tool, Args: json.RawMessage(`{}`)}})
		add(convo.Message{ID: id + ".result", Role: convo.RoleToolResult, ToolCallID: id, Content: `{"rows":[]}`})
		if n%5 == 0 && n < 15 {
			add(convo.Message{ID: fmt.Sprintf("s%d.pause", n), Role: convo.RoleAssistant, Content: "paused"})
			add(convo.Message{ID: fmt.Sprintf("s%d.continue", n), Role: convo.RoleUser, Content: "继续"})
		}
		if n > 10 {
			last = append(last, activities.StepRecord{N: n, Tool: tool, OK: true})
		}
	}
	res, err := a.Progress(ctx, activities.ProgressInput{Task: key, Goal: "有多少订单？", Step: 15, Leaf: leaf, Steps: last})
	if err != nil {
		t.Fatal(err)
	}
	if want := "已完成：15 步（list_tables ×1、run_sql ×14）。"; !strings.Contains(res.Summary, want) || res.Engine != "steps" {
		t.Errorf("summary lacks %q (engine %s):\n%s", want, res.Engine, res.Summary)
	}
	again, err := a.Progress(ctx, activities.ProgressInput{Task: key, Goal: "有多少订单？", Step: 15, Leaf: leaf, Steps: last})
	if err != nil || again.Summary != res.Summary {
		t.Errorf("a retry wrote another summary: %v\n%s", err, again.Summary)
	}
}
