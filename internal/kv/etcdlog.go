package kv

import (
	"cmp"
	"context"
	"log/slog"
	"slices"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// newZapSlog returns a zap logger, which the etcd client wants, that writes
// to l: zap's info messages at debug level (the client is chatty about
// routine reconnects), warnings and errors as such.
func newZapSlog(l *slog.Logger) *zap.Logger {
	return zap.New(zapSlogCore{l: l})
}

// zapSlogCore is a zapcore.Core over a slog.Logger.
type zapSlogCore struct {
	l     *slog.Logger
	attrs []slog.Attr // fields added by With
}

func slogLevel(l zapcore.Level) slog.Level {
	switch {
	case l >= zapcore.ErrorLevel:
		return slog.LevelError
	case l == zapcore.WarnLevel:
		return slog.LevelWarn
	default:
		return slog.LevelDebug
	}
}

func (c zapSlogCore) Enabled(l zapcore.Level) bool {
	return c.l.Enabled(context.Background(), slogLevel(l))
}

func (c zapSlogCore) With(fields []zapcore.Field) zapcore.Core {
	return zapSlogCore{l: c.l, attrs: append(slices.Clip(c.attrs), fieldAttrs(fields)...)}
}

func (c zapSlogCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c zapSlogCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	attrs := append(slices.Clip(c.attrs), fieldAttrs(fields)...)
	c.l.LogAttrs(context.Background(), slogLevel(e.Level), e.Message, attrs...)
	return nil
}

func (c zapSlogCore) Sync() error { return nil }

// fieldAttrs converts zap fields to slog attributes, in name order.
func fieldAttrs(fields []zapcore.Field) []slog.Attr {
	if len(fields) == 0 {
		return nil
	}
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range fields {
		f.AddTo(enc)
	}
	attrs := make([]slog.Attr, 0, len(enc.Fields))
	for k, v := range enc.Fields {
		attrs = append(attrs, slog.Any(k, v))
	}
	slices.SortFunc(attrs, func(a, b slog.Attr) int { return cmp.Compare(a.Key, b.Key) })
	return attrs
}
