package config

import (
	"context"
	"go/ast"
	goparser "go/parser"
	"go/token"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctxflow/ctxflow/workflows"
)

// env is a fake environment for load.
func env(vars map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v, ok := vars[name]
		return v, ok
	}
}

func TestDefaults(t *testing.T) {
	c, err := load(env(nil))
	if err != nil {
		t.Fatalf("load with an empty environment: %v", err)
	}
	want := Config{
		TemporalAddress:     "127.0.0.1:7233",
		TemporalNamespace:   "default",
		TemporalCompression: "auto",
		UIPort:              8233,
		TemporalPort:        7233,
		DataDir:             "./data",
		MaxBodyBytes:        1 << 20,
		MaxInFlight:         512,
		ShutdownTimeout:     15 * time.Second,
		TurnWaitTimeout:     5 * time.Minute,
		UploadDir:           "$CTXFLOW_DATA_DIR/uploads",
		MaxUploadBytes:      32 << 20,
		IngestWaitTimeout:   5 * time.Minute,
		OllamaHost:          "http://127.0.0.1:11434",
		OllamaNumCtx:        8192,
		OllamaPull:          "never",
		OllamaProbeInterval: 30 * time.Second,
		ModelProvider:       "auto",
		Collection:          "rag_documents",
		AltEmbeddingModels:  []string{"offline"},
		VectorStore:         "embedded",
		MilvusAddress:       "localhost:19530",
		Tokenizer:           "cl100k_base",
		TranscriptSync:      true,
		TranscriptStore:     "file",
		WorkerActivities:    64,
		DemoDocs:            "builtin",
		SQLDatabase:         "demo",
		ObservationMaxChars: 5000,
		ToolResultMaxBytes:  64 << 10,
		MCPTimeout:          time.Minute,
		RetentionSweep:      time.Hour,
		Session:             workflows.DefaultSessionConfig(),
		Limits:              workflows.DefaultLimits(),
		LogLevel:            slog.LevelInfo,
		LogFormat:           "text",
	}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("defaults:\n got %+v\nwant %+v", c, want)
	}
	// The documented seed defaults (docs/architecture.md §8), not just "whatever the
	// workflows package says".
	if c.Session.LLMModel != "qwen2.5:0.5b" || c.Session.EmbeddingModel != "bge-m3:latest" ||
		c.Session.MaxTokens != 4000 || c.Session.SummaryThreshold != 3000 {
		t.Errorf("session defaults = %+v", c.Session)
	}
	if c.Limits.LLMTimeout != 60*time.Second || c.Limits.LLMMaxTokens != 2000 {
		t.Errorf("limit defaults = %+v", c.Limits)
	}

	// Set but empty or blank is the same as unset.
	blank := map[string]string{}
	for _, v := range Vars {
		if !strings.Contains(v.Name, ",") {
			blank[v.Name] = " "
		}
	}
	if c2, err := load(env(blank)); err != nil || !reflect.DeepEqual(c2, want) {
		t.Errorf("blank variables: err %v, config %+v", err, c2)
	}
}

// TestListenAddr: unset, `ctxflow dev` listens on loopback only.
func TestListenAddr(t *testing.T) {
	c, err := load(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if dev, api := c.ListenAddr(true), c.ListenAddr(false); dev != "127.0.0.1:8080" || api != ":8080" {
		t.Errorf("ListenAddr: dev %q, api %q", dev, api)
	}
}

func TestOverrides(t *testing.T) {
	for _, tc := range []struct {
		name, value string
		check       func(c Config) bool
	}{
		{"TEMPORAL_ADDRESS", "temporal:7233", func(c Config) bool { return c.TemporalAddress == "temporal:7233" }},
		{"TEMPORAL_NAMESPACE", "prod", func(c Config) bool { return c.TemporalNamespace == "prod" }},
		{"CTXFLOW_HTTP_ADDR", "127.0.0.1:9000", func(c Config) bool {
			return c.ListenAddr(true) == "127.0.0.1:9000" && c.ListenAddr(false) == "127.0.0.1:9000"
		}},
		{"CTXFLOW_UI_PORT", "0", func(c Config) bool { return c.UIPort == 0 }},
		{"CTXFLOW_TEMPORAL_PORT", " 17233 ", func(c Config) bool { return c.TemporalPort == 17233 }},
		{"CTXFLOW_DATA_DIR", "/var/lib/ctxflow", func(c Config) bool { return c.DataDir == "/var/lib/ctxflow" }},
		{"CTXFLOW_DEMO_DOCS", "off", func(c Config) bool { return c.DemoDocs == "off" }},
		{"CTXFLOW_MAX_BODY_BYTES", "2048", func(c Config) bool { return c.MaxBodyBytes == 2048 }},
		{"CTXFLOW_API_MAX_INFLIGHT", "8", func(c Config) bool { return c.MaxInFlight == 8 }},
		{"CTXFLOW_SHUTDOWN_TIMEOUT", "2m30s", func(c Config) bool { return c.ShutdownTimeout == 150*time.Second }},
		{"CTXFLOW_TURN_WAIT_TIMEOUT", "45s", func(c Config) bool { return c.TurnWaitTimeout == 45*time.Second }},
		{"CTXFLOW_UPLOAD_DIR", "/shared/uploads/", func(c Config) bool { return c.Uploads() == "/shared/uploads" }},
		{"CTXFLOW_UPLOAD_DIR", "$CTXFLOW_DATA_DIR/../up", func(c Config) bool { return c.Uploads() == "up" }},
		{"CTXFLOW_MAX_UPLOAD_BYTES", "1048576", func(c Config) bool { return c.MaxUploadBytes == 1<<20 }},
		{"CTXFLOW_INGEST_WAIT_TIMEOUT", "30m", func(c Config) bool { return c.IngestWaitTimeout == 30*time.Minute }},
		{"OLLAMA_HOST", "http://gpu:11434", func(c Config) bool { return c.OllamaHost == "http://gpu:11434" }},
		{"CTXFLOW_OPENAI_BASE_URL", "http://vllm:8000/v1", func(c Config) bool { return c.OpenAIBaseURL == "http://vllm:8000/v1" }},
		{"CTXFLOW_OPENAI_API_KEY", "sk-test", func(c Config) bool { return c.OpenAIAPIKey == "sk-test" }},
		{"CTXFLOW_OPENAI_CONTEXT_LENGTH", "32768", func(c Config) bool { return c.OpenAIContextLength == 32768 }},
		{"CTXFLOW_APPROVE_TOOLS", "*=run_sql; acme=mcp:fs/*, run_sql,run_sql;", func(c Config) bool {
			return reflect.DeepEqual(c.ApproveTools, map[string][]string{"*": {"run_sql"}, "acme": {"mcp:fs/*", "run_sql"}})
		}},
		{"CTXFLOW_RETENTION", "*=90d; acme=720h;audit=0", func(c Config) bool {
			return reflect.DeepEqual(c.Retention, map[string]time.Duration{"*": 90 * 24 * time.Hour, "acme": 720 * time.Hour, "audit": 0})
		}},
		{"CTXFLOW_RETENTION_SWEEP", "10m", func(c Config) bool { return c.RetentionSweep == 10*time.Minute }},
		{"CTXFLOW_MODEL_PROVIDER", "offline", func(c Config) bool { return c.ModelProvider == "offline" }},
		{"CTXFLOW_COLLECTION", "docs", func(c Config) bool { return c.Collection == "docs" }},
		{"CTXFLOW_VECTOR_STORE", "milvus", func(c Config) bool { return c.VectorStore == "milvus" }},
		{"MILVUS_ADDRESS", "milvus:19530", func(c Config) bool { return c.MilvusAddress == "milvus:19530" }},
		{"MILVUS_TOKEN", "root:Milvus", func(c Config) bool { return c.MilvusToken == "root:Milvus" }},
		{"CTXFLOW_ALT_EMBEDDING_MODELS", " nomic-embed-text , offline,", func(c Config) bool {
			return reflect.DeepEqual(c.AltEmbeddingModels, []string{"nomic-embed-text", "offline"})
		}},
		{"CTXFLOW_TOKENIZER", "o200k_base", func(c Config) bool { return c.Tokenizer == "o200k_base" }},
		{"CTXFLOW_TEMPORAL_COMPRESSION", "gzip", func(c Config) bool { return c.TemporalCompression == "gzip" }},
		{"CTXFLOW_TRANSCRIPT_FSYNC", "false", func(c Config) bool { return !c.TranscriptSync }},
		{"CTXFLOW_TRANSCRIPT_FSYNC", "0", func(c Config) bool { return !c.TranscriptSync }},
		{"DATABASE_URL", "postgres://db/ctxflow", func(c Config) bool { return c.DatabaseURL == "postgres://db/ctxflow" }},
		{"CTXFLOW_LLM_MODEL", "llama3.2:1b", func(c Config) bool { return c.Session.LLMModel == "llama3.2:1b" }},
		{"CTXFLOW_EMBEDDING_MODEL", "nomic-embed-text", func(c Config) bool { return c.Session.EmbeddingModel == "nomic-embed-text" }},
		{"CONTEXT_MAX_TOKENS", "3000", func(c Config) bool { return c.Session.MaxTokens == 3000 }},
		{"SUMMARY_TRIGGER_THRESHOLD", "1500", func(c Config) bool { return c.Session.SummaryThreshold == 1500 }},
		{"LLM_TIMEOUT", "90s", func(c Config) bool { return c.Limits.LLMTimeout == 90*time.Second }},
		{"LLM_MAX_TOKENS", "512", func(c Config) bool { return c.Limits.LLMMaxTokens == 512 }},
		{"CTXFLOW_TOOL_RESULT_MAX_BYTES", "4096", func(c Config) bool { return c.ToolResultMaxBytes == 4096 }},
		{"CTXFLOW_MAX_QUESTION_BYTES", "4096", func(c Config) bool { return c.Limits.MaxQuestionBytes == 4096 }},
		{"CTXFLOW_CONTINUE_AS_NEW_TURNS", "7", func(c Config) bool { return c.Limits.ContinueAsNewEvery == 7 }},
		{"CTXFLOW_SESSION_IDLE_TTL", "1h", func(c Config) bool { return c.Limits.IdleTTL == time.Hour }},
		{"CTXFLOW_RECENT_TURNS", "8", func(c Config) bool { return c.Limits.RecentTurns == 8 }},
		{"CTXFLOW_LOG_LEVEL", "debug", func(c Config) bool { return c.LogLevel == slog.LevelDebug }},
		{"CTXFLOW_LOG_LEVEL", "WARN", func(c Config) bool { return c.LogLevel == slog.LevelWarn }},
		{"CTXFLOW_LOG_FORMAT", "json", func(c Config) bool { return c.LogFormat == "json" }},
	} {
		t.Run(tc.name+"="+tc.value, func(t *testing.T) {
			c, err := load(env(map[string]string{tc.name: tc.value}))
			if err != nil {
				t.Fatalf("load: %v", err)
			}
			if !tc.check(c) {
				t.Errorf("%s=%q not applied: %+v", tc.name, tc.value, c)
			}
			// Nothing else changed.
			def, _ := load(env(nil))
			changed := 0
			rc, rd := reflect.ValueOf(c), reflect.ValueOf(def)
			for i := range rc.NumField() {
				if !reflect.DeepEqual(rc.Field(i).Interface(), rd.Field(i).Interface()) {
					changed++
				}
			}
			if changed != 1 {
				t.Errorf("%s changed %d fields of Config, want 1", tc.name, changed)
			}
		})
	}
}

func TestPostgresTranscripts(t *testing.T) {
	c, err := load(env(map[string]string{"CTXFLOW_TRANSCRIPT_STORE": "postgres", "DATABASE_URL": "postgres://db/ctxflow"}))
	if err != nil || c.TranscriptStore != "postgres" || c.DatabaseURL != "postgres://db/ctxflow" {
		t.Errorf("postgres transcripts: %q %q, %v", c.TranscriptStore, c.DatabaseURL, err)
	}
}

func TestOpenAIProvider(t *testing.T) {
	c, err := load(env(map[string]string{
		"CTXFLOW_MODEL_PROVIDER": "openai", "CTXFLOW_OPENAI_BASE_URL": "https://api.openai.com/v1", "CTXFLOW_OPENAI_API_KEY": "sk-test",
	}))
	if err != nil || c.ModelProvider != "openai" || c.OpenAIBaseURL != "https://api.openai.com/v1" || c.OpenAIAPIKey != "sk-test" {
		t.Errorf("openai provider: %q %q %q, %v", c.ModelProvider, c.OpenAIBaseURL, c.OpenAIAPIKey, err)
	}
	// No base URL: a start-up error that says what to set, not a worker
	// that fails every turn.
	_, err = load(env(map[string]string{"CTXFLOW_MODEL_PROVIDER": "openai", "CTXFLOW_OPENAI_API_KEY": "sk-test"}))
	if err == nil || !strings.Contains(err.Error(), "CTXFLOW_OPENAI_BASE_URL is not set") {
		t.Errorf("openai provider without a base URL: err = %v", err)
	}
}

func TestUploads(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{nil, "data/uploads"},
		{map[string]string{"CTXFLOW_DATA_DIR": "/var/lib/ctxflow"}, "/var/lib/ctxflow/uploads"},
		{map[string]string{"CTXFLOW_DATA_DIR": "/var/lib/ctxflow", "CTXFLOW_UPLOAD_DIR": "/mnt/shared/"}, "/mnt/shared"},
		{map[string]string{"CTXFLOW_DATA_DIR": "/d", "CTXFLOW_UPLOAD_DIR": "$CTXFLOW_DATA_DIR/in"}, "/d/in"},
	} {
		c, err := load(env(tc.env))
		if err != nil || c.Uploads() != tc.want {
			t.Errorf("%v: Uploads() = %q (%v), want %q", tc.env, c.Uploads(), err, tc.want)
		}
	}
}

func TestErrorsNameTheVariable(t *testing.T) {
	for _, tc := range []struct {
		name, value string
	}{
		{"CTXFLOW_UI_PORT", "eighty"},
		{"CTXFLOW_UI_PORT", "70000"},
		{"CTXFLOW_TEMPORAL_PORT", "-1"},
		{"CTXFLOW_MAX_BODY_BYTES", "1MiB"},
		{"CTXFLOW_MAX_BODY_BYTES", "100"},
		{"CONTEXT_MAX_TOKENS", "4k"},
		{"LLM_MAX_TOKENS", "1.5"},
		{"CTXFLOW_RECENT_TURNS", "many"},
		{"CTXFLOW_SHUTDOWN_TIMEOUT", "15"},
		{"CTXFLOW_SHUTDOWN_TIMEOUT", "-1s"},
		{"CTXFLOW_TURN_WAIT_TIMEOUT", "soon"},
		{"CTXFLOW_TURN_WAIT_TIMEOUT", "0s"},
		{"CTXFLOW_MAX_UPLOAD_BYTES", "32MiB"},
		{"CTXFLOW_MAX_UPLOAD_BYTES", "10"},
		{"CTXFLOW_TOOL_RESULT_MAX_BYTES", "100"},
		{"CTXFLOW_MAX_QUESTION_BYTES", "10"},
		{"CTXFLOW_TOOL_RESULT_MAX_BYTES", "64KiB"},
		{"CTXFLOW_INGEST_WAIT_TIMEOUT", "-5m"},
		{"CTXFLOW_INGEST_WAIT_TIMEOUT", "later"},
		{"LLM_TIMEOUT", "60"},
		{"CTXFLOW_SESSION_IDLE_TTL", "1 day"},
		{"CTXFLOW_TRANSCRIPT_FSYNC", "yes"},
		{"CTXFLOW_LOG_LEVEL", "verbose"},
		{"CTXFLOW_LOG_FORMAT", "xml"},
		{"CTXFLOW_TOKENIZER", "p50k_base"},
		{"CTXFLOW_TEMPORAL_COMPRESSION", "zstd"},
		{"CTXFLOW_MODEL_PROVIDER", "anthropic"},
		{"CTXFLOW_MODEL_PROVIDER", "openai"}, // without CTXFLOW_OPENAI_BASE_URL
		{"CTXFLOW_OPENAI_BASE_URL", "vllm:8000/v1"},
		{"CTXFLOW_OPENAI_BASE_URL", "ftp://vllm/v1"},
		{"CTXFLOW_OPENAI_CONTEXT_LENGTH", "100"},
		{"CTXFLOW_APPROVE_TOOLS", "run_sql"},
		{"CTXFLOW_APPROVE_TOOLS", "acme="},
		{"CTXFLOW_APPROVE_TOOLS", "acme=[run"},
		{"CTXFLOW_APPROVE_TOOLS", "bad tenant=run_sql"},
		{"CTXFLOW_RETENTION", "30d"},
		{"CTXFLOW_RETENTION", "acme=soon"},
		{"CTXFLOW_RETENTION", "acme=-1h"},
		{"CTXFLOW_RETENTION", "acme=1d;acme=2d"},
		{"CTXFLOW_RETENTION_SWEEP", "1s"},
		{"CTXFLOW_OPENAI_CONTEXT_LENGTH", "-1"},
		{"CTXFLOW_TRANSCRIPT_STORE", "sqlite"},
		{"CTXFLOW_TRANSCRIPT_STORE", "postgres"}, // without DATABASE_URL
		// Out of the ranges of workflows.SessionConfig and Limits.
		{"CTXFLOW_LLM_MODEL", "two words"},
		{"CTXFLOW_EMBEDDING_MODEL", strings.Repeat("m", 201)},
		{"CONTEXT_MAX_TOKENS", "10"},
		{"CONTEXT_MAX_TOKENS", "2000000"},
		{"SUMMARY_TRIGGER_THRESHOLD", "50"},
		{"LLM_TIMEOUT", "500ms"},
		{"LLM_MAX_TOKENS", "0"},
		{"CTXFLOW_CONTINUE_AS_NEW_TURNS", "0"},
		{"CTXFLOW_CONTINUE_AS_NEW_TURNS", "10001"},
		{"CTXFLOW_SESSION_IDLE_TTL", "10ms"},
		{"CTXFLOW_RECENT_TURNS", "1001"},
	} {
		t.Run(tc.name+"="+tc.value, func(t *testing.T) {
			_, err := load(env(map[string]string{tc.name: tc.value}))
			if err == nil {
				t.Fatalf("%s=%q accepted", tc.name, tc.value)
			}
			if !strings.Contains(err.Error(), tc.name) {
				t.Errorf("error %q does not name %s", err, tc.name)
			}
		})
	}
}

func TestEveryErrorIsReported(t *testing.T) {
	_, err := load(env(map[string]string{
		"CTXFLOW_UI_PORT":    "x",
		"LLM_TIMEOUT":        "x",
		"CONTEXT_MAX_TOKENS": "1",
		"CTXFLOW_LOG_FORMAT": "x",
	}))
	if err == nil {
		t.Fatal("load accepted four bad variables")
	}
	for _, name := range []string{"CTXFLOW_UI_PORT", "LLM_TIMEOUT", "CONTEXT_MAX_TOKENS", "CTXFLOW_LOG_FORMAT"} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("error %q does not name %s", err, name)
		}
	}
}

// readNames returns the environment variables config.go reads: string
// literals passed to the parser's methods or to an environment lookup.
func readNames(t *testing.T) []string {
	t.Helper()
	f, err := goparser.ParseFile(token.NewFileSet(), "config.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	readers := map[string]bool{"str": true, "int": true, "dur": true, "bool": true, "raw": true, "approveTools": true, "lookup": true, "Getenv": true, "LookupEnv": true}
	var names []string
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || len(call.Args) == 0 {
			return true
		}
		var fn string
		switch f := call.Fun.(type) {
		case *ast.SelectorExpr:
			fn = f.Sel.Name
		case *ast.Ident:
			fn = f.Name
		}
		lit, ok := call.Args[0].(*ast.BasicLit)
		if !readers[fn] || !ok || lit.Kind != token.STRING {
			return true
		}
		name, err := strconv.Unquote(lit.Value)
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
		return true
	})
	slices.Sort(names)
	return slices.Compact(names)
}

func TestVarsListsEveryVariableRead(t *testing.T) {
	read := readNames(t)
	if len(read) < 20 {
		t.Fatalf("found only %d variables read in config.go: %v (is the scan broken?)", len(read), read)
	}
	documented := map[string]bool{}
	for _, v := range Vars {
		if documented[v.Name] {
			t.Errorf("Vars lists %s twice", v.Name)
		}
		documented[v.Name] = true
		if v.Default == "" || v.Meaning == "" {
			t.Errorf("Vars entry %s has no default or meaning", v.Name)
		}
	}
	for _, name := range read {
		if !documented[name] {
			t.Errorf("config.go reads %s but Vars does not list it", name)
		}
	}
	for _, v := range Vars {
		if strings.Contains(v.Name, ",") { // the SDK's own variables, documentation only
			for _, part := range strings.Split(v.Name, ",") {
				if !strings.HasPrefix(strings.TrimSpace(part), "TEMPORAL_") {
					t.Errorf("combined Vars entry %q holds %q", v.Name, part)
				}
			}
			continue
		}
		if !slices.Contains(read, v.Name) {
			t.Errorf("Vars lists %s but config.go does not read it", v.Name)
		}
	}
}

// TestVarsDefaultsAreTheDefaults sets each variable to the default Vars
// documents: the configuration must not change.
func TestVarsDefaultsAreTheDefaults(t *testing.T) {
	def, err := load(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range Vars {
		if strings.Contains(v.Name, ",") || v.Default == "unset" {
			continue
		}
		c, err := load(env(map[string]string{v.Name: v.Default}))
		if err != nil {
			t.Errorf("%s=%q (its documented default): %v", v.Name, v.Default, err)
			continue
		}
		if !reflect.DeepEqual(c, def) {
			t.Errorf("%s=%q (its documented default) changes the configuration:\n got %+v\nwant %+v", v.Name, v.Default, c, def)
		}
	}
}

func TestLogger(t *testing.T) {
	ctx := context.Background()
	c, err := load(env(map[string]string{"CTXFLOW_LOG_FORMAT": "json", "CTXFLOW_LOG_LEVEL": "warn"}))
	if err != nil {
		t.Fatal(err)
	}
	l := c.Logger()
	if _, ok := l.Handler().(*slog.JSONHandler); !ok {
		t.Errorf("json format gave a %T", l.Handler())
	}
	if l.Enabled(ctx, slog.LevelInfo) || !l.Enabled(ctx, slog.LevelWarn) {
		t.Error("warn level not applied")
	}
	c, _ = load(env(map[string]string{"CTXFLOW_LOG_LEVEL": "debug"}))
	if _, ok := c.Logger().Handler().(*slog.TextHandler); !ok || !c.Logger().Enabled(ctx, slog.LevelDebug) {
		t.Errorf("text debug logger: %T, debug enabled %v", c.Logger().Handler(), c.Logger().Enabled(ctx, slog.LevelDebug))
	}
}

func TestLoadReadsTheProcessEnvironment(t *testing.T) {
	for _, v := range Vars {
		if !strings.Contains(v.Name, ",") {
			t.Setenv(v.Name, "") // blank is unset
		}
	}
	t.Setenv("CTXFLOW_HTTP_ADDR", ":9999")
	t.Setenv("CTXFLOW_RECENT_TURNS", "5")
	c, err := Load()
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if c.HTTPAddr != ":9999" || c.Limits.RecentTurns != 5 {
		t.Errorf("Load ignored the environment: %q, %d", c.HTTPAddr, c.Limits.RecentTurns)
	}
}

func TestKeys(t *testing.T) {
	a, b := strings.Repeat("a", 64), strings.Repeat("B", 64)
	file := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(file, []byte("# keys\nbeta:"+b+"  # the second\n\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		cfg       Config
		want      map[string]string
		wantError string
	}{
		{"none", Config{}, nil, ""},
		{"env and file", Config{APIKeys: " acme:" + a + " ,", APIKeysFile: file}, map[string]string{a: "acme", strings.ToLower(b): "beta"}, ""},
		{"not a hash", Config{APIKeys: "acme:secret"}, nil, "64 hex digits"},
		{"no tenant", Config{APIKeys: a}, nil, "tenant:"},
		{"bad tenant", Config{APIKeys: "a/b:" + a}, nil, "tenant"},
		{"one key, two tenants", Config{APIKeys: "acme:" + a + ",beta:" + a}, nil, "two tenants"},
		{"missing file", Config{APIKeysFile: file + ".nope"}, nil, "CTXFLOW_API_KEYS_FILE"},
	} {
		got, err := tc.cfg.Keys()
		if tc.wantError != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantError) {
				t.Errorf("%s: error %v, want %q", tc.name, err, tc.wantError)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %v %v, want %v", tc.name, got, err, tc.want)
		}
	}
}

// TestTokenSecret: the configured secret, else one made once in the data
// dir and read back by every later process; a short one is refused.
func TestTokenSecret(t *testing.T) {
	dir := t.TempDir()
	c, err := load(env(map[string]string{"CTXFLOW_DATA_DIR": dir}))
	if err != nil {
		t.Fatal(err)
	}
	first, err := c.TokenSecret()
	if err != nil || len(first) != 32 {
		t.Fatalf("made secret: %d bytes, %v", len(first), err)
	}
	again, err := c.TokenSecret()
	if err != nil || string(again) != string(first) {
		t.Errorf("a second process read another secret (%v)", err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "token-secret")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("token-secret: %v %v", fi, err)
	}
	// Processes starting together make one secret, each read whole.
	fresh, err := load(env(map[string]string{"CTXFLOW_DATA_DIR": t.TempDir()}))
	if err != nil {
		t.Fatal(err)
	}
	got := make([][]byte, 8)
	var wg sync.WaitGroup
	for i := range got {
		wg.Go(func() { got[i], _ = fresh.TokenSecret() })
	}
	wg.Wait()
	for i := range got {
		if len(got[i]) != 32 || string(got[i]) != string(got[0]) {
			t.Fatalf("concurrent starts read secrets of %d and %d bytes, or different ones", len(got[0]), len(got[i]))
		}
	}
	c, err = load(env(map[string]string{"CTXFLOW_DATA_DIR": dir, "CTXFLOW_TOKEN_SECRET": "a-shared-secret-of-the-deployment"}))
	if s, _ := c.TokenSecret(); err != nil || string(s) != "a-shared-secret-of-the-deployment" {
		t.Errorf("configured secret: %q %v", s, err)
	}
	if _, err := load(env(map[string]string{"CTXFLOW_TOKEN_SECRET": "short"})); err == nil || !strings.Contains(err.Error(), "CTXFLOW_TOKEN_SECRET") {
		t.Errorf("a short secret: %v", err)
	}
}
