// Package worker builds ctxflow's ports from configuration, registers the
// workflows and activities, and runs a Temporal worker.
package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/ctxflow/ctxflow/activities"
	"github.com/ctxflow/ctxflow/activities/broker"
	"github.com/ctxflow/ctxflow/activities/ingest"
	"github.com/ctxflow/ctxflow/activities/milvus"
	"github.com/ctxflow/ctxflow/activities/offline"
	"github.com/ctxflow/ctxflow/activities/ollama"
	"github.com/ctxflow/ctxflow/activities/openai"
	"github.com/ctxflow/ctxflow/activities/pgtranscript"
	"github.com/ctxflow/ctxflow/activities/sqltools"
	"github.com/ctxflow/ctxflow/activities/tiktoken"
	"github.com/ctxflow/ctxflow/activities/transcript"
	"github.com/ctxflow/ctxflow/activities/vecstore"
	"github.com/ctxflow/ctxflow/convo"
	"github.com/ctxflow/ctxflow/internal/config"
	"github.com/ctxflow/ctxflow/internal/telemetry"
	"github.com/ctxflow/ctxflow/lexical"
	"github.com/ctxflow/ctxflow/workflows"
)

// Ports are the adapters the activities run on.
type Ports struct {
	Session *activities.Session
	Ingest  *activities.Ingest
	RAG     *activities.RAG
	Agent   *activities.Agent
	// Erase erases sessions and tenants and runs the retention sweep; its
	// Temporal client is set by [New].
	Erase *activities.Eraser
	// Broker carries answer deltas to streamed turns: in process, or
	// PostgreSQL's LISTEN/NOTIFY with the PostgreSQL transcript store (so
	// an API process elsewhere hears them).
	Broker activities.Broker
	// steps offers the session workflows' step events to Broker.
	steps workflows.StepPublisher
	close []func() error
}

// Close releases the adapters.
func (p *Ports) Close() error {
	var errs []error
	for _, c := range p.close {
		errs = append(errs, c())
	}
	return errors.Join(errs...)
}

// BuildPorts creates the adapters the configuration names. With provider
// "auto" it asks Ollama (bounded by ctx and a few seconds) whether it answers
// and has the default chat model, and falls back to the offline engine.
func BuildPorts(ctx context.Context, cfg config.Config, log *slog.Logger) (*Ports, error) {
	tok, err := tiktoken.New(cfg.Tokenizer)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	remote, err := openMCP(cfg, log)
	if err != nil {
		return nil, err
	}
	model, engine, err := chooseModel(ctx, cfg, tok, log)
	if err != nil {
		return nil, err
	}
	go func() { // beside the rest: a worker started after a crash polls 1 s sooner (docs/operations.md, "Recovery")
		start := time.Now()
		lexical.LoadSegmenter()
		log.Debug("Chinese dictionary loaded", "took", time.Since(start))
	}()
	store, err := openTranscripts(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	embedder, embedModel := chooseEmbedder(ctx, model, cfg, log)
	vectors, err := openVectorStore(ctx, cfg, embedder, embedModel, log)
	if err != nil {
		_ = store.Close()
		return nil, fmt.Errorf("vector store: %w", err)
	}
	offlineEngine := &offline.Engine{Tokenizer: tok}
	embs := embedders(model, embedder, embedModel, cfg.AltEmbeddingModels)
	// After the checks above, which need the adapter itself; labelled by
	// the configured model (and the offline engine), else "other".
	model = telemetry.MeterModel(model, cfg.Session.LLMModel, offline.ModelName)
	model = telemetry.TraceModel(model, engine) // GenAI "chat" spans
	rag := &activities.RAG{
		Store: vectors, Embedders: embs,
		Grader: offlineEngine, Reformulator: offlineEngine, Relevance: lexical.Relevance{},
		Model: model, Engine: engine, Tokenizer: tok,
	}
	if engine != offline.ModelName { // a real model grades and rewrites
		rag.Grader, rag.Reformulator = activities.ModelGrader{Model: model}, activities.ModelReformulator{Model: model}
	}
	checkDimension(ctx, rag, cfg, log)
	db, err := openSQL(ctx, cfg, log)
	if err != nil {
		_ = store.Close()
		_ = vectors.Close()
		return nil, fmt.Errorf("sql database: %w", err)
	}
	agent := &activities.Agent{
		Transcript: store, Tools: telemetry.TraceTools(append(db.Tools(), activities.KnowledgeTool(rag))), Tokenizer: tok,
		Planner: offline.Planner{}, ObservationMaxChars: cfg.ObservationMaxChars, ResultMaxBytes: cfg.ToolResultMaxBytes,
	}
	if engine != offline.ModelName { // a real model plans and summarises
		agent.Planner, agent.Model = activities.ModelPlanner{Model: model, Engine: engine}, model
	}
	closers := []func() error{store.Close, vectors.Close, db.Close}
	if remote != nil { // the MCP servers' tools
		agent.Remote, closers = telemetry.TraceToolSource(remote), append(closers, remote.Close)
	}
	var deltas activities.Broker = broker.NewLocal()
	if cfg.TranscriptStore == "postgres" {
		pg, err := broker.OpenPostgres(ctx, cfg.DatabaseURL)
		if err != nil {
			for _, c := range closers {
				_ = c()
			}
			return nil, err
		}
		deltas, closers = pg, append(closers, pg.Close)
	}
	uploads, err := filepath.Abs(cfg.Uploads())
	if err != nil {
		for _, c := range closers {
			_ = c()
		}
		return nil, fmt.Errorf("upload directory %s: %w", cfg.Uploads(), err)
	}
	summaries := convo.NewSummaryLRU(1024)
	eraser := &activities.Eraser{
		Namespace: cfg.TemporalNamespace, Transcript: store, Vectors: vectors, UploadDir: uploads,
		Caches: []interface{ Clear() }{summaries}, Retention: cfg.Retention,
		Scrub: embeddedScrub(cfg.DataDir), Logger: log.With("component", "erase"),
	}
	steps, stopSteps := broker.Offer(deltas, log)
	closers = append([]func() error{func() error { stopSteps(); return nil }}, closers...) // before the broker closes
	return &Ports{
		Agent: agent,
		Session: &activities.Session{
			Transcript: store, Model: model, Tokenizer: tok, SummaryCache: summaries, Engine: engine,
			Knowledge: vectors, Rewriter: rewriter(engine, model, cfg.Session.LLMModel),
			SmallTalk: lexical.SmallTalk{}, Intents: intents(engine, model), Broker: deltas,
		},
		Ingest: &activities.Ingest{Store: vectors, Embedder: embedder, Parser: ingest.Parser{Tokenizer: tok}, EmbedModel: embedModel, Alternatives: embs[1:]},
		RAG:    rag,
		Erase:  eraser,
		Broker: deltas,
		steps:  steps,
		close:  closers,
	}, nil
}

// intents is the intent classifier: the chat model when it is a real one,
// else the offline classifier over the labels' examples.
func intents(engine string, model activities.ChatModel) activities.IntentClassifier {
	if engine == offline.ModelName {
		return lexical.NewIntents(nil)
	}
	return activities.ModelIntents{Model: model}
}

// rewriter is the question rewriter: the chat model's structured
// {rewritten, topic} when it is a real one, with the offline rewriter to
// fall back on; else the offline rewriter.
func rewriter(engine string, model activities.ChatModel, name string) activities.Rewriter {
	if engine == offline.ModelName {
		return lexical.Rewriter{}
	}
	return activities.ModelRewriter{Model: model, ModelName: name, Fallback: lexical.Rewriter{}}
}

// transcriptStore is a TranscriptStore the worker closes.
type transcriptStore interface {
	activities.TranscriptStore
	Close() error
}

// openTranscripts opens the file store under the data directory, or the
// PostgreSQL store (migrating its schema first).
func openTranscripts(ctx context.Context, cfg config.Config, log *slog.Logger) (transcriptStore, error) {
	if cfg.TranscriptStore != "postgres" {
		return transcript.Open(transcript.Options{
			Dir: filepath.Join(cfg.DataDir, "transcripts"), Sync: cfg.TranscriptSync, Logger: log,
		})
	}
	octx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	s, err := pgtranscript.Open(octx, pgtranscript.Options{URL: cfg.DatabaseURL, Migrate: true})
	if err != nil {
		return nil, err
	}
	log.Info("transcript store: postgres")
	return s, nil
}

// Migrate applies the transcript store's missing schema migrations to the
// database at cfg.DatabaseURL and returns them.
func Migrate(ctx context.Context, cfg config.Config) ([]string, error) {
	if cfg.DatabaseURL == "" {
		return nil, errors.New("migrate: DATABASE_URL is not set")
	}
	return pgtranscript.Migrate(ctx, cfg.DatabaseURL)
}

// openSQL opens the agent's read-only database: the demo shop (generated
// under the data directory the first time), a SQLite file, or PostgreSQL.
func openSQL(ctx context.Context, cfg config.Config, log *slog.Logger) (*sqltools.DB, error) {
	switch src := cfg.SQLDatabase; {
	case strings.HasPrefix(src, "postgres://"), strings.HasPrefix(src, "postgresql://"):
		db, err := sqltools.OpenPostgres(ctx, src, sqltools.Options{})
		if err == nil {
			log.Info("agent database: postgres", "database", db.Name())
		}
		return db, err
	case src == "demo":
		path := filepath.Join(cfg.DataDir, "demo", "shop.db")
		if err := sqltools.EnsureDemo(ctx, path); err != nil {
			return nil, err
		}
		log.Info("agent database: the demo shop", "path", path, "tables", len(sqltools.DemoTables))
		return sqltools.OpenSQLite(path, sqltools.Options{})
	default:
		log.Info("agent database: sqlite", "path", src)
		return sqltools.OpenSQLite(src, sqltools.Options{})
	}
}

// vectorStore is a VectorStore the worker closes.
type vectorStore interface {
	activities.VectorStore
	Close() error
}

// openVectorStore opens the embedded store under the data directory, or
// the Milvus collection (created, if missing, with the embedder's
// dimension).
func openVectorStore(ctx context.Context, cfg config.Config, e activities.Embedder, model string, log *slog.Logger) (vectorStore, error) {
	if cfg.VectorStore != "milvus" {
		return vecstore.Open(vecstore.Options{Dir: filepath.Join(cfg.DataDir, "vectors"), Collection: cfg.Collection})
	}
	dim := 0
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if vs, err := e.Embed(pctx, model, []string{"dimension probe"}); err == nil && len(vs) == 1 {
		dim = len(vs[0])
	} else {
		log.Warn("embedder did not answer: a missing Milvus collection cannot be created", "embedder", model, "error", err)
	}
	octx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	s, err := milvus.Open(octx, milvus.Options{
		Address: cfg.MilvusAddress, Token: cfg.MilvusToken, Collection: cfg.Collection, Logger: log,
	})
	if err != nil && dim > 0 {
		// A missing collection needs the dimension; an existing one is
		// opened without it so that dimension adaptation can read its own.
		s, err = milvus.Open(octx, milvus.Options{
			Address: cfg.MilvusAddress, Token: cfg.MilvusToken, Collection: cfg.Collection, Dimension: dim, Logger: log,
		})
	}
	if err != nil {
		return nil, fmt.Errorf("milvus at %s: %w", cfg.MilvusAddress, err)
	}
	log.Info("vector store: milvus", "address", cfg.MilvusAddress, "collection", cfg.Collection)
	return s, nil
}

// embedders lists the chosen embedder, then the configured alternatives
// (dimension adaptation): "offline" is the built-in embedder, other names
// are models of the chat model's server, Ollama or the OpenAI-compatible
// one (usable only when chat runs on one).
func embedders(chat activities.ChatModel, chosen activities.Embedder, chosenModel string, alts []string) []activities.NamedEmbedder {
	out := []activities.NamedEmbedder{{Embedder: chosen, Model: chosenModel}}
	seen := map[string]bool{chosenModel: true}
	server := serverEmbedder(chat)
	for _, m := range alts {
		switch {
		case seen[m]:
		case m == offline.ModelName:
			out = append(out, activities.NamedEmbedder{Embedder: &offline.Engine{}, Model: m})
		case server != nil:
			out = append(out, activities.NamedEmbedder{Embedder: server, Model: m})
		default:
			continue
		}
		seen[m] = true
	}
	return out
}

// serverEmbedder is the chat model's server as an embedder: Ollama or the
// OpenAI-compatible one; nil for the offline engine.
func serverEmbedder(chat activities.ChatModel) activities.Embedder {
	switch c := chat.(type) {
	case *ollama.Client:
		return c
	case *openai.Client:
		return c
	}
	return nil
}

// checkDimension logs which embedder will search the collection, or why
// none can: the worker still starts (sessions can chat), and every
// retrieval reports the same error in its trace.
func checkDimension(ctx context.Context, rag *activities.RAG, cfg config.Config, log *slog.Logger) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	model, err := activities.CheckEmbedder(cctx, rag)
	if err != nil {
		log.Error("knowledge base cannot be searched", "collection", cfg.Collection, "error", err)
		return
	}
	log.Info("knowledge base embedder", "collection", cfg.Collection, "embedder", model)
}

// chooseEmbedder embeds with the server of the chat model when it has the
// embedding model (Ollama) or embeds with it (an OpenAI-compatible server,
// asked once), else with the offline engine's hashed n-grams.
func chooseEmbedder(ctx context.Context, chat activities.ChatModel, cfg config.Config, log *slog.Logger) (activities.Embedder, string) {
	if client, ok := chat.(*openai.Client); ok {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		n, err := client.Dimension(pctx, cfg.Session.EmbeddingModel)
		if err == nil {
			log.Info("embedder: the OpenAI-compatible server", "model", cfg.Session.EmbeddingModel, "dimension", n)
			return client, cfg.Session.EmbeddingModel
		}
		log.Warn("embedder: offline n-grams, the OpenAI-compatible server does not embed with the embedding model",
			"model", cfg.Session.EmbeddingModel, "error", err)
		return &offline.Engine{}, offline.ModelName
	}
	if client, ok := chat.(*ollama.Client); ok {
		pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		if has, err := client.HasModel(pctx, cfg.Session.EmbeddingModel); err == nil && has {
			log.Info("embedder: ollama", "model", cfg.Session.EmbeddingModel)
			return client, cfg.Session.EmbeddingModel
		}
		log.Warn("embedder: offline n-grams, ollama has no embedding model", "model", cfg.Session.EmbeddingModel)
	}
	return &offline.Engine{}, offline.ModelName
}

// OllamaClient is the Ollama adapter as cfg configures it: num_ctx on every
// call, the keep-alive, and a per-call bound a little under the activity's,
// so that a slow model is reported as a model timeout rather than an
// activity timeout.
func OllamaClient(cfg config.Config) (*ollama.Client, error) {
	client, err := ollama.New(ollama.Config{
		Host: cfg.OllamaHost, Timeout: cfg.Limits.LLMTimeout * 9 / 10,
		NumCtx: cfg.OllamaNumCtx, KeepAlive: cfg.OllamaKeepAlive,
	})
	if err != nil {
		return nil, fmt.Errorf("ollama: %w", err)
	}
	return client, nil
}

// OpenAIClient is the adapter of the OpenAI-compatible server as cfg
// configures it (provider "openai").
func OpenAIClient(cfg config.Config, log *slog.Logger) (*openai.Client, error) {
	client, err := openai.New(openai.Config{
		BaseURL: cfg.OpenAIBaseURL, APIKey: cfg.OpenAIAPIKey, Logger: log,
		ContextLength: cfg.OpenAIContextLength,
	})
	if err != nil {
		return nil, fmt.Errorf("openai: %w", err)
	}
	return client, nil
}

// pull downloads model to the server, logging its progress at most every
// 10% of each layer (and each new status).
func pull(ctx context.Context, client *ollama.Client, model string, log *slog.Logger) error {
	log.Info("ollama: pulling the model (CTXFLOW_OLLAMA_PULL=missing)", "model", model)
	last, lastPct := "", -10
	err := client.Pull(ctx, model, func(status string, completed, total int64) {
		pct := -1
		if total > 0 {
			pct = int(100 * completed / total)
		}
		if status != last || pct >= lastPct+10 {
			log.Info("ollama pull", "model", model, "status", status, "percent", pct)
			last, lastPct = status, pct
		}
	})
	if err != nil {
		return err
	}
	log.Info("ollama: model pulled", "model", model)
	return nil
}

// openAIModel is the adapter of the OpenAI-compatible server (provider
// "openai"). As provider "ollama", it is not asked anything at start-up:
// its first call says what is wrong.
func openAIModel(cfg config.Config, log *slog.Logger) (activities.ChatModel, string, error) {
	client, err := OpenAIClient(cfg, log)
	if err != nil {
		return nil, "", err
	}
	log.Info("model provider: openai-compatible server (CTXFLOW_MODEL_PROVIDER=openai)",
		"base_url", client.BaseURL(), "model", cfg.Session.LLMModel, "api_key_set", cfg.OpenAIAPIKey != "",
		"context_length", cfg.OpenAIContextLength)
	return client, "openai", nil
}

// chooseModel picks the chat model provider.
func chooseModel(ctx context.Context, cfg config.Config, tok convo.Tokenizer, log *slog.Logger) (activities.ChatModel, string, error) {
	offlineEngine := &offline.Engine{Tokenizer: tok}
	if cfg.ModelProvider == "offline" {
		log.Info("model provider: offline engine (CTXFLOW_MODEL_PROVIDER=offline)")
		return offlineEngine, offline.ModelName, nil
	}
	if cfg.ModelProvider == "openai" {
		return openAIModel(cfg, log)
	}
	client, err := OllamaClient(cfg)
	if err != nil {
		return nil, "", err
	}
	if cfg.ModelProvider == "ollama" {
		log.Info("model provider: ollama (CTXFLOW_MODEL_PROVIDER=ollama)", "host", client.Host())
		return client, "ollama", nil
	}
	pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	why := ""
	if err := client.Ping(pctx); err != nil {
		why = "ollama does not answer: " + err.Error()
	} else if ok, err := client.HasModel(pctx, cfg.Session.LLMModel); err != nil {
		why = "ollama model check failed: " + err.Error()
	} else if !ok && cfg.OllamaPull == "missing" {
		cancel() // a pull takes as long as the download
		if err := pull(ctx, client, cfg.Session.LLMModel, log); err != nil {
			why = "ollama pull failed: " + err.Error()
		}
	} else if !ok {
		why = fmt.Sprintf("ollama has no model %q: run `ollama pull %s`, or set CTXFLOW_OLLAMA_PULL=missing", cfg.Session.LLMModel, cfg.Session.LLMModel)
	}
	if why != "" {
		log.Warn("model provider: offline engine, answers are extractive and labelled as such", "reason", why,
			"probe", cfg.OllamaProbeInterval)
		if cfg.OllamaProbeInterval > 0 { // until the model appears
			return &lateModel{offline: offlineEngine, client: client, model: cfg.Session.LLMModel, interval: cfg.OllamaProbeInterval, log: log},
				offline.ModelName, nil
		}
		return offlineEngine, offline.ModelName, nil
	}
	log.Info("model provider: ollama", "host", client.Host(), "model", cfg.Session.LLMModel)
	return client, "ollama", nil
}

// Register adds ctxflow's workflows and activities to w.
func Register(w sdkworker.Registry, p *Ports) {
	w.RegisterWorkflowWithOptions(workflows.SessionWorkflow, workflow.RegisterOptions{Name: workflows.SessionWorkflowName})
	w.RegisterActivityWithOptions(p.Session, activity.RegisterOptions{})
	w.RegisterWorkflowWithOptions(workflows.IngestWorkflow, workflow.RegisterOptions{Name: workflows.IngestWorkflowName})
	w.RegisterWorkflowWithOptions(workflows.DeleteDocumentWorkflow, workflow.RegisterOptions{Name: workflows.DeleteDocumentWorkflowName})
	w.RegisterActivityWithOptions(p.Ingest, activity.RegisterOptions{})
	w.RegisterWorkflowWithOptions(workflows.CorrectiveRAGWorkflow, workflow.RegisterOptions{Name: workflows.CorrectiveRAGWorkflowName})
	w.RegisterActivityWithOptions(p.RAG, activity.RegisterOptions{})
	w.RegisterWorkflowWithOptions(workflows.TaskWorkflow, workflow.RegisterOptions{Name: workflows.TaskWorkflowName})
	w.RegisterActivityWithOptions(p.Agent, activity.RegisterOptions{})
	if p.Erase != nil {
		w.RegisterWorkflowWithOptions(workflows.EraseWorkflow, workflow.RegisterOptions{Name: workflows.EraseWorkflowName})
		w.RegisterWorkflowWithOptions(workflows.RetentionWorkflow, workflow.RegisterOptions{Name: workflows.RetentionWorkflowName})
		w.RegisterActivityWithOptions(p.Erase, activity.RegisterOptions{})
	}
}

// workflowTaskPollers is how many workflow-task polls a worker keeps open
// (the SDK's default is 2, shared by the sticky and the normal queue). With
// a fast model a turn is one workflow task, so under load two polls were
// the bottleneck: tasks and queries queued seconds on the sticky queue.
// Measured on 2 cores: 10 sessions 181 → 206 turns/s (16 polls: no more),
// 200 clients p99 3.1–3.9 → 1.4 s.
const workflowTaskPollers = 8

// New returns a worker of version v on the ctxflow task queue with
// everything registered, running at most maxActivities activities at once
// (0: the SDK's default), so that a burst of uploads or turns cannot take
// the process's memory without bound.
func New(c client.Client, p *Ports, maxActivities int, v Version) sdkworker.Worker {
	w := sdkworker.New(c, workflows.TaskQueue, sdkworker.Options{
		DeploymentOptions:                       v.options(),
		MaxConcurrentActivityExecutionSize:      maxActivities,
		MaxConcurrentWorkflowTaskPollers:        workflowTaskPollers,
		MaxConcurrentLocalActivityExecutionSize: maxActivities,
		Interceptors:                            append(telemetry.WorkerInterceptors(), stepsInterceptor(p.steps)),
	})
	if p.Erase != nil {
		p.Erase.Temporal = c
	}
	Register(w, p)
	return w
}

// RegisterSearchAttributes adds the session search attributes to the
// namespace if they are missing. On a cluster where this client may not
// (Temporal Cloud) it returns an error telling the operator what to create.
func RegisterSearchAttributes(ctx context.Context, c client.Client, namespace string) error {
	want := workflows.SearchAttributes()
	resp, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		return fmt.Errorf("list search attributes of %s: %w", namespace, err)
	}
	missing := map[string]enumspb.IndexedValueType{}
	for name, typ := range want {
		if _, ok := resp.GetCustomAttributes()[name]; !ok {
			missing[name] = typ
		}
	}
	if len(missing) == 0 {
		return nil
	}
	_, err = c.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
		Namespace: namespace, SearchAttributes: missing,
	})
	var exists *serviceerror.AlreadyExists
	if err != nil && !errors.As(err, &exists) {
		return fmt.Errorf("add search attributes %v to %s (create them with `temporal operator search-attribute create`): %w", keys(missing), namespace, err)
	}
	return nil
}

func keys(m map[string]enumspb.IndexedValueType) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
