package jobs

import (
	"log/slog"

	"github.com/uptrace/bun"
)

// calls is what prompt execution does around each provider call: it asks the governor for a
// slot, tells it what the provider said, and records the attempt's usage.
type calls struct {
	cfg *Config
	db  *bun.DB
	log *slog.Logger
}
