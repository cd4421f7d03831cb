package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"go.temporal.io/server/common/dynamicconfig"

	"github.com/ctxflow/ctxflow/internal/config"
	"github.com/ctxflow/ctxflow/internal/devserver"
)

// runTemporal runs the Temporal server of `make cluster` until ctx ends:
// the server ctxflow dev embeds, on PostgreSQL instead of SQLite, with the
// Web UI. It creates no namespace: `ctxflow register` does, as on any
// cluster.
func runTemporal(ctx context.Context, args []string, cfg config.Config, log *slog.Logger, stdout io.Writer) error {
	fs := flag.NewFlagSet("temporal", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	db := fs.String("db", "", "postgres:// URL of the default store's database")
	vis := fs.String("visibility-db", "", "postgres:// URL of the visibility store's database")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *db == "" || *vis == "" || fs.NArg() > 0 {
		return errors.New("usage: ctxflow temporal --db URL --visibility-db URL")
	}
	store, err := devserver.PostgresStore(*db, *vis)
	if err != nil {
		return err
	}
	start := time.Now()
	srv, err := devserver.Start(ctx, devserver.Options{
		Store:        store,
		FrontendPort: cfg.TemporalPort,
		UIPort:       cfg.UIPort,
		Namespace:    cfg.TemporalNamespace, // the Web UI's
		// What ctxflow register adds reaches every service's namespace
		// cache within a second (by default 10 s), so sessions start as
		// soon as it returns.
		DynamicConfig: map[string]any{dynamicconfig.NamespaceCacheRefreshInterval.Key().String(): time.Second},
		Logger:        log.With("component", "temporal"),
	})
	if err != nil {
		return fmt.Errorf("start temporal: %w", err)
	}
	fmt.Fprintf(stdout, "temporal ready in %s\n  Temporal:    %s\n", time.Since(start).Round(time.Millisecond), srv.FrontendHostPort())
	if u := srv.UIURL(); u != "" {
		fmt.Fprintf(stdout, "  Temporal UI: %s\n", u)
	}
	<-ctx.Done()
	return srv.Stop()
}
