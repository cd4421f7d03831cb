package sqltools

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/ctxflow/ctxflow/activities"
)

// The attack of issue 22: tenant beta's task escapes the one-statement
// wrapper run_sql used to build around its statement, turns query_only off
// and leaves a temp view on a pooled connection that every tenant shares.
const poison = "SELECT 1 WHERE 0) AS q; PRAGMA query_only=0; CREATE TEMP VIEW IF NOT EXISTS customers AS SELECT 'POISONED-BY-BETA' AS name; SELECT * FROM (SELECT 1"

// testIsolation runs, as tenant beta, statements that tried to change what
// others read, and checks that each was refused and that tenant acme's
// tasks, on whichever pooled connection, read the real table.
func testIsolation(t *testing.T, db *DB) {
	runSQL := tools(t, db)["run_sql"]
	beta := activities.WithTenant(t.Context(), "beta")
	for _, stmt := range []string{
		poison,
		"SELECT 1; PRAGMA query_only=0",
		"CREATE TEMP VIEW customers AS SELECT 'POISONED-BY-BETA' AS name",
		"SELECT id FROM customers) AS q /*",       // the wrapper's LIMIT, commented out
		"SELECT 1 /* */; SELECT 2",                // a second statement after a comment
		"SELECT * FROM pragma_database_list",      // the database's file path
		"SELECT file FROM pragma_database_list()", // likewise
		"SELECT 1; SET search_path TO pg_catalog", // PostgreSQL's session settings
		"DECLARE c CURSOR FOR SELECT 1",           // a cursor of its own
		"SELECT 1) AS q; DELETE FROM reviews; --", // the wrapper escaped again
		"COMMIT; SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE",
	} {
		args, _ := json.Marshal(map[string]string{"sql": stmt})
		if out, err := runSQL.Call(beta, args); !errors.Is(err, activities.ErrToolFailed) {
			t.Errorf("%q ran: %v %v", stmt, out, err)
		}
	}
	// A query whose effect on its session would outlive it on PostgreSQL,
	// were the transaction kept: it runs, and is gone with it.
	if db.dialect == Postgres {
		if _, err := db.Query(beta, "SELECT set_config('search_path', 'pg_catalog', false)"); err != nil {
			t.Errorf("set_config: %v", err)
		}
	}
	acme := activities.WithTenant(t.Context(), "acme")
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for range 20 { // many at once: every pooled connection
		wg.Go(func() {
			res, err := db.Query(acme, "SELECT count(*), min(name) FROM customers")
			if err != nil {
				errs <- err
				return
			}
			if got := fmt.Sprint(res.Rows); strings.Contains(got, "POISONED") || res.Rows[0][0] == int64(1) {
				errs <- fmt.Errorf("acme read %s", got)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// The cap holds without a LIMIT in the text, however the text ends
	// (PostgreSQL refuses a comment left open; SQLite ends it there).
	for _, stmt := range []string{"SELECT id FROM customers", "SELECT id FROM customers -- the end", "SELECT id FROM customers /* the end"} {
		res, err := db.Query(acme, stmt)
		if errors.Is(err, ErrStatement) && db.dialect == Postgres && strings.Contains(stmt, "/*") {
			continue
		}
		if err != nil || len(res.Rows) != db.opts.MaxRows || !res.Truncated {
			t.Errorf("%q: %d rows, truncated %v, %v; want the cap of %d", stmt, len(res.Rows), res.Truncated, err, db.opts.MaxRows)
		}
	}
}

func TestTenantsCannotChangeWhatOthersRead(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { testIsolation(t, demo(t)) })
	t.Run("postgres", func(t *testing.T) {
		db := pgDemo(t)
		testIsolation(t, db)
		res, err := db.Query(t.Context(), "SELECT current_setting('search_path')")
		if err != nil || strings.Contains(fmt.Sprint(res.Rows), "pg_catalog") && !strings.Contains(fmt.Sprint(res.Rows), "public") {
			t.Errorf("search_path after another tenant's set_config: %v %v", res.Rows, err)
		}
	})
}
