package activities_test

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/convo"
)

// nativeStep plans one step on a model that takes tools and answers reply
// in its text, without a native call.
func nativeStep(t interface{ Fatalf(string, ...any) }, reply string) (activities.PlanStep, int) {
	m := &toolModel{native: activities.ChatResponse{Content: reply}}
	step, err := activities.ModelPlanner{Model: m, Engine: "ollama"}.Next(context.Background(), planRequest())
	if err != nil {
		t.Fatalf("Next(%q): %v", reply, err)
	}
	return step, len(m.reqs)
}

func call(name, args string) convo.ToolCall {
	c := convo.ToolCall{Name: name}
	if args != "" {
		c.Args = json.RawMessage(args)
	}
	return c
}

// TestToolCallsWrittenAsText (issue 24, item 4): a model that takes tools
// but writes its call in the reply's text has it run as a call; a reply
// that tries a call and fails to parse is a parse error (the task's
// json_parse_error observation); prose, braces or not, is the answer.
func TestToolCallsWrittenAsText(t *testing.T) {
	const count = `{"sql":"SELECT count(*) FROM orders"}`
	calls := []struct {
		name, reply string
		thought     string
		calls       []convo.ToolCall
	}{
		{"name and arguments", `{"name": "run_sql", "arguments": {"sql": "SELECT count(*) FROM orders"}}`, "", []convo.ToolCall{call("run_sql", count)}},
		{"name and parameters", `{"name": "run_sql", "parameters": {"sql": "SELECT count(*) FROM orders"}}`, "", []convo.ToolCall{call("run_sql", count)}},
		{"JSON mode's tool and args, with a thought", `{"thought": "Count them.", "tool": "run_sql", "args": {"sql": "SELECT count(*) FROM orders"}}`, "Count them.", []convo.ToolCall{call("run_sql", count)}},
		{"ReAct's action and action_input", `{"action": "list_tables", "action_input": {}}`, "", []convo.ToolCall{call("list_tables", `{}`)}},
		{"OpenAI's function, arguments as a string", `{"type": "function", "function": {"name": "run_sql", "arguments": "{\"sql\": \"SELECT count(*) FROM orders\"}"}}`, "", []convo.ToolCall{call("run_sql", count)}},
		{"no arguments", `{"name": "list_tables"}`, "", []convo.ToolCall{call("list_tables", "")}},
		{"a trailing comma", "{\"name\": \"list_tables\", \"arguments\": {},}", "", []convo.ToolCall{call("list_tables", `{}`)}},
		{"fenced, after prose", "I will list the tables first.\n```json\n{\n  \"name\": \"list_tables\",\n  \"arguments\": {}\n}\n```", "I will list the tables first.", []convo.ToolCall{call("list_tables", `{}`)}},
		{"Qwen's tag", "<tool_call>\n{\"name\": \"run_sql\", \"arguments\": {\"sql\": \"SELECT count(*) FROM orders\"}}\n</tool_call>", "", []convo.ToolCall{call("run_sql", count)}},
		{"two tags after prose", "Tables, then a count.\n<tool_call>\n{\"name\": \"list_tables\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"run_sql\", \"arguments\": {\"sql\": \"SELECT count(*) FROM orders\"}}\n</tool_call>", "Tables, then a count.", []convo.ToolCall{call("list_tables", `{}`), call("run_sql", count)}},
		{"a tag cut off", "<tool_call>\n{\"name\": \"run_sql\", \"arguments\": {\"sql\": \"SELECT count(*) FROM orders\"}}", "", []convo.ToolCall{call("run_sql", count)}},
		{"an array", `[{"name": "list_tables", "arguments": {}}, {"name": "run_sql", "arguments": {"sql": "SELECT count(*) FROM orders"}}]`, "", []convo.ToolCall{call("list_tables", `{}`), call("run_sql", count)}},
		{"amid prose with braces of its own", `The set {a, b} is small. {"name": "list_tables", "arguments": {}} Then I count.`, "The set {a, b} is small.", []convo.ToolCall{call("list_tables", `{}`)}},
		{"after JSON that is no call", `It returned {"count": 3}; now {"name": "list_tables", "arguments": {}}`, `It returned {"count": 3}; now`, []convo.ToolCall{call("list_tables", `{}`)}},
		{"after Chinese prose", `先列出所有的表。{"name": "list_tables", "arguments": {}}`, "先列出所有的表。", []convo.ToolCall{call("list_tables", `{}`)}},
	}
	for _, tc := range calls {
		t.Run("call/"+tc.name, func(t *testing.T) {
			got, n := nativeStep(t, tc.reply)
			want := activities.PlanStep{Thought: tc.thought, Calls: tc.calls, Engine: "ollama"}
			if n != 1 || !reflect.DeepEqual(got, want) {
				t.Fatalf("Next(%q) after %d calls =\n%+v\nwant\n%+v", tc.reply, n, got, want)
			}
		})
	}

	answers := []struct{ name, reply, thought, answer string }{
		{"prose", "There are 2000 orders.", "There are 2000 orders.", "There are 2000 orders."},
		{"Chinese prose", "共有 2000 个订单，其中 1500 个已发货。", "共有 2000 个订单，其中 1500 个已发货。", "共有 2000 个订单，其中 1500 个已发货。"},
		{"prose that mentions braces", "Grouped by status, the set {pending, shipped} has 2 values.", "Grouped by status, the set {pending, shipped} has 2 values.", "Grouped by status, the set {pending, shipped} has 2 values."},
		{"prose quoting JSON", `The query returned {"count": 2000}, so there are 2000 orders.`, `The query returned {"count": 2000}, so there are 2000 orders.`, `The query returned {"count": 2000}, so there are 2000 orders.`},
		{"Chinese prose quoting JSON", `结果是 {"订单数": 2000}。`, `结果是 {"订单数": 2000}。`, `结果是 {"订单数": 2000}。`},
		{"prose naming tools", "I used list_tables and run_sql: 2000 orders.", "I used list_tables and run_sql: 2000 orders.", "I used list_tables and run_sql: 2000 orders."},
		{"prose quoting an object with a name", `The top customer is {"name": "Alice", "orders": 12}.`, `The top customer is {"name": "Alice", "orders": 12}.`, `The top customer is {"name": "Alice", "orders": 12}.`},
		{"an SQL fence", "2000 orders:\n```sql\nSELECT count(*) FROM orders\n```", "2000 orders:\n```sql\nSELECT count(*) FROM orders\n```", "2000 orders:\n```sql\nSELECT count(*) FROM orders\n```"},
		{"a footnote", "[1] There are 2000 orders.", "[1] There are 2000 orders.", "[1] There are 2000 orders."},
		{"an answer as JSON", `{"thought": "Counted.", "answer": "There are 2000 orders."}`, "Counted.", "There are 2000 orders."},
		{"ReAct's final answer", `{"action": "Final Answer", "action_input": "There are 2000 orders."}`, "", "There are 2000 orders."},
		{"empty", "", "", ""},
	}
	for _, tc := range answers {
		t.Run("answer/"+tc.name, func(t *testing.T) {
			got, n := nativeStep(t, tc.reply)
			want := activities.PlanStep{Thought: tc.thought, Answer: tc.answer, Engine: "ollama"}
			if n != 1 || !reflect.DeepEqual(got, want) {
				t.Fatalf("Next(%q) after %d calls =\n%+v\nwant\n%+v", tc.reply, n, got, want)
			}
		})
	}

	broken := []struct{ name, reply, says string }{
		{"a Python dict", `{'name': 'run_sql', 'arguments': {'sql': 'SELECT count(*) FROM orders'}}`, convo.ErrNoJSON.Error()},
		{"an unknown tool", `{"name": "drop_everything", "arguments": {}}`, `unknown tool "drop_everything": the tools are list_tables, run_sql`},
		{"a field of no shape", `{"name": "run_sql", "sql": "SELECT 1"}`, `unknown field "sql"`},
		{"arguments that are no object", `{"name": "run_sql", "arguments": "SELECT 1"}`, "the arguments of run_sql are not a JSON object"},
		{"two tools in one call", `{"name": "run_sql", "tool": "list_tables"}`, "it names 2 tools"},
		{"neither a tool nor an answer", `{"thought": "Let me think."}`, "names no tool"},
		{"a broken tag", "<tool_call>\n{\"name\": \"run_sql\", \"arguments\": {sql: SELECT 1}}\n</tool_call>", "<tool_call> 1: " + convo.ErrNoJSON.Error()},
		{"a tag holding an answer", "<tool_call>{\"answer\": \"2000\"}</tool_call>", `<tool_call> 1: it holds an "answer"`},
		{"an unknown tool whose arguments look like a call", `{"tool": "nope", "args": {"name": "list_tables"}}`, `unknown tool "nope"`},
		{"a list with an unknown tool", `[{"name": "list_tables"}, {"name": "nope"}]`, `item 2 of the list: unknown tool "nope"`},
		{"a JSON fence holding no call", "```json\n{\"count\": 2000}\n```", `unknown field "count"`},
		{"braces that are no JSON", "{not json at all}", convo.ErrNoJSON.Error()},
		{"a known tool in broken JSON amid prose", `Let me count: {"name": "run_sql", "arguments": {"sql": "SELECT 1" "x"}} now.`, convo.ErrNoJSON.Error()},
		{"a known tool as a key", `Calling {"run_sql": {"sql": "SELECT 1"}}`, `unknown field "run_sql"`},
		{"Chinese prose and a Python dict", `我来查询：{'name': 'list_tables'}`, convo.ErrNoJSON.Error()},
	}
	for _, tc := range broken {
		t.Run("broken/"+tc.name, func(t *testing.T) {
			got, n := nativeStep(t, tc.reply)
			if n != 1 || !strings.Contains(got.ParseError, tc.says) || got.Raw != tc.reply || len(got.Calls) > 0 || got.Answer != "" || got.Thought != "" {
				t.Fatalf("Next(%q) after %d calls = %+v; want a parse error saying %q", tc.reply, n, got, tc.says)
			}
		})
	}
}

// TestProseIsNeverAToolCall: text without "{" is never a tool call; unless
// it opens a <tool_call> tag or starts with a fence, it is the answer. The
// same text around a call written as JSON, in any of the shapes, gives
// that call.
func TestProseIsNeverAToolCall(t *testing.T) {
	fragments := []string{"[", "]", "}", `"`, "'", ":", ",", "\n", " ", "```", "```json\n", "<tool_call>", "</tool_call>",
		"run_sql", "list_tables", `"name": "run_sql"`, `"arguments"`, "共有 2000 个订单", "null", "1", "[1, 2]", `["a"]`}
	proseGen := rapid.Map(rapid.SliceOfN(rapid.OneOf(rapid.SampledFrom(fragments), rapid.String()), 0, 12), func(parts []string) string {
		return strings.ReplaceAll(strings.Join(parts, ""), "{", "(")
	})
	rapid.Check(t, func(t *rapid.T) {
		prose := proseGen.Draw(t, "prose")
		got, _ := nativeStep(t, prose)
		if len(got.Calls) > 0 {
			t.Fatalf("Next(%q) called %+v", prose, got.Calls)
		}
		s := strings.TrimSpace(prose)
		if !strings.Contains(s, "<tool_call>") && !strings.HasPrefix(s, "```") && (got.ParseError != "" || got.Answer != s) {
			t.Fatalf("Next(%q) = %+v; want the answer", prose, got)
		}

		// The same prose (less its tags) around a call.
		before := strings.ReplaceAll(prose, "<tool_call>", "")
		after := strings.ReplaceAll(proseGen.Draw(t, "after"), "<tool_call>", "")
		sql := rapid.String().Draw(t, "sql")
		args, _ := json.Marshal(map[string]string{"sql": sql})
		var carried map[string]string // as JSON carries it: invalid UTF-8 is U+FFFD
		_ = json.Unmarshal(args, &carried)
		shape := rapid.SampledFrom([][2]string{{"name", "arguments"}, {"name", "parameters"}, {"tool", "args"}, {"action", "action_input"}}).Draw(t, "shape")
		obj, _ := json.Marshal(map[string]any{shape[0]: "run_sql", shape[1]: json.RawMessage(args)})
		text := string(obj)
		switch rapid.IntRange(0, 2).Draw(t, "wrap") {
		case 1:
			text = "\n```json\n" + text + "\n```\n"
		case 2:
			text = "\n<tool_call>\n" + text + "\n</tool_call>\n"
		}
		reply := before + " " + text + " " + after
		got, _ = nativeStep(t, reply)
		if len(got.Calls) != 1 || got.Calls[0].Name != "run_sql" || got.Calls[0].Args == nil || got.ParseError != "" {
			t.Fatalf("Next(%q) = %+v; want the call of run_sql", reply, got)
		}
		var back map[string]string
		if err := json.Unmarshal(got.Calls[0].Args, &back); err != nil || back["sql"] != carried["sql"] {
			t.Fatalf("Next(%q) called run_sql with %s (%v), want %s", reply, got.Calls[0].Args, err, args)
		}
	})
}
