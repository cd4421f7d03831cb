package devserver

import (
	"context"
	"log/slog"
	"sync/atomic"

	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/log/tag"
)

// slogLogger adapts the server's log.Logger interface to a *slog.Logger,
// dropping records below level before their tags are converted. Tags added
// with With are kept as they are and converted only when a record is
// emitted: the server calls With on hot paths.
type slogLogger struct {
	log   *slog.Logger
	level slog.Leveler
	tags  []tag.Tag
	// quiet, once set, drops everything below error: while stopping, the
	// services warn about each other going away.
	quiet *atomic.Bool
}

var (
	_ log.Logger     = slogLogger{}
	_ log.WithLogger = slogLogger{}
)

func newServerLogger(l *slog.Logger, level slog.Leveler) slogLogger {
	return slogLogger{log: l.With("component", "temporal"), level: level, quiet: new(atomic.Bool)}
}

func (s slogLogger) Debug(msg string, tags ...tag.Tag) { s.emit(slog.LevelDebug, msg, tags) }
func (s slogLogger) Info(msg string, tags ...tag.Tag)  { s.emit(slog.LevelInfo, msg, tags) }
func (s slogLogger) Warn(msg string, tags ...tag.Tag)  { s.emit(slog.LevelWarn, msg, tags) }
func (s slogLogger) Error(msg string, tags ...tag.Tag) { s.emit(slog.LevelError, msg, tags) }

// DPanic, Panic and Fatal log at error level and return: an embedded server
// must not take the host process down.
func (s slogLogger) DPanic(msg string, tags ...tag.Tag) { s.emit(slog.LevelError, msg, tags) }

// Panic logs at error level; see DPanic.
func (s slogLogger) Panic(msg string, tags ...tag.Tag) { s.emit(slog.LevelError, msg, tags) }

// Fatal logs at error level; see DPanic.
func (s slogLogger) Fatal(msg string, tags ...tag.Tag) { s.emit(slog.LevelError, msg, tags) }

// With returns a logger that adds tags to every record.
func (s slogLogger) With(tags ...tag.Tag) log.Logger {
	return slogLogger{log: s.log, level: s.level, tags: append(s.tags[:len(s.tags):len(s.tags)], tags...), quiet: s.quiet}
}

func (s slogLogger) emit(level slog.Level, msg string, tags []tag.Tag) {
	ctx := context.Background()
	if level < s.level.Level() || (level < slog.LevelError && s.quiet.Load()) || !s.log.Enabled(ctx, level) {
		return
	}
	attrs := make([]slog.Attr, 0, len(s.tags)+len(tags))
	for _, t := range s.tags {
		attrs = append(attrs, slog.Any(t.Key(), t.Value()))
	}
	for _, t := range tags {
		attrs = append(attrs, slog.Any(t.Key(), t.Value()))
	}
	s.log.LogAttrs(ctx, level, msg, attrs...)
}
