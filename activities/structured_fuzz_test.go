package activities_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/convo"
)

// modelReplies are answers of the shapes small models give in JSON mode.
var modelReplies = []string{
	`{"is_relevant": true, "confidence": 0.8, "reasoning": "names the price"}`,
	"Sure! Here you go:\n```json\n{\"is_relevant\": false, \"confidence\": 0.2, \"reasoning\": \"off topic\"}\n```\nHope it helps.",
	`{"rewritten_query": "Pixel 8 price", "rewrite_reason": "more specific", "keywords": ["Pixel 8", "price",],}`,
	`{"thought": "count them", "tool": "run_sql", "args": {"sql": "SELECT count(*) FROM orders"}}`,
	`{"thought": "done", "answer": "There are 2000 orders."}`,
	`{"thought": "cut off", "tool": "run_sql", "args": {"sql": "SELECT`,
	"```\n{\"answer\": \"use ``` fences\"}\n```",
	`I think {"answer": "{braces} and \"quotes\" in [strings]"} — that's all.`,
	`[1, 2, {"a": null}]`,
	`{"tool": "", "answer": "  "}`,
	`{"answer": "x", "extra": 1}`,
	`{"answer":"\ud800 lone surrogate"}`,
	"no JSON at all",
	"",
	"```json\n```",
	`{"a":"b\"`,
}

// FuzzExtractJSON: whatever a model answers, the repair of its JSON never
// panics; what it returns is compact, valid JSON (an object or an array)
// that it returns unchanged when given again, and an answer that already
// is an object or an array comes back as itself; anything else is
// convo.ErrNoJSON. The structured steps built on it (the grader and the
// reformulator, whose model answers answer and then, corrected,
// correction; the planner's JSON mode) never panic either, and accept an
// answer only as the strict decoding of its JSON, alone.
func FuzzExtractJSON(f *testing.F) {
	for i, r := range modelReplies {
		f.Add(r, modelReplies[(i+1)%len(modelReplies)])
	}
	f.Add(`{"is_relevant": true, "confidence": 0.9, "reasoning": ""}`, `{"reasoning": "the second answer"}`)
	f.Add(`{"rewritten_query": " ", "rewrite_reason": "r", "keywords": ["k"]}`, `{"rewritten_query": "q"}`)
	f.Fuzz(func(t *testing.T, answer, correction string) {
		raw, err := convo.ExtractJSON(answer)
		switch {
		case err != nil:
			if !errors.Is(err, convo.ErrNoJSON) || raw != nil {
				t.Fatalf("ExtractJSON(%q) = %s, %v; want ErrNoJSON", answer, raw, err)
			}
		case len(raw) == 0 || raw[0] != '{' && raw[0] != '[' || !json.Valid(raw):
			t.Fatalf("ExtractJSON(%q) = %q: not a JSON object or array", answer, raw)
		default:
			var compact bytes.Buffer
			_ = json.Compact(&compact, raw)
			if !bytes.Equal(compact.Bytes(), raw) {
				t.Fatalf("ExtractJSON(%q) = %s: not compact", answer, raw)
			}
			if again, err := convo.ExtractJSON(string(raw)); err != nil || !bytes.Equal(again, raw) {
				t.Fatalf("ExtractJSON(%s) = %s, %v: not a fixed point", raw, again, err)
			}
		}
		if s := strings.TrimSpace(answer); s != "" && (s[0] == '{' || s[0] == '[') && json.Valid([]byte(s)) {
			var want bytes.Buffer
			_ = json.Compact(&want, []byte(s))
			if !bytes.Equal(raw, want.Bytes()) {
				t.Fatalf("ExtractJSON(%q) = %s, %v; want the answer itself, %s", answer, raw, err, want.Bytes())
			}
		}
		replies := []string{answer, correction}
		checkStructured(t, replies, func(m activities.ChatModel) (activities.Grade, error) {
			return activities.ModelGrader{Model: m}.Grade(context.Background(), "m", "q", "d")
		}, func(g activities.Grade) bool { return strings.TrimSpace(g.Reasoning) != "" })
		checkStructured(t, replies, func(m activities.ChatModel) (activities.Reformulation, error) {
			return activities.ModelReformulator{Model: m}.Reformulate(context.Background(), "m", activities.ReformulateRequest{Original: "q"})
		}, func(r activities.Reformulation) bool { return strings.TrimSpace(r.RewrittenQuery) != "" })
		checkPlan(t, answer, raw, err)
	})
}

// strictly is the strict decoding of the JSON in a model's answer into a
// T (unknown fields refused), if there is one and it passes ok.
func strictly[T any](answer string, ok func(T) bool) (T, bool) {
	var v T
	raw, err := convo.ExtractJSON(answer)
	if err != nil {
		return v, false
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	return v, dec.Decode(&v) == nil && ok(v)
}

// checkStructured runs a structured step (call) on a model that answers
// replies in turn: it takes the first answer whose JSON decodes strictly
// and passes the step's check (ok), as that answer alone says it, after
// one call for each answer it read; when neither does, it fails with a
// transient error, for the workflow to retry.
func checkStructured[T any](t *testing.T, replies []string, call func(activities.ChatModel) (T, error), ok func(T) bool) {
	t.Helper()
	m := &scriptedModel{replies: replies}
	got, err := call(m)
	for i, r := range replies {
		want, valid := strictly(r, ok)
		if !valid {
			continue
		}
		if err != nil || !reflect.DeepEqual(got, want) || len(m.reqs) != i+1 {
			t.Fatalf("%T of %q = %+v, %v after %d calls; want %+v of answer %d", got, replies, got, err, len(m.reqs), want, i+1)
		}
		return
	}
	if err == nil || activities.IsPermanent(err) || len(m.reqs) != len(replies) {
		t.Fatalf("%T of %q (no valid answer) = %+v, %v after %d calls; want a transient error", got, replies, got, err, len(m.reqs))
	}
}

// checkPlan: a JSON-mode plan of answer is a tool call, an answer or a
// parse error, never a failure, and agrees with the extraction.
func checkPlan(t *testing.T, answer string, raw json.RawMessage, rawErr error) {
	t.Helper()
	m := &toolModel{jsonReplies: []string{answer}}
	step, err := activities.ModelPlanner{Model: m, Engine: "ollama", JSONMode: true}.Next(context.Background(), planRequest())
	if err != nil {
		t.Fatalf("plan of %q: %v", answer, err)
	}
	if step.Raw != answer || step.Engine != "ollama" {
		t.Fatalf("plan of %q: raw %q, engine %q", answer, step.Raw, step.Engine)
	}
	var want struct {
		Thought string          `json:"thought"`
		Tool    string          `json:"tool"`
		Args    json.RawMessage `json:"args"`
		Answer  string          `json:"answer"`
	}
	valid := rawErr == nil
	if valid {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		valid = dec.Decode(&want) == nil && (want.Tool != "" || strings.TrimSpace(want.Answer) != "")
	}
	switch {
	case !valid:
		if step.ParseError == "" || len(step.Calls) > 0 || step.Answer != "" {
			t.Fatalf("plan of %q (no valid plan in it) = %+v", answer, step)
		}
	case step.ParseError != "":
		t.Fatalf("plan of %q: parse error %q, though %s is a plan", answer, step.ParseError, raw)
	case want.Tool != "":
		if len(step.Calls) != 1 || step.Calls[0].Name != want.Tool || !bytes.Equal(step.Calls[0].Args, want.Args) || step.Answer != "" ||
			len(step.Calls[0].Args) > 0 && !json.Valid(step.Calls[0].Args) || step.Thought != want.Thought {
			t.Fatalf("plan of %q = %+v, want the call of %s", answer, step, raw)
		}
	default:
		if len(step.Calls) != 0 || step.Answer != want.Answer || step.Thought != want.Thought {
			t.Fatalf("plan of %q = %+v, want the answer of %s", answer, step, raw)
		}
	}
}

// FuzzExtractJSONRoundTrip: a grade or a plan, marshalled and wrapped the
// way models wrap JSON (prose before and after, a fence with or without
// an info string, pretty-printing, a trailing comma), comes back as the
// same value. The prose is the fuzzer's, less what would make the
// answer ambiguous: brackets (a JSON value of its own) and ``` (a fence
// of its own).
func FuzzExtractJSONRoundTrip(f *testing.F) {
	f.Add(true, 0.8, "names the price", "", "", uint8(0))
	f.Add(false, 0.25, `off "topic" {x} [1]`, "Sure! Here you go:", "Hope it helps.", uint8(1))
	f.Add(true, 1.0, "a```b", "Answer:\n", "", uint8(2))
	f.Add(false, 0.0, "x\\", "", " ", uint8(3))
	f.Add(true, 0.5, "长文本 \u2028", "答案：", "。", uint8(4))
	f.Add(true, 0.5, "", "", "", uint8(5))
	f.Fuzz(func(t *testing.T, relevant bool, confidence float64, reasoning, before, after string, wrap uint8) {
		if math.IsNaN(confidence) || math.IsInf(confidence, 0) {
			return // not JSON
		}
		b, _ := json.Marshal(reasoning) // as JSON carries it: invalid UTF-8 is U+FFFD
		_ = json.Unmarshal(b, &reasoning)
		g := activities.Grade{IsRelevant: relevant, Confidence: confidence, Reasoning: reasoning}
		obj, _ := json.Marshal(g)
		before, after = prose(before), prose(after)
		var answer string
		switch wrap % 6 {
		case 0:
			answer = string(obj)
		case 1:
			answer = before + "\n```json\n" + string(obj) + "\n```\n" + after
		case 2:
			answer = before + "\n```\n" + string(obj) + "\n```\n" + after
		case 3:
			answer = before + " " + string(obj) + " " + after
		case 4:
			pretty, _ := json.MarshalIndent(g, "", "  ")
			answer = before + "\n" + string(pretty) + "\n" + after
		case 5:
			answer = before + " " + strings.TrimSuffix(string(obj), "}") + ",}" + " " + after
		}
		raw, err := convo.ExtractJSON(answer)
		if err != nil {
			t.Fatalf("ExtractJSON(%q): %v", answer, err)
		}
		var back activities.Grade
		if err := json.Unmarshal(raw, &back); err != nil || back != g {
			t.Fatalf("ExtractJSON(%q) = %s (%v), want %s", answer, raw, err, obj)
		}
		got, err := activities.ModelGrader{Model: &scriptedModel{replies: []string{answer}}}.Grade(context.Background(), "m", "q", "d")
		if strings.TrimSpace(reasoning) != "" && (err != nil || got != back) {
			t.Fatalf("Grade of %q = %+v, %v; want %+v", answer, got, err, g)
		}

		// The same prose around a plan's tool call.
		args, _ := json.Marshal(map[string]string{"sql": reasoning})
		plan, _ := json.Marshal(map[string]any{"thought": before, "tool": "run_sql", "args": json.RawMessage(args)})
		step, err := activities.ModelPlanner{Model: &toolModel{jsonReplies: []string{before + "\n```json\n" + string(plan) + "\n```\n" + after}}, JSONMode: true}.
			Next(context.Background(), planRequest())
		var sql map[string]string
		if err != nil || step.ParseError != "" || len(step.Calls) != 1 || step.Thought != before ||
			json.Unmarshal(step.Calls[0].Args, &sql) != nil || sql["sql"] != reasoning {
			t.Fatalf("plan of %s = %+v, %v", plan, step, err)
		}
	})
}

// prose is s as the prose around a model's JSON: valid UTF-8 without
// brackets or a fence of its own.
func prose(s string) string {
	s = strings.ToValidUTF8(s, "?")
	s = strings.Map(func(r rune) rune {
		if strings.ContainsRune("{}[]", r) {
			return '*'
		}
		return r
	}, s)
	for strings.Contains(s, "```") {
		s = strings.ReplaceAll(s, "```", "``")
	}
	return s
}
