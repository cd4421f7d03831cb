package devserver

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/persistence/sql/sqlplugin/postgresql"
)

// SQLStore is the persistence of a cluster, instead of the embedded SQLite
// database: the default store and visibility, each a database whose schema
// Temporal's own tool set up (temporal-sql-tool setup-schema and
// update-schema). Start creates nothing in them: the server writes its
// cluster metadata and system namespace on its first start, and the
// namespace and its search attributes are registered through the API, as
// on any cluster (`ctxflow register`).
type SQLStore struct {
	Default, Visibility *config.SQL
}

// PostgresStore is the SQLStore of two PostgreSQL databases, each named by
// a URL: postgres://user:password@host:port/database (the port defaults to
// 5432; query parameters, such as sslmode, are passed to the driver).
func PostgresStore(defaultURL, visibilityURL string) (*SQLStore, error) {
	def, err := postgresSQL(defaultURL, 20)
	if err != nil {
		return nil, fmt.Errorf("default store: %w", err)
	}
	vis, err := postgresSQL(visibilityURL, 10)
	if err != nil {
		return nil, fmt.Errorf("visibility store: %w", err)
	}
	return &SQLStore{Default: def, Visibility: vis}, nil
}

// postgresSQL configures Temporal's postgres12 plugin for the database at
// rawURL, with at most maxConns connections.
func postgresSQL(rawURL string, maxConns int) (*config.SQL, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("parse %q: %w", rawURL, err)
	}
	db := strings.TrimPrefix(u.Path, "/")
	if (u.Scheme != "postgres" && u.Scheme != "postgresql") || u.Host == "" || db == "" {
		return nil, fmt.Errorf("%q is not a postgres://user@host:port/database URL", u.Redacted())
	}
	attrs := map[string]string{}
	for k, v := range u.Query() {
		attrs[k] = v[0]
	}
	password, _ := u.User.Password()
	return &config.SQL{
		PluginName:        postgresql.PluginNamePGX,
		DatabaseName:      db,
		ConnectAddr:       net.JoinHostPort(u.Hostname(), cmp.Or(u.Port(), "5432")),
		ConnectProtocol:   "tcp",
		User:              u.User.Username(),
		Password:          password,
		ConnectAttributes: attrs,
		MaxConns:          maxConns,
		MaxIdleConns:      maxConns,
		MaxConnLifetime:   time.Hour,
	}, nil
}

// openStore configures the server on a cluster's databases, keeping the
// history shard count they were first started with.
func openStore(ctx context.Context, store *SQLStore, shards int32) (*dbConfig, error) {
	if store.Default == nil || store.Visibility == nil {
		return nil, fmt.Errorf("a cluster's store needs a default and a visibility database")
	}
	db := &dbConfig{sql: store.Default, visibility: store.Visibility}
	var err error
	if db.shards, err = historyShards(ctx, db); err != nil {
		return nil, err
	}
	if db.shards == 0 {
		db.shards = cmp.Or(shards, HistoryShards)
	}
	return db, nil
}
