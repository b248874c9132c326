package jobs

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
)

func TestQuietHandlerTakesInfoToDebug(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := slog.New(quietHandler{slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})})
	log.Info("producer job counts", "queue", "prompts")
	log.Warn("a warning stays")
	log.Error("an error stays")
	if log.Enabled(context.Background(), slog.LevelInfo) {
		t.Error("info is enabled through the quiet handler at level info")
	}
	out := buf.String()
	if strings.Contains(out, "producer job counts") || !strings.Contains(out, "a warning stays") || !strings.Contains(out, "an error stays") {
		t.Errorf("logged:\n%s", out)
	}
	buf.Reset()
	debug := slog.New(quietHandler{slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})}).With("component", "river")
	debug.Info("producer job counts")
	if !strings.Contains(buf.String(), "level=DEBUG") || !strings.Contains(buf.String(), "component=river") {
		t.Errorf("at debug: %q", buf.String())
	}
}
