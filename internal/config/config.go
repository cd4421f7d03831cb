// Package config reads ctxflow's service configuration from environment
// variables. Each variable is declared once, in settings: its name, default,
// meaning, range or choices, and the field of [Config] it sets. Loading and
// its errors, [Vars] (from which docs/configuration.md is generated) and
// [Check] (with which make lint checks the values deploy/ sets) derive from
// it; the defaults and ranges of the session limits are workflows'.
package config

import (
	"cmp"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ctxflow/ctxflow/convo"
	"github.com/ctxflow/ctxflow/workflows"
)

// Config is the service configuration.
type Config struct {
	// Temporal connection for `ctxflow worker` and `ctxflow api`; TLS and API
	// keys come from the SDK's own environment config (TEMPORAL_TLS_*,
	// TEMPORAL_API_KEY, TEMPORAL_PROFILE).
	TemporalAddress   string
	TemporalNamespace string
	// TemporalCompression is the gRPC compression to the Temporal server:
	// "gzip", "none", or "auto" (none on loopback, where compressing only
	// costs CPU; gzip elsewhere).
	TemporalCompression string

	HTTPAddr        string
	UIPort          int
	TemporalPort    int
	DataDir         string
	DemoDocs        string // `ctxflow dev`'s demo knowledge base: "builtin" (demo/), a path, or "off"
	MaxBodyBytes    int64
	MaxInFlight     int
	ShutdownTimeout time.Duration
	TurnWaitTimeout time.Duration
	// UploadDir holds documents uploaded through the API, which the workers
	// read by the same path. It is kept as configured; [Config.Uploads]
	// resolves it.
	UploadDir string
	// APIKeys and APIKeysFile hold the API keys (see [Config.Keys]);
	// AllowAnonymous lets `ctxflow api` serve without any.
	APIKeys        string
	APIKeysFile    string
	AllowAnonymous bool
	// TokenSecretValue is CTXFLOW_TOKEN_SECRET (see TokenSecret).
	TokenSecretValue  string
	MaxUploadBytes    int64
	IngestWaitTimeout time.Duration

	OllamaHost string
	// OllamaNumCtx is the num_ctx of every Ollama call; OllamaKeepAlive
	// how long the server keeps a model loaded (0: its default);
	// OllamaPull is "missing" (pull a missing model at start-up) or "never".
	OllamaNumCtx    int
	OllamaKeepAlive time.Duration
	OllamaPull      string
	// OllamaProbeInterval is how often a worker that started without its
	// Ollama model asks for it (0: never).
	OllamaProbeInterval time.Duration
	ModelProvider       string
	Collection          string
	// AltEmbeddingModels are tried when the collection's dimension is not
	// the embedding model's ("offline" is the built-in embedder).
	AltEmbeddingModels []string
	// OpenAIBaseURL and OpenAIAPIKey name the server of provider "openai"
	// (an OpenAI-compatible API) and its key ("": none).
	OpenAIBaseURL string
	OpenAIAPIKey  string
	// OpenAIContextLength is the context that server serves its chat
	// models with (0: what it says of them, vLLM's max_model_len).
	OpenAIContextLength int
	// VectorStore is "embedded" (under DataDir) or "milvus".
	VectorStore    string
	MilvusAddress  string
	MilvusToken    string
	Tokenizer      string
	TranscriptSync bool
	// TranscriptStore is "file" (under DataDir) or "postgres" (at
	// DatabaseURL).
	TranscriptStore string
	DatabaseURL     string
	// WorkerActivities bounds the activities a worker runs at once.
	WorkerActivities int
	// Deployment is the Worker Deployment the workers are versions of
	// ("": unversioned), and BuildID this worker's version ("": the
	// binary's build id).
	Deployment, BuildID string
	// SQLDatabase is the agent's read-only database: "demo" (the demo
	// shop, generated under DataDir), a SQLite file, or a postgres:// URL.
	SQLDatabase string
	// ObservationMaxChars caps a tool result in a task's model view.
	ObservationMaxChars int
	// ToolResultMaxBytes caps a tool result in the transcript.
	ToolResultMaxBytes int
	// MCPServers lists the MCP servers whose tools tasks may call
	// (activities/mcp.ParseServers reads it; "": none); MCPTimeout bounds
	// one call of their tools.
	MCPServers string
	MCPTimeout time.Duration
	// ApproveTools are each tenant's approveTools (CTXFLOW_APPROVE_TOOLS;
	// "*" names every tenant): added to its sessions' own.
	ApproveTools map[string][]string
	// Retention is each tenant's retention period (CTXFLOW_RETENTION; "*"
	// names every other tenant): its sessions idle longer are erased by
	// the sweep that runs every RetentionSweep.
	Retention      map[string]time.Duration
	RetentionSweep time.Duration

	Session workflows.SessionConfig
	Limits  workflows.Limits

	LogLevel  slog.Level
	LogFormat string

	// MetricsAddr is where `ctxflow worker` serves GET /metrics ("": it
	// does not); the API serves /metrics on its own port.
	MetricsAddr string
	// OTel is the trace exporter: "stdout" or "otlp" ("" when off).
	OTel string
}

// Var documents one environment variable.
type Var struct {
	Name, Default, Meaning string
	// Values is the range or the choices of a value ("": any text).
	Values string
}

// Vars lists every environment variable ctxflow reads, in the order of
// docs/configuration.md: the Var of each setting.
var Vars = func() []Var {
	vars := make([]Var, len(settings))
	for i, s := range settings {
		vars[i] = s.Var
	}
	return vars
}()

// A setting is one environment variable, declared once: its Var (name,
// default as documented, meaning, values) and parse, which checks a text
// against its range and sets its field of Config. A default of "unset"
// leaves the field zero.
type setting struct {
	Var
	// parse sets the value v into c, or says (naming the variable) why it
	// cannot. Nil for variables that others read (the Temporal SDK).
	parse func(c *Config, v string) error
}

// The defaults of sessions and of their limits are the workflows
// package's: the settings that override them take their defaults from here.
var (
	sessionDefaults = workflows.DefaultSessionConfig()
	limitDefaults   = workflows.DefaultLimits()
)

// settings is every variable ctxflow reads: load, Check, [Vars] (so
// docs/configuration.md) and the deploy checks (deploy/deploylint) derive
// from it.
var settings = []setting{
	read.str("TEMPORAL_ADDRESS", "127.0.0.1:7233", "Temporal frontend for `ctxflow worker` and `ctxflow api` (`ctxflow dev` runs its own)", func(c *Config, v string) { c.TemporalAddress = v }),
	read.str("TEMPORAL_NAMESPACE", "default", "Temporal namespace", func(c *Config, v string) { c.TemporalNamespace = v }),
	{Var: Var{Name: "TEMPORAL_API_KEY, TEMPORAL_TLS_*, TEMPORAL_PROFILE", Default: "unset", Meaning: "TLS, API key and profile, read by the Temporal SDK's environment config"}},
	read.str("CTXFLOW_TEMPORAL_COMPRESSION", "auto", "gRPC compression to Temporal: `gzip`, `none`, or `auto` (none when the address is loopback, as for `ctxflow dev`; gzip otherwise)", func(c *Config, v string) { c.TemporalCompression = v }).oneOf("auto", "gzip", "none"),
	read.str("CTXFLOW_HTTP_ADDR", "unset", "address of the HTTP API; unset: `:8080` for `ctxflow api`, `127.0.0.1:8080` (this machine only) for `ctxflow dev`", func(c *Config, v string) { c.HTTPAddr = v }),
	read.int("CTXFLOW_UI_PORT", "8233", "`ctxflow dev`: port of the Temporal Web UI (0 turns it off)", within(0, 65535), func(c *Config, n int) { c.UIPort = n }),
	read.int("CTXFLOW_TEMPORAL_PORT", "7233", "`ctxflow dev`: port of the embedded Temporal frontend (0 picks a free one)", within(0, 65535), func(c *Config, n int) { c.TemporalPort = n }),
	read.str("CTXFLOW_DATA_DIR", "./data", "`ctxflow dev` and the worker: Temporal's SQLite files (`temporal/temporal.db`, `temporal/visibility.db`) and the transcripts", func(c *Config, v string) { c.DataDir = v }),
	read.str("CTXFLOW_DEMO_DOCS", "builtin", "`ctxflow dev`: the demo knowledge base, ingested once into a new data dir (tenant `default`; documents deleted later stay deleted): `builtin` (the pages of `demo/`, compiled in: 华为Mate60, Mate70, iPhone 15 and ctxflow itself, in Chinese and English), a file or directory as `ctxflow ingest` takes, or `off`", func(c *Config, v string) { c.DemoDocs = v }),
	read.int("CTXFLOW_MAX_BODY_BYTES", "1048576", "largest HTTP request body accepted", atLeast(1024), func(c *Config, n int) { c.MaxBodyBytes = int64(n) }),
	read.int("CTXFLOW_API_MAX_INFLIGHT", "512", "most `/v1` requests the API serves at once (streams and `?wait=true` turns included); one more is answered 429 `overloaded` with `Retry-After: 1`", atLeast(1), func(c *Config, n int) { c.MaxInFlight = n }),
	read.dur("CTXFLOW_SHUTDOWN_TIMEOUT", "15s", "grace period for in-flight requests and activities on SIGINT/SIGTERM", zeroOrMore, func(c *Config, d time.Duration) { c.ShutdownTimeout = d }),
	read.dur("CTXFLOW_TURN_WAIT_TIMEOUT", "5m", "longest a `?wait=true` turn request waits for its answer", moreThanZero, func(c *Config, d time.Duration) { c.TurnWaitTimeout = d }),
	read.str("CTXFLOW_UPLOAD_DIR", "$CTXFLOW_DATA_DIR/uploads", "`POST /v1/documents` stores uploads here and the workers read them by the same absolute path: with separate api and worker processes, mount one shared volume at this path in both", func(c *Config, v string) { c.UploadDir = v }),
	read.int("CTXFLOW_MAX_UPLOAD_BYTES", "33554432", "largest document upload (`POST /v1/documents` body) accepted", atLeast(1024), func(c *Config, n int) { c.MaxUploadBytes = int64(n) }),
	read.dur("CTXFLOW_INGEST_WAIT_TIMEOUT", "5m", "longest a `?wait=true` upload waits for its ingestion (then `202`, and the ingestion goes on)", moreThanZero, func(c *Config, d time.Duration) { c.IngestWaitTimeout = d }),
	read.str("OLLAMA_HOST", "http://127.0.0.1:11434", "Ollama server used for chat", func(c *Config, v string) { c.OllamaHost = v }),
	read.int("CTXFLOW_OLLAMA_NUM_CTX", "8192", "context length (`num_ctx`) asked of Ollama on every call, the same for every call so that the server never reloads the model (its own default, 4,096 on most machines, cuts longer prompts silently); capped by the model's own. A session whose window (`maxTokens`) and answer (`LLM_MAX_TOKENS`) do not fit it is refused when it is created", within(512, 1<<21), func(c *Config, n int) { c.OllamaNumCtx = n }),
	read.dur("CTXFLOW_OLLAMA_KEEP_ALIVE", "unset", "how long Ollama keeps the model loaded after a call (a Go duration; negative: for good); unset: the server's default (5m)", anyValue, func(c *Config, d time.Duration) { c.OllamaKeepAlive = d }),
	read.dur("CTXFLOW_OLLAMA_PROBE_INTERVAL", "30s", "how often a worker that started without its Ollama model (Ollama down, or the model not pulled) asks for it: once it is there, answers move from the offline engine to it without a restart (0: never)", anyValue, func(c *Config, d time.Duration) { c.OllamaProbeInterval = d }),
	read.str("CTXFLOW_OLLAMA_PULL", "never", "`missing`: a worker whose model Ollama lacks pulls it at start-up, logging the progress; `never`: it names `ollama pull <model>` in its log and answers offline", func(c *Config, v string) { c.OllamaPull = v }).oneOf("never", "missing"),
	read.str("CTXFLOW_MODEL_PROVIDER", "auto", "`auto` (Ollama if it answers at start-up and has the model, else offline), `ollama`, `openai` (the OpenAI-compatible server at `CTXFLOW_OPENAI_BASE_URL`) or `offline`", func(c *Config, v string) { c.ModelProvider = v }).oneOf("auto", "ollama", "openai", "offline"),
	read.raw("CTXFLOW_OPENAI_BASE_URL", "unset", "with `CTXFLOW_MODEL_PROVIDER=openai` (and then required): the server's OpenAI-compatible base URL, the part before `/chat/completions`, e.g. `http://127.0.0.1:8000/v1` (vLLM), `http://127.0.0.1:8080/v1` (llama.cpp), `http://127.0.0.1:1234/v1` (LM Studio), `https://api.openai.com/v1`; chat and embeddings go there", "an `http://` or `https://` URL", parseOpenAIBaseURL),
	read.str("CTXFLOW_OPENAI_API_KEY", "unset", "its API key, sent as `Authorization: Bearer`; unset: none (a local server)", func(c *Config, v string) { c.OpenAIAPIKey = v }),
	read.int("CTXFLOW_OPENAI_CONTEXT_LENGTH", "0", "the context, in tokens, that the OpenAI-compatible server serves the chat model with (its own setting: vLLM's `--max-model-len`, llama.cpp's `-c`, Ollama's `OLLAMA_CONTEXT_LENGTH` or a Modelfile's `num_ctx`; this API cannot ask for one). A session whose window (`maxTokens`) and answer (`LLM_MAX_TOKENS`) do not fit it is refused when it is created. 0: the `max_model_len` vLLM lists in `/v1/models`, else not checked", zeroOr("ask the server", 512, 1<<21), func(c *Config, n int) { c.OpenAIContextLength = n }),
	read.str("CTXFLOW_COLLECTION", "rag_documents", "vector collection of the knowledge base (under `CTXFLOW_DATA_DIR/vectors`, or in Milvus)", func(c *Config, v string) { c.Collection = v }),
	read.str("CTXFLOW_VECTOR_STORE", "embedded", "`embedded` (a crash-safe chunk log + bleve under `CTXFLOW_DATA_DIR/vectors`) or `milvus`", func(c *Config, v string) { c.VectorStore = v }).oneOf("embedded", "milvus"),
	read.str("MILVUS_ADDRESS", "localhost:19530", "Milvus endpoint when `CTXFLOW_VECTOR_STORE=milvus` (`https://…` for TLS)", func(c *Config, v string) { c.MilvusAddress = v }),
	read.str("MILVUS_TOKEN", "unset", "Milvus API key or `user:password`", func(c *Config, v string) { c.MilvusToken = v }),
	read.str("CTXFLOW_TOKENIZER", "cl100k_base", "tiktoken encoding for token budgets (`cl100k_base` or `o200k_base`)", func(c *Config, v string) { c.Tokenizer = v }).oneOf("cl100k_base", "o200k_base"),
	read.int("CTXFLOW_WORKER_ACTIVITIES", "64", "activities (and local activities) a worker runs at once; more wait their turn", within(1, 10_000), func(c *Config, n int) { c.WorkerActivities = n }),
	read.str("CTXFLOW_DEPLOYMENT", "unset", "Worker Deployment the workers are versions of: set, a worker takes only the tasks of its version once `ctxflow deploy promote` made it current (see [deploying a new version](operations.md#deploying-a-new-version)); unset, workers are unversioned and take every task", func(c *Config, v string) { c.Deployment = v }),
	read.str("CTXFLOW_BUILD_ID", "unset", "this worker's version in `CTXFLOW_DEPLOYMENT`, and the build `ctxflow deploy promote` promotes; unset: the binary's Go build ID (`ctxflow@…`)", func(c *Config, v string) { c.BuildID = v }),
	read.bool("CTXFLOW_TRANSCRIPT_FSYNC", "true", "fsync every transcript append (false survives process crashes, not machine crashes)", func(c *Config, b bool) { c.TranscriptSync = b }),
	read.str("CTXFLOW_TRANSCRIPT_STORE", "file", "`file` (JSONL under `CTXFLOW_DATA_DIR/transcripts`: one worker process, or `ctxflow dev`) or `postgres` (at `DATABASE_URL`, shared by any number of workers)", func(c *Config, v string) { c.TranscriptStore = v }).oneOf("file", "postgres"),
	read.str("DATABASE_URL", "unset", "PostgreSQL of the transcripts when `CTXFLOW_TRANSCRIPT_STORE=postgres` (`postgres://user:password@host:5432/db`; `pool_max_conns=N` sizes a worker's pool); workers migrate its schema at start-up, `ctxflow migrate` does it alone", func(c *Config, v string) { c.DatabaseURL = v }),
	read.str("CTXFLOW_LLM_MODEL", sessionDefaults.LLMModel, "default chat model of new sessions", func(c *Config, v string) { c.Session.LLMModel = v }),
	read.str("CTXFLOW_EMBEDDING_MODEL", sessionDefaults.EmbeddingModel, "default embedding model of new sessions", func(c *Config, v string) { c.Session.EmbeddingModel = v }),
	read.raw("CTXFLOW_ALT_EMBEDDING_MODELS", "offline", "embedders tried, in order, when the collection's dimension is not the embedding model's (comma-separated models of the chat provider's server, Ollama or the OpenAI-compatible one; `offline` is the built-in n-gram embedder, 384 dimensions)", "", parseAltEmbeddingModels),
	read.int("CONTEXT_MAX_TOKENS", strconv.Itoa(sessionDefaults.MaxTokens), "default token budget of the model view", anyValue, func(c *Config, n int) { c.Session.MaxTokens = n }),
	read.int("SUMMARY_TRIGGER_THRESHOLD", strconv.Itoa(sessionDefaults.SummaryThreshold), "default token count above which older history is summarised", anyValue, func(c *Config, n int) { c.Session.SummaryThreshold = n }),
	read.dur("LLM_TIMEOUT", durText(limitDefaults.LLMTimeout), "start-to-close timeout of one model call (an activity)", limit(workflows.LLMTimeoutRange), func(c *Config, d time.Duration) { c.Limits.LLMTimeout = d }),
	read.dur("CTXFLOW_HEARTBEAT_TIMEOUT", durText(limitDefaults.HeartbeatTimeout), "a model activity silent this long is retried on another worker (crash detection)", limit(workflows.HeartbeatTimeoutRange), func(c *Config, d time.Duration) { c.Limits.HeartbeatTimeout = d }),
	read.int("LLM_MAX_TOKENS", strconv.Itoa(limitDefaults.LLMMaxTokens), "tokens generated at most per model call", limit(workflows.LLMMaxTokensRange), func(c *Config, n int) { c.Limits.LLMMaxTokens = n }),
	read.int("CTXFLOW_CONTINUE_AS_NEW_TURNS", strconv.Itoa(limitDefaults.ContinueAsNewEvery), "turns per workflow run before the session continues as new", limit(workflows.ContinueAsNewRange), func(c *Config, n int) { c.Limits.ContinueAsNewEvery = n }),
	read.dur("CTXFLOW_SESSION_IDLE_TTL", durText(limitDefaults.IdleTTL), "an idle session's run ends cleanly after this; its next turn revives it", limit(workflows.IdleTTLRange), func(c *Config, d time.Duration) { c.Limits.IdleTTL = d }),
	read.int("CTXFLOW_RECENT_TURNS", strconv.Itoa(limitDefaults.RecentTurns), "turn results a session keeps for the turn and steps queries", limit(workflows.RecentTurnsRange), func(c *Config, n int) { c.Limits.RecentTurns = n }),
	read.str("CTXFLOW_SQL_DATABASE", "demo", "the agent's read-only SQL database: `demo` (a shop of 14 tables, generated under `$CTXFLOW_DATA_DIR/demo/shop.db`), the path of a SQLite file, or a `postgres://` URL", func(c *Config, v string) { c.SQLDatabase = v }),
	read.int("CTXFLOW_MAX_QUESTION_BYTES", strconv.Itoa(limitDefaults.MaxQuestionBytes), "largest question (or task goal) a turn may carry, in bytes: a longer one is refused with 400. Retrieval's work is bounded apart from it (at most 64 distinct terms a keyword search)", limit(workflows.MaxQuestionBytesRange), func(c *Config, n int) { c.Limits.MaxQuestionBytes = n }),
	read.int("MAX_STEPS", strconv.Itoa(sessionDefaults.MaxSteps), "default `maxSteps` of new sessions: agent task steps before the task pauses with a progress summary", anyValue, func(c *Config, n int) { c.Session.MaxSteps = n }),
	read.dur("CTXFLOW_FAST_MODEL", durText(limitDefaults.FastModel), "a chat model whose answers in a session have taken less than this on average is called as a local activity inside the turn's workflow task (one workflow task a turn instead of two); slower ones, and a failure there, as regular activities; retrievals under it, and running summaries under a tenth of it, run in their workflow tasks too; 0: always regular", limit(workflows.FastModelRange), func(c *Config, d time.Duration) { c.Limits.FastModel = d }),
	read.int("MESSAGE_COMPRESS_RECENT_WINDOW", strconv.Itoa(limitDefaults.TaskRecentMessages), "unfolded messages a task's model view holds before older steps are folded into its running summary", limit(workflows.TaskRecentMessagesRange), func(c *Config, n int) { c.Limits.TaskRecentMessages = n }),
	read.int("MESSAGE_COMPRESS_MAX_LENGTH", "5000", "characters of a tool result in a task's model view (lists cut to their first 10 items); the transcript keeps it whole", within(100, 1_000_000), func(c *Config, n int) { c.ObservationMaxChars = n }),
	read.int("CTXFLOW_TOOL_RESULT_MAX_BYTES", "65536", "bytes of a tool result's JSON stored in the transcript: a larger one is cut there, and what is stored (and shown to the model) says what was cut", within(1024, 16<<20), func(c *Config, n int) { c.ToolResultMaxBytes = n }),
	read.str("CTXFLOW_MCP_SERVERS", "unset", "MCP servers whose tools agent tasks may call (named `mcp:<server>/<tool>`): `name=stdio:command args…` or `name=http(s)://…/mcp`, separated by `;`, or a JSON array of `{\"name\", \"command\": [...] | \"url\", \"env\", \"headers\", \"timeout\", \"tenants\"}` (see [MCP tools](#mcp-tools)). A task lists them when it starts; unset: none", func(c *Config, v string) { c.MCPServers = v }),
	read.dur("CTXFLOW_MCP_TIMEOUT", "60s", "timeout of one MCP tool call (an activity; a server's `timeout` overrides it); tools the server marks read-only or idempotent are tried 3 times, others once", moreThanZero, func(c *Config, d time.Duration) { c.MCPTimeout = d }),
	read.raw("CTXFLOW_APPROVE_TOOLS", "unset", "tools whose calls wait for a person's approval, per tenant, added to each session's `approveTools` (which cannot remove them): `tenant=pattern,pattern` separated by `;`, glob patterns of tool names (`run_sql`, `mcp:filesystem/*`); tenant `*` is every tenant, e.g. `*=run_sql;acme=mcp:*`. For sessions started (or continued as new) after the setting", "", parseApproveTools),
	read.raw("CTXFLOW_RETENTION", "unset", "how long each tenant's sessions are kept after their last activity: a session idle longer is erased for good (transcript, summaries, facts, workflow histories; see [retention and erasure](operations.md#retention-and-erasure)) by the sweep the workers schedule. `tenant=duration` separated by `;`, durations in Go syntax or days (`720h`, `30d`); tenant `*` is every tenant not named, `0` keeps a tenant's sessions, e.g. `*=90d;acme=30d;audit=0`. Unset: kept for good (no sweep)", "", parseRetention),
	read.dur("CTXFLOW_RETENTION_SWEEP", "1h", "how often the retention sweep runs (a Temporal schedule the workers create when `CTXFLOW_RETENTION` is set)", within(int64(time.Minute), int64(7*24*time.Hour)), func(c *Config, d time.Duration) { c.RetentionSweep = d }),
	read.str("CTXFLOW_API_KEYS", "unset", "API keys, `tenant:<sha256 of the key>` separated by commas (`ctxflow key TENANT` makes one): each request then needs `Authorization: Bearer <key>`, and its tenant is the key's. Unset: no keys", func(c *Config, v string) { c.APIKeys = v }),
	read.str("CTXFLOW_API_KEYS_FILE", "unset", "a file of API keys, one `tenant:<sha256>` a line (`#` comments), added to `CTXFLOW_API_KEYS`", func(c *Config, v string) { c.APIKeysFile = v }),
	read.raw("CTXFLOW_TOKEN_SECRET", "unset", "secret that signs the page tokens of `GET /v1/sessions` (16 bytes at least); unset: a random one kept in `$CTXFLOW_DATA_DIR/token-secret`. The API processes of one deployment share it", "at least 16 bytes", parseTokenSecret),
	read.bool("CTXFLOW_ALLOW_ANONYMOUS", "false", "let `ctxflow api` serve without API keys (any caller then picks a tenant with `X-Tenant-ID`); `ctxflow dev` always may, and says so", func(c *Config, b bool) { c.AllowAnonymous = b }),
	read.str("CTXFLOW_METRICS_ADDR", "unset", "`ctxflow worker`: address of its Prometheus `GET /metrics` listener, e.g. `:9090` (unset: none; `ctxflow dev` and `ctxflow api` serve `/metrics` on the API's port)", func(c *Config, v string) { c.MetricsAddr = v }),
	read.str("CTXFLOW_OTEL", "off", "OpenTelemetry traces, one per turn across API, workflow and activities: `off`, `stdout` (a JSON line per span) or `otlp` (gRPC to `OTEL_EXPORTER_OTLP_ENDPOINT`, default `localhost:4317`, and OpenTelemetry's other `OTEL_EXPORTER_OTLP_*` variables)", func(c *Config, v string) {
		if v != "off" {
			c.OTel = v
		}
	}).oneOf("off", "stdout", "otlp"),
	read.raw("CTXFLOW_LOG_LEVEL", "info", "debug, info, warn or error", "`debug`, `info`, `warn`, `error`", func(c *Config, v string) error {
		if err := c.LogLevel.UnmarshalText([]byte(v)); err != nil {
			return fmt.Errorf("CTXFLOW_LOG_LEVEL: %w", err)
		}
		return nil
	}),
	read.str("CTXFLOW_LOG_FORMAT", "text", "text or json", func(c *Config, v string) { c.LogFormat = v }).oneOf("text", "json"),
}

// rules are the checks that tie settings together, made once each
// setting's own value is read.
var rules = []func(c Config) error{
	func(c Config) error {
		if c.TranscriptStore == "postgres" && c.DatabaseURL == "" {
			return errors.New("CTXFLOW_TRANSCRIPT_STORE=postgres: DATABASE_URL is not set")
		}
		return nil
	},
	func(c Config) error {
		if c.ModelProvider == "openai" && c.OpenAIBaseURL == "" {
			return errors.New("CTXFLOW_MODEL_PROVIDER=openai: CTXFLOW_OPENAI_BASE_URL is not set (the server's OpenAI-compatible base URL, e.g. http://127.0.0.1:8000/v1)")
		}
		return nil
	},
}

// Load reads the configuration from the environment.
func Load() (Config, error) { return load(os.LookupEnv) }

// load reads every setting from lookup (unset or blank: its default), then
// checks the rules and, if each value was good alone, the session defaults
// and limits together.
func load(lookup func(string) (string, bool)) (Config, error) {
	c := Config{Session: sessionDefaults, Limits: limitDefaults}
	var errs []error
	for _, s := range settings {
		v, ok := lookup(s.Name)
		if v = strings.TrimSpace(v); s.parse == nil || !ok || v == "" {
			if s.parse == nil || s.Default == "unset" {
				continue
			}
			v = s.Default
		}
		if err := s.check(&c, v); err != nil {
			errs = append(errs, err)
		}
	}
	for _, rule := range rules {
		if err := rule(c); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 { // together (should the rules ever tie options)
		if err := c.Session.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("session defaults: %w", err))
		}
		if err := c.Limits.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return c, fmt.Errorf("configuration: %w", errors.Join(errs...))
	}
	return c, nil
}

// check reads v into c and checks it alone: its own range, then, set
// alone on the defaults, workflows' rules for sessions and limits, so that
// a value out of their range is reported under its variable's name.
func (s setting) check(c *Config, v string) error {
	if err := s.parse(c, v); err != nil {
		return err
	}
	alone := Config{Session: sessionDefaults, Limits: limitDefaults}
	if err := s.parse(&alone, v); err != nil {
		return err
	}
	if err := errors.Join(alone.Session.Validate(), alone.Limits.Validate()); err != nil {
		return fmt.Errorf("%s: %w", s.Name, err)
	}
	return nil
}

// Check reports whether value is a good value of the variable name, alone
// (the rules that tie variables together are load's): deploy/deploylint
// checks the values that deploy/ sets with it. Names that ctxflow does not
// read itself (the Temporal SDK's) are not checked.
func Check(name, value string) error {
	value = strings.TrimSpace(value)
	for _, s := range settings {
		if s.Name == name && s.parse != nil && value != "" {
			return s.check(&Config{}, value)
		}
	}
	return nil
}

// read declares settings: each method takes the variable's name, its
// default as documented, its meaning, and where its value goes in Config.
var read declare

type declare struct{}

// str is a text setting.
func (declare) str(name, def, meaning string, set func(*Config, string)) setting {
	return setting{Var{name, def, meaning, ""}, func(c *Config, v string) error {
		set(c, v)
		return nil
	}}
}

// raw is a setting whose text parse reads and checks itself; values
// documents what it takes.
func (declare) raw(name, def, meaning, values string, parse func(*Config, string) error) setting {
	return setting{Var{name, def, meaning, values}, parse}
}

// int is an integer setting in the range r.
func (declare) int(name, def, meaning string, r bounds, set func(*Config, int)) setting {
	return setting{Var{name, def, meaning, r.text(strconv.FormatInt)}, func(c *Config, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("%s=%q: not an integer", name, v)
		}
		if !r.has(int64(n)) {
			return fmt.Errorf("%s %d: want %s", name, n, r.text(strconv.FormatInt))
		}
		set(c, n)
		return nil
	}}
}

// dur is a duration setting (Go syntax: 30s, 5m) in the range r.
func (declare) dur(name, def, meaning string, r bounds, set func(*Config, time.Duration)) setting {
	return setting{Var{name, def, meaning, r.text(durFormat)}, func(c *Config, v string) error {
		d, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("%s=%q: not a duration like 30s or 5m", name, v)
		}
		if !r.has(int64(d)) {
			return fmt.Errorf("%s %s: want %s", name, d, r.text(durFormat))
		}
		set(c, d)
		return nil
	}}
}

// bool is a true-or-false setting (strconv.ParseBool: 1, t, TRUE…).
func (declare) bool(name, def, meaning string, set func(*Config, bool)) setting {
	return setting{Var{name, def, meaning, "`true`, `false`"}, func(c *Config, v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("%s=%q: not true or false", name, v)
		}
		set(c, b)
		return nil
	}}
}

// oneOf limits s to the given values.
func (s setting) oneOf(values ...string) setting {
	quoted := make([]string, len(values))
	for i, v := range values {
		quoted[i] = "`" + v + "`"
	}
	s.Values = strings.Join(quoted, ", ")
	parse := s.parse
	s.parse = func(c *Config, v string) error {
		if !slices.Contains(values, v) {
			return fmt.Errorf("%s %q: want %s or %s", s.Name, v, strings.Join(values[:len(values)-1], ", "), values[len(values)-1])
		}
		return parse(c, v)
	}
	return s
}

// bounds are the values an integer or duration setting may take: min to
// max (no upper bound when max is 0), and 0 too when zero names what it
// means. check is false for the limits of workflows.Limits, which their
// Validate checks (with the same range).
type bounds struct {
	min, max int64
	zero     string
	check    bool
	desc     string // how they read, when not as min and max
}

var (
	anyValue     = bounds{desc: "-"}
	zeroOrMore   = bounds{min: 0, check: true, desc: "0 or more"}
	moreThanZero = bounds{min: 1, check: true, desc: "more than 0"}
)

func within(min, max int64) bounds { return bounds{min: min, max: max, check: true} }
func atLeast(min int64) bounds     { return bounds{min: min, check: true} }

func zeroOr(meaning string, min, max int64) bounds {
	return bounds{min: min, max: max, zero: meaning, check: true}
}

// limit is the range of a knob of workflows.Limits, documented here and
// checked by Limits.Validate.
func limit(r workflows.Range) bounds { return bounds{min: r.Min, max: r.Max} }

func (b bounds) has(n int64) bool {
	return !b.check || b.zero != "" && n == 0 || n >= b.min && (b.max == 0 || n <= b.max)
}

// text is how the bounds read in documentation and errors, with numbers
// formatted by format.
func (b bounds) text(format func(int64, int) string) string {
	f := func(n int64) string { return format(n, 10) }
	var s string
	switch {
	case b.desc == "-":
		return ""
	case b.desc != "":
		return b.desc
	case b.max == 0:
		s = "at least " + f(b.min)
	default:
		s = f(b.min) + " to " + f(b.max)
	}
	if b.zero != "" {
		s = "0 (" + b.zero + ") or " + s
	}
	return s
}

// durText writes a duration as the documentation does: whole hours in h,
// whole seconds in s ("60s", not "1m0s"), else as Go does ("500ms").
func durText(d time.Duration) string {
	switch {
	case d == 0:
		return "0"
	case d%time.Hour == 0:
		return strconv.FormatInt(int64(d/time.Hour), 10) + "h"
	case d%time.Second == 0:
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	}
	return d.String()
}

func durFormat(n int64, _ int) string { return durText(time.Duration(n)) }

func parseAltEmbeddingModels(c *Config, v string) error {
	c.AltEmbeddingModels = nil
	for m := range strings.SplitSeq(v, ",") {
		if m = strings.TrimSpace(m); m != "" {
			c.AltEmbeddingModels = append(c.AltEmbeddingModels, m)
		}
	}
	return nil
}

func parseOpenAIBaseURL(c *Config, v string) error {
	if u, err := url.Parse(v); err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return fmt.Errorf("CTXFLOW_OPENAI_BASE_URL %q: want an http:// or https:// URL, e.g. http://127.0.0.1:8000/v1", v)
	}
	c.OpenAIBaseURL = v
	return nil
}

func parseTokenSecret(c *Config, v string) error {
	if len(v) < 16 {
		return fmt.Errorf("CTXFLOW_TOKEN_SECRET: %d bytes, want at least 16", len(v))
	}
	c.TokenSecretValue = v
	return nil
}

// parseRetention reads CTXFLOW_RETENTION, `tenant=duration;…`.
func parseRetention(c *Config, v string) error {
	const name = "CTXFLOW_RETENTION"
	out := map[string]time.Duration{}
	var errs []error
	for part := range strings.SplitSeq(v, ";") {
		if strings.TrimSpace(part) == "" {
			continue
		}
		tenant, period, ok := strings.Cut(part, "=")
		tenant, period = strings.TrimSpace(tenant), strings.TrimSpace(period)
		if !ok || tenant == "" {
			errs = append(errs, fmt.Errorf("%s: %q: want tenant=duration (tenant * for every other tenant)", name, convo.Clip(part, 60)))
			continue
		}
		if tenant != "*" {
			if err := workflows.ValidateID("tenant", tenant); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", name, err))
				continue
			}
		}
		d, err := parsePeriod(period)
		if err != nil || d < 0 {
			errs = append(errs, fmt.Errorf("%s: tenant %s: %q: want a duration like 720h or 30d (0: kept)", name, tenant, convo.Clip(period, 30)))
			continue
		}
		if _, dup := out[tenant]; dup {
			errs = append(errs, fmt.Errorf("%s: tenant %s is named twice", name, tenant))
			continue
		}
		out[tenant] = d
	}
	c.Retention = out
	return errors.Join(errs...)
}

// parsePeriod reads a Go duration, or a whole number of days ("30d").
func parsePeriod(v string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(v, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n < 0 || n > 100*365 {
			return 0, fmt.Errorf("%q: not a number of days", v)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	return time.ParseDuration(v)
}

// parseApproveTools reads CTXFLOW_APPROVE_TOOLS, `tenant=pattern,pattern;…`.
func parseApproveTools(c *Config, v string) error {
	const name = "CTXFLOW_APPROVE_TOOLS"
	out := map[string][]string{}
	var errs []error
	for part := range strings.SplitSeq(v, ";") {
		if strings.TrimSpace(part) == "" {
			continue
		}
		tenant, list, ok := strings.Cut(part, "=")
		tenant = strings.TrimSpace(tenant)
		if !ok || tenant == "" {
			errs = append(errs, fmt.Errorf("%s: %q: want tenant=pattern,pattern (tenant * for every tenant)", name, convo.Clip(part, 60)))
			continue
		}
		if tenant != "*" {
			if err := workflows.ValidateID("tenant", tenant); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", name, err))
				continue
			}
		}
		for pat := range strings.SplitSeq(list, ",") {
			if pat = strings.TrimSpace(pat); pat != "" && !slices.Contains(out[tenant], pat) {
				out[tenant] = append(out[tenant], pat)
			}
		}
		if err := workflows.ValidateApproveTools(out[tenant]); err != nil || len(out[tenant]) == 0 {
			errs = append(errs, fmt.Errorf("%s: tenant %s: %v", name, tenant, cmp.Or[error](err, errors.New("no pattern"))))
		}
	}
	c.ApproveTools = out
	return errors.Join(errs...)
}

// Keys returns the API keys: the SHA-256 (hex) of each key → its tenant,
// from CTXFLOW_API_KEYS ("tenant:sha256,...") and the lines of
// CTXFLOW_API_KEYS_FILE ("tenant:sha256"; blank lines and # comments
// skipped). Nil when neither names a key.
func (c Config) Keys() (map[string]string, error) {
	var entries []string
	for e := range strings.SplitSeq(c.APIKeys, ",") {
		entries = append(entries, e)
	}
	if c.APIKeysFile != "" {
		b, err := os.ReadFile(c.APIKeysFile)
		if err != nil {
			return nil, fmt.Errorf("CTXFLOW_API_KEYS_FILE: %w", err)
		}
		for line := range strings.SplitSeq(string(b), "\n") {
			if i := strings.IndexByte(line, '#'); i >= 0 {
				line = line[:i]
			}
			entries = append(entries, line)
		}
	}
	var keys map[string]string
	for _, e := range entries {
		if e = strings.TrimSpace(e); e == "" {
			continue
		}
		tenant, sum, ok := strings.Cut(e, ":")
		tenant, sum = strings.TrimSpace(tenant), strings.ToLower(strings.TrimSpace(sum))
		if !ok || len(sum) != 64 || strings.Trim(sum, "0123456789abcdef") != "" {
			return nil, fmt.Errorf("API key entry %q: want tenant:<SHA-256 of the key, 64 hex digits> (ctxflow key TENANT makes one)", convo.Clip(e, 40))
		}
		if err := workflows.ValidateID("tenant", tenant); err != nil {
			return nil, fmt.Errorf("API key entry %q: %w", convo.Clip(e, 40), err)
		}
		if keys == nil {
			keys = map[string]string{}
		}
		if t, dup := keys[sum]; dup && t != tenant {
			return nil, fmt.Errorf("one API key is given to two tenants (%s and %s)", t, tenant)
		}
		keys[sum] = tenant
	}
	return keys, nil
}

// Uploads returns the upload directory: UploadDir with a leading
// $CTXFLOW_DATA_DIR (the default, or a value no shell expanded) replaced by
// the data directory.
func (c Config) Uploads() string {
	dir := c.UploadDir
	if rest, ok := strings.CutPrefix(dir, "$CTXFLOW_DATA_DIR"); ok {
		dir = c.DataDir + rest
	}
	return filepath.Clean(dir)
}

// Logger returns the slog logger the configuration asks for.
func (c Config) Logger() *slog.Logger {
	opts := &slog.HandlerOptions{Level: c.LogLevel}
	if c.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, opts))
}

// ListenAddr is where the HTTP API listens: CTXFLOW_HTTP_ADDR, else every
// interface on port 8080 for `ctxflow api` and loopback for `ctxflow dev`,
// whose defaults (no API keys) are for one machine.
func (c Config) ListenAddr(dev bool) string {
	switch {
	case c.HTTPAddr != "":
		return c.HTTPAddr
	case dev:
		return "127.0.0.1:8080"
	}
	return ":8080"
}

// TokenSecret is the secret that signs page tokens: CTXFLOW_TOKEN_SECRET,
// else the one kept in the data dir, made (32 random bytes) the first time.
func (c Config) TokenSecret() ([]byte, error) {
	if c.TokenSecretValue != "" {
		return []byte(c.TokenSecretValue), nil
	}
	path := filepath.Join(c.DataDir, "token-secret")
	if b, err := os.ReadFile(path); err == nil && len(b) >= 16 {
		return b, nil
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("token secret: %w", err)
	}
	if err := os.MkdirAll(c.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("token secret: %w", err)
	}
	// Made once, whole: written apart, then linked into place, which fails
	// for a process that lost the race; it reads the winner's.
	tmp, err := os.CreateTemp(c.DataDir, ".token-secret-*")
	if err != nil {
		return nil, fmt.Errorf("token secret: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return nil, fmt.Errorf("token secret: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return nil, fmt.Errorf("token secret: %w", err)
	}
	if err := os.Link(tmp.Name(), path); errors.Is(err, os.ErrExist) {
		return os.ReadFile(path)
	} else if err != nil {
		return nil, fmt.Errorf("token secret %s: %w", path, err)
	}
	return b, nil
}
