package activities

import (
	"fmt"
	"slices"
	"strings"

	"github.com/ctxflow/ctxflow/convo"
)

// KnownFacts are what a session's agent tasks found out about their
// database (seed 001 §3, §7, §8): the tables, their schemas, sample rows,
// the SQL that ran and the errors met. Tool results add to them; they are
// kept in the task's and the session's state and rendered into the system
// prompt of every later model call and later task, so that nothing is
// discovered twice. They are bounded, so that state stays small.
type KnownFacts struct {
	Tables       []string    `json:"knownTables,omitempty"`
	Schemas      []TableFact `json:"knownSchemas,omitempty"`
	Samples      []TableFact `json:"knownSamples,omitempty"`
	SQLHistory   []string    `json:"sqlHistory,omitempty"`
	ErrorHistory []string    `json:"errorHistory,omitempty"`
}

// TableFact is something known about one table.
type TableFact struct {
	Table string `json:"table"`
	Text  string `json:"text"`
}

// Bounds of KnownFacts.
const (
	maxFactTables  = 64
	maxFactText    = 600
	maxFactHistory = 20
)

// Merge adds what d found: tables and facts by table (a newer fact about a
// table replaces the older), histories appended, all within the bounds.
func (f *KnownFacts) Merge(d KnownFacts) {
	for _, t := range d.Tables {
		if !slices.Contains(f.Tables, t) && len(f.Tables) < maxFactTables {
			f.Tables = append(f.Tables, t)
		}
	}
	f.Schemas = mergeFacts(f.Schemas, d.Schemas)
	f.Samples = mergeFacts(f.Samples, d.Samples)
	f.SQLHistory = appendBounded(f.SQLHistory, d.SQLHistory)
	f.ErrorHistory = appendBounded(f.ErrorHistory, d.ErrorHistory)
}

func mergeFacts(have, add []TableFact) []TableFact {
	for _, a := range add {
		a.Text = convo.Clip(a.Text, maxFactText)
		if i := slices.IndexFunc(have, func(h TableFact) bool { return h.Table == a.Table }); i >= 0 {
			have[i] = a
		} else if len(have) < maxFactTables {
			have = append(have, a)
		}
	}
	return have
}

func appendBounded(have, add []string) []string {
	for _, a := range add {
		// A repeat moves to the end, so that the newest are the ones kept
		// and merging the same facts again changes nothing.
		a = convo.Clip(a, maxFactText)
		have = append(slices.DeleteFunc(slices.Clone(have), func(h string) bool { return h == a }), a)
	}
	if n := len(have) - maxFactHistory; n > 0 {
		have = append([]string(nil), have[n:]...)
	}
	return have
}

// IsZero reports that nothing is known.
func (f KnownFacts) IsZero() bool {
	return len(f.Tables)+len(f.Schemas)+len(f.Samples)+len(f.SQLHistory)+len(f.ErrorHistory) == 0
}

// Schema returns what is known of a table's schema ("" for nothing).
func (f KnownFacts) Schema(table string) string {
	for _, s := range f.Schemas {
		if s.Table == table {
			return s.Text
		}
	}
	return ""
}

// Prompt renders the facts for a system prompt, with the instruction not
// to discover them again; "" when nothing is known.
func (f KnownFacts) Prompt() string {
	if f.IsZero() {
		return ""
	}
	var b strings.Builder
	b.WriteString("Known so far (from earlier steps and tasks of this session; use it, do not call list_tables or describe_table again for what is here):\n")
	if len(f.Tables) > 0 {
		fmt.Fprintf(&b, "- tables: %s\n", strings.Join(f.Tables, ", "))
	}
	for _, s := range f.Schemas {
		fmt.Fprintf(&b, "- schema of %s: %s\n", s.Table, s.Text)
	}
	for _, s := range f.Samples {
		fmt.Fprintf(&b, "- sample of %s: %s\n", s.Table, s.Text)
	}
	for _, q := range f.SQLHistory {
		fmt.Fprintf(&b, "- ran: %s\n", q)
	}
	for _, e := range f.ErrorHistory {
		fmt.Fprintf(&b, "- error met: %s\n", e)
	}
	return b.String()
}
