// Package devserver runs a real Temporal server (frontend, history, matching
// and worker services) inside the current process, backed by SQLite, with the
// Temporal Web UI optionally served next to it.
//
// It is what `ctxflow dev` and the end-to-end tests run against: the same
// server code as a production cluster, without a separate binary to download.
// With Options.DataDir set, namespaces and workflows survive a restart (also
// after the process was killed); with DataDir empty, everything lives in an
// in-memory SQLite database that disappears with the process.
package devserver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/server/temporal"
)

// Defaults applied by Start to zero-valued Options fields.
const (
	DefaultFrontendIP = "127.0.0.1"
	DefaultNamespace  = "default"
	DefaultRetention  = 7 * 24 * time.Hour
	// DatabaseFileName is the name of the SQLite file inside Options.DataDir.
	DatabaseFileName = "temporal.db"
	// VisibilityFileName is the SQLite file of the visibility records (the
	// list of workflows and their search attributes) beside DatabaseFileName,
	// in a data dir created with it (see openVisibilityDB).
	VisibilityFileName = "visibility.db"
)

// systemNamespace is the server's own, there from its first start.
const systemNamespace = "temporal-system"

// Options configures an embedded Temporal server. The zero value is usable:
// an in-memory server on 127.0.0.1 with a free port, namespace "default", no UI.
type Options struct {
	// DataDir holds the SQLite databases (DataDir/temporal.db, and
	// DataDir/visibility.db for the visibility records of a data dir
	// created with it); it is created if missing. Empty means an in-memory
	// database that is lost on Stop.
	DataDir string
	// Store, when set, replaces SQLite with a cluster's databases (see
	// SQLStore; DataDir is then unused). Namespace, Retention and
	// SearchAttributes are not applied: they are registered through the
	// API, and Start waits for the services only.
	Store *SQLStore
	// FrontendIP is the address the frontend gRPC service listens on
	// (default 127.0.0.1). The other services always listen on 127.0.0.1.
	FrontendIP string
	// FrontendPort is the frontend gRPC port; 0 picks a free port.
	FrontendPort int
	// UIPort, when not 0, serves the Temporal Web UI on FrontendIP:UIPort.
	UIPort int
	// HistoryShards is the number of history shards of a new database
	// (default [HistoryShards]); an existing database keeps its own.
	HistoryShards int32
	// Namespace is created at start-up if missing (default "default").
	Namespace string
	// Retention is how long closed workflows stay queryable in Namespace
	// (default DefaultRetention). An existing namespace is updated to it.
	Retention time.Duration
	// SearchAttributes are custom search attributes registered in Namespace at
	// start-up if missing. Registering a name that exists with another type
	// is an error.
	SearchAttributes map[string]enumspb.IndexedValueType
	// DynamicConfig overrides the server's dynamic config (key → value), on
	// top of the defaults chosen by this package (see DefaultDynamicConfig).
	// A value may also be a []dynamicconfig.ConstrainedValue.
	DynamicConfig map[string]any
	// Logger receives the server's logs (default slog.Default()).
	Logger *slog.Logger
	// LogLevel is the lowest level of server logs passed to Logger (default
	// slog.LevelWarn: the server is chatty at info). A *slog.LevelVar allows
	// changing it while the server runs.
	LogLevel slog.Leveler
}

// Server is a running embedded Temporal server. Its methods are safe for
// concurrent use.
type Server struct {
	temporal     temporal.Server
	logger       slogLogger
	ui           *uiServer
	lock         *dirLock
	frontendAddr string
	uiURL        string
	namespace    string

	stopOnce sync.Once
	stopErr  error
}

// Start starts a Temporal server as described by opts and returns once the
// frontend answers and the namespace with its search attributes is ready.
// ctx bounds the wait for readiness; the server itself runs until Stop.
func Start(ctx context.Context, opts Options) (_ *Server, err error) {
	started := time.Now()
	if err := opts.setDefaults(); err != nil {
		return nil, err
	}
	logger := newServerLogger(opts.Logger, opts.LogLevel)

	s := &Server{namespace: opts.Namespace, logger: logger}
	defer func() {
		if err != nil {
			_ = s.Stop()
		}
	}()

	db, err := s.prepareDatabase(ctx, opts)
	if err != nil {
		return nil, err
	}

	if opts.UIPort != 0 {
		// Claim the UI port before starting anything slow.
		if s.ui, err = listenUI(opts.FrontendIP, opts.UIPort); err != nil {
			return nil, err
		}
	}

	// Free ports are found by listening and closing; another process may
	// take one before the server binds it. Such a race is retried with
	// fresh ports (a fixed FrontendPort that is taken fails every time).
	var srv temporal.Server
	for attempt := 1; ; attempt++ {
		p, err := pickPorts(opts)
		if err != nil {
			return nil, err
		}
		s.frontendAddr = p.frontendAddr()
		serverOpts, err := buildServerOptions(opts, p, db, logger)
		if err != nil {
			return nil, err
		}
		srv, err = temporal.NewServer(serverOpts...)
		if err == nil {
			break
		}
		if attempt == 5 || !strings.Contains(err.Error(), "address already in use") {
			return nil, fmt.Errorf("create temporal server: %w", err)
		}
		opts.Logger.Debug("temporal dev server: port taken, retrying with new ports", "attempt", attempt, "error", err)
	}
	s.temporal = srv // so that a failed start is cleaned up by Stop
	if err := srv.Start(); err != nil {
		return nil, fmt.Errorf("start temporal server: %w", err)
	}

	probeNS, attrs := opts.Namespace, opts.SearchAttributes
	if opts.Store != nil { // the namespace may not be registered yet
		probeNS, attrs = systemNamespace, nil
	}
	if err := waitReady(ctx, s.frontendAddr, probeNS, attrs, opts.Logger); err != nil {
		return nil, err
	}

	if s.ui != nil {
		if err := s.ui.serve(s.frontendAddr, opts.Namespace); err != nil {
			return nil, err
		}
		s.uiURL = "http://" + net.JoinHostPort(dialHost(opts.FrontendIP), strconv.Itoa(opts.UIPort))
	}

	opts.Logger.Debug("temporal dev server started",
		"frontend", s.frontendAddr, "ui", s.uiURL, "dataDir", opts.DataDir,
		"elapsed", time.Since(started))
	return s, nil
}

// prepareDatabase locks DataDir (if any), creates the schema when the
// database is new and creates or updates the namespace.
func (s *Server) prepareDatabase(ctx context.Context, opts Options) (*dbConfig, error) {
	if opts.Store != nil {
		return openStore(ctx, opts.Store, opts.HistoryShards)
	}
	if opts.DataDir == "" {
		db := newMemoryDB()
		db.shards = cmp.Or(opts.HistoryShards, HistoryShards)
		if err := ensureNamespace(ctx, db, opts); err != nil {
			return nil, err
		}
		return db, nil
	}
	if err := os.MkdirAll(opts.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	lock, err := lockDir(opts.DataDir)
	if err != nil {
		return nil, err
	}
	s.lock = lock
	path := filepath.Join(opts.DataDir, DatabaseFileName)
	_, err = os.Stat(path)
	newDir := errors.Is(err, os.ErrNotExist)
	visibility, err := openVisibilityDB(filepath.Join(opts.DataDir, VisibilityFileName), newDir)
	if err != nil {
		return nil, err
	}
	db, err := openFileDB(path)
	if err != nil {
		return nil, err
	}
	db.visibility = visibility
	if db.shards, err = historyShards(ctx, db); err != nil {
		return nil, err
	}
	if db.shards == 0 {
		db.shards = cmp.Or(opts.HistoryShards, HistoryShards)
	}
	if err := ensureNamespace(ctx, db, opts); err != nil {
		return nil, err
	}
	return db, nil
}

// FrontendHostPort returns the host:port of the frontend gRPC service, for
// client.Options.HostPort.
func (s *Server) FrontendHostPort() string { return s.frontendAddr }

// UIURL returns the base URL of the Web UI, or "" when the UI is off.
func (s *Server) UIURL() string { return s.uiURL }

// Namespace returns the namespace created at start-up.
func (s *Server) Namespace() string { return s.namespace }

// Stop stops the UI and the server and releases the data dir. It is safe to
// call more than once; later calls return the first call's result.
func (s *Server) Stop() error {
	s.stopOnce.Do(func() {
		s.logger.quiet.Store(true)
		var errs []error
		if s.ui != nil {
			if err := s.ui.stop(); err != nil {
				errs = append(errs, fmt.Errorf("stop web ui: %w", err))
			}
		}
		if s.temporal != nil {
			if err := stopTemporal(s.temporal); err != nil {
				errs = append(errs, fmt.Errorf("stop temporal server: %w", err))
			}
		}
		if s.lock != nil {
			if err := s.lock.release(); err != nil {
				errs = append(errs, fmt.Errorf("unlock data dir: %w", err))
			}
		}
		s.stopErr = errors.Join(errs...)
	})
	return s.stopErr
}

// stopTemporal stops the server, turning a panic inside it into an error.
func stopTemporal(srv temporal.Server) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic while stopping: %v", r)
		}
	}()
	return srv.Stop()
}

func (o *Options) setDefaults() error {
	if o.FrontendIP == "" {
		o.FrontendIP = DefaultFrontendIP
	}
	if net.ParseIP(o.FrontendIP) == nil {
		return fmt.Errorf("frontend IP %q is not an IP address", o.FrontendIP)
	}
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	if o.Retention == 0 {
		o.Retention = DefaultRetention
	}
	if o.Retention < 0 {
		return fmt.Errorf("retention %v is negative", o.Retention)
	}
	if o.FrontendPort < 0 || o.FrontendPort > 65535 {
		return fmt.Errorf("frontend port %d out of range", o.FrontendPort)
	}
	if o.UIPort < 0 || o.UIPort > 65535 {
		return fmt.Errorf("UI port %d out of range", o.UIPort)
	}
	if o.UIPort != 0 && o.UIPort == o.FrontendPort {
		return fmt.Errorf("UI port and frontend port are both %d", o.UIPort)
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.LogLevel == nil {
		o.LogLevel = slog.LevelWarn
	}
	if o.DataDir != "" {
		abs, err := filepath.Abs(o.DataDir)
		if err != nil {
			return fmt.Errorf("resolve data dir: %w", err)
		}
		o.DataDir = abs
	}
	return nil
}
