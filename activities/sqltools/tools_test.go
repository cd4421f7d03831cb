package sqltools

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ctxflow/ctxflow/activities"
)

// tools are the demo database's tools by name.
func tools(t *testing.T, db *DB) map[string]activities.Tool {
	t.Helper()
	out := map[string]activities.Tool{}
	for _, tool := range db.Tools() {
		out[tool.Spec().Name] = tool
	}
	return out
}

// call runs a tool with JSON arguments.
func call(t *testing.T, tool activities.Tool, args string) (any, error) {
	t.Helper()
	return tool.Call(t.Context(), json.RawMessage(args))
}

// facts are the facts a tool's result reports (the agent merges them).
func facts(t *testing.T, out any) activities.KnownFacts {
	t.Helper()
	fr, ok := out.(activities.FactsReporter)
	if !ok {
		t.Fatalf("%T reports no facts", out)
	}
	return fr.Facts()
}

// TestTools runs the tools over one demo database (generating it is the
// slow part), opened with MaxRows 50.
func TestTools(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shop.db")
	if err := EnsureDemo(t.Context(), path); err != nil {
		t.Fatal(err)
	}
	db, err := OpenSQLite(path, Options{MaxRows: 50, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	t.Run("specs", func(t *testing.T) { testSpecs(t, db) })
	t.Run("list_tables", func(t *testing.T) { testListTables(t, db) })
	t.Run("describe_table", func(t *testing.T) { testDescribeTable(t, db) })
	t.Run("refusals", func(t *testing.T) { testRefusals(t, db) })
	t.Run("sample_rows", func(t *testing.T) { testSampleRows(t, db) })
	t.Run("run_sql", func(t *testing.T) { testRunSQL(t, db) })
	t.Run("infrastructure failure", func(t *testing.T) { testInfrastructureFailure(t, path) })
}

func testSpecs(t *testing.T, db *DB) {
	var names []string
	for _, tool := range db.Tools() {
		names = append(names, tool.Spec().Name)
		if p := tool.Policy(); p != (activities.ToolPolicy{Timeout: 30 * time.Second, ReadOnly: true}) {
			t.Errorf("%s: policy %+v", tool.Spec().Name, p)
		}
		if info := tool.Policy().Info(tool.Spec().Name); info.Attempts != 3 {
			t.Errorf("%s: %d attempts, want retries (read-only)", tool.Spec().Name, info.Attempts)
		}
	}
	if strings.Join(names, ",") != "list_tables,describe_table,sample_rows,run_sql" {
		t.Fatalf("tools %v", names)
	}
	ts := tools(t, db)
	for name, want := range map[string]string{
		"list_tables":    `{"type":"object"}`,
		"describe_table": `{"type":"object","properties":{"table":{"type":"string","description":"the table's name"}},"required":["table"]}`,
		"sample_rows": `{"type":"object","properties":{"limit":{"type":"integer","description":"how many rows (default 5, at most 20)"},` +
			`"table":{"type":"string","description":"the table's name"}},"required":["table"]}`,
		"run_sql": `{"type":"object","properties":{"sql":{"type":"string","description":"one SELECT (or WITH ... SELECT) statement"}},"required":["sql"]}`,
	} {
		if got := string(ts[name].Spec().Parameters); got != want {
			t.Errorf("%s schema = %s\nwant %s", name, got, want)
		}
	}
	for name, says := range map[string]string{"list_tables": "sqlite", "run_sql": "at most 50"} {
		if d := ts[name].Spec().Description; !strings.Contains(d, says) {
			t.Errorf("%s description %q does not say %q", name, d, says)
		}
	}
}

func testListTables(t *testing.T, db *DB) {
	tool := tools(t, db)["list_tables"]
	for _, args := range []string{`{}`, ``, `null`} {
		out, err := call(t, tool, args)
		if err != nil {
			t.Fatalf("list_tables(%q): %v", args, err)
		}
		want := TablesResult{Database: "shop.db", Tables: DemoTables}
		if !reflect.DeepEqual(out, want) {
			t.Fatalf("list_tables = %+v, want %+v", out, want)
		}
		if f := facts(t, out); !reflect.DeepEqual(f, activities.KnownFacts{Tables: DemoTables}) {
			t.Errorf("facts = %+v", f)
		}
	}
	if _, err := call(t, tool, `{"schema": "main"}`); !errors.Is(err, activities.ErrToolArgs) {
		t.Errorf("an unknown argument: %v, want ErrToolArgs", err)
	}
}

func testDescribeTable(t *testing.T, db *DB) {
	tool := tools(t, db)["describe_table"]
	tests := []struct {
		table string
		rows  int64
		fact  string
	}{
		{"customers", 500, "id INTEGER pk, name TEXT, email TEXT, city TEXT, country TEXT, joined_on TEXT (500 rows)"},
		{"orders", 2000, "id INTEGER pk, customer_id INTEGER → customers.id, address_id INTEGER → addresses.id, ordered_at TEXT, " +
			"status TEXT, total DOUBLE PRECISION (2000 rows)"},
		{"inventory", 640, "product_id INTEGER pk → products.id, warehouse_id INTEGER pk → warehouses.id, quantity INTEGER (640 rows)"},
		{"categories", 12, "id INTEGER pk, name TEXT, parent_id INTEGER → categories.id (12 rows)"},
	}
	for _, tc := range tests {
		t.Run(tc.table, func(t *testing.T) {
			out, err := call(t, tool, `{"table": "`+tc.table+`"}`)
			if err != nil {
				t.Fatal(err)
			}
			res, ok := out.(TableResult)
			if !ok || res.Name != tc.table || res.Rows != tc.rows {
				t.Fatalf("describe_table = %#v", out)
			}
			f := facts(t, out)
			if len(f.Schemas) != 1 || f.Schemas[0].Table != tc.table || f.Schemas[0].Text != tc.fact {
				t.Errorf("facts = %+v\nwant a schema of %s: %q", f, tc.table, tc.fact)
			}
			if len(f.Tables)+len(f.Samples)+len(f.SQLHistory)+len(f.ErrorHistory) != 0 {
				t.Errorf("describe_table reports more than a schema: %+v", f)
			}
		})
	}
	orders, _ := call(t, tool, `{"table": "orders"}`)
	if c := orders.(TableResult).Columns[1]; c != (Column{Name: "customer_id", Type: "INTEGER", References: "customers.id"}) {
		t.Errorf("orders.customer_id = %+v", c)
	}
}

func testRefusals(t *testing.T, db *DB) {
	ts := tools(t, db)
	tests := []struct {
		tool, args string
		want       error
		says       string
	}{
		{"describe_table", `{"table": "nowhere"}`, activities.ErrToolFailed, `no table "nowhere" (the tables are addresses, carriers,`},
		{"describe_table", `{"table": "orders; DROP TABLE orders"}`, activities.ErrToolFailed, "is not a table name"},
		{"describe_table", `{"table": ""}`, activities.ErrToolFailed, "is not a table name"},
		{"describe_table", `{}`, activities.ErrToolArgs, "missing table"},
		{"describe_table", `{"table": 7}`, activities.ErrToolArgs, "table"},
		{"sample_rows", `{"table": "nowhere", "limit": 2}`, activities.ErrToolFailed, `no table "nowhere"`},
		{"sample_rows", `{"table": "orders", "limit": "all"}`, activities.ErrToolArgs, "limit"},
		{"sample_rows", `{"limit": 3}`, activities.ErrToolArgs, "missing table"},
		{"run_sql", `{"sql": "DELETE FROM reviews"}`, activities.ErrToolFailed, ErrStatement.Error()},
		{"run_sql", `{"sql": "UPDATE products SET price = 0"}`, activities.ErrToolFailed, ErrStatement.Error()},
		{"run_sql", `{"sql": "SELECT nope FROM customers"}`, activities.ErrToolFailed, "no such column: nope"},
		{"run_sql", `{"sql": "   "}`, activities.ErrToolFailed, "the statement is empty"},
		{"run_sql", `{"query": "SELECT 1"}`, activities.ErrToolArgs, `missing sql`},
	}
	for _, tc := range tests {
		t.Run(tc.tool+" "+tc.args, func(t *testing.T) {
			_, err := call(t, ts[tc.tool], tc.args)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("error = %v, want %v saying %q", err, tc.want, tc.says)
			}
			if tc.want == activities.ErrToolFailed && !errors.Is(err, ErrStatement) {
				t.Errorf("a refusal that does not wrap ErrStatement: %v", err)
			}
		})
	}
	// Nothing was written by the refused statements.
	out, err := call(t, ts["run_sql"], `{"sql": "SELECT count(*) AS n, min(price) AS cheapest FROM products"}`)
	if err != nil {
		t.Fatal(err)
	}
	if r := out.(QueryResult).Rows[0]; r[0] != int64(200) || r[1] == 0.0 {
		t.Errorf("products after the refusals: %v", r)
	}
	if n, _ := call(t, ts["run_sql"], `{"sql": "SELECT count(*) FROM reviews"}`); n.(QueryResult).Rows[0][0] != int64(800) {
		t.Errorf("reviews after the refusals: %v", n)
	}
}

func testSampleRows(t *testing.T, db *DB) {
	tool := tools(t, db)["sample_rows"]
	tests := []struct {
		args string
		rows int
	}{
		{`{"table": "customers"}`, 5},
		{`{"table": "customers", "limit": 0}`, 5},
		{`{"table": "customers", "limit": -3}`, 5},
		{`{"table": "customers", "limit": 1}`, 1},
		{`{"table": "customers", "limit": 12}`, 12},
		{`{"table": "customers", "limit": 20}`, 20},
		{`{"table": "customers", "limit": 1000}`, 20},
		{`{"table": "carriers", "limit": 10}`, 4}, // all there is
	}
	for _, tc := range tests {
		t.Run(tc.args, func(t *testing.T) {
			out, err := call(t, tool, tc.args)
			if err != nil {
				t.Fatal(err)
			}
			res := out.(SampleResult)
			if len(res.Rows) != tc.rows || res.Truncated {
				t.Fatalf("%d rows (truncated %v), want %d", len(res.Rows), res.Truncated, tc.rows)
			}
			f := facts(t, out)
			if len(f.Samples) != 1 || f.Samples[0].Table != res.Table {
				t.Fatalf("facts = %+v", f)
			}
			// The fact holds the columns and at most three rows.
			cols, rows, ok := strings.Cut(f.Samples[0].Text, ": ")
			var got [][]any
			if !ok || cols != strings.Join(res.Columns, ", ") || json.Unmarshal([]byte(rows), &got) != nil || len(got) != min(tc.rows, 3) {
				t.Errorf("sample fact = %q", f.Samples[0].Text)
			}
		})
	}
	out, _ := call(t, tool, `{"table": "carriers", "limit": 2}`)
	want := `{"table":"carriers","columns":["id","name"],"rows":[[1,"DHL"],[2,"UPS"]]}`
	if b, _ := json.Marshal(out); string(b) != want {
		t.Errorf("sample_rows JSON = %s, want %s", b, want)
	}
	if f := facts(t, out); f.Samples[0].Text != `id, name: [[1,"DHL"],[2,"UPS"]]` {
		t.Errorf("sample fact = %q", f.Samples[0].Text)
	}
}

func testRunSQL(t *testing.T, db *DB) {
	tool := tools(t, db)["run_sql"]
	tests := []struct {
		name      string
		sql       string
		rows      int
		truncated bool
		history   string
	}{
		{"a count", "SELECT count(*) FROM customers", 1, false, "SELECT count(*) FROM customers → = 500"},
		{"a trailing semicolon", "SELECT count(*) FROM orders;", 1, false, "SELECT count(*) FROM orders; → = 2000"},
		{"blanks folded in the history", "SELECT  name\n\tFROM carriers\n  ORDER BY id", 4, false, "SELECT name FROM carriers ORDER BY id → 4 rows"},
		{"one value of several columns", "SELECT id, name FROM carriers WHERE id = 4", 1, false, "SELECT id, name FROM carriers WHERE id = 4 → 1 rows"},
		{"capped at MaxRows", "SELECT id, email FROM customers ORDER BY id", 50, true, "SELECT id, email FROM customers ORDER BY id → 50 rows"},
		{"exactly MaxRows is not truncated", "SELECT id FROM customers ORDER BY id LIMIT 50", 50, false, "SELECT id FROM customers ORDER BY id LIMIT 50 → 50 rows"},
		{"a CTE", "WITH c AS (SELECT country, count(*) AS n FROM customers GROUP BY country) SELECT sum(n) FROM c", 1, false,
			"WITH c AS (SELECT country, count(*) AS n FROM customers GROUP BY country) SELECT sum(n) FROM c → = 500"},
		{"nothing found", "SELECT * FROM customers WHERE id < 0", 0, false, "SELECT * FROM customers WHERE id < 0 → 0 rows"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args, _ := json.Marshal(map[string]string{"sql": tc.sql})
			out, err := tool.Call(t.Context(), args)
			if err != nil {
				t.Fatal(err)
			}
			res := out.(QueryResult)
			if res.SQL != tc.sql || len(res.Rows) != tc.rows || res.Truncated != tc.truncated {
				t.Fatalf("run_sql = %q, %d rows, truncated %v; want %d rows, truncated %v", res.SQL, len(res.Rows), res.Truncated, tc.rows, tc.truncated)
			}
			if f := facts(t, out); !reflect.DeepEqual(f, activities.KnownFacts{SQLHistory: []string{tc.history}}) {
				t.Errorf("facts = %+v, want history %q", f, tc.history)
			}
		})
	}
	out, _ := call(t, tool, `{"sql": "SELECT id, email FROM customers ORDER BY id"}`)
	res := out.(QueryResult)
	if res.Rows[0][0] != int64(1) || res.Rows[49][0] != int64(50) || res.Rows[49][1] != "customer50@example.com" {
		t.Errorf("capped rows: first %v, last %v", res.Rows[0], res.Rows[49])
	}
	// The agent stores the JSON; the offline planner reads sql, columns and rows.
	out, _ = call(t, tool, `{"sql": "SELECT count(*) AS n FROM carriers"}`)
	if b, _ := json.Marshal(out); string(b) != `{"sql":"SELECT count(*) AS n FROM carriers","columns":["n"],"rows":[[4]]}` {
		t.Errorf("run_sql JSON = %s", b)
	}
	if b, _ := json.Marshal(res); !strings.HasSuffix(string(b), `,"truncated":true}`) {
		t.Errorf("a capped result does not say so: …%s", b[len(b)-40:])
	}
}

// A database that fails is the tool's infrastructure failing (retried),
// not a refusal for the model to fix.
func testInfrastructureFailure(t *testing.T, path string) {
	db, err := OpenSQLite(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ts := tools(t, db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	for name, args := range map[string]string{
		"list_tables": `{}`, "describe_table": `{"table": "orders"}`, "sample_rows": `{"table": "orders"}`, "run_sql": `{"sql": "SELECT 1"}`,
	} {
		_, err := call(t, ts[name], args)
		if err == nil || errors.Is(err, activities.ErrToolFailed) || errors.Is(err, activities.ErrToolArgs) {
			t.Errorf("%s on a closed database: %v, want an infrastructure error", name, err)
		}
	}
}
