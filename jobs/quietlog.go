package jobs

import (
	"context"
	"log/slog"
)

// quietHandler takes River's info records down to debug: River reports its routine work
// ("producer job counts", elections, periodic jobs) at info, and an idle server should say
// nothing at info. Warnings and errors pass unchanged.
type quietHandler struct{ inner slog.Handler }

func (h quietHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.inner.Enabled(ctx, quieter(l))
}

func (h quietHandler) Handle(ctx context.Context, r slog.Record) error {
	r.Level = quieter(r.Level)
	return h.inner.Handle(ctx, r)
}

func (h quietHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return quietHandler{h.inner.WithAttrs(as)}
}

func (h quietHandler) WithGroup(name string) slog.Handler {
	return quietHandler{h.inner.WithGroup(name)}
}

// quieter maps info to debug and leaves every other level.
func quieter(l slog.Level) slog.Level {
	if l == slog.LevelInfo {
		return slog.LevelDebug
	}
	return l
}
