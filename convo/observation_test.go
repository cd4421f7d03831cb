package convo

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCompressObservationShortUnchanged(t *testing.T) {
	for _, s := range []string{"", "ok", `[1,2,3]`, strings.Repeat("字", 5000)} {
		if got := CompressObservation(s, 0); got != s {
			t.Errorf("short input changed: %q", got)
		}
	}
}

func TestCompressObservationJSONList(t *testing.T) {
	rows := make([]map[string]any, 100)
	for i := range rows {
		rows[i] = map[string]any{"id": i, "name": fmt.Sprintf("product-%d", i), "note": strings.Repeat("n", 80)}
	}
	raw, _ := json.Marshal(map[string]any{"rows": rows, "total": 100})
	got := CompressObservation(string(raw), 2000)
	if n := utf8.RuneCountInString(got); n > 2000 {
		t.Fatalf("len %d > 2000", n)
	}
	var v struct {
		Rows  []any `json:"rows"`
		Total int   `json:"total"`
	}
	if err := json.Unmarshal([]byte(got), &v); err != nil {
		t.Fatalf("compressed JSON is not JSON: %v\n%s", err, got)
	}
	if len(v.Rows) != ObservationListItems+1 || v.Total != 100 {
		t.Errorf("rows %d, total %d", len(v.Rows), v.Total)
	}
	if marker, _ := v.Rows[ObservationListItems].(string); marker != "… 90 more items (100 total)" {
		t.Errorf("marker = %q", marker)
	}
	first, _ := v.Rows[0].(map[string]any)
	if first["name"] != "product-0" {
		t.Errorf("first row = %v", first)
	}
}

func TestCompressObservationKeepsKeyOrder(t *testing.T) {
	in := `{"zeta":"` + strings.Repeat("z", 400) + `","alpha":[` + strings.Repeat(`1,`, 50) + `1],"mid":{"b":true,"a":null}}`
	got := CompressObservation(in, 300)
	zi, ai, mi := strings.Index(got, `"zeta"`), strings.Index(got, `"alpha"`), strings.Index(got, `"mid"`)
	if zi < 0 || ai < zi || mi < ai {
		t.Errorf("keys lost or reordered: %s", got)
	}
	if !json.Valid([]byte(got)) {
		t.Errorf("not valid JSON: %s", got)
	}
	if !strings.Contains(got, "…[+") {
		t.Errorf("long string not marked: %s", got)
	}
}

func TestCompressObservationText(t *testing.T) {
	in := strings.Repeat("a", 3000) + "MIDDLE" + strings.Repeat("b", 3000) + "END"
	got := CompressObservation(in, 1000)
	if n := utf8.RuneCountInString(got); n > 1000 {
		t.Fatalf("len %d > 1000", n)
	}
	if !strings.HasPrefix(got, "aaa") || !strings.HasSuffix(got, "END") || !strings.Contains(got, "characters omitted") {
		t.Errorf("head/tail/marker missing: %.80q…", got)
	}
	if tiny := CompressObservation(in, 5); utf8.RuneCountInString(tiny) != 5 {
		t.Errorf("tiny cap: %q", tiny)
	}
}
