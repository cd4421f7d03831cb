package pgtranscript

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// The schema's migrations: migrations/NNNN_name.sql, applied in order of
// NNNN. A migration, once released, never changes: a change is a new file.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrateLock is the advisory lock key that serialises migrations: "ctxflow"
// in ASCII.
const migrateLock = 0x63_74_78_66_6c_6f_77

type migration struct {
	version int
	name    string // file name
	sql     string
}

func migrations() ([]migration, error) {
	names, err := fs.Glob(migrationFiles, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, p := range names {
		name := strings.TrimPrefix(p, "migrations/")
		num, _, ok := strings.Cut(name, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %s: the name must start with a positive number and _", name)
		}
		b, err := migrationFiles.ReadFile(p)
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version: v, name: name, sql: string(b)})
	}
	slices.SortFunc(out, func(a, b migration) int { return a.version - b.version })
	for i := 1; i < len(out); i++ {
		if out[i].version == out[i-1].version {
			return nil, fmt.Errorf("migrations %s and %s have the same number", out[i-1].name, out[i].name)
		}
	}
	return out, nil
}

// Migrate brings the database at url to the schema this build expects and
// returns the migrations it applied (none when it was up to date). See
// [Options.Migrate] for how.
func Migrate(ctx context.Context, url string) ([]string, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("transcript store: connect: %w", err)
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	return migrate(ctx, conn)
}

// migrate applies the missing migrations in one transaction that first
// takes an advisory lock: of workers starting at once, one migrates and
// the others wait, then find nothing to do. A failed migration leaves the
// schema as it was.
func migrate(ctx context.Context, db interface {
	Begin(context.Context) (pgx.Tx, error)
}) ([]string, error) {
	all, err := migrations()
	if err != nil {
		return nil, err
	}
	tx, err := db.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("transcript store: migrate: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(migrateLock)); err != nil {
		return nil, fmt.Errorf("transcript store: migrate: lock: %w", err)
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    integer     PRIMARY KEY,
		name       text        NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return nil, fmt.Errorf("transcript store: migrate: %w", err)
	}
	rows, err := tx.Query(ctx, "SELECT version FROM schema_migrations")
	if err != nil {
		return nil, fmt.Errorf("transcript store: migrate: %w", err)
	}
	done, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return nil, fmt.Errorf("transcript store: migrate: %w", err)
	}
	var applied []string
	for _, m := range all {
		if slices.Contains(done, int32(m.version)) {
			continue
		}
		if _, err := tx.Exec(ctx, m.sql); err != nil {
			return nil, fmt.Errorf("transcript store: migration %s: %w", m.name, err)
		}
		if _, err := tx.Exec(ctx, "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", m.version, m.name); err != nil {
			return nil, fmt.Errorf("transcript store: migration %s: %w", m.name, err)
		}
		applied = append(applied, m.name)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("transcript store: migrate: commit: %w", err)
	}
	return applied, nil
}
