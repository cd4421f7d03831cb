package activities_test

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"pgregory.net/rapid"

	"github.com/ctxflow/ctxflow/activities"
)

// The bounds of KnownFacts (facts.go).
const (
	factTables  = 64
	factText    = 600
	factHistory = 20
)

func numbered(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d", prefix, i+1)
	}
	return out
}

func TestKnownFactsMerge(t *testing.T) {
	long := strings.Repeat("x", 1000)
	han := strings.Repeat("表", 400) // 1200 bytes: clipped inside a rune
	tests := []struct {
		name   string
		have   activities.KnownFacts
		add    activities.KnownFacts
		want   activities.KnownFacts
		custom func(t *testing.T, got activities.KnownFacts)
	}{
		{
			name: "into nothing",
			add:  activities.KnownFacts{Tables: []string{"orders", "customers"}, SQLHistory: []string{"SELECT 1 → = 1"}},
			want: activities.KnownFacts{Tables: []string{"orders", "customers"}, SQLHistory: []string{"SELECT 1 → = 1"}},
		},
		{
			name: "tables deduplicated, order of discovery kept",
			have: activities.KnownFacts{Tables: []string{"orders", "customers"}},
			add:  activities.KnownFacts{Tables: []string{"customers", "products", "products", "orders"}},
			want: activities.KnownFacts{Tables: []string{"orders", "customers", "products"}},
		},
		{
			name: "a newer fact about a table replaces the older, in place",
			have: activities.KnownFacts{Schemas: []activities.TableFact{{"orders", "id INTEGER"}, {"customers", "id INTEGER"}}},
			add: activities.KnownFacts{Schemas: []activities.TableFact{{"orders", "id INTEGER pk, total REAL"}, {"products", "id INTEGER"}},
				Samples: []activities.TableFact{{"orders", "id: [[1]]"}}},
			want: activities.KnownFacts{
				Schemas: []activities.TableFact{{"orders", "id INTEGER pk, total REAL"}, {"customers", "id INTEGER"}, {"products", "id INTEGER"}},
				Samples: []activities.TableFact{{"orders", "id: [[1]]"}},
			},
		},
		{
			name: "histories appended without repeats",
			have: activities.KnownFacts{SQLHistory: []string{"a", "b"}, ErrorHistory: []string{"run_sql: no such table"}},
			add:  activities.KnownFacts{SQLHistory: []string{"b", "c", "c"}, ErrorHistory: []string{"run_sql: no such table", "describe_table: no table"}},
			want: activities.KnownFacts{SQLHistory: []string{"a", "b", "c"}, ErrorHistory: []string{"run_sql: no such table", "describe_table: no table"}},
		},
		{
			name: "a repeat moves to the end of its history",
			have: activities.KnownFacts{SQLHistory: []string{"a", "b", "c"}},
			add:  activities.KnownFacts{SQLHistory: []string{"a"}},
			want: activities.KnownFacts{SQLHistory: []string{"b", "c", "a"}},
		},
		{
			// Appending only what was new, then trimming, dropped the
			// repeat q1 here, and merging the same facts again brought it
			// back in place of q2.
			name: "a repeat is not trimmed away before what is older",
			have: activities.KnownFacts{SQLHistory: numbered("q", 6)},
			add:  activities.KnownFacts{SQLHistory: append([]string{"q1"}, numbered("q", 21)[6:]...)},
			want: activities.KnownFacts{SQLHistory: append(numbered("q", 6)[2:], append([]string{"q1"}, numbered("q", 21)[6:]...)...)},
		},
		{
			name: "histories keep the newest 20",
			have: activities.KnownFacts{SQLHistory: numbered("q", 18), ErrorHistory: numbered("e", 20)},
			add:  activities.KnownFacts{SQLHistory: []string{"new1", "new2", "new3", "new4"}, ErrorHistory: []string{"e-new"}},
			want: activities.KnownFacts{
				SQLHistory:   append(numbered("q", 18)[2:], "new1", "new2", "new3", "new4"),
				ErrorHistory: append(numbered("e", 20)[1:], "e-new"),
			},
		},
		{
			name: "tables bounded: the first 64 stay",
			have: activities.KnownFacts{Tables: numbered("t", 60)},
			add:  activities.KnownFacts{Tables: numbered("u", 10)},
			want: activities.KnownFacts{Tables: append(numbered("t", 60), numbered("u", 4)...)},
		},
		{
			name: "table facts bounded, but a known table is still updated",
			have: activities.KnownFacts{Schemas: tableFacts(numbered("t", 64), "old")},
			add:  activities.KnownFacts{Schemas: []activities.TableFact{{"t1", "new"}, {"u1", "new"}}},
			want: activities.KnownFacts{Schemas: append([]activities.TableFact{{"t1", "new"}}, tableFacts(numbered("t", 64)[1:], "old")...)},
		},
		{
			name: "long texts clipped on a rune boundary",
			add: activities.KnownFacts{Schemas: []activities.TableFact{{"a", long}}, Samples: []activities.TableFact{{"b", han}},
				SQLHistory: []string{long}, ErrorHistory: []string{han}},
			custom: func(t *testing.T, got activities.KnownFacts) {
				for _, s := range []string{got.Schemas[0].Text, got.Samples[0].Text, got.SQLHistory[0], got.ErrorHistory[0]} {
					if !utf8.ValidString(s) || !strings.HasSuffix(s, "…") || len(s) > factText+len("…") || len(s) < factText-3 {
						t.Errorf("clipped to %d bytes (valid UTF-8: %v): %.20q…", len(s), utf8.ValidString(s), s)
					}
				}
				if got.Schemas[0].Text != long[:factText]+"…" || got.Samples[0].Text != han[:factText]+"…" {
					t.Errorf("clipped schema/sample = %d/%d bytes", len(got.Schemas[0].Text), len(got.Samples[0].Text))
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := clone(tc.have)
			got.Merge(tc.add)
			again := clone(got)
			if again.Merge(tc.add); !reflect.DeepEqual(again, got) {
				t.Errorf("merging the same facts again changed them:\n%+v\nto\n%+v", got, again)
			}
			if tc.custom != nil {
				tc.custom(t, got)
				return
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Merge =\n%+v\nwant\n%+v", got, tc.want)
			}
		})
	}
}

func tableFacts(tables []string, text string) []activities.TableFact {
	out := make([]activities.TableFact, len(tables))
	for i, t := range tables {
		out[i] = activities.TableFact{Table: t, Text: text}
	}
	return out
}

func TestKnownFactsLookups(t *testing.T) {
	var f activities.KnownFacts
	if !f.IsZero() || f.Prompt() != "" || f.Schema("orders") != "" {
		t.Fatalf("zero facts: IsZero %v, Prompt %q", f.IsZero(), f.Prompt())
	}
	for _, one := range []activities.KnownFacts{
		{Tables: []string{"a"}}, {Schemas: []activities.TableFact{{"a", "x"}}}, {Samples: []activities.TableFact{{"a", "x"}}},
		{SQLHistory: []string{"x"}}, {ErrorHistory: []string{"x"}},
	} {
		if one.IsZero() || one.Prompt() == "" {
			t.Errorf("%+v: IsZero %v, Prompt %q", one, one.IsZero(), one.Prompt())
		}
	}
	f.Merge(activities.KnownFacts{Schemas: []activities.TableFact{{"orders", "id INTEGER pk (2000 rows)"}}})
	if got := f.Schema("orders"); got != "id INTEGER pk (2000 rows)" {
		t.Errorf("Schema(orders) = %q", got)
	}
	if got := f.Schema("customers"); got != "" {
		t.Errorf("Schema(customers) = %q, want nothing", got)
	}
}

func TestKnownFactsPrompt(t *testing.T) {
	f := activities.KnownFacts{
		Tables:       []string{"customers", "orders"},
		Schemas:      []activities.TableFact{{"orders", "id INTEGER pk, customer_id INTEGER → customers.id (2000 rows)"}},
		Samples:      []activities.TableFact{{"customers", `id, name: [[1,"Anna Weber"]]`}},
		SQLHistory:   []string{"SELECT count(*) FROM orders → = 2000", "SELECT * FROM customers → 50 rows"},
		ErrorHistory: []string{"run_sql: no such column: nope"},
	}
	want := "Known so far (from earlier steps and tasks of this session; use it, do not call list_tables or describe_table again for what is here):\n" +
		"- tables: customers, orders\n" +
		"- schema of orders: id INTEGER pk, customer_id INTEGER → customers.id (2000 rows)\n" +
		"- sample of customers: id, name: [[1,\"Anna Weber\"]]\n" +
		"- ran: SELECT count(*) FROM orders → = 2000\n" +
		"- ran: SELECT * FROM customers → 50 rows\n" +
		"- error met: run_sql: no such column: nope\n"
	if got := f.Prompt(); got != want {
		t.Errorf("Prompt =\n%s\nwant\n%s", got, want)
	}
	// Only what is known is rendered.
	only := activities.KnownFacts{ErrorHistory: []string{"list_tables: timeout"}}.Prompt()
	if !strings.HasSuffix(only, "\n- error met: list_tables: timeout\n") || strings.Contains(only, "- tables:") || strings.Count(only, "\n") != 2 {
		t.Errorf("errors only: %q", only)
	}
	// The task prompt carries them.
	if p := activities.TaskPrompt("How many orders?", f); !strings.Contains(p, "Goal: How many orders?\n") || !strings.HasSuffix(p, want) {
		t.Errorf("TaskPrompt = %q", p)
	}
	if p := activities.TaskPrompt("How many orders?", activities.KnownFacts{}); strings.Contains(p, "Known so far") {
		t.Errorf("TaskPrompt without facts = %q", p)
	}
}

// genFacts draws facts from small pools, so that repeats are common, and
// sometimes over the bounds.
func genFacts(t *rapid.T, label string) activities.KnownFacts {
	table := rapid.SampledFrom(numbered("t", 80))
	fact := rapid.Custom(func(t *rapid.T) activities.TableFact {
		return activities.TableFact{Table: table.Draw(t, "table"), Text: rapid.SampledFrom([]string{"a", "b", strings.Repeat("é", 400)}).Draw(t, "text")}
	})
	history := rapid.SampledFrom(append(numbered("q", 30), strings.Repeat("long ", 200)))
	return activities.KnownFacts{
		Tables:       rapid.SliceOfN(table, 0, 90).Draw(t, label+".tables"),
		Schemas:      rapid.SliceOfN(fact, 0, 70).Draw(t, label+".schemas"),
		Samples:      rapid.SliceOfN(fact, 0, 10).Draw(t, label+".samples"),
		SQLHistory:   rapid.SliceOfN(history, 0, 30).Draw(t, label+".sql"),
		ErrorHistory: rapid.SliceOfN(history, 0, 30).Draw(t, label+".errors"),
	}
}

// clone copies facts deeply (Merge updates table facts in place).
func clone(f activities.KnownFacts) activities.KnownFacts {
	return activities.KnownFacts{
		Tables: slices.Clone(f.Tables), Schemas: slices.Clone(f.Schemas), Samples: slices.Clone(f.Samples),
		SQLHistory: slices.Clone(f.SQLHistory), ErrorHistory: slices.Clone(f.ErrorHistory),
	}
}

func TestKnownFactsMergeProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var f activities.KnownFacts
		f.Merge(genFacts(t, "base")) // a state Merge can reach
		d := genFacts(t, "delta")

		once := clone(f)
		once.Merge(d)
		twice := clone(once)
		twice.Merge(d)
		if !reflect.DeepEqual(once, twice) {
			t.Fatalf("Merge is not idempotent:\nonce  %+v\ntwice %+v", once, twice)
		}

		// Never loses a table; adds the new ones while there is room.
		for _, tb := range f.Tables {
			if !slices.Contains(once.Tables, tb) {
				t.Fatalf("table %s lost", tb)
			}
		}
		for _, tb := range d.Tables {
			if !slices.Contains(once.Tables, tb) && len(once.Tables) < factTables {
				t.Fatalf("table %s not added, with %d tables known", tb, len(once.Tables))
			}
		}
		for _, s := range f.Schemas {
			if once.Schema(s.Table) == "" {
				t.Fatalf("schema of %s lost", s.Table)
			}
		}
		// Bounded and without repeats.
		if len(once.Tables) > factTables || len(once.Schemas) > factTables || len(once.Samples) > factTables ||
			len(once.SQLHistory) > factHistory || len(once.ErrorHistory) > factHistory {
			t.Fatalf("over the bounds: %d tables, %d schemas, %d samples, %d sql, %d errors",
				len(once.Tables), len(once.Schemas), len(once.Samples), len(once.SQLHistory), len(once.ErrorHistory))
		}
		for name, xs := range map[string][]string{"tables": once.Tables, "sql": once.SQLHistory, "errors": once.ErrorHistory,
			"schemas": tablesOf(once.Schemas), "samples": tablesOf(once.Samples)} {
			if len(slices.Compact(slices.Sorted(slices.Values(xs)))) != len(xs) {
				t.Fatalf("%s repeat: %v", name, xs)
			}
		}
	})
}

func tablesOf(fs []activities.TableFact) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.Table
	}
	return out
}
