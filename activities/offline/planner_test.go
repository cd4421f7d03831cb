package offline_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/activities/offline"
	"github.com/ctxflow/ctxflow/activities/sqltools"
	"github.com/ctxflow/ctxflow/convo"
)

// shop opens the demo database, generated into a temporary folder.
func shop(t *testing.T) *sqltools.DB {
	t.Helper()
	path := filepath.Join(t.TempDir(), "shop.db")
	if err := sqltools.EnsureDemo(t.Context(), path); err != nil {
		t.Fatal(err)
	}
	db, err := sqltools.OpenSQLite(path, sqltools.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// scalar is the one value a query returns, straight from the database.
func scalar(t *testing.T, db *sqltools.DB, sql string) string {
	t.Helper()
	res, err := db.Query(t.Context(), sql)
	if err != nil || len(res.Rows) != 1 || len(res.Rows[0]) != 1 {
		t.Fatalf("%s: %+v, %v", sql, res, err)
	}
	return fmt.Sprint(res.Rows[0][0])
}

// taskRun is a task driven to its answer.
type taskRun struct {
	steps  []activities.StepRecord
	calls  []string // tool(args) of every call, in order
	facts  activities.KnownFacts
	answer string
}

// drive runs a task as the agent and the task workflow do: the planner
// decides each step from the task's model view, its facts and its steps;
// each call runs the tool of its name with its JSON arguments (an argument
// error or a refusal becomes an error observation); the result is stored
// as a tool result, its facts merged, the step recorded.
func drive(t *testing.T, db *sqltools.DB, goal string, facts activities.KnownFacts, maxSteps int) taskRun {
	t.Helper()
	tools := db.Tools()
	specs := make([]activities.ToolSpec, len(tools))
	for i, tool := range tools {
		specs[i] = tool.Spec()
	}
	run := taskRun{facts: facts, steps: []activities.StepRecord{}}
	transcript := []convo.Message{{ID: "goal", Role: convo.RoleUser, Content: goal}}
	for n := 1; n <= maxSteps; n++ {
		msgs, err := convo.View{}.ModelMessages(transcript)
		if err != nil {
			t.Fatal(err)
		}
		view := append([]convo.ModelMessage{{Role: string(convo.RoleSystem), Content: activities.TaskPrompt(goal, run.facts)}}, msgs...)
		step, err := offline.Planner{}.Next(t.Context(), activities.PlanRequest{
			Model: offline.ModelName, Goal: goal, Facts: run.facts, View: view, Tools: specs, Step: n, Steps: run.steps,
		})
		if err != nil {
			t.Fatalf("step %d: %v", n, err)
		}
		if step.Engine != offline.ModelName || step.ParseError != "" {
			t.Fatalf("step %d: %+v", n, step)
		}
		if len(step.Calls) == 0 {
			if step.Answer == "" {
				t.Fatalf("step %d: neither a call nor an answer", n)
			}
			run.answer = step.Answer
			run.steps = append(run.steps, activities.StepRecord{N: n, OK: true, Observation: convo.Clip(step.Answer, 160)})
			return run
		}
		if step.Thought != "" {
			transcript = append(transcript, convo.Message{ID: fmt.Sprintf("s%d.think", n), Role: convo.RoleAssistant, Content: step.Thought})
		}
		for i, c := range step.Calls {
			id := fmt.Sprintf("s%d.c%d", n, i+1)
			content, found, ok := runTool(t, tools, c)
			transcript = append(transcript,
				convo.Message{ID: id, Role: convo.RoleToolCall, ToolCall: &convo.ToolCall{ID: id, Name: c.Name, Args: c.Args}},
				convo.Message{ID: id + ".r", Role: convo.RoleToolResult, ToolCallID: id, Content: content})
			run.facts.Merge(found)
			run.steps = append(run.steps, activities.StepRecord{N: n, Tool: c.Name, Args: convo.Clip(string(c.Args), 200), OK: ok, Observation: convo.Clip(content, 160)})
			run.calls = append(run.calls, c.Name+string(c.Args))
		}
	}
	t.Fatalf("no answer after %d steps; calls %v", maxSteps, run.calls)
	return run
}

// runTool is the agent's dispatch: the tool of the call's name, its result
// as JSON with its facts, or an error observation.
func runTool(t *testing.T, tools []activities.Tool, c convo.ToolCall) (content string, facts activities.KnownFacts, ok bool) {
	t.Helper()
	for _, tool := range tools {
		if tool.Spec().Name != c.Name {
			continue
		}
		out, err := tool.Call(t.Context(), c.Args)
		switch {
		case errors.Is(err, activities.ErrToolArgs), errors.Is(err, activities.ErrToolFailed):
			b, _ := json.Marshal(map[string]string{"error": err.Error()})
			return string(b), activities.KnownFacts{ErrorHistory: []string{c.Name + ": " + err.Error()}}, false
		case err != nil:
			t.Fatalf("%s: %v", c.Name, err)
		}
		b, err := json.Marshal(out)
		if err != nil {
			t.Fatal(err)
		}
		if fr, isFR := out.(activities.FactsReporter); isFR {
			facts = fr.Facts()
		}
		return string(b), facts, true
	}
	t.Fatalf("the planner called an unknown tool %q", c.Name)
	return "", facts, false
}

// TestPlanner drives the offline planner over one demo database (generating
// it is the slow part).
func TestPlanner(t *testing.T) {
	db := shop(t)
	t.Run("counts the customers", func(t *testing.T) { countsCustomers(t, db) })
	t.Run("counts every table", func(t *testing.T) { countsEveryTable(t, db) })
	t.Run("says when it needs a model", func(t *testing.T) { needsAModel(t, db) })
	t.Run("compiles simple shapes", func(t *testing.T) { compilesSimpleShapes(t, db) })
	t.Run("uses known facts", func(t *testing.T) { usesKnownFacts(t, db) })
	t.Run("is deterministic", func(t *testing.T) { isDeterministic(t, db) })
}

// TestPlannerCountsManyTables: with more tables than the SQL history
// keeps, every table is still counted once and the answer has them all.
func TestPlannerCountsManyTables(t *testing.T) {
	const tables = 30
	path := filepath.Join(t.TempDir(), "many.db")
	w, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= tables; i++ {
		if _, err := w.ExecContext(t.Context(), fmt.Sprintf(`CREATE TABLE t%02d (id INTEGER PRIMARY KEY)`, i)); err != nil {
			t.Fatal(err)
		}
		for j := range i {
			if _, err := w.ExecContext(t.Context(), fmt.Sprintf(`INSERT INTO t%02d VALUES (%d)`, i, j)); err != nil {
				t.Fatal(err)
			}
		}
	}
	_ = w.Close()
	db, err := sqltools.OpenSQLite(path, sqltools.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	run := drive(t, db, "How many rows does each table have?", activities.KnownFacts{}, 3*tables)
	if len(run.steps) != tables+2 {
		t.Errorf("%d steps, want %d: list, one a table, answer", len(run.steps), tables+2)
	}
	for i := 1; i <= tables; i++ {
		if !strings.Contains(run.answer, fmt.Sprintf("t%02d %d", i, i)) {
			t.Errorf("answer misses t%02d %d: %s", i, i, run.answer)
		}
	}
	if !strings.Contains(run.answer, fmt.Sprintf("%d tables, %d rows", tables, tables*(tables+1)/2)) {
		t.Errorf("answer %q", run.answer)
	}
}

func countsCustomers(t *testing.T, db *sqltools.DB) {
	want := scalar(t, db, "SELECT COUNT(*) FROM customers")
	run := drive(t, db, "How many customers are there?", activities.KnownFacts{}, 10)
	wantCalls := []string{`list_tables{}`, `describe_table{"table":"customers"}`, `run_sql{"sql":"SELECT count(*) AS count FROM \"customers\""}`}
	if !reflect.DeepEqual(run.calls, wantCalls) {
		t.Errorf("calls %v\nwant  %v", run.calls, wantCalls)
	}
	if run.answer != "(offline engine) Result: count "+want+".\nSQL: SELECT count(*) AS count FROM \"customers\"" {
		t.Errorf("answer %q, want the count %s", run.answer, want)
	}
	if len(run.steps) != 4 || run.steps[3].Observation != convo.Clip(run.answer, 160) {
		t.Errorf("steps %+v", run.steps)
	}
	for _, s := range run.steps {
		if !s.OK {
			t.Errorf("a failed step: %+v", s)
		}
	}
}

// countLine is "N tables, M rows in all: a 1, b 2, ...".
var countLine = regexp.MustCompile(`^\(offline engine\) (\d+) tables, (\d+) rows in all: (.*)\. \(One SELECT count\(\*\) a table\.\)$`)

func countsEveryTable(t *testing.T, db *sqltools.DB) {
	run := drive(t, db, "How many rows does each table of the shop have?", activities.KnownFacts{}, 40)
	if len(run.steps) <= 12 {
		t.Errorf("%d steps, want more than 12 (one a table)", len(run.steps))
	}
	if want := 1 + len(sqltools.DemoTables) + 1; len(run.steps) != want {
		t.Errorf("%d steps, want %d: list the tables, count each, answer", len(run.steps), want)
	}
	g := countLine.FindStringSubmatch(run.answer)
	if g == nil {
		t.Fatalf("answer %q", run.answer)
	}
	parts := strings.Split(g[3], ", ")
	if g[1] != strconv.Itoa(len(sqltools.DemoTables)) || len(parts) != len(sqltools.DemoTables) {
		t.Fatalf("answer lists %s tables (%d parts), want %d: %q", g[1], len(parts), len(sqltools.DemoTables), run.answer)
	}
	total := 0
	for i, table := range sqltools.DemoTables {
		want := scalar(t, db, fmt.Sprintf(`SELECT COUNT(*) FROM "%s"`, table))
		if parts[i] != table+" "+want {
			t.Errorf("answer says %q, want %q", parts[i], table+" "+want)
		}
		n, _ := strconv.Atoi(want)
		total += n
	}
	if g[2] != strconv.Itoa(total) {
		t.Errorf("answer says %s rows in all, want %d", g[2], total)
	}
	for _, s := range run.steps[1 : len(run.steps)-1] {
		if s.Tool != "run_sql" || !s.OK || !strings.Contains(s.Args, "count(*) AS rows_in_") {
			t.Errorf("a counting step: %+v", s)
		}
	}
}

func needsAModel(t *testing.T, db *sqltools.DB) {
	tests := []struct {
		goal      string
		why       string
		described []string
	}{
		{"Which customers have never placed an order?", "the goal is not a count, a top N, a sum or an average of one or two tables", []string{"customers", "orders"}},
		{"What is the weather like today?", "the goal names none of the tables", nil},
	}
	for _, tc := range tests {
		t.Run(tc.goal, func(t *testing.T) {
			run := drive(t, db, tc.goal, activities.KnownFacts{}, 10)
			if len(run.steps) != 1+len(tc.described)+1 {
				t.Errorf("steps %v", run.calls)
			}
			prefix := "(offline engine) Writing the SQL for this needs a language model (" + tc.why + "). What I found: tables " +
				strings.Join(sqltools.DemoTables, ", ")
			if !strings.HasPrefix(run.answer, prefix) || !strings.HasSuffix(run.answer, ".") {
				t.Fatalf("answer %q\nwant it to start %q", run.answer, prefix)
			}
			for _, table := range tc.described {
				schema := run.facts.Schema(table)
				if schema == "" || !strings.Contains(run.answer, "; "+table+": "+schema) {
					t.Errorf("the answer does not give the schema of %s (%q): %q", table, schema, run.answer)
				}
			}
			for _, s := range run.steps {
				if s.Tool == "run_sql" {
					t.Errorf("it ran SQL it could not write: %+v", s)
				}
			}
		})
	}
}

// More shapes it compiles, each checked against the database itself.
func compilesSimpleShapes(t *testing.T, db *sqltools.DB) {
	tests := []struct {
		goal, sql, answer, truth string
	}{
		{"How many customers live in 'Berlin'?",
			`SELECT count(*) AS count FROM "customers" WHERE "name" = 'Berlin' OR "email" = 'Berlin' OR "city" = 'Berlin' OR "country" = 'Berlin' OR "joined_on" = 'Berlin'`,
			"Result: count %s.", "SELECT COUNT(*) FROM customers WHERE city = 'Berlin'"},
		{"What is the average price of the products?", `SELECT round(avg("price"), 2) AS avg_price FROM "products"`,
			"Result: avg_price %s.", "SELECT round(avg(price), 2) FROM products"},
		{"What are the top 3 cheapest products?", `SELECT * FROM "products" ORDER BY "price" ASC LIMIT 3`,
			"Result: id %s, ", "SELECT id FROM products ORDER BY price ASC LIMIT 1"},
		{"有多少个客户？", `SELECT count(*) AS count FROM "customers"`, "（离线引擎） 结果：count %s。", "SELECT COUNT(*) FROM customers"},
	}
	for _, tc := range tests {
		t.Run(tc.goal, func(t *testing.T) {
			run := drive(t, db, tc.goal, activities.KnownFacts{}, 10)
			last := run.calls[len(run.calls)-1]
			if want, _ := json.Marshal(map[string]string{"sql": tc.sql}); last != "run_sql"+string(want) {
				t.Errorf("last call %s, want the SQL %s", last, tc.sql)
			}
			if want := fmt.Sprintf(tc.answer, scalar(t, db, tc.truth)); !strings.Contains(run.answer, want) || !strings.Contains(run.answer, tc.sql) {
				t.Errorf("answer %q, want %q and the SQL", run.answer, want)
			}
		})
	}
}

// What an earlier task found is not discovered again.
func usesKnownFacts(t *testing.T, db *sqltools.DB) {
	first := drive(t, db, "How many customers are there?", activities.KnownFacts{}, 10)
	second := drive(t, db, "How many orders are there?", first.facts, 10)
	want := []string{`describe_table{"table":"orders"}`, `run_sql{"sql":"SELECT count(*) AS count FROM \"orders\""}`}
	if !reflect.DeepEqual(second.calls, want) {
		t.Errorf("calls %v, want %v", second.calls, want)
	}
	third := drive(t, db, "How many customers are there?", second.facts, 10)
	if len(third.calls) != 1 || !strings.HasPrefix(third.calls[0], "run_sql") || third.answer != first.answer {
		t.Errorf("the same question again: calls %v, answer %q (first %q)", third.calls, third.answer, first.answer)
	}
}

func isDeterministic(t *testing.T, db *sqltools.DB) {
	for _, goal := range []string{"How many customers are there?", "How many rows does each table of the shop have?", "Which customers have never placed an order?"} {
		a := drive(t, db, goal, activities.KnownFacts{}, 40)
		b := drive(t, db, goal, activities.KnownFacts{}, 40)
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%s: two runs differ:\n%+v\n%+v", goal, a, b)
		}
	}
}

func TestPlannerHonoursCancellation(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	step, err := offline.Planner{}.Next(ctx, activities.PlanRequest{Goal: "How many customers are there?", Step: 1})
	if !errors.Is(err, context.Canceled) || !reflect.DeepEqual(step, activities.PlanStep{}) {
		t.Errorf("Next on a canceled context = %+v, %v", step, err)
	}
}
