package devserver

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"

	enumspb "go.temporal.io/api/enums/v1"
	persistencespb "go.temporal.io/server/api/persistence/v1"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/metrics"
	"go.temporal.io/server/common/persistence"
	"go.temporal.io/server/common/persistence/serialization"
	tsql "go.temporal.io/server/common/persistence/sql"
	"go.temporal.io/server/common/persistence/sql/sqlplugin"
	sqliteplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/sqlite"
	"go.temporal.io/server/common/resolver"
	"go.temporal.io/server/common/searchattribute/sadefs"
	sqliteschema "go.temporal.io/server/schema/sqlite"
	"google.golang.org/protobuf/types/known/durationpb"
)

// dbConfig is the persistence configuration shared by the schema set-up,
// the namespace set-up and the server: SQLite, or a cluster's SQLStore.
type dbConfig struct {
	sql *config.SQL
	// visibility is the visibility store's database (nil: sql's).
	visibility *config.SQL
	// shards is the number of history shards: HistoryShards for a new
	// database, what an existing one was created with otherwise (the
	// server refuses to change it).
	shards int32
}

// HistoryShards is the default number of history shards of a new database. One
// shard serialises every workflow's writes: with 8, ten sessions run
// 1.8× the turns per second of one shard on 2 cores (BenchmarkThroughput).
// Databases created with another count keep it.
const HistoryShards = 8

// historyShards returns the history shard count recorded in the database
// (0 when the server never started on it).
func historyShards(ctx context.Context, db *dbConfig) (int32, error) {
	conn, err := tsql.NewSQLDB(sqlplugin.DbKindUnknown, db.sql, resolver.NewNoopResolver(), log.NewNoopLogger(), metrics.NoopMetricsHandler)
	if err != nil {
		return 0, fmt.Errorf("open database: %w", err)
	}
	defer func() { _ = conn.Close() }()
	row, err := conn.GetClusterMetadata(ctx, &sqlplugin.ClusterMetadataFilter{ClusterName: clusterName})
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read cluster metadata: %w", err)
	}
	md, err := serialization.NewSerializer().DeserializeClusterMetadata(persistence.NewDataBlob(row.Data, row.DataEncoding))
	if err != nil {
		return 0, fmt.Errorf("decode cluster metadata: %w", err)
	}
	return md.GetHistoryShardCount(), nil
}

// newMemoryDB configures a fresh in-memory database. The SQLite plugin
// creates the schema when it first connects to it.
func newMemoryDB() *dbConfig {
	return &dbConfig{shards: HistoryShards, sql: &config.SQL{
		PluginName:        sqliteplugin.PluginName,
		DatabaseName:      "ctxflow-devserver-" + strconv.FormatUint(rand.Uint64(), 36),
		ConnectAttributes: map[string]string{"mode": "memory", "cache": "shared"},
	}}
}

// openFileDB configures the database file at path, creating it with the
// Temporal schema if it does not exist.
func openFileDB(path string) (*dbConfig, error) {
	if err := createOnce(path); err != nil {
		return nil, err
	}
	return &dbConfig{sql: walSQLConfig(path)}, checkSameFile(path)
}

// openVisibilityDB configures the visibility records' own file at path,
// creating it if it does not exist and create is set (a new data dir). On
// a single connection a database runs one statement at a time, and a
// visibility record is a costly one (its row has some sixty indexes): in a
// file of its own it no longer holds up the history's writes (a qa turn's
// child workflow writes two). A data dir created before this file keeps
// its records in the main database: nil, as for any other store.
func openVisibilityDB(path string, create bool) (*config.SQL, error) {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) && !create {
		return nil, nil
	}
	// The server's schema function creates both schemas: here only the
	// visibility tables are used; the others stay empty.
	db, err := openFileDB(path)
	if err != nil {
		return nil, err
	}
	return db.sql, nil
}

// createOnce creates the database file at path with the Temporal schema if
// it does not exist. The schema is written to a temporary file that is
// renamed into place once complete, so a process killed during set-up
// never leaves a half-initialised database behind.
func createOnce(path string) error {
	if _, err := os.Stat(path); err == nil {
		return nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("check database file: %w", err)
	}
	stale, err := filepath.Glob(path + ".setup-*")
	if err != nil {
		return fmt.Errorf("find leftover schema set-up files: %w", err)
	}
	for _, f := range stale {
		if err := os.Remove(f); err != nil {
			return fmt.Errorf("remove leftover schema set-up file: %w", err)
		}
	}
	// A unique name: the SQLite plugin keeps connections open for the life
	// of the process, keyed by file name.
	tmp := path + ".setup-" + strconv.FormatUint(rand.Uint64(), 36)
	if err := sqliteschema.SetupSchema(fileSQLConfig(tmp)); err != nil {
		return fmt.Errorf("create temporal schema in %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("move new database into place: %w", err)
	}
	return nil
}

// walSQLConfig configures the server's connection to the database file at
// path.
func walSQLConfig(path string) *config.SQL {
	c := fileSQLConfig(path)
	// WAL with synchronous=NORMAL: a commit is durable once written to the
	// WAL, which survives a killed process (only a power loss can drop the
	// last commits), and no fsync is paid per commit.
	c.ConnectAttributes["journal_mode"] = "wal"
	c.ConnectAttributes["synchronous"] = "normal"
	// Deleted rows are overwritten with zeros (an erased session's
	// history leaves no bytes in the file; the worker's erase then
	// truncates the write-ahead log, docs/operations.md).
	c.ConnectAttributes["secure_delete"] = "on"
	// A connection that finds the database locked (by that truncation,
	// in another process) waits for it instead of failing.
	c.ConnectAttributes["busy_timeout"] = "10000"
	return c
}

// openedFiles maps the path of each database file used by this process to
// its os.FileInfo at first use.
var openedFiles sync.Map

// checkSameFile fails if path is no longer the file this process first used
// under that name. The SQLite plugin never closes its connections and reuses
// them by file name, so after a data dir was deleted and recreated under a
// running process, the server would write to the deleted file and lose
// everything.
func checkSameFile(path string) error {
	info, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("check database file: %w", err)
	}
	if first, loaded := openedFiles.LoadOrStore(path, info); loaded && !os.SameFile(first.(os.FileInfo), info) {
		return fmt.Errorf("database %s was replaced since this process opened it; restart the process to use it", path)
	}
	return nil
}

func fileSQLConfig(path string) *config.SQL {
	return &config.SQL{
		PluginName:        sqliteplugin.PluginName,
		DatabaseName:      path,
		ConnectAttributes: map[string]string{"mode": "rwc"},
	}
}

// validateSearchAttributes rejects names the server reserves and unknown types.
func validateSearchAttributes(attrs map[string]enumspb.IndexedValueType) error {
	for name, typ := range attrs {
		if name == "" || sadefs.IsReserved(name) {
			return fmt.Errorf("search attribute name %q is reserved", name)
		}
		if _, ok := enumspb.IndexedValueType_name[int32(typ)]; !ok || typ == enumspb.INDEXED_VALUE_TYPE_UNSPECIFIED {
			return fmt.Errorf("search attribute %q has invalid type %v", name, typ)
		}
	}
	return nil
}

// ensureNamespace creates the namespace with its retention and search
// attributes, or brings an existing one up to date. It runs before the server
// starts, so the server loads the final state and no cache can be stale.
func ensureNamespace(ctx context.Context, db *dbConfig, opts Options) error {
	if err := validateSearchAttributes(opts.SearchAttributes); err != nil {
		return err
	}
	conn, err := tsql.NewSQLDB(sqlplugin.DbKindUnknown, db.sql, resolver.NewNoopResolver(),
		log.NewNoopLogger(), metrics.NoopMetricsHandler)
	if err != nil {
		return fmt.Errorf("open database: %w", err)
	}
	defer func() { _ = conn.Close() }()

	name := opts.Namespace
	rows, err := conn.SelectFromNamespace(ctx, sqlplugin.NamespaceFilter{Name: &name})
	if errors.Is(err, sql.ErrNoRows) || (err == nil && len(rows) == 0) {
		return createNamespace(db, opts)
	}
	if err != nil {
		return fmt.Errorf("read namespace %q: %w", name, err)
	}
	return updateNamespace(ctx, conn, rows[0], opts)
}

func createNamespace(db *dbConfig, opts Options) error {
	ns, err := sqliteschema.NewNamespaceConfig(clusterName, opts.Namespace, false, opts.SearchAttributes)
	if err != nil {
		return fmt.Errorf("configure namespace %q: %w", opts.Namespace, err)
	}
	ns.Detail.Config.Retention = durationpb.New(opts.Retention)
	if err := sqliteschema.CreateNamespaces(db.sql, ns); err != nil {
		return fmt.Errorf("create namespace %q: %w", opts.Namespace, err)
	}
	return nil
}

func updateNamespace(ctx context.Context, conn sqlplugin.DB, row sqlplugin.NamespaceRow, opts Options) error {
	serializer := serialization.NewSerializer()
	detail, err := serializer.NamespaceDetailFromBlob(persistence.NewDataBlob(row.Data, row.DataEncoding))
	if err != nil {
		return fmt.Errorf("decode namespace %q: %w", opts.Namespace, err)
	}
	changed, err := reconcileNamespace(detail, opts)
	if err != nil || !changed {
		return err
	}
	detail.ConfigVersion++
	blob, err := serializer.NamespaceDetailToBlob(detail)
	if err != nil {
		return fmt.Errorf("encode namespace %q: %w", opts.Namespace, err)
	}

	tx, err := conn.BeginTx(ctx)
	if err != nil {
		return fmt.Errorf("begin namespace update: %w", err)
	}
	if err := writeNamespace(ctx, tx, row, blob.GetData(), blob.GetEncodingType().String()); err != nil {
		_ = tx.Rollback()
		return fmt.Errorf("update namespace %q: %w", opts.Namespace, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit namespace %q: %w", opts.Namespace, err)
	}
	return nil
}

// writeNamespace stores the namespace row the way the server's metadata
// store does: under the metadata lock, bumping the notification version.
func writeNamespace(ctx context.Context, tx sqlplugin.Tx, row sqlplugin.NamespaceRow, data []byte, encoding string) error {
	meta, err := tx.LockNamespaceMetadata(ctx)
	if err != nil {
		return fmt.Errorf("lock metadata: %w", err)
	}
	row.Data = data
	row.DataEncoding = encoding
	row.NotificationVersion = meta.NotificationVersion
	res, err := tx.UpdateNamespace(ctx, &row)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("%d rows updated (%v)", n, err)
	}
	res, err = tx.UpdateNamespaceMetadata(ctx, meta)
	if err != nil {
		return fmt.Errorf("bump metadata version: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("bump metadata version: %d rows updated (%v)", n, err)
	}
	return nil
}

// reconcileNamespace sets the retention and adds the missing search
// attributes to detail. It reports whether anything changed.
func reconcileNamespace(detail *persistencespb.NamespaceDetail, opts Options) (bool, error) {
	if detail.Config == nil {
		detail.Config = &persistencespb.NamespaceConfig{}
	}
	cfg := detail.Config
	changed := false
	if cfg.GetRetention().AsDuration() != opts.Retention {
		cfg.Retention = durationpb.New(opts.Retention)
		changed = true
	}

	fields := sadefs.GetDBIndexSearchAttributes(nil).CustomSearchAttributes // field → type
	if cfg.CustomSearchAttributeAliases == nil {
		cfg.CustomSearchAttributeAliases = map[string]string{}
	}
	aliases := cfg.CustomSearchAttributeAliases // field → alias
	fieldOf := make(map[string]string, len(aliases))
	for field, alias := range aliases {
		fieldOf[alias] = field
	}
	for _, name := range slices.Sorted(maps.Keys(opts.SearchAttributes)) {
		want := opts.SearchAttributes[name]
		if field, ok := fieldOf[name]; ok {
			if fields[field] != want {
				return false, fmt.Errorf("search attribute %q exists with type %v, want %v", name, fields[field], want)
			}
			continue
		}
		field := freeField(fields, aliases, want)
		if field == "" {
			return false, fmt.Errorf("no free search attribute slot of type %v for %q", want, name)
		}
		aliases[field] = name
		changed = true
	}
	return changed, nil
}

// freeField returns the first database field of type typ without an alias.
func freeField(fields map[string]enumspb.IndexedValueType, aliases map[string]string, typ enumspb.IndexedValueType) string {
	for _, field := range slices.Sorted(maps.Keys(fields)) {
		if _, used := aliases[field]; !used && fields[field] == typ {
			return field
		}
	}
	return ""
}
