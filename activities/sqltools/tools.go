package sqltools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ctxflow/ctxflow/activities"
)

// readOnly is the policy of every tool here: they only read, so a retry is
// always safe.
var readOnly = activities.ToolPolicy{Timeout: 30 * time.Second, ReadOnly: true}

// Tools are the database's tools for an agent: list_tables,
// describe_table, sample_rows and run_sql. Their results add to the
// session's known facts.
func (d *DB) Tools() []activities.Tool {
	return []activities.Tool{
		activities.NewTool("list_tables", "List the tables of the "+d.dialect+" database.", readOnly,
			func(ctx context.Context, _ struct{}) (any, error) {
				tables, err := d.Tables(ctx)
				return TablesResult{Database: d.name, Tables: tables}, statement(err)
			}),
		activities.NewTool("describe_table", "Describe a table: its columns, their types, keys and foreign keys, and its row count.", readOnly,
			func(ctx context.Context, a struct {
				Table string `json:"table" desc:"the table's name"`
			}) (any, error) {
				t, err := d.Describe(ctx, a.Table)
				return TableResult(t), statement(err)
			}),
		activities.NewTool("sample_rows", "Return a few rows of a table, to see what its values look like.", readOnly,
			func(ctx context.Context, a struct {
				Table string `json:"table" desc:"the table's name"`
				Limit int    `json:"limit,omitempty" desc:"how many rows (default 5, at most 20)"`
			}) (any, error) {
				n := a.Limit
				if n <= 0 {
					n = 5
				}
				res, err := d.Sample(ctx, a.Table, min(n, 20))
				return SampleResult{Table: a.Table, Result: res}, statement(err)
			}),
		activities.NewTool("run_sql", fmt.Sprintf("Run one read-only SQL query (%s dialect) and return its rows (at most %d).", d.dialect, d.opts.MaxRows), readOnly,
			func(ctx context.Context, a struct {
				SQL string `json:"sql" desc:"one SELECT (or WITH ... SELECT) statement"`
			}) (any, error) {
				res, err := d.Query(ctx, a.SQL)
				return QueryResult{SQL: a.SQL, Result: res}, statement(err)
			}),
	}
}

// statement marks a refused statement as the model's to fix.
func statement(err error) error {
	if errors.Is(err, ErrStatement) {
		return fmt.Errorf("%w: %w", activities.ErrToolFailed, err)
	}
	return err
}

// TablesResult is list_tables' result.
type TablesResult struct {
	Database string   `json:"database"`
	Tables   []string `json:"tables"`
}

// Facts implements activities.FactsReporter.
func (r TablesResult) Facts() activities.KnownFacts { return activities.KnownFacts{Tables: r.Tables} }

// TableResult is describe_table's result.
type TableResult Table

// Facts implements activities.FactsReporter: the schema, compact.
func (r TableResult) Facts() activities.KnownFacts {
	cols := make([]string, len(r.Columns))
	for i, c := range r.Columns {
		s := c.Name + " " + c.Type
		if c.PrimaryKey {
			s += " pk"
		}
		if c.References != "" {
			s += " → " + c.References
		}
		cols[i] = s
	}
	return activities.KnownFacts{Schemas: []activities.TableFact{{Table: r.Name, Text: fmt.Sprintf("%s (%d rows)", strings.Join(cols, ", "), r.Rows)}}}
}

// SampleResult is sample_rows' result.
type SampleResult struct {
	Table string `json:"table"`
	Result
}

// Facts implements activities.FactsReporter: the first rows, compact.
func (r SampleResult) Facts() activities.KnownFacts {
	rows := r.Rows[:min(len(r.Rows), 3)]
	b, _ := json.Marshal(rows)
	return activities.KnownFacts{Samples: []activities.TableFact{{Table: r.Table, Text: strings.Join(r.Columns, ", ") + ": " + string(b)}}}
}

// QueryResult is run_sql's result.
type QueryResult struct {
	SQL string `json:"sql"`
	Result
}

// Facts implements activities.FactsReporter: the statement that ran, and
// its value when it returned one.
func (r QueryResult) Facts() activities.KnownFacts {
	out := fmt.Sprintf("%d rows", len(r.Rows))
	if len(r.Rows) == 1 && len(r.Columns) == 1 {
		out = fmt.Sprintf("= %v", r.Rows[0][0])
	}
	return activities.KnownFacts{SQLHistory: []string{fmt.Sprintf("%s → %s", strings.Join(strings.Fields(r.SQL), " "), out)}}
}
