// Package ollamatest runs a real Ollama server for integration tests
// (docs/architecture.md §11).
//
// [Start] builds Ollama v0.17.4 CPU-only with scripts/ollama-test-server.sh
// (or finds the binary that script cached outside the clone), serves it on a
// free loopback port with its own OLLAMA_MODELS and HOME, and registers a tiny
// random-weight llama model ([WriteTinyGGUF]) under [ModelName]. The model's
// answers are noise, but every request goes through Ollama's real inference
// path: templates, tokenizer, sampling, grammar-constrained structured output
// and embeddings.
//
// A test that needs the server decides for itself whether to run: see
// [Wanted]. Once it calls Start, a server that cannot be built or started
// fails the test; it is never skipped.
package ollamatest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ctxflow/ctxflow/internal/freeport"
)

const (
	// Version is the Ollama release the script builds.
	Version = "0.17.4"
	// ModelName is the name the tiny model is registered under; the server
	// reports it as ModelName + ":latest".
	ModelName = "ctxflow-tiny"
	// DefaultNumPredict is the model's num_predict (a PARAMETER of its
	// Modelfile, which must agree): the random model rarely stops by itself,
	// so a request that does not set num_predict still ends after this many
	// tokens.
	DefaultNumPredict = 32
	// Seed seeds the model's random weights.
	Seed = 20260515

	// EnvVar set to 1 makes the integration tests mandatory: a missing
	// binary is built, and a failure to build it fails the tests.
	EnvVar = "CTXFLOW_OLLAMA_TESTS"
)

// ServerDefaultContext is the test server's default context length
// (OLLAMA_CONTEXT_LENGTH): half the model's [ContextLength].
const ServerDefaultContext = ContextLength / 2

// Modelfile registers the tiny model. The TEMPLATE is a plain chat format;
// the model has no template of its own. num_thread 1: the model is far too
// small to gain from threads, and llama.cpp's spinning worker threads make
// each token 20-200 times slower when the (2-core) machine is busy with other
// tests.
const Modelfile = `FROM ./tiny.gguf
TEMPLATE """{{- range .Messages }}<|{{ .Role }}|>
{{ .Content }}
{{ end }}<|assistant|>
"""
PARAMETER num_predict 32
PARAMETER num_thread 1
PARAMETER stop "<|user|>"
`

// Server is a running Ollama server with the tiny model registered.
type Server struct {
	// URL is the base URL, e.g. "http://127.0.0.1:41234".
	URL string
	// Host is the address in OLLAMA_HOST syntax, e.g. "127.0.0.1:41234".
	Host string
	// Model is the name the tiny model is registered under.
	Model string
	// Bin is the ollama binary.
	Bin string
	// Dir is the server's HOME; OLLAMA_MODELS is Dir/models.
	Dir string

	cmd     *exec.Cmd
	logPath string
	exited  chan struct{}
	killed  sync.Once
}

// ScriptPath returns the path of scripts/ollama-test-server.sh.
func ScriptPath() (string, error) {
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		p := filepath.Join(filepath.Dir(file), "..", "..", "scripts", "ollama-test-server.sh")
		if _, err := os.Stat(p); err == nil {
			return filepath.Clean(p), nil
		}
	}
	// Built with -trimpath: look up from the working directory (a test runs
	// in its package's directory) for the module root.
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, "scripts", "ollama-test-server.sh")
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			if _, err := os.Stat(p); err != nil {
				return "", fmt.Errorf("ollamatest: module root %s has no scripts/ollama-test-server.sh", dir)
			}
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("ollamatest: scripts/ollama-test-server.sh not found above the working directory")
		}
		dir = parent
	}
}

// BinaryPath returns where the script keeps the ollama binary, built or not
// (`scripts/ollama-test-server.sh path`).
func BinaryPath() (string, error) {
	script, err := ScriptPath()
	if err != nil {
		return "", err
	}
	out, err := exec.Command("bash", script, "path").Output()
	if err != nil {
		return "", fmt.Errorf("ollamatest: %s path: %w", script, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// Wanted reports whether the tests that need a real server should run, and
// why: when CTXFLOW_OLLAMA_TESTS=1 (then a binary that cannot be built is a
// failure), or when the script's cached binary exists. Otherwise a test may
// skip with the reason.
func Wanted() (bool, string) {
	if os.Getenv(EnvVar) == "1" {
		return true, EnvVar + "=1"
	}
	bin, err := BinaryPath()
	if err != nil {
		return false, err.Error()
	}
	if fi, err := os.Stat(bin); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
		return true, "found " + bin
	}
	return false, fmt.Sprintf("no Ollama binary at %s; build it with scripts/ollama-test-server.sh or set %s=1", bin, EnvVar)
}

var (
	buildOnce sync.Once
	buildBin  string
	buildErr  error
	buildLog  string
	buildTook time.Duration
)

// Binary returns the ollama binary, building it with the script if it is
// not cached (about 5-9 minutes on 2 cores; concurrent builds from several
// test binaries are serialised by the script's lock).
func Binary() (string, error) {
	buildOnce.Do(func() {
		start := time.Now()
		script, err := ScriptPath()
		if err != nil {
			buildErr = err
			return
		}
		var stdout, stderr bytes.Buffer
		cmd := exec.Command("bash", script, "build")
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err = cmd.Run()
		buildTook, buildLog = time.Since(start), stderr.String()
		if err != nil {
			buildErr = fmt.Errorf("ollamatest: %s build failed (%v) after %s:\n%s", script, err, buildTook.Round(time.Second), tail(buildLog, 60))
			return
		}
		buildBin = strings.TrimSpace(lastLine(stdout.String()))
		if buildBin == "" {
			buildErr = fmt.Errorf("ollamatest: %s build printed no binary path:\n%s", script, tail(buildLog, 60))
		}
	})
	return buildBin, buildErr
}

// Start builds (or finds) the binary, starts a server, registers the tiny
// model and returns the server; it is stopped when the test ends. Any
// failure is fatal to the test.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		t.Fatal(err)
	}
	if buildTook > 10*time.Second {
		t.Logf("ollamatest: built %s in %s", bin, buildTook.Round(time.Second))
	}

	started := time.Now()
	var s *Server
	for attempt := 1; ; attempt++ {
		s, err = start(t, bin)
		if err == nil {
			break
		}
		// Another process may take the free port between our probe and the
		// server's bind; try again on a new one.
		if attempt < 3 && errors.Is(err, errPortTaken) {
			t.Logf("ollamatest: %v; retrying", err)
			continue
		}
		t.Fatal(err)
	}
	ready := time.Since(started)

	created := time.Now()
	if err := s.createModel(); err != nil {
		t.Fatal(err)
	}
	t.Logf("ollamatest: ollama %s serving %s at %s (ready in %s, model created in %s)",
		Version, s.Model, s.URL, ready.Round(time.Millisecond), time.Since(created).Round(time.Millisecond))
	return s
}

var errPortTaken = errors.New("address already in use")

func start(t testing.TB, bin string) (*Server, error) {
	port, err := freeport.Port("127.0.0.1") // below the ephemeral range: see there
	if err != nil {
		return nil, fmt.Errorf("ollamatest: no free port: %w", err)
	}
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "models"), 0o755); err != nil {
		return nil, err
	}
	host := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	s := &Server{
		URL:     "http://" + host,
		Host:    host,
		Model:   ModelName,
		Bin:     bin,
		Dir:     dir,
		logPath: filepath.Join(dir, "serve.log"),
		exited:  make(chan struct{}),
	}
	logf, err := os.Create(s.logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "serve")
	cmd.Env = s.env()
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logf, logf
	// Own process group: Kill takes the model runners down with the server.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("ollamatest: start %s serve: %w", bin, err)
	}
	s.cmd = cmd
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(s.exited)
	}()
	t.Cleanup(func() {
		s.Kill()
		if t.Failed() {
			t.Logf("ollamatest: server log (%s):\n%s", s.logPath, tail(s.Logs(), 80))
		}
	})

	if err := s.waitReady(60 * time.Second); err != nil {
		s.Kill()
		if strings.Contains(s.Logs(), "address already in use") {
			return nil, fmt.Errorf("ollamatest: port %d: %w", port, errPortTaken)
		}
		return nil, fmt.Errorf("ollamatest: %w\nserver log:\n%s", err, tail(s.Logs(), 60))
	}
	return s, nil
}

// env is the environment of the server and of the CLI run against it:
// the test's own, less any OLLAMA_* setting, plus the server's address and
// private directories.
func (s *Server) env() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "OLLAMA_") || strings.HasPrefix(kv, "HOME=") {
			continue
		}
		env = append(env, kv)
	}
	return append(env,
		"HOME="+s.Dir,
		"OLLAMA_HOST="+s.Host,
		"OLLAMA_MODELS="+filepath.Join(s.Dir, "models"),
		"OLLAMA_NO_CLOUD=1",
		"OLLAMA_NOPRUNE=1",
		// One model, one request at a time: the least memory and the most
		// predictable timings on a small CI machine.
		"OLLAMA_MAX_LOADED_MODELS=1",
		"OLLAMA_NUM_PARALLEL=1",
		// The server's default context, below the model's own as Ollama's
		// (4,096) is below a real model's: a longer prompt arrives whole
		// only when the request asks for more (num_ctx).
		fmt.Sprintf("OLLAMA_CONTEXT_LENGTH=%d", ServerDefaultContext),
	)
}

func (s *Server) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		select {
		case <-s.exited:
			return fmt.Errorf("ollama serve exited before answering on %s (%v)", s.URL, s.cmd.ProcessState)
		default:
		}
		resp, err := client.Get(s.URL + "/api/version")
		if err == nil {
			var v struct{ Version string }
			derr := json.NewDecoder(resp.Body).Decode(&v)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && derr == nil {
				if v.Version != Version {
					return fmt.Errorf("server at %s is version %q, want %q", s.URL, v.Version, Version)
				}
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("ollama serve did not answer GET %s/api/version within %s (last error: %v)", s.URL, timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// createModel writes the tiny model and registers it with `ollama create`.
func (s *Server) createModel() error {
	dir := filepath.Join(s.Dir, "tiny")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := WriteTinyGGUF(filepath.Join(dir, "tiny.gguf"), Seed); err != nil {
		return fmt.Errorf("ollamatest: %w", err)
	}
	return s.create(s.Model, Modelfile)
}

// CreateModel registers the tiny model again under name, with params added
// to its Modelfile (e.g. "PARAMETER num_ctx 2048": the context a client of
// the OpenAI-compatible API, which cannot ask for one, is served with).
func (s *Server) CreateModel(name string, params ...string) error {
	return s.create(name, Modelfile+strings.Join(params, "\n")+"\n")
}

func (s *Server) create(name, modelfile string) error {
	dir := filepath.Join(s.Dir, "tiny")
	file := "Modelfile." + name
	if err := os.WriteFile(filepath.Join(dir, file), []byte(modelfile), 0o644); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.Bin, "create", name, "-f", file)
	cmd.Dir = dir
	cmd.Env = s.env()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("ollamatest: ollama create %s: %v\n%s\nserver log:\n%s", name, err, out, tail(s.Logs(), 40))
	}
	return nil
}

// Kill ends the server and its model runners at once (SIGKILL to the process
// group), as a crash would, and waits for the server to exit. It is safe to
// call more than once; the test's cleanup calls it too.
func (s *Server) Kill() {
	s.killed.Do(func() {
		if s.cmd == nil || s.cmd.Process == nil {
			return
		}
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		select {
		case <-s.exited:
		case <-time.After(10 * time.Second):
		}
	})
}

// Logs returns what the server has logged so far.
func (s *Server) Logs() string {
	b, _ := os.ReadFile(s.logPath)
	return string(b)
}

func lastLine(s string) string {
	s = strings.TrimRight(s, "\n")
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}
