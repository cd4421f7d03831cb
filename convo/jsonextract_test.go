package convo

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

func TestExtractJSON(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"plain", `{"a": 1}`, `{"a":1}`},
		{"array", `[1, 2]`, `[1,2]`},
		{"fenced", "Here you go:\n```json\n{\"sql\": \"select 1\"}\n```\nDone.", `{"sql":"select 1"}`},
		{"fence without info", "```\n{\"a\": true}\n```", `{"a":true}`},
		{"chatty", `Sure! The answer is {"thought": "use {braces} in \"strings\"", "action": "query"} — hope it helps.`, `{"thought":"use {braces} in \"strings\"","action":"query"}`},
		{"trailing comma", `{"a": [1, 2,], "b": 3,}`, `{"a":[1,2],"b":3}`},
		{"cut off", `{"action": "query", "args": {"sql": "select`, `{"action":"query","args":{"sql":"select"}}`},
		{"second fence is the json", "```text\nnot json\n```\n```json\n{\"x\": 1}\n```", `{"x":1}`},
		{"unicode", `答案：{"产品": "华为Mate60", "价格": 5999}`, `{"产品":"华为Mate60","价格":5999}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ExtractJSON(tc.in)
			if err != nil || string(got) != tc.want {
				t.Fatalf("ExtractJSON = %s, %v; want %s", got, err, tc.want)
			}
		})
	}
	for _, bad := range []string{"", "no json here", "{not: json at all", "```\n```"} {
		if got, err := ExtractJSON(bad); !errors.Is(err, ErrNoJSON) {
			t.Errorf("ExtractJSON(%q) = %s, %v; want ErrNoJSON", bad, got, err)
		}
	}
}

// Any JSON object, wrapped in prose or a fence, comes back equal.
func TestPropExtractJSONFindsWrappedObject(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		obj := rapid.MapOf(rapid.StringMatching(`[a-z{}"\\ ]{1,8}`), rapid.OneOf(
			rapid.Map(rapid.IntRange(-1000, 1000), func(i int) any { return float64(i) }),
			rapid.Map(rapid.String(), func(s string) any { return s }),
			rapid.Map(rapid.Bool(), func(b bool) any { return b }),
		)).Draw(t, "object")
		raw, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		prefix := rapid.StringMatching(`[A-Za-z ,.:!\n]{0,30}`).Draw(t, "prefix")
		suffix := rapid.StringMatching(`[A-Za-z ,.!\n]{0,30}`).Draw(t, "suffix")
		wrapped := prefix + string(raw) + suffix
		if rapid.Bool().Draw(t, "fenced") {
			wrapped = prefix + "\n```json\n" + string(raw) + "\n```\n" + suffix
		}
		got, err := ExtractJSON(wrapped)
		if err != nil {
			t.Fatalf("ExtractJSON(%q): %v", wrapped, err)
		}
		var back map[string]any
		if err := json.Unmarshal(got, &back); err != nil || !reflect.DeepEqual(back, obj) && !(len(obj) == 0 && len(back) == 0) {
			t.Fatalf("ExtractJSON(%q) = %s, want %s", wrapped, got, raw)
		}
	})
}

func TestParseErrorObservation(t *testing.T) {
	_, err := ExtractJSON("I think we should query the orders table")
	obs := ParseErrorObservation("I think we should query the orders table", `{"action": string, "args": object}`, err, 5000)
	var o map[string]string
	if err := json.Unmarshal([]byte(obs), &o); err != nil {
		t.Fatal(err)
	}
	if o["type"] != "json_parse_error" || o["raw"] == "" || !strings.Contains(o["expected"], "action") || o["error"] != ErrNoJSON.Error() {
		t.Errorf("observation = %s", obs)
	}
	long := ParseErrorObservation(strings.Repeat("x", 20000), "{}", err, 100)
	if len(long) > 600 {
		t.Errorf("raw answer not cut: %d bytes", len(long))
	}
}
