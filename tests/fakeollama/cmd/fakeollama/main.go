// Command fakeollama serves the deterministic fake Ollama of package
// fakeollama, for manual checks:
//
//	go run ./tests/fakeollama/cmd/fakeollama -addr 127.0.0.1:11434 -delay 200ms
//	OLLAMA_HOST=http://127.0.0.1:11434 ctxflow dev
//
// It stops on SIGINT or SIGTERM.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/ctxflow/ctxflow/tests/fakeollama"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:11434", "address to listen on")
	delay := flag.Duration("delay", 0, "wait before each chat answer")
	chunkDelay := flag.Duration("chunk-delay", 0, "pause between streamed fragments")
	models := flag.String("models", fakeollama.DefaultModel, "comma-separated model names to claim")
	flag.Parse()

	opts := fakeollama.Options{Delay: *delay, ChunkDelay: *chunkDelay}
	for m := range strings.SplitSeq(*models, ",") {
		if m = strings.TrimSpace(m); m != "" {
			opts.Models = append(opts.Models, m)
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *addr, opts); err != nil {
		slog.Error("fakeollama", "err", err)
		os.Exit(1)
	}
}

// run serves a fake on addr until ctx ends.
func run(ctx context.Context, addr string, opts fakeollama.Options) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	fake := fakeollama.New(opts)
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			slog.Info("request", "method", r.Method, "path", r.URL.Path)
			fake.ServeHTTP(w, r)
		}),
		ReadHeaderTimeout: 10 * time.Second,
	}
	slog.Info("fake ollama listening", "addr", "http://"+ln.Addr().String(), "models", opts.Models, "delay", opts.Delay)

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	c := fake.Calls()
	slog.Info("fake ollama stopped", "chat", c.Chat, "show", c.Show, "tags", c.Tags, "version", c.Version)
	return nil
}
