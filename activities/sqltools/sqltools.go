// Package sqltools is the agent's read-only SQL database: embedded SQLite
// (modernc.org/sqlite, pure Go) by default, PostgreSQL (pgx) when
// configured, and the built-in tools over it (list_tables, describe_table,
// sample_rows, run_sql).
//
// What runs is decided by the database engine, never by matching the text
// of a statement, and no statement can change a connection that another
// tenant's task uses next:
//   - SQLite is opened read-only (mode=ro, query_only, no database to
//     ATTACH), and SQLite's own parser checks every statement before it runs
//     (see checker): exactly one statement, with an authorizer that allows
//     only reading (no PRAGMA, no temp objects, no writes).
//   - PostgreSQL runs every statement as the query of a cursor
//     (DECLARE ... CURSOR FOR <statement>) in a READ ONLY transaction that
//     is rolled back, always over the extended protocol: the server refuses
//     a second statement and anything that is not a query, and whatever a
//     query sets for its session ends with the transaction.
//
// The row cap is applied outside the statement's text: SQLite's rows are
// read no further than the cap, PostgreSQL's cursor fetches no more. Each
// query has a timeout.
package sqltools

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Options bound the queries.
type Options struct {
	// Timeout bounds one query (default 10 s).
	Timeout time.Duration
	// MaxRows bounds the rows a query returns (default 200).
	MaxRows int
}

func (o Options) withDefaults() Options {
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.MaxRows <= 0 {
		o.MaxRows = 200
	}
	return o
}

// Dialects.
const (
	SQLite   = "sqlite"
	Postgres = "postgres"
)

// DB is a read-only SQL database. It is safe for concurrent use.
type DB struct {
	db      *sql.DB
	dialect string
	name    string // what the tools call it: a file name, or a database
	opts    Options
	check   *checker // SQLite's statements, before they run
}

// ErrStatement wraps a statement the database refused or could not run
// (a syntax error, an unknown table, a write refused as read-only): the
// model's to fix, never retried.
var ErrStatement = errors.New("the database refused the statement")

// busyTimeoutMS is how long SQLite waits for a locked database.
const busyTimeoutMS = 2000

// OpenSQLite opens a SQLite file read-only.
func OpenSQLite(path string, opts Options) (*DB, error) {
	db, err := sql.Open("sqlite", fmt.Sprintf("file:%s?mode=ro&_pragma=query_only(1)&_pragma=busy_timeout(%d)", path, busyTimeoutMS))
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	d := &DB{db: db, dialect: SQLite, name: path[strings.LastIndexByte(path, '/')+1:], opts: opts.withDefaults()}
	if err := d.ping(context.Background()); err != nil {
		db.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if d.check, err = openChecker(path); err != nil {
		db.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return d, nil
}

// OpenPostgres connects to a PostgreSQL database (a pgx connection URL);
// every transaction is read-only by default, and every query runs in an
// explicit READ ONLY one.
func OpenPostgres(ctx context.Context, url string, opts Options) (*DB, error) {
	conf, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("postgres URL: %w", err)
	}
	conf.RuntimeParams["default_transaction_read_only"] = "on"
	// The extended protocol, whatever the URL says: the server then takes
	// one statement a call (the simple protocol runs a script).
	conf.DefaultQueryExecMode = pgx.QueryExecModeExec
	db := stdlib.OpenDB(*conf)
	d := &DB{db: db, dialect: Postgres, name: conf.Database, opts: opts.withDefaults()}
	if err := d.ping(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("connect to postgres %s: %w", conf.Database, err)
	}
	return d, nil
}

func (d *DB) ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, d.opts.Timeout)
	defer cancel()
	return d.db.PingContext(ctx)
}

// Close closes the database.
func (d *DB) Close() error {
	if d.check != nil {
		d.check.close()
	}
	return d.db.Close()
}

// Name names the database for the tools.
func (d *DB) Name() string { return d.name }

// Result is what a query returned.
type Result struct {
	Columns []string `json:"columns"`
	Rows    [][]any  `json:"rows"`
	// Truncated reports that the query had more rows than the cap.
	Truncated bool `json:"truncated,omitempty"`
}

// trailing is one final semicolon, with the blanks around it.
var trailing = regexp.MustCompile(`;\s*$`)

// Query runs one read-only query (see the package doc) with args and
// returns at most MaxRows rows. A statement the database refuses is an
// error wrapping ErrStatement; anything else (the database unreachable, a
// timeout) is not.
func (d *DB) Query(ctx context.Context, statement string, args ...any) (Result, error) {
	statement = strings.TrimSpace(trailing.ReplaceAllString(statement, ""))
	if statement == "" {
		return Result{}, fmt.Errorf("%w: the statement is empty", ErrStatement)
	}
	if d.check != nil {
		if err := d.check.check(statement); err != nil {
			return Result{}, err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, d.opts.Timeout)
	defer cancel()
	var res Result
	err := d.run(ctx, func(q querier) error {
		rows, err := d.rows(ctx, q, statement, args)
		if err != nil {
			return err
		}
		defer rows.Close()
		if res.Columns, err = rows.Columns(); err != nil {
			return err
		}
		for rows.Next() {
			if len(res.Rows) == d.opts.MaxRows {
				res.Truncated = true
				break
			}
			vals := make([]any, len(res.Columns))
			ptrs := make([]any, len(vals))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				return err
			}
			for i, v := range vals {
				if b, ok := v.([]byte); ok {
					vals[i] = string(b)
				}
			}
			res.Rows = append(res.Rows, vals)
		}
		return rows.Err()
	})
	if err != nil {
		if ctx.Err() != nil {
			return Result{}, fmt.Errorf("%w: the query did not finish within %s", ErrStatement, d.opts.Timeout)
		}
		return Result{}, d.classify(err)
	}
	return res, nil
}

type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// rows starts a checked statement: on SQLite as it is, read no further
// than the cap; on PostgreSQL as a cursor's query, of which the cap's rows
// (and one more, to tell a cut) are fetched.
func (d *DB) rows(ctx context.Context, q querier, statement string, args []any) (*sql.Rows, error) {
	if d.dialect == SQLite {
		return q.QueryContext(ctx, statement, args...)
	}
	cur, err := q.QueryContext(ctx, "DECLARE ctxflow_q NO SCROLL CURSOR FOR "+statement, args...)
	if err != nil {
		return nil, err
	}
	if err := cur.Close(); err != nil {
		return nil, err
	}
	return q.QueryContext(ctx, fmt.Sprintf("FETCH FORWARD %d FROM ctxflow_q", d.opts.MaxRows+1))
}

// run runs fn on one connection set up for a read-only query: on SQLite
// no database may be attached; on Postgres a READ ONLY transaction, rolled
// back after.
func (d *DB) run(ctx context.Context, fn func(querier) error) error {
	conn, err := d.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if d.dialect == SQLite {
		if _, err := sqlite.Limit(conn, sqlite3.SQLITE_LIMIT_ATTACHED, 0); err != nil {
			return err
		}
		return fn(conn)
	}
	tx, err := conn.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // read-only: nothing to keep
	return fn(tx)
}

// classify wraps the database's refusals in ErrStatement.
func (d *DB) classify(err error) error {
	var pg *pgconn.PgError
	var lite *sqlite.Error
	switch {
	case unbound(err):
		return fmt.Errorf("%w: %v (the statement has a parameter; none is bound)", ErrStatement, err)
	case errors.As(err, &pg):
		// Class 08 (connection) and 57 (operator intervention) are the
		// server's trouble, not the statement's.
		if !strings.HasPrefix(pg.Code, "08") && !strings.HasPrefix(pg.Code, "57") {
			return fmt.Errorf("%w: %s", ErrStatement, pg.Message)
		}
	case errors.As(err, &lite):
		switch lite.Code() & 0xff {
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_NOMEM:
		default:
			return fmt.Errorf("%w: %s", ErrStatement, lite.Error())
		}
	}
	return err
}

// unbound reports the refusal to run a statement with parameters that have
// no value: a plain error of the driver, before the database sees it
// (modernc's "missing named argument", "missing argument with index",
// pgx's "expected N arguments, got M"), or PostgreSQL's protocol error for
// a bind without them. The tools bind none, so it is the
// statement's fault.
func unbound(err error) bool {
	if pg := (*pgconn.PgError)(nil); errors.As(err, &pg) { // over the extended protocol, the server's refusal
		return pg.Code == "08P01" && strings.HasPrefix(pg.Message, "bind message supplies ")
	}
	msg := err.Error()
	return strings.HasPrefix(msg, "missing named argument ") || strings.HasPrefix(msg, "missing argument with index ") ||
		strings.HasPrefix(msg, "expected ") && strings.Contains(msg, " arguments, got ")
}

// Tables lists the tables, sorted.
func (d *DB) Tables(ctx context.Context) ([]string, error) {
	q := `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name`
	if d.dialect == Postgres {
		q = `SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' ORDER BY table_name`
	}
	res, err := d.Query(ctx, q)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(res.Rows))
	for i, r := range res.Rows {
		out[i] = fmt.Sprint(r[0])
	}
	return out, nil
}

// Column describes a column of a table.
type Column struct {
	Name       string `json:"name"`
	Type       string `json:"type"`
	Nullable   bool   `json:"nullable"`
	PrimaryKey bool   `json:"primaryKey,omitempty"`
	// References is "table.column" for a foreign key.
	References string `json:"references,omitempty"`
}

// Table describes a table.
type Table struct {
	Name    string   `json:"name"`
	Columns []Column `json:"columns"`
	Rows    int64    `json:"rows"`
}

var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

// Describe returns a table's columns, foreign keys and row count. An
// unknown table wraps ErrStatement.
func (d *DB) Describe(ctx context.Context, table string) (Table, error) {
	if err := d.checkTable(ctx, table); err != nil {
		return Table{}, err
	}
	t := Table{Name: table}
	var res Result
	var err error
	if d.dialect == SQLite {
		res, err = d.Query(ctx, `SELECT c.name, c.type, c."notnull", c.pk, f."table", f."to"
			FROM pragma_table_info(?) AS c LEFT JOIN pragma_foreign_key_list(?) AS f ON f."from" = c.name ORDER BY c.cid`, table, table)
	} else {
		res, err = d.Query(ctx, `SELECT c.column_name, c.data_type, CASE WHEN c.is_nullable = 'NO' THEN 1 ELSE 0 END,
				CASE WHEN EXISTS (SELECT 1 FROM information_schema.key_column_usage k JOIN information_schema.table_constraints tc
					ON tc.constraint_name = k.constraint_name AND tc.constraint_type = 'PRIMARY KEY'
					WHERE k.table_name = c.table_name AND k.column_name = c.column_name) THEN 1 ELSE 0 END,
				(SELECT ccu.table_name FROM information_schema.key_column_usage k JOIN information_schema.table_constraints tc
					ON tc.constraint_name = k.constraint_name AND tc.constraint_type = 'FOREIGN KEY'
					JOIN information_schema.constraint_column_usage ccu ON ccu.constraint_name = tc.constraint_name
					WHERE k.table_name = c.table_name AND k.column_name = c.column_name LIMIT 1),
				(SELECT ccu.column_name FROM information_schema.key_column_usage k JOIN information_schema.table_constraints tc
					ON tc.constraint_name = k.constraint_name AND tc.constraint_type = 'FOREIGN KEY'
					JOIN information_schema.constraint_column_usage ccu ON ccu.constraint_name = tc.constraint_name
					WHERE k.table_name = c.table_name AND k.column_name = c.column_name LIMIT 1)
			FROM information_schema.columns c WHERE c.table_schema = current_schema() AND c.table_name = $1 ORDER BY c.ordinal_position`, table)
	}
	if err != nil {
		return t, err
	}
	for _, r := range res.Rows {
		c := Column{Name: fmt.Sprint(r[0]), Type: fmt.Sprint(r[1]), Nullable: fmt.Sprint(r[2]) == "0", PrimaryKey: fmt.Sprint(r[3]) != "0"}
		if r[4] != nil {
			c.References = fmt.Sprint(r[4]) + "." + fmt.Sprint(r[5])
		}
		t.Columns = append(t.Columns, c)
	}
	count, err := d.Query(ctx, "SELECT count(*) FROM "+d.quote(table))
	if err != nil {
		return t, err
	}
	_, _ = fmt.Sscan(fmt.Sprint(count.Rows[0][0]), &t.Rows)
	return t, nil
}

// Sample returns up to n rows of a table.
func (d *DB) Sample(ctx context.Context, table string, n int) (Result, error) {
	if err := d.checkTable(ctx, table); err != nil {
		return Result{}, err
	}
	n = min(max(n, 1), d.opts.MaxRows)
	return d.Query(ctx, fmt.Sprintf("SELECT * FROM %s LIMIT %d", d.quote(table), n))
}

// checkTable refuses a name that is not a table of the database.
func (d *DB) checkTable(ctx context.Context, table string) error {
	if !identifier.MatchString(table) {
		return fmt.Errorf("%w: %q is not a table name", ErrStatement, table)
	}
	tables, err := d.Tables(ctx)
	if err != nil {
		return err
	}
	for _, t := range tables {
		if t == table {
			return nil
		}
	}
	return fmt.Errorf("%w: no table %q (the tables are %s)", ErrStatement, table, strings.Join(tables, ", "))
}

func (d *DB) quote(ident string) string { return `"` + ident + `"` }
