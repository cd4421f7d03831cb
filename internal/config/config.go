// Package config reads ctxflow's service configuration from environment
// variables. Every variable, its default and its meaning is listed in [Vars];
// the README's configuration table is checked against it by a test.
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
}

// Vars lists every environment variable ctxflow reads, in README order.
var Vars = []Var{
	{"TEMPORAL_ADDRESS", "127.0.0.1:7233", "Temporal frontend for `ctxflow worker` and `ctxflow api` (`ctxflow dev` runs its own)"},
	{"TEMPORAL_NAMESPACE", "default", "Temporal namespace"},
	{"TEMPORAL_API_KEY, TEMPORAL_TLS_*, TEMPORAL_PROFILE", "unset", "TLS, API key and profile, read by the Temporal SDK's environment config"},
	{"CTXFLOW_TEMPORAL_COMPRESSION", "auto", "gRPC compression to Temporal: `gzip`, `none`, or `auto` (none when the address is loopback, as for `ctxflow dev`; gzip otherwise)"},
	{"CTXFLOW_HTTP_ADDR", "unset", "address of the HTTP API; unset: `:8080` for `ctxflow api`, `127.0.0.1:8080` (this machine only) for `ctxflow dev`"},
	{"CTXFLOW_UI_PORT", "8233", "`ctxflow dev`: port of the Temporal Web UI (0 turns it off)"},
	{"CTXFLOW_TEMPORAL_PORT", "7233", "`ctxflow dev`: port of the embedded Temporal frontend (0 picks a free one)"},
	{"CTXFLOW_DATA_DIR", "./data", "`ctxflow dev` and the worker: Temporal's SQLite file and the transcripts"},
	{"CTXFLOW_DEMO_DOCS", "builtin", "`ctxflow dev`: the demo knowledge base, ingested once into a new data dir (tenant `default`; documents deleted later stay deleted): `builtin` (the pages of `demo/`, compiled in: 华为Mate60, Mate70, iPhone 15 and ctxflow itself, in Chinese and English), a file or directory as `ctxflow ingest` takes, or `off`"},
	{"CTXFLOW_MAX_BODY_BYTES", "1048576", "largest HTTP request body accepted"},
	{"CTXFLOW_API_MAX_INFLIGHT", "512", "most `/v1` requests the API serves at once (streams and `?wait=true` turns included); one more is answered 429 `overloaded` with `Retry-After: 1`"},
	{"CTXFLOW_SHUTDOWN_TIMEOUT", "15s", "grace period for in-flight requests and activities on SIGINT/SIGTERM"},
	{"CTXFLOW_TURN_WAIT_TIMEOUT", "5m", "longest a `?wait=true` turn request waits for its answer"},
	{"CTXFLOW_UPLOAD_DIR", "$CTXFLOW_DATA_DIR/uploads", "`POST /v1/documents` stores uploads here and the workers read them by the same absolute path: with separate api and worker processes, mount one shared volume at this path in both"},
	{"CTXFLOW_MAX_UPLOAD_BYTES", "33554432", "largest document upload (`POST /v1/documents` body) accepted"},
	{"CTXFLOW_INGEST_WAIT_TIMEOUT", "5m", "longest a `?wait=true` upload waits for its ingestion (then `202`, and the ingestion goes on)"},
	{"OLLAMA_HOST", "http://127.0.0.1:11434", "Ollama server used for chat"},
	{"CTXFLOW_OLLAMA_NUM_CTX", "8192", "context length (`num_ctx`) asked of Ollama on every call, the same for every call so that the server never reloads the model (its own default, 4,096 on most machines, cuts longer prompts silently); capped by the model's own. A session whose window (`maxTokens`) and answer (`LLM_MAX_TOKENS`) do not fit it is refused when it is created"},
	{"CTXFLOW_OLLAMA_KEEP_ALIVE", "unset", "how long Ollama keeps the model loaded after a call (a Go duration; negative: for good); unset: the server's default (5m)"},
	{"CTXFLOW_OLLAMA_PROBE_INTERVAL", "30s", "how often a worker that started without its Ollama model (Ollama down, or the model not pulled) asks for it: once it is there, answers move from the offline engine to it without a restart (0: never)"},
	{"CTXFLOW_OLLAMA_PULL", "never", "`missing`: a worker whose model Ollama lacks pulls it at start-up, logging the progress; `never`: it names `ollama pull <model>` in its log and answers offline"},
	{"CTXFLOW_MODEL_PROVIDER", "auto", "`auto` (Ollama if it answers at start-up and has the model, else offline), `ollama`, `openai` (the OpenAI-compatible server at `CTXFLOW_OPENAI_BASE_URL`) or `offline`"},
	{"CTXFLOW_OPENAI_BASE_URL", "unset", "with `CTXFLOW_MODEL_PROVIDER=openai` (and then required): the server's OpenAI-compatible base URL, the part before `/chat/completions`, e.g. `http://127.0.0.1:8000/v1` (vLLM), `http://127.0.0.1:8080/v1` (llama.cpp), `http://127.0.0.1:1234/v1` (LM Studio), `https://api.openai.com/v1`; chat and embeddings go there"},
	{"CTXFLOW_OPENAI_API_KEY", "unset", "its API key, sent as `Authorization: Bearer`; unset: none (a local server)"},
	{"CTXFLOW_OPENAI_CONTEXT_LENGTH", "0", "the context, in tokens, that the OpenAI-compatible server serves the chat model with (its own setting: vLLM's `--max-model-len`, llama.cpp's `-c`, Ollama's `OLLAMA_CONTEXT_LENGTH` or a Modelfile's `num_ctx`; this API cannot ask for one). A session whose window (`maxTokens`) and answer (`LLM_MAX_TOKENS`) do not fit it is refused when it is created. 0: the `max_model_len` vLLM lists in `/v1/models`, else not checked"},
	{"CTXFLOW_COLLECTION", "rag_documents", "vector collection of the knowledge base (under `CTXFLOW_DATA_DIR/vectors`, or in Milvus)"},
	{"CTXFLOW_VECTOR_STORE", "embedded", "`embedded` (a crash-safe chunk log + bleve under `CTXFLOW_DATA_DIR/vectors`) or `milvus`"},
	{"MILVUS_ADDRESS", "localhost:19530", "Milvus endpoint when `CTXFLOW_VECTOR_STORE=milvus` (`https://…` for TLS)"},
	{"MILVUS_TOKEN", "unset", "Milvus API key or `user:password`"},
	{"CTXFLOW_TOKENIZER", "cl100k_base", "tiktoken encoding for token budgets (`cl100k_base` or `o200k_base`)"},
	{"CTXFLOW_WORKER_ACTIVITIES", "64", "activities (and local activities) a worker runs at once; more wait their turn"},
	{"CTXFLOW_TRANSCRIPT_FSYNC", "true", "fsync every transcript append (false survives process crashes, not machine crashes)"},
	{"CTXFLOW_TRANSCRIPT_STORE", "file", "`file` (JSONL under `CTXFLOW_DATA_DIR/transcripts`: one worker process, or `ctxflow dev`) or `postgres` (at `DATABASE_URL`, shared by any number of workers)"},
	{"DATABASE_URL", "unset", "PostgreSQL of the transcripts when `CTXFLOW_TRANSCRIPT_STORE=postgres` (`postgres://user:password@host:5432/db`; `pool_max_conns=N` sizes a worker's pool); workers migrate its schema at start-up, `ctxflow migrate` does it alone"},
	{"CTXFLOW_LLM_MODEL", "qwen2.5:0.5b", "default chat model of new sessions"},
	{"CTXFLOW_EMBEDDING_MODEL", "bge-m3:latest", "default embedding model of new sessions"},
	{"CTXFLOW_ALT_EMBEDDING_MODELS", "offline", "embedders tried, in order, when the collection's dimension is not the embedding model's (comma-separated models of the chat provider's server, Ollama or the OpenAI-compatible one; `offline` is the built-in n-gram embedder, 384 dimensions)"},
	{"CONTEXT_MAX_TOKENS", "4000", "default token budget of the model view"},
	{"SUMMARY_TRIGGER_THRESHOLD", "3000", "default token count above which older history is summarised"},
	{"LLM_TIMEOUT", "60s", "start-to-close timeout of one model call (an activity)"},
	{"CTXFLOW_HEARTBEAT_TIMEOUT", "10s", "a model activity silent this long is retried on another worker (crash detection)"},
	{"LLM_MAX_TOKENS", "2000", "tokens generated at most per model call"},
	{"CTXFLOW_CONTINUE_AS_NEW_TURNS", "100", "turns per workflow run before the session continues as new"},
	{"CTXFLOW_SESSION_IDLE_TTL", "24h", "an idle session's run ends cleanly after this; its next turn revives it"},
	{"CTXFLOW_RECENT_TURNS", "32", "turn results a session keeps for the turn and steps queries"},
	{"CTXFLOW_SQL_DATABASE", "demo", "the agent's read-only SQL database: `demo` (a shop of 14 tables, generated under `$CTXFLOW_DATA_DIR/demo/shop.db`), the path of a SQLite file, or a `postgres://` URL"},
	{"CTXFLOW_MAX_QUESTION_BYTES", "32768", "largest question (or task goal) a turn may carry, 1024 to 1048576 bytes: a longer one is refused with 400. Retrieval's work is bounded apart from it (at most 64 distinct terms a keyword search)"},
	{"MAX_STEPS", "12", "default `maxSteps` of new sessions: agent task steps before the task pauses with a progress summary"},
	{"CTXFLOW_FAST_MODEL", "500ms", "a chat model whose answers in a session have taken less than this on average is called as a local activity inside the turn's workflow task (one workflow task a turn instead of two); slower ones, and a failure there, as regular activities; 0: always regular"},
	{"MESSAGE_COMPRESS_RECENT_WINDOW", "10", "unfolded messages a task's model view holds before older steps are folded into its running summary"},
	{"MESSAGE_COMPRESS_MAX_LENGTH", "5000", "characters of a tool result in a task's model view (lists cut to their first 10 items); the transcript keeps it whole"},
	{"CTXFLOW_TOOL_RESULT_MAX_BYTES", "65536", "bytes of a tool result's JSON stored in the transcript: a larger one is cut there, and what is stored (and shown to the model) says what was cut"},
	{"CTXFLOW_MCP_SERVERS", "unset", "MCP servers whose tools agent tasks may call (named `mcp:<server>/<tool>`): `name=stdio:command args…` or `name=http(s)://…/mcp`, separated by `;`, or a JSON array of `{\"name\", \"command\": [...] | \"url\", \"env\", \"headers\", \"timeout\", \"tenants\"}` (see [MCP tools](#mcp-tools)). A task lists them when it starts; unset: none"},
	{"CTXFLOW_MCP_TIMEOUT", "60s", "timeout of one MCP tool call (an activity; a server's `timeout` overrides it); tools the server marks read-only or idempotent are tried 3 times, others once"},
	{"CTXFLOW_APPROVE_TOOLS", "unset", "tools whose calls wait for a person's approval, per tenant, added to each session's `approveTools` (which cannot remove them): `tenant=pattern,pattern` separated by `;`, glob patterns of tool names (`run_sql`, `mcp:filesystem/*`); tenant `*` is every tenant, e.g. `*=run_sql;acme=mcp:*`. For sessions started (or continued as new) after the setting"},
	{"CTXFLOW_API_KEYS", "unset", "API keys, `tenant:<sha256 of the key>` separated by commas (`ctxflow key TENANT` makes one): each request then needs `Authorization: Bearer <key>`, and its tenant is the key's. Unset: no keys"},
	{"CTXFLOW_API_KEYS_FILE", "unset", "a file of API keys, one `tenant:<sha256>` a line (`#` comments), added to `CTXFLOW_API_KEYS`"},
	{"CTXFLOW_TOKEN_SECRET", "unset", "secret that signs the page tokens of `GET /v1/sessions` (16 bytes at least); unset: a random one kept in `$CTXFLOW_DATA_DIR/token-secret`. The API processes of one deployment share it"},
	{"CTXFLOW_ALLOW_ANONYMOUS", "false", "let `ctxflow api` serve without API keys (any caller then picks a tenant with `X-Tenant-ID`); `ctxflow dev` always may, and says so"},
	{"CTXFLOW_METRICS_ADDR", "unset", "`ctxflow worker`: address of its Prometheus `GET /metrics` listener, e.g. `:9090` (unset: none; `ctxflow dev` and `ctxflow api` serve `/metrics` on the API's port)"},
	{"CTXFLOW_OTEL", "off", "OpenTelemetry traces, one per turn across API, workflow and activities: `off`, `stdout` (a JSON line per span) or `otlp` (gRPC to `OTEL_EXPORTER_OTLP_ENDPOINT`, default `localhost:4317`, and OpenTelemetry's other `OTEL_EXPORTER_OTLP_*` variables)"},
	{"CTXFLOW_LOG_LEVEL", "info", "debug, info, warn or error"},
	{"CTXFLOW_LOG_FORMAT", "text", "text or json"},
}

// Load reads the configuration from the environment.
func Load() (Config, error) { return load(os.LookupEnv) }

func load(lookup func(string) (string, bool)) (Config, error) {
	p := parser{lookup: lookup}
	c := Config{
		TemporalAddress:     p.str("TEMPORAL_ADDRESS", "127.0.0.1:7233"),
		TemporalNamespace:   p.str("TEMPORAL_NAMESPACE", "default"),
		TemporalCompression: p.str("CTXFLOW_TEMPORAL_COMPRESSION", "auto"),
		HTTPAddr:            p.str("CTXFLOW_HTTP_ADDR", ""),
		UIPort:              p.int("CTXFLOW_UI_PORT", 8233),
		TemporalPort:        p.int("CTXFLOW_TEMPORAL_PORT", 7233),
		DataDir:             p.str("CTXFLOW_DATA_DIR", "./data"),
		DemoDocs:            p.str("CTXFLOW_DEMO_DOCS", "builtin"),
		MaxBodyBytes:        int64(p.int("CTXFLOW_MAX_BODY_BYTES", 1<<20)),
		MaxInFlight:         p.int("CTXFLOW_API_MAX_INFLIGHT", 512),
		ShutdownTimeout:     p.dur("CTXFLOW_SHUTDOWN_TIMEOUT", 15*time.Second),
		TurnWaitTimeout:     p.dur("CTXFLOW_TURN_WAIT_TIMEOUT", 5*time.Minute),
		MaxUploadBytes:      int64(p.int("CTXFLOW_MAX_UPLOAD_BYTES", 32<<20)),
		IngestWaitTimeout:   p.dur("CTXFLOW_INGEST_WAIT_TIMEOUT", 5*time.Minute),
		OllamaHost:          p.str("OLLAMA_HOST", "http://127.0.0.1:11434"),
		OllamaNumCtx:        p.int("CTXFLOW_OLLAMA_NUM_CTX", 8192),
		OllamaKeepAlive:     p.dur("CTXFLOW_OLLAMA_KEEP_ALIVE", 0),
		OllamaPull:          p.str("CTXFLOW_OLLAMA_PULL", "never"),
		OllamaProbeInterval: p.dur("CTXFLOW_OLLAMA_PROBE_INTERVAL", 30*time.Second),
		ModelProvider:       p.str("CTXFLOW_MODEL_PROVIDER", "auto"),
		Collection:          p.str("CTXFLOW_COLLECTION", "rag_documents"),
		VectorStore:         p.str("CTXFLOW_VECTOR_STORE", "embedded"),
		MilvusAddress:       p.str("MILVUS_ADDRESS", "localhost:19530"),
		MilvusToken:         p.str("MILVUS_TOKEN", ""),
		Tokenizer:           p.str("CTXFLOW_TOKENIZER", "cl100k_base"),
		TranscriptSync:      p.bool("CTXFLOW_TRANSCRIPT_FSYNC", true),
		TranscriptStore:     p.str("CTXFLOW_TRANSCRIPT_STORE", "file"),
		DatabaseURL:         p.str("DATABASE_URL", ""),
		WorkerActivities:    p.int("CTXFLOW_WORKER_ACTIVITIES", 64),
		SQLDatabase:         p.str("CTXFLOW_SQL_DATABASE", "demo"),
		ObservationMaxChars: p.int("MESSAGE_COMPRESS_MAX_LENGTH", 5000),
		ToolResultMaxBytes:  p.int("CTXFLOW_TOOL_RESULT_MAX_BYTES", 64<<10),
		LogFormat:           p.str("CTXFLOW_LOG_FORMAT", "text"),
		MetricsAddr:         p.str("CTXFLOW_METRICS_ADDR", ""),
	}
	c.UploadDir = p.str("CTXFLOW_UPLOAD_DIR", "$CTXFLOW_DATA_DIR/uploads")
	c.APIKeys = p.str("CTXFLOW_API_KEYS", "")
	c.APIKeysFile = p.str("CTXFLOW_API_KEYS_FILE", "")
	c.AllowAnonymous = p.bool("CTXFLOW_ALLOW_ANONYMOUS", false)
	c.OpenAIBaseURL = p.str("CTXFLOW_OPENAI_BASE_URL", "")
	c.OpenAIAPIKey = p.str("CTXFLOW_OPENAI_API_KEY", "")
	c.OpenAIContextLength = p.int("CTXFLOW_OPENAI_CONTEXT_LENGTH", 0)
	c.MCPServers = p.str("CTXFLOW_MCP_SERVERS", "")
	c.ApproveTools = p.approveTools("CTXFLOW_APPROVE_TOOLS")
	if c.MCPTimeout = p.dur("CTXFLOW_MCP_TIMEOUT", time.Minute); c.MCPTimeout <= 0 {
		p.errs = append(p.errs, fmt.Errorf("CTXFLOW_MCP_TIMEOUT %s: want more than 0", c.MCPTimeout))
	}
	if c.TokenSecretValue = p.str("CTXFLOW_TOKEN_SECRET", ""); c.TokenSecretValue != "" && len(c.TokenSecretValue) < 16 {
		p.errs = append(p.errs, fmt.Errorf("CTXFLOW_TOKEN_SECRET: %d bytes, want at least 16", len(c.TokenSecretValue)))
	}
	c.Session = workflows.DefaultSessionConfig()
	c.Session.LLMModel = p.str("CTXFLOW_LLM_MODEL", c.Session.LLMModel)
	c.Session.EmbeddingModel = p.str("CTXFLOW_EMBEDDING_MODEL", c.Session.EmbeddingModel)
	for _, m := range strings.Split(p.str("CTXFLOW_ALT_EMBEDDING_MODELS", "offline"), ",") {
		if m = strings.TrimSpace(m); m != "" {
			c.AltEmbeddingModels = append(c.AltEmbeddingModels, m)
		}
	}
	c.Session.MaxTokens = p.int("CONTEXT_MAX_TOKENS", c.Session.MaxTokens)
	c.Session.SummaryThreshold = p.int("SUMMARY_TRIGGER_THRESHOLD", c.Session.SummaryThreshold)
	c.Session.MaxSteps = p.int("MAX_STEPS", c.Session.MaxSteps)

	c.Limits = workflows.DefaultLimits()
	c.Limits.LLMTimeout = p.dur("LLM_TIMEOUT", c.Limits.LLMTimeout)
	c.Limits.LLMMaxTokens = p.int("LLM_MAX_TOKENS", c.Limits.LLMMaxTokens)
	c.Limits.HeartbeatTimeout = p.dur("CTXFLOW_HEARTBEAT_TIMEOUT", c.Limits.HeartbeatTimeout)
	c.Limits.ContinueAsNewEvery = p.int("CTXFLOW_CONTINUE_AS_NEW_TURNS", c.Limits.ContinueAsNewEvery)
	c.Limits.IdleTTL = p.dur("CTXFLOW_SESSION_IDLE_TTL", c.Limits.IdleTTL)
	c.Limits.RecentTurns = p.int("CTXFLOW_RECENT_TURNS", c.Limits.RecentTurns)
	c.Limits.TaskRecentMessages = p.int("MESSAGE_COMPRESS_RECENT_WINDOW", c.Limits.TaskRecentMessages)
	c.Limits.FastModel = p.dur("CTXFLOW_FAST_MODEL", c.Limits.FastModel)
	c.Limits.MaxQuestionBytes = p.int("CTXFLOW_MAX_QUESTION_BYTES", c.Limits.MaxQuestionBytes)

	if err := c.LogLevel.UnmarshalText([]byte(p.str("CTXFLOW_LOG_LEVEL", "info"))); err != nil {
		p.errs = append(p.errs, fmt.Errorf("CTXFLOW_LOG_LEVEL: %w", err))
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		p.errs = append(p.errs, fmt.Errorf("CTXFLOW_LOG_FORMAT %q: want text or json", c.LogFormat))
	}
	if c.OTel = p.str("CTXFLOW_OTEL", "off"); c.OTel == "off" {
		c.OTel = ""
	} else if c.OTel != "stdout" && c.OTel != "otlp" {
		p.errs = append(p.errs, fmt.Errorf("CTXFLOW_OTEL %q: want off, stdout or otlp", c.OTel))
	}
	if c.MaxInFlight < 1 {
		p.errs = append(p.errs, fmt.Errorf("CTXFLOW_API_MAX_INFLIGHT %d: want at least 1", c.MaxInFlight))
	}
	if c.MaxBodyBytes < 1024 {
		p.errs = append(p.errs, fmt.Errorf("CTXFLOW_MAX_BODY_BYTES %d: want at least 1024", c.MaxBodyBytes))
	}
	if c.MaxUploadBytes < 1024 {
		p.errs = append(p.errs, fmt.Errorf("CTXFLOW_MAX_UPLOAD_BYTES %d: want at least 1024", c.MaxUploadBytes))
	}
	if c.ObservationMaxChars < 100 || c.ObservationMaxChars > 1_000_000 {
		p.errs = append(p.errs, fmt.Errorf("MESSAGE_COMPRESS_MAX_LENGTH %d: want 100 to 1000000", c.ObservationMaxChars))
	}
	if c.ToolResultMaxBytes < 1024 || c.ToolResultMaxBytes > 16<<20 {
		p.errs = append(p.errs, fmt.Errorf("CTXFLOW_TOOL_RESULT_MAX_BYTES %d: want 1024 to 16777216", c.ToolResultMaxBytes))
	}
	if c.WorkerActivities < 1 || c.WorkerActivities > 10_000 {
		p.errs = append(p.errs, fmt.Errorf("CTXFLOW_WORKER_ACTIVITIES %d: want 1 to 10000", c.WorkerActivities))
	}
	if c.IngestWaitTimeout <= 0 {
		p.errs = append(p.errs, fmt.Errorf("CTXFLOW_INGEST_WAIT_TIMEOUT %s: want more than 0", c.IngestWaitTimeout))
	}
	if c.VectorStore != "embedded" && c.VectorStore != "milvus" {
		p.errs = append(p.errs, fmt.Errorf("CTXFLOW_VECTOR_STORE %q: want embedded or milvus", c.VectorStore))
	}
	if c.TranscriptStore != "file" && c.TranscriptStore != "postgres" {
		p.errs = append(p.errs, fmt.Errorf("CTXFLOW_TRANSCRIPT_STORE %q: want file or postgres", c.TranscriptStore))
	} else if c.TranscriptStore == "postgres" && c.DatabaseURL == "" {
		p.errs = append(p.errs, errors.New("CTXFLOW_TRANSCRIPT_STORE=postgres: DATABASE_URL is not set"))
	}
	switch c.ModelProvider {
	case "auto", "ollama", "offline":
	case "openai":
		if c.OpenAIBaseURL == "" {
			p.errs = append(p.errs, errors.New("CTXFLOW_MODEL_PROVIDER=openai: CTXFLOW_OPENAI_BASE_URL is not set (the server's OpenAI-compatible base URL, e.g. http://127.0.0.1:8000/v1)"))
		}
	default:
		p.errs = append(p.errs, fmt.Errorf("CTXFLOW_MODEL_PROVIDER %q: want auto, ollama, openai or offline", c.ModelProvider))
	}
	if u, err := url.Parse(c.OpenAIBaseURL); c.OpenAIBaseURL != "" && (err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "") {
		p.errs = append(p.errs, fmt.Errorf("CTXFLOW_OPENAI_BASE_URL %q: want an http:// or https:// URL, e.g. http://127.0.0.1:8000/v1", c.OpenAIBaseURL))
	}
	if n := c.OpenAIContextLength; n != 0 && (n < 512 || n > 1<<21) {
		p.errs = append(p.errs, fmt.Errorf("CTXFLOW_OPENAI_CONTEXT_LENGTH %d: want 0 (ask the server) or 512 to 2097152", n))
	}
	if c.OllamaNumCtx < 512 || c.OllamaNumCtx > 1<<21 {
		p.errs = append(p.errs, fmt.Errorf("CTXFLOW_OLLAMA_NUM_CTX %d: want 512 to 2097152", c.OllamaNumCtx))
	}
	if c.OllamaPull != "never" && c.OllamaPull != "missing" {
		p.errs = append(p.errs, fmt.Errorf("CTXFLOW_OLLAMA_PULL %q: want never or missing", c.OllamaPull))
	}
	if c.TemporalCompression != "auto" && c.TemporalCompression != "gzip" && c.TemporalCompression != "none" {
		p.errs = append(p.errs, fmt.Errorf("CTXFLOW_TEMPORAL_COMPRESSION %q: want auto, gzip or none", c.TemporalCompression))
	}
	if c.Tokenizer != "cl100k_base" && c.Tokenizer != "o200k_base" {
		p.errs = append(p.errs, fmt.Errorf("CTXFLOW_TOKENIZER %q: want cl100k_base or o200k_base", c.Tokenizer))
	}
	for _, port := range []struct {
		name string
		n    int
	}{{"CTXFLOW_UI_PORT", c.UIPort}, {"CTXFLOW_TEMPORAL_PORT", c.TemporalPort}} {
		if port.n < 0 || port.n > 65535 {
			p.errs = append(p.errs, fmt.Errorf("%s %d: want a port in [0, 65535]", port.name, port.n))
		}
	}
	if c.ShutdownTimeout < 0 {
		p.errs = append(p.errs, fmt.Errorf("CTXFLOW_SHUTDOWN_TIMEOUT %s: want 0 or more", c.ShutdownTimeout))
	}
	if c.TurnWaitTimeout <= 0 {
		p.errs = append(p.errs, fmt.Errorf("CTXFLOW_TURN_WAIT_TIMEOUT %s: want more than 0", c.TurnWaitTimeout))
	}
	// Each variable is checked alone against the defaults, so that an
	// out-of-range value is reported under its own name.
	n := len(p.errs)
	type knobs struct {
		s workflows.SessionConfig
		l workflows.Limits
	}
	for _, v := range []struct {
		name string
		set  func(k *knobs)
	}{
		{"CTXFLOW_LLM_MODEL", func(k *knobs) { k.s.LLMModel = c.Session.LLMModel }},
		{"CTXFLOW_EMBEDDING_MODEL", func(k *knobs) { k.s.EmbeddingModel = c.Session.EmbeddingModel }},
		{"CONTEXT_MAX_TOKENS", func(k *knobs) { k.s.MaxTokens = c.Session.MaxTokens }},
		{"SUMMARY_TRIGGER_THRESHOLD", func(k *knobs) { k.s.SummaryThreshold = c.Session.SummaryThreshold }},
		{"LLM_TIMEOUT", func(k *knobs) { k.l.LLMTimeout = c.Limits.LLMTimeout }},
		{"CTXFLOW_HEARTBEAT_TIMEOUT", func(k *knobs) { k.l.HeartbeatTimeout = c.Limits.HeartbeatTimeout }},
		{"LLM_MAX_TOKENS", func(k *knobs) { k.l.LLMMaxTokens = c.Limits.LLMMaxTokens }},
		{"CTXFLOW_CONTINUE_AS_NEW_TURNS", func(k *knobs) { k.l.ContinueAsNewEvery = c.Limits.ContinueAsNewEvery }},
		{"CTXFLOW_SESSION_IDLE_TTL", func(k *knobs) { k.l.IdleTTL = c.Limits.IdleTTL }},
		{"CTXFLOW_RECENT_TURNS", func(k *knobs) { k.l.RecentTurns = c.Limits.RecentTurns }},
		{"MAX_STEPS", func(k *knobs) { k.s.MaxSteps = c.Session.MaxSteps }},
		{"MESSAGE_COMPRESS_RECENT_WINDOW", func(k *knobs) { k.l.TaskRecentMessages = c.Limits.TaskRecentMessages }},
		{"CTXFLOW_FAST_MODEL", func(k *knobs) { k.l.FastModel = c.Limits.FastModel }},
		{"CTXFLOW_MAX_QUESTION_BYTES", func(k *knobs) { k.l.MaxQuestionBytes = c.Limits.MaxQuestionBytes }},
	} {
		k := knobs{workflows.DefaultSessionConfig(), workflows.DefaultLimits()}
		v.set(&k)
		if err := errors.Join(k.s.Validate(), k.l.Validate()); err != nil {
			p.errs = append(p.errs, fmt.Errorf("%s: %w", v.name, err))
		}
	}
	if len(p.errs) == n { // and together (should the rules ever tie options)
		if err := c.Session.Validate(); err != nil {
			p.errs = append(p.errs, fmt.Errorf("session defaults: %w", err))
		}
		if err := c.Limits.Validate(); err != nil {
			p.errs = append(p.errs, err)
		}
	}
	if len(p.errs) > 0 {
		return c, fmt.Errorf("configuration: %w", errors.Join(p.errs...))
	}
	return c, nil
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

type parser struct {
	lookup func(string) (string, bool)
	errs   []error
}

func (p *parser) raw(name string) (string, bool) {
	v, ok := p.lookup(name)
	v = strings.TrimSpace(v)
	return v, ok && v != ""
}

// approveTools reads `tenant=pattern,pattern;…`.
func (p *parser) approveTools(name string) map[string][]string {
	v := p.str(name, "")
	if strings.TrimSpace(v) == "" {
		return nil
	}
	out := map[string][]string{}
	for part := range strings.SplitSeq(v, ";") {
		if strings.TrimSpace(part) == "" {
			continue
		}
		tenant, list, ok := strings.Cut(part, "=")
		tenant = strings.TrimSpace(tenant)
		if !ok || tenant == "" {
			p.errs = append(p.errs, fmt.Errorf("%s: %q: want tenant=pattern,pattern (tenant * for every tenant)", name, convo.Clip(part, 60)))
			continue
		}
		if tenant != "*" {
			if err := workflows.ValidateID("tenant", tenant); err != nil {
				p.errs = append(p.errs, fmt.Errorf("%s: %w", name, err))
				continue
			}
		}
		for pat := range strings.SplitSeq(list, ",") {
			if pat = strings.TrimSpace(pat); pat != "" && !slices.Contains(out[tenant], pat) {
				out[tenant] = append(out[tenant], pat)
			}
		}
		if err := workflows.ValidateApproveTools(out[tenant]); err != nil || len(out[tenant]) == 0 {
			p.errs = append(p.errs, fmt.Errorf("%s: tenant %s: %v", name, tenant, cmp.Or[error](err, errors.New("no pattern"))))
		}
	}
	return out
}

func (p *parser) str(name, def string) string {
	if v, ok := p.raw(name); ok {
		return v
	}
	return def
}

func (p *parser) int(name string, def int) int {
	v, ok := p.raw(name)
	if !ok {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		p.errs = append(p.errs, fmt.Errorf("%s=%q: not an integer", name, v))
		return def
	}
	return n
}

func (p *parser) dur(name string, def time.Duration) time.Duration {
	v, ok := p.raw(name)
	if !ok {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		p.errs = append(p.errs, fmt.Errorf("%s=%q: not a duration like 30s or 5m", name, v))
		return def
	}
	return d
}

func (p *parser) bool(name string, def bool) bool {
	v, ok := p.raw(name)
	if !ok {
		return def
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		p.errs = append(p.errs, fmt.Errorf("%s=%q: not true or false", name, v))
		return def
	}
	return b
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
