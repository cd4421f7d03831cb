package sqltools

import (
	"crypto/sha256"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ctxflow/ctxflow/activities"
)

// fuzzDB is the demo database for a fuzz target, in a temporary folder,
// opened read-only as the agent opens it (short timeout, small row cap,
// to keep executions fast), with its tools by name and a fingerprint
// taken through a connection of its own.
type fuzzDB struct {
	db    *DB
	tools []activities.Tool
	path  string
	raw   *sql.DB
	want  string
}

func openFuzzDB(f *testing.F) *fuzzDB {
	path := filepath.Join(f.TempDir(), "shop.db")
	if err := EnsureDemo(f.Context(), path); err != nil {
		f.Fatal(err)
	}
	db, err := OpenSQLite(path, Options{MaxRows: 20, Timeout: 250 * time.Millisecond})
	if err != nil {
		f.Fatal(err)
	}
	raw, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = db.Close(); _ = raw.Close() })
	d := &fuzzDB{db: db, tools: db.Tools(), path: path, raw: raw}
	d.want = d.fingerprint(f)
	return d
}

// fingerprint is what a write would change: the schema, every table's row
// count, the sum of a few columns, and the file's size, time and hash.
func (d *fuzzDB) fingerprint(tb testing.TB) string {
	var b strings.Builder
	rows, err := d.raw.Query(`SELECT type, name, coalesce(sql, '') FROM sqlite_master ORDER BY type, name`)
	if err != nil {
		tb.Fatal(err)
	}
	for rows.Next() {
		var typ, name, ddl string
		if err := rows.Scan(&typ, &name, &ddl); err != nil {
			tb.Fatal(err)
		}
		fmt.Fprintf(&b, "%s %s %s\n", typ, name, ddl)
	}
	if err := rows.Close(); err != nil {
		tb.Fatal(err)
	}
	for _, t := range DemoTables {
		var n int64
		if err := d.raw.QueryRow(`SELECT count(*) FROM "` + t + `"`).Scan(&n); err != nil {
			tb.Fatal(err)
		}
		fmt.Fprintf(&b, "%s %d\n", t, n)
	}
	var sums string
	if err := d.raw.QueryRow(`SELECT (SELECT sum(total) FROM orders) || ' ' || (SELECT sum(price) FROM products) || ' ' ||
		(SELECT sum(quantity) FROM inventory) || ' ' || (SELECT group_concat(name) FROM carriers)`).Scan(&sums); err != nil {
		tb.Fatal(err)
	}
	b.WriteString(sums + "\n")
	entries, err := os.ReadDir(filepath.Dir(d.path))
	if err != nil {
		tb.Fatal(err)
	}
	for _, e := range entries { // no journal, no attached file, nothing new
		info, err := e.Info()
		if err != nil {
			tb.Fatal(err)
		}
		fmt.Fprintf(&b, "%s %d %s\n", e.Name(), info.Size(), info.ModTime().Format(time.RFC3339Nano))
	}
	content, err := os.ReadFile(d.path)
	if err != nil {
		tb.Fatal(err)
	}
	fmt.Fprintf(&b, "%x\n", sha256.Sum256(content))
	return b.String()
}

// check runs the call of a tool with args, then checks that it failed as
// an observation for the model or returned JSON, and wrote nothing.
func (d *fuzzDB) check(t *testing.T, tool activities.Tool, args []byte) {
	t.Helper()
	out, err := tool.Call(t.Context(), args)
	name := tool.Spec().Name
	switch {
	case err != nil:
		// On a healthy database every failure is the model's to fix: the
		// agent turns it into an error observation (never a retry, never a
		// failed task).
		if !errors.Is(err, activities.ErrToolArgs) && !errors.Is(err, activities.ErrToolFailed) {
			t.Fatalf("%s(%q): %v is neither ErrToolArgs nor ErrToolFailed", name, args, err)
		}
		if errors.Is(err, activities.ErrToolFailed) && !errors.Is(err, ErrStatement) {
			t.Fatalf("%s(%q): a tool error that is not a refused statement: %v", name, args, err)
		}
	default:
		// The agent stores the result's JSON; one it cannot encode (a
		// float the query made infinite) becomes an error observation too.
		var unsupported *json.UnsupportedValueError
		if _, err := json.Marshal(out); err != nil && !errors.As(err, &unsupported) {
			t.Fatalf("%s(%q): result %+v does not encode: %v", name, args, out, err)
		}
		fr, ok := out.(activities.FactsReporter)
		if !ok {
			t.Fatalf("%s(%q): %T reports no facts", name, args, out)
		}
		_ = fr.Facts()
		if r, ok := out.(QueryResult); ok && len(r.Rows) > 20 {
			t.Fatalf("run_sql(%q): %d rows, over the cap of 20", args, len(r.Rows))
		}
	}
	if got := d.fingerprint(t); got != d.want {
		t.Fatalf("%s(%q) changed the database:\n%s\nwant\n%s", name, args, got, d.want)
	}
}

// FuzzToolArgs: whatever arguments the model sends to a database tool
// (list_tables, describe_table, sample_rows, run_sql), the call never
// panics or writes, and fails only as an error observation (arguments that
// do not fit the schema, or a statement the database refused).
func FuzzToolArgs(f *testing.F) {
	for _, s := range []struct {
		tool uint8
		args string
	}{
		{0, `{}`}, {0, ``}, {0, `null`}, {0, `{"schema":"main"}`}, {0, `[]`},
		{1, `{"table":"orders"}`}, {1, `{"table":"orders; DROP TABLE orders"}`}, {1, `{"table":7}`}, {1, `{"TABLE":"orders"}`},
		{1, `{"table":"sqlite_master"}`}, {1, `{"table":"orders","table":"x"}`},
		{2, `{"table":"carriers","limit":2}`}, {2, `{"table":"orders","limit":"all"}`}, {2, `{"table":"orders","limit":1e400}`},
		{2, `{"table":"orders","limit":-9223372036854775808}`}, {2, `{"table":"orders","limit":2.5}`},
		{3, `{"sql":"SELECT count(*) FROM orders"}`}, {3, `{"sql":"DELETE FROM reviews"}`}, {3, `{"sql":"SELECT 1; DROP TABLE orders"}`},
		{3, `{"sql":["SELECT 1"]}`}, {3, `{"sql":"SELECT 1","extra":true}`}, {3, `{"sql":"SELECT 1"} trailing`},
	} {
		f.Add(s.tool, []byte(s.args))
	}
	d := openFuzzDB(f)
	f.Fuzz(func(t *testing.T, tool uint8, args []byte) {
		d.check(t, d.tools[int(tool)%len(d.tools)], args)
	})
}

// FuzzRunSQL: whatever statement the model sends to run_sql, it runs as
// one read-only query or is refused as a statement; the database never
// changes.
func FuzzRunSQL(f *testing.F) {
	for _, s := range []string{
		"SELECT count(*) FROM orders",
		"SELECT id, name FROM customers ORDER BY id",
		"WITH c AS (SELECT country, count(*) AS n FROM customers GROUP BY country) SELECT sum(n) FROM c",
		"SELECT * FROM orders o JOIN customers c ON c.id = o.customer_id WHERE o.total > 100;",
		"INSERT INTO carriers (id, name) VALUES (9, 'x')",
		"UPDATE products SET price = 0",
		"DELETE FROM reviews",
		"DROP TABLE reviews",
		"CREATE TABLE evil (x int)",
		"CREATE TEMP TABLE t AS SELECT 1",
		"ALTER TABLE carriers ADD COLUMN y int",
		"ATTACH DATABASE 'evil.db' AS evil",
		"PRAGMA query_only = 0",
		"PRAGMA writable_schema = 1",
		"VACUUM INTO 'copy.db'",
		"REPLACE INTO carriers VALUES (1, 'x')",
		"SELECT 1; DELETE FROM reviews",
		"SELECT 1) AS q; DELETE FROM reviews; SELECT * FROM (SELECT 1",
		"WITH d AS (DELETE FROM reviews RETURNING id) SELECT * FROM d",
		"SELECT * FROM pragma_table_info('orders')",
		"SELECT load_extension('x')",
		"SELECT 1e999, -1e999, 0.0/0",
		"SELECT randomblob(100), zeroblob(10), x'00ff'",
		"WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n+1 FROM r) SELECT count(*) FROM r",
		"SELECT * FROM orders a, orders b, orders c",
		"-- comment\nSELECT 1 /* block */",
		"SELECT '\x00'",
		"",
		";",
	} {
		f.Add(s)
	}
	d := openFuzzDB(f)
	runSQL := d.tools[3]
	f.Fuzz(func(t *testing.T, statement string) {
		args, err := json.Marshal(map[string]string{"sql": statement})
		if err != nil {
			t.Fatal(err)
		}
		d.check(t, runSQL, args)
	})
}
