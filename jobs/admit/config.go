package admit

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"time"

	"github.com/uptrace/bun"
)

// Config configures an Admission.
type Config struct {
	// DB holds the quota counters and the budgets. Required.
	DB *bun.DB
	// Models lists the models a job may ask for; the first is the default. Required: a
	// deployment without a list of its own admits the provider's own model only, so that no
	// caller creates limiters, metrics series or prices by inventing names.
	Models []string
	// OrgMaxQueued, when positive, caps an org's queued plus running jobs.
	OrgMaxQueued int
	// SubmitRate, when positive, is each user's admissions per second, with a burst of ten
	// times that, counted by this process.
	SubmitRate float64
	// MeanOutputTTL is how long the mean output of a model's last attempts, the estimate of a
	// job that sets no max_tokens, is reused before it is read again (default 30 s).
	MeanOutputTTL time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Log receives what the admission cannot answer to a caller (default slog.Default()).
	Log *slog.Logger
}

// maxModelName bounds a model name in the list.
const maxModelName = 200

func (c *Config) validate() error {
	if c.DB == nil {
		return errors.New("admit: DB is required")
	}
	if len(c.Models) == 0 {
		return errors.New("admit: Models must name at least the provider's own model")
	}
	seen := map[string]bool{}
	for _, m := range c.Models {
		switch {
		case strings.TrimSpace(m) != m || m == "":
			return fmt.Errorf("admit: model %q must not be blank or carry spaces around it", m)
		case len(m) > maxModelName:
			return fmt.Errorf("admit: model %q is longer than %d bytes", m, maxModelName)
		case ControlCharProblem(m) != "":
			return fmt.Errorf("admit: model %q: %s", m, ControlCharProblem(m))
		case seen[m]:
			return fmt.Errorf("admit: model %q is listed twice", m)
		}
		seen[m] = true
	}
	if c.OrgMaxQueued < 0 {
		return fmt.Errorf("admit: OrgMaxQueued %d must not be negative", c.OrgMaxQueued)
	}
	if c.SubmitRate < 0 || math.IsNaN(c.SubmitRate) || math.IsInf(c.SubmitRate, 0) {
		return fmt.Errorf("admit: SubmitRate %v must be a finite number ≥ 0", c.SubmitRate)
	}
	if c.MeanOutputTTL < 0 {
		return fmt.Errorf("admit: MeanOutputTTL %s must not be negative", c.MeanOutputTTL)
	}
	if c.MeanOutputTTL == 0 {
		c.MeanOutputTTL = 30 * time.Second
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
	return nil
}
