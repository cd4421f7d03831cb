// Command ctxflow runs the ctxflow service.
//
//	ctxflow dev     embedded Temporal server + Web UI, worker and API in one process
//	ctxflow worker  a worker against an external Temporal cluster
//	ctxflow api     the HTTP API against an external Temporal cluster
//	ctxflow ingest  ingest documents into the knowledge base
//	ctxflow eval    measure the rewriter, retrieval and answers on evaluation sets
//	ctxflow temporal a Temporal server on PostgreSQL, with its Web UI (make cluster)
//	ctxflow migrate apply the transcript store's schema migrations to $DATABASE_URL
//	ctxflow register add the session search attributes to the cluster's namespace
//	ctxflow chat    a terminal chat with a running API
//
// Configuration comes from environment variables; see the README.
package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"
	sdklog "go.temporal.io/sdk/log"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/activities/broker"
	"github.com/ctxflow/ctxflow/activities/pgtranscript"
	"github.com/ctxflow/ctxflow/api"
	"github.com/ctxflow/ctxflow/internal/config"
	"github.com/ctxflow/ctxflow/internal/devserver"
	"github.com/ctxflow/ctxflow/internal/telemetry"
	"github.com/ctxflow/ctxflow/worker"
	"github.com/ctxflow/ctxflow/workflows"
)

const usage = `usage: ctxflow <command>

commands:
  dev      run everything in one process: an embedded Temporal server (SQLite
           under $CTXFLOW_DATA_DIR) with its Web UI, the worker and the API
  worker   run a worker against the Temporal cluster at $TEMPORAL_ADDRESS
  api      serve the HTTP API against the Temporal cluster at $TEMPORAL_ADDRESS
  ingest [--tenant T] PATH...
           ingest files (.md .txt .html .pdf, .jsonl of passages) or
           directories into the knowledge base of tenant T (default
           "default"), through the workers of the cluster at
           $TEMPORAL_ADDRESS (with ctxflow dev running, that is the embedded
           one); progress on stderr, one line per document on stdout
  eval --data FILE [--data FILE ...] [--limit N] [--json OUT] [--detail]
           measure evaluation sets in the JSONL format of ../shared/evaldata
           (FILE: a set's cases.jsonl; its passages inline or in a
           passages.jsonl beside it): the worker's question rewriter against
           the gold rewrites (token F1, exact match, when it changes a
           question), the qa turn's retrieval over the set's passages as a
           closed corpus (recall@5 and MRR with the question as asked,
           rewritten and the gold rewrite) and the offline answers against
           gold answers; a table on stdout, one JSON object per set in OUT
           (- for stdout), the first N cases of each set; --detail adds
           recall@5 per search mode and the corrective loop's judges
  erase --tenant T [--session ID]
           erase tenant T for good (its sessions: transcripts, summaries,
           facts, workflow histories; its documents: chunks, uploads,
           ingestion histories), or only its session ID, through the workers
           of the cluster at $TEMPORAL_ADDRESS; the workers log one audit
           line, this prints the counts
  deploy promote [--build ID] | deploy status
           Worker Versioning ($CTXFLOW_DEPLOYMENT): promote makes a version
           (default $CTXFLOW_BUILD_ID) current once one of its workers polls,
           so that new workflows start on it and running ones move to it;
           status prints the deployment's versions and their drainage
  migrate  apply the PostgreSQL transcript store's schema migrations to
           $DATABASE_URL and exit (workers also apply them at start-up)
  register create $TEMPORAL_NAMESPACE at $TEMPORAL_ADDRESS if it is missing
           (retention 7 days), add the session search attributes to it and
           exit (workers also add them at start-up, when their credentials
           may)
  temporal --db URL --visibility-db URL
           run a Temporal server on PostgreSQL (the two databases, their
           schema set up by temporal-sql-tool) on 127.0.0.1, its frontend on
           $CTXFLOW_TEMPORAL_PORT and its Web UI on $CTXFLOW_UI_PORT, until
           stopped; scripts/cluster.sh (make cluster) runs it
  chat [--api URL] [--key KEY] [--session ID] [--max-steps N]
           a terminal chat with the API at $CTXFLOW_API_URL (default
           http://localhost:8080; key $CTXFLOW_API_KEY) in a session (default
           a new one): answers streamed, /task, /continue, /steps, /branch,
           /tree, /session; /help lists them
  bench [--api URL] [--key KEY] [--sessions N] [--turns N] [--json FILE]
           drive the API at $CTXFLOW_API_URL with chat turns (?wait=true)
           from N new sessions at once (default 10, 500 turns in all) and
           print turns/s and the turn's p50 and p99 (the full comparison
           with the peer is "make bench", from the source tree)
  key TENANT
           make an API key for a tenant: prints the key (give it to the
           client) and the line for CTXFLOW_API_KEYS(_FILE), its hash

Configuration is read from environment variables (see README.md).
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 1 && asksHelp(args[1:]) { // before anything is loaded or dialled
		if u := commandUsage(args[0]); u != "" {
			fmt.Fprint(stdout, u)
			return 0
		}
	}
	if len(args) == 0 || (args[0] != "ingest" && args[0] != "eval" && args[0] != "key" && args[0] != "chat" && args[0] != "bench" && args[0] != "erase" && args[0] != "deploy" && args[0] != "temporal" && len(args) != 1) {
		fmt.Fprint(stderr, usage)
		return 2
	}
	cfg, err := config.Load()
	if err != nil {
		fmt.Fprintln(stderr, "ctxflow:", err)
		return 2
	}
	log := slog.New(telemetry.LogHandler(cfg.Logger().Handler())) // + a request's session, turn and trace ids
	slog.SetDefault(log)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var tel *telemetry.Telemetry // metrics and traces of the service commands
	if args[0] == "dev" || args[0] == "worker" || args[0] == "api" {
		if tel, err = telemetry.New(ctx, telemetry.Options{Service: "ctxflow-" + args[0], Tracing: cfg.OTel, Stdout: stdout, Logger: log}); err != nil {
			fmt.Fprintln(stderr, "ctxflow:", err)
			return 1
		}
		defer func() {
			if err := tel.Shutdown(context.WithoutCancel(ctx)); err != nil {
				log.Warn("telemetry shutdown", "error", err)
			}
		}()
	}

	// Before any SDK worker starts, the embedded server's own included:
	// else the SDK hashes the whole executable for its checksum.
	worker.SetBinaryChecksum()
	switch args[0] {
	case "dev":
		err = runDev(ctx, cfg, log, stdout, tel)
	case "worker":
		err = runWorker(ctx, cfg, log, tel)
	case "api":
		err = runAPI(ctx, cfg, log, tel)
	case "temporal":
		err = runTemporal(ctx, args[1:], cfg, log, stdout)
	case "migrate":
		var applied []string
		if applied, err = worker.Migrate(ctx, cfg); err == nil && len(applied) == 0 {
			fmt.Fprintln(stdout, "transcript store: the schema is up to date")
		}
		for _, m := range applied {
			fmt.Fprintln(stdout, "transcript store: applied", m)
		}
	case "register":
		var c client.Client
		if c, err = dialExternal(ctx, cfg, log); err == nil {
			// A new cluster's namespace is created here too (ctxflow temporal,
			// or the temporalio/server image, make none).
			if err = worker.PrepareNamespace(ctx, c, cfg.TemporalNamespace, devserver.DefaultRetention, 30*time.Second); err == nil {
				fmt.Fprintln(stdout, "search attributes registered in namespace", cfg.TemporalNamespace)
			}
			c.Close()
		}
	case "eval":
		err = runEval(ctx, args[1:], stdout, stderr)
	case "ingest":
		var c client.Client
		if c, err = dialExternal(ctx, cfg, log); err == nil {
			err = runIngest(ctx, c, args[1:], stdout, stderr)
			c.Close()
		}
	case "erase":
		var c client.Client
		if c, err = dialExternal(ctx, cfg, log); err == nil {
			err = runErase(ctx, c, cfg.TemporalNamespace, args[1:], stdout)
			c.Close()
		}
	case "deploy":
		var c client.Client
		if c, err = dialExternal(ctx, cfg, log); err == nil {
			err = runDeploy(ctx, c, cfg, args[1:], stdout)
			c.Close()
		}
	case "chat":
		err = runChat(ctx, args[1:], os.Stdin, stdout, stderr)
	case "bench":
		err = runBench(ctx, args[1:], stdout, stderr)
	case "key":
		if len(args) != 2 {
			fmt.Fprint(stderr, usage)
			return 2
		}
		err = newKey(args[1], stdout)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "ctxflow: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	if err != nil {
		log.Error("ctxflow stopped", "command", args[0], "error", err)
		return 1
	}
	return 0
}

// runDev runs the embedded stack until ctx ends.
func runDev(ctx context.Context, cfg config.Config, log *slog.Logger, stdout io.Writer, tel *telemetry.Telemetry) error {
	start := time.Now()
	demo, err := planDemo(cfg.DemoDocs, cfg.DataDir) // before the server makes a new data dir's database
	if err != nil {
		return err
	}
	srv, err := devserver.Start(ctx, devserver.Options{
		DataDir:          filepath.Join(cfg.DataDir, "temporal"),
		FrontendPort:     cfg.TemporalPort,
		UIPort:           cfg.UIPort,
		Namespace:        cfg.TemporalNamespace,
		SearchAttributes: workflows.SearchAttributes(),
		Logger:           log.With("component", "temporal"),
	})
	if err != nil {
		return fmt.Errorf("start embedded temporal: %w", err)
	}
	defer func() {
		if err := srv.Stop(); err != nil {
			log.Warn("stop embedded temporal", "error", err)
		}
	}()
	copts := client.Options{HostPort: srv.FrontendHostPort(), Namespace: srv.Namespace(), Logger: sdkLogger(log)}
	copts.ConnectionOptions.GrpcCompression = grpcCompression(cfg.TemporalCompression, copts.HostPort)
	tel.ClientOptions(&copts)
	c, err := client.DialContext(ctx, copts)
	if err != nil {
		return fmt.Errorf("connect to embedded temporal: %w", err)
	}
	defer c.Close()

	return serve(ctx, cfg, log, c, tel, true, func(apiAddr string) {
		demo.ingest(ctx, c, log)
		fmt.Fprintf(stdout, "ctxflow dev ready in %s\n  API:         http://%s\n", time.Since(start).Round(time.Millisecond), apiAddr)
		web := "http://" + apiAddr + "/"
		if u := srv.UIURL(); u != "" {
			web += "?temporalUI=" + url.QueryEscape(u) // the page's links to sessions' workflows
			fmt.Fprintf(stdout, "  Web:         %s\n  Temporal UI: %s\n", web, u)
		} else {
			fmt.Fprintf(stdout, "  Web:         %s\n", web)
		}
		fmt.Fprintf(stdout, "  Temporal:    %s (namespace %s)\n  Data:        %s\n", srv.FrontendHostPort(), srv.Namespace(), cfg.DataDir)
	})
}

func runWorker(ctx context.Context, cfg config.Config, log *slog.Logger, tel *telemetry.Telemetry) error {
	sticky := worker.NewStickyQueues(cfg.DataDir, log)
	c, err := dialExternal(ctx, cfg, log, tel.ClientOptions, sticky.ClientOptions)
	if err != nil {
		return err
	}
	defer c.Close()
	// Before this worker polls: the sessions of a worker killed on this
	// data dir leave its sticky queue now, not after the sticky timeout.
	if _, err := sticky.ReleaseDead(ctx, c.WorkflowService()); err != nil {
		log.Warn("dead workers' sticky queues not released", "error", err)
	}
	defer sticky.Close()
	if cfg.MetricsAddr != "" {
		if err := telemetry.Serve(ctx, cfg.MetricsAddr, tel.Handler(), log); err != nil {
			return err
		}
	}
	if err := worker.RegisterSearchAttributes(ctx, c, cfg.TemporalNamespace); err != nil {
		log.Warn("search attributes not registered; sessions will fail to publish their status until they are", "error", err)
	}
	return serve(ctx, cfg, log, c, tel, false, nil)
}

func runAPI(ctx context.Context, cfg config.Config, log *slog.Logger, tel *telemetry.Telemetry) error {
	if keys, err := cfg.Keys(); err != nil {
		return err
	} else if keys == nil && !cfg.AllowAnonymous {
		return errors.New("no API keys: set CTXFLOW_API_KEYS or CTXFLOW_API_KEYS_FILE (ctxflow key TENANT makes a key), or CTXFLOW_ALLOW_ANONYMOUS=true to let any caller pick a tenant")
	}
	c, err := dialExternal(ctx, cfg, log, tel.ClientOptions)
	if err != nil {
		return err
	}
	defer c.Close()
	// With the PostgreSQL transcript store, the API reads transcripts too
	// (the messages, tree and export routes) and hears the answers' deltas
	// for streamed turns (LISTEN/NOTIFY); the file store is the workers'
	// own.
	var shared apiPorts
	if cfg.TranscriptStore == "postgres" {
		store, err := pgtranscript.Open(ctx, pgtranscript.Options{URL: cfg.DatabaseURL})
		if err != nil {
			return err
		}
		defer store.Close()
		deltas, err := broker.OpenPostgres(ctx, cfg.DatabaseURL)
		if err != nil {
			return err
		}
		defer deltas.Close()
		shared = apiPorts{transcripts: store, broker: deltas}
	} else {
		log.Info("transcripts are in the workers' files: the messages, tree and export routes answer 503, and streamed turns have no tokens (CTXFLOW_TRANSCRIPT_STORE=postgres shares both)")
	}
	return serveHTTP(ctx, cfg, log, c, tel, shared, func(addr string) { log.Info("api listening", "addr", addr) })
}

// dialExternal connects to the cluster named by the environment, using the
// SDK's environment config for TLS and API keys; with sets more options.
func dialExternal(ctx context.Context, cfg config.Config, log *slog.Logger, with ...func(*client.Options)) (client.Client, error) {
	opts, err := envconfig.LoadDefaultClientOptions()
	if err != nil {
		return nil, fmt.Errorf("temporal client config: %w", err)
	}
	if opts.HostPort == "" {
		opts.HostPort = cfg.TemporalAddress
	}
	if opts.Namespace == "" {
		opts.Namespace = cfg.TemporalNamespace
	}
	opts.Logger = sdkLogger(log)
	opts.ConnectionOptions.GrpcCompression = grpcCompression(cfg.TemporalCompression, opts.HostPort)
	for _, f := range with {
		f(&opts)
	}
	c, err := client.DialContext(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("connect to temporal at %s: %w", opts.HostPort, err)
	}
	return c, nil
}

// grpcCompression is the compression of the connection to hostPort for
// CTXFLOW_TEMPORAL_COMPRESSION: on loopback ("auto") gzip only costs CPU,
// in the server and in every client, for bytes that never leave the host.
func grpcCompression(mode, hostPort string) client.GrpcCompression {
	if mode == "gzip" || mode == "auto" && !loopback(hostPort) {
		return &client.GrpcCompressionGzip{}
	}
	return &client.GrpcCompressionNone{}
}

// loopback reports a host:port on this host's loopback interface.
func loopback(hostPort string) bool {
	host, _, err := net.SplitHostPort(hostPort)
	if err != nil {
		host = hostPort
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// serve runs a worker, and the API too when withAPI is set, until ctx ends.
func serve(ctx context.Context, cfg config.Config, log *slog.Logger, c client.Client, tel *telemetry.Telemetry, withAPI bool, ready func(string)) error {
	ports, err := worker.BuildPorts(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer func() {
		if err := ports.Close(); err != nil {
			log.Warn("close ports", "error", err)
		}
	}()
	w := worker.New(c, ports, cfg.WorkerActivities, worker.VersionOf(cfg))
	if err := w.Start(); err != nil {
		return fmt.Errorf("start worker: %w", err)
	}
	defer w.Stop()
	log.Info("worker started", "taskQueue", workflows.TaskQueue, "version", worker.VersionOf(cfg).String(), "engine", ports.Session.Engine, "model", cfg.Session.LLMModel)
	if err := worker.EnsureRetentionSchedule(ctx, c, cfg, log); err != nil {
		log.Warn("retention sweep not scheduled", "error", err)
	}
	if !withAPI {
		<-ctx.Done()
		log.Info("shutting down worker")
		return nil
	}
	// One process: the API reads the transcripts the worker writes.
	return serveHTTP(ctx, cfg, log, c, tel, apiPorts{transcripts: ports.Session.Transcript, broker: ports.Broker, dev: true}, ready)
}

// serveHTTP serves the API until ctx ends, then drains in-flight requests.
// apiPorts are what the API shares with the workers when it can: the
// transcripts and the broker of answer deltas (nil each when it cannot).
type apiPorts struct {
	transcripts api.Transcripts
	broker      activities.Broker
	dev         bool // `ctxflow dev`: loopback unless CTXFLOW_HTTP_ADDR says otherwise
}

// modelContext is what the API asks for a session's model context: the
// chat model's server, Ollama or the OpenAI-compatible one; nil for the
// offline engine.
func modelContext(cfg config.Config, log *slog.Logger) api.ModelContext {
	var (
		client api.ModelContext
		err    error
	)
	switch cfg.ModelProvider {
	case "auto", "ollama":
		client, err = worker.OllamaClient(cfg)
	case "openai":
		client, err = worker.OpenAIClient(cfg, log)
	default:
		return nil
	}
	if err != nil {
		log.Warn("session configurations are not checked against the model's context", "error", err)
		return nil
	}
	return client
}

func serveHTTP(ctx context.Context, cfg config.Config, log *slog.Logger, c client.Client, tel *telemetry.Telemetry, shared apiPorts, ready func(string)) error {
	uploads, err := filepath.Abs(cfg.Uploads())
	if err != nil {
		return fmt.Errorf("upload directory %s: %w", cfg.Uploads(), err)
	}
	keys, err := cfg.Keys()
	if err != nil {
		return err
	}
	secret, err := cfg.TokenSecret()
	if err != nil {
		return err
	}
	if keys == nil {
		log.Warn("no API keys: any caller may act as any tenant with X-Tenant-ID (set CTXFLOW_API_KEYS or CTXFLOW_API_KEYS_FILE)")
	} else {
		log.Info("API keys on", "keys", len(keys))
	}
	h := api.New(c, api.Options{
		Defaults: cfg.Session, Limits: cfg.Limits, MaxBodyBytes: cfg.MaxBodyBytes,
		TurnWaitTimeout: cfg.TurnWaitTimeout, UploadDir: uploads, MaxUploadBytes: cfg.MaxUploadBytes,
		IngestWaitTimeout: cfg.IngestWaitTimeout, MaxInFlight: cfg.MaxInFlight, Namespace: cfg.TemporalNamespace, Transcripts: shared.transcripts, Broker: shared.broker, Collection: cfg.Collection, Keys: keys, Logger: log.With("component", "api"),
		Metrics: tel.Handler(), TokenSecret: secret, Models: modelContext(cfg, log), ApproveTools: cfg.ApproveTools,
	}).Handler()
	addr := cfg.ListenAddr(shared.dev)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	if ready != nil {
		ready(displayAddr(ln.Addr()))
	}
	select {
	case err := <-errc:
		return fmt.Errorf("http server: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down http server", "grace", cfg.ShutdownTimeout)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownTimeout)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("http shutdown: %w", err)
	}
	return nil
}

// displayAddr turns a listen address like [::]:8080 into localhost:8080.
func displayAddr(a net.Addr) string {
	host, port, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "localhost"
	}
	return net.JoinHostPort(host, port)
}

func sdkLogger(log *slog.Logger) sdklog.Logger {
	return sdklog.NewStructuredLogger(log.With("component", "temporal-sdk"))
}

// newKey prints a new API key for tenant and its CTXFLOW_API_KEYS entry
// (the key's SHA-256: the server never stores the key itself).
func newKey(tenant string, out io.Writer) error {
	if err := workflows.ValidateID("tenant", tenant); err != nil {
		return err
	}
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		return err
	}
	key := "cfk_" + base64.RawURLEncoding.EncodeToString(b[:])
	sum := sha256.Sum256([]byte(key))
	fmt.Fprintf(out, "key:   %s\nentry: %s:%s\n", key, tenant, hex.EncodeToString(sum[:]))
	return nil
}
