package sqltools

import (
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ctxflow/ctxflow/internal/pgtest"
)

// demo opens the demo database, generated into a temporary folder.
func demo(t *testing.T) *DB {
	t.Helper()
	path := filepath.Join(t.TempDir(), "shop.db")
	if err := EnsureDemo(t.Context(), path); err != nil {
		t.Fatal(err)
	}
	db, err := OpenSQLite(path, Options{MaxRows: 50, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func TestDemoDatabase(t *testing.T) {
	db := demo(t)
	tables, err := db.Tables(t.Context())
	if err != nil || strings.Join(tables, ",") != strings.Join(DemoTables, ",") {
		t.Fatalf("tables %v, %v; want %v", tables, err, DemoTables)
	}
	total := int64(0)
	for _, name := range tables {
		tbl, err := db.Describe(t.Context(), name)
		if err != nil || len(tbl.Columns) < 2 {
			t.Fatalf("describe %s: %+v, %v", name, tbl, err)
		}
		total += tbl.Rows
	}
	if total < 10000 {
		t.Errorf("the demo holds %d rows", total)
	}
	orders, _ := db.Describe(t.Context(), "orders")
	if c := orders.Columns[1]; c.Name != "customer_id" || c.References != "customers.id" || c.Nullable {
		t.Errorf("orders.customer_id = %+v", c)
	}
	// Generated the same on every machine.
	res, err := db.Query(t.Context(), "SELECT count(*), round(sum(total), 2) FROM orders WHERE status = 'delivered'")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("delivered orders: %v", res.Rows[0])
	again := demo(t)
	res2, _ := again.Query(t.Context(), "SELECT count(*), round(sum(total), 2) FROM orders WHERE status = 'delivered'")
	if res.Rows[0][0] != res2.Rows[0][0] || res.Rows[0][1] != res2.Rows[0][1] {
		t.Errorf("two generations differ: %v vs %v", res.Rows[0], res2.Rows[0])
	}
}

// The database itself refuses anything but one read-only query.
func TestReadOnlyIsEnforcedByTheDatabase(t *testing.T) {
	testReadOnly(t, demo(t))
}

func testReadOnly(t *testing.T, db *DB) {
	for _, stmt := range []string{
		"INSERT INTO carriers (id, name) VALUES (9, 'x')",
		"UPDATE products SET price = 0",
		"DELETE FROM reviews",
		"DROP TABLE reviews",
		"CREATE TABLE evil (x int)",
		"ALTER TABLE carriers ADD COLUMN y int",
		"ATTACH DATABASE '/tmp/evil.db' AS evil",
		"PRAGMA user_version = 7",
		"PRAGMA query_only = 0",
		"SELECT 1; DELETE FROM reviews",
		"SELECT 1; SELECT 2",
		"WITH d AS (DELETE FROM reviews RETURNING id) SELECT * FROM d",
	} {
		_, err := db.Query(t.Context(), stmt)
		if !errors.Is(err, ErrStatement) {
			t.Errorf("%s: %v, want it refused", stmt, err)
		}
	}
	res, err := db.Query(t.Context(), "SELECT count(*) FROM reviews;")
	if err != nil || len(res.Rows) != 1 || res.Rows[0][0] == nil {
		t.Fatalf("a read after the refusals: %+v %v", res, err)
	}
	if n := res.Rows[0][0]; n != int64(800) {
		t.Errorf("reviews = %v after the refusals, want 800 (nothing written)", n)
	}
}

func TestRowCapAndErrors(t *testing.T) {
	db := demo(t)
	res, err := db.Query(t.Context(), "SELECT id, name FROM customers ORDER BY id")
	if err != nil || len(res.Rows) != 50 || !res.Truncated || res.Columns[1] != "name" || res.Rows[0][0] != int64(1) {
		t.Fatalf("capped query: %d rows, truncated %v, %v", len(res.Rows), res.Truncated, err)
	}
	for _, stmt := range []string{"SELEC 1", "SELECT nope FROM customers", "SELECT * FROM nowhere", "", "SELECT ?", "SELECT @m()", "SELECT :x", "SELECT $1"} {
		if _, err := db.Query(t.Context(), stmt); !errors.Is(err, ErrStatement) {
			t.Errorf("%q: %v, want ErrStatement", stmt, err)
		}
	}
	if _, err := db.Describe(t.Context(), "nowhere"); !errors.Is(err, ErrStatement) || !strings.Contains(err.Error(), "orders") {
		t.Errorf("describe of an unknown table: %v", err)
	}
	if _, err := db.Sample(t.Context(), "x; DROP TABLE orders", 3); !errors.Is(err, ErrStatement) {
		t.Errorf("sample of a bad name: %v", err)
	}
	s, err := db.Sample(t.Context(), "carriers", 3)
	if err != nil || len(s.Rows) != 3 {
		t.Errorf("sample: %+v %v", s, err)
	}
}

// pgDemo loads the demo into a database of the project's own PostgreSQL
// server and opens it read-only, with MaxRows 50.
func pgDemo(t *testing.T) *DB {
	t.Helper()
	url := pgtest.Database(t)
	rw, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer rw.Close()
	if err := LoadDemo(t.Context(), rw, Postgres); err != nil {
		t.Fatal(err)
	}
	db, err := OpenPostgres(t.Context(), url, Options{MaxRows: 50})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// The same refusals on PostgreSQL (the project's own server).
func TestReadOnlyIsEnforcedByPostgres(t *testing.T) {
	db := pgDemo(t)
	testReadOnly(t, db)
	tables, err := db.Tables(t.Context())
	if err != nil || strings.Join(tables, ",") != strings.Join(DemoTables, ",") {
		t.Fatalf("tables %v, %v", tables, err)
	}
	orders, err := db.Describe(t.Context(), "orders")
	if err != nil || orders.Rows != 2000 || orders.Columns[1].References != "customers.id" || !orders.Columns[0].PrimaryKey {
		t.Errorf("describe orders: %+v %v", orders, err)
	}
	res, err := db.Query(t.Context(), "SELECT id, name FROM customers ORDER BY id")
	if err != nil || len(res.Rows) != 50 || !res.Truncated {
		t.Errorf("capped query: %d rows, truncated %v, %v", len(res.Rows), res.Truncated, err)
	}
	if _, err := db.Query(t.Context(), "SELECT $1"); !errors.Is(err, ErrStatement) {
		t.Errorf("a parameter without a value: %v, want ErrStatement", err)
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Stop()
	os.Exit(code)
}

// A database locked by another process is the infrastructure's trouble,
// not the statement's: the query fails after the busy timeout, retryably,
// also when SQLite's parser has not read the schema yet.
func TestLockedDatabaseIsNotTheStatementsFault(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shop.db")
	if err := EnsureDemo(t.Context(), path); err != nil {
		t.Fatal(err)
	}
	rw, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer rw.Close()
	conn, err := rw.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	db, err := OpenSQLite(path, Options{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := conn.ExecContext(t.Context(), "BEGIN EXCLUSIVE"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Query(t.Context(), "SELECT count(*) FROM orders"); err == nil || errors.Is(err, ErrStatement) {
		t.Errorf("a query of a locked database: %v, want an error that is not the statement's", err)
	}
	if _, err := conn.ExecContext(t.Context(), "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	if res, err := db.Query(t.Context(), "SELECT count(*) FROM orders"); err != nil || len(res.Rows) != 1 {
		t.Errorf("after the lock: %+v %v", res, err)
	}
}
