package governor

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/uptrace/bun"

	"asterion/jobs/provider"
)

// Burst is how many calls may start at once when a model's limiter is idle. Two is the most
// that keeps every window of w seconds within ceil(RPM × w / 60) + 2 starts.
const Burst = 2

// DefaultHorizon is how far ahead a slot may be reserved.
const DefaultHorizon = 2 * time.Second

// DefaultMaxPause is the longest one provider answer may hold a model by default.
const DefaultMaxPause = 5 * time.Minute

// MaxMaxPause is the largest MaxPause a deployment may configure: a provider that asks for
// longer than a day is better paused by an operator, who can see it and lift it.
const MaxMaxPause = 24 * time.Hour

// Config configures a Governor.
type Config struct {
	// DB holds the shared state. Required.
	DB *bun.DB
	// RPM and TPM bound the calls and the tokens started per minute for each model; zero
	// means whatever the provider reports, and unlimited until it does.
	RPM, TPM int
	// Horizon is how far ahead a slot may be reserved, in (0, 1 min]. Default DefaultHorizon.
	Horizon time.Duration
	// MaxPause is the longest one provider answer (a 429's Retry-After, the reset of an
	// exhausted limit, one call's token debt) may hold a model for every process, in
	// (0, MaxMaxPause]. Default DefaultMaxPause. Any member can make the provider say "wait",
	// and the wait holds every org.
	MaxPause time.Duration
	// OnGrant, when set, is called with every slot Reserve grants, after it is taken. It is a
	// test signal: the governor's promise is about the slots it hands out on the database's
	// clock, and a test compares those with when the calls really started instead of timing
	// the calls on a machine whose load it does not control.
	OnGrant func(model string, gr Grant)
}

func (c *Config) validate() error {
	if c.DB == nil {
		return errors.New("governor: DB is required")
	}
	if c.RPM < 0 || c.TPM < 0 {
		return fmt.Errorf("governor: RPM %d and TPM %d must not be negative", c.RPM, c.TPM)
	}
	if c.Horizon == 0 {
		c.Horizon = DefaultHorizon
	}
	if c.Horizon < 0 || c.Horizon > time.Minute {
		return fmt.Errorf("governor: Horizon %s is outside (0, 1m]", c.Horizon)
	}
	if c.MaxPause == 0 {
		c.MaxPause = DefaultMaxPause
	}
	if c.MaxPause < 0 || c.MaxPause > MaxMaxPause {
		return fmt.Errorf("governor: MaxPause %s is outside (0, %s]", c.MaxPause, MaxMaxPause)
	}
	return nil
}

// Governor hands out call slots for the models of one provider account.
type Governor struct {
	cfg Config
	// metered holds, for each model this process reserved a slot for, whether a token limit
	// was in force at its last reservation: where none is, a call's token debt changes
	// nothing and is not sent.
	metered sync.Map
	// uncounted holds, for each model, the calls granted by a read of its row and not yet
	// added to its count (*uncountedCalls).
	uncounted sync.Map
}

// Horizon is the longest a caller waits for a granted slot.
func (g *Governor) Horizon() time.Duration { return g.cfg.Horizon }

// MaxPause is the longest one provider answer holds a model, and so the longest a caller
// waiting for the model need sleep before asking again.
func (g *Governor) MaxPause() time.Duration { return g.cfg.MaxPause }

// New validates cfg and returns a governor.
func New(cfg Config) (*Governor, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Governor{cfg: cfg}, nil
}

// Grant is the answer to a reservation.
type Grant struct {
	// Granted means a slot was taken: the call may start after Wait.
	Granted bool
	// Wait is how long until the slot (granted) or until asking again is worth it (not
	// granted: the slot would be beyond the horizon).
	Wait time.Duration
	// Paused means an operator paused the model: no slot until it is resumed.
	Paused bool
	// At is the slot on the database's clock (zero when paused).
	At time.Time
}

// Reserve asks for a slot for one call to model that will use about tokens tokens.
func (g *Governor) Reserve(ctx context.Context, model string, tokens int) (Grant, error) {
	var (
		granted, paused, metered, counted bool
		slot                              sql.NullTime
		now                               time.Time
	)
	row := g.cfg.DB.DB.QueryRowContext(ctx, reserveSQL, model, g.cfg.RPM, g.cfg.TPM, max(tokens, 0),
		g.cfg.Horizon.Seconds(), Burst, true)
	if err := row.Scan(&granted, &slot, &now, &paused, &metered, &counted); err != nil {
		return Grant{}, fmt.Errorf("reserve a call slot for model %s: %w", model, err)
	}
	if granted && !counted {
		g.countLater(model)
	}
	g.metered.Store(model, metered)
	gr := Grant{Granted: granted, Paused: paused}
	if slot.Valid {
		gr.At = slot.Time
	}
	if slot.Valid && slot.Time.After(now) {
		gr.Wait = slot.Time.Sub(now)
		if !granted {
			// Ask again when the slot comes within the horizon.
			gr.Wait = max(gr.Wait-g.cfg.Horizon, 10*time.Millisecond)
		}
	}
	if granted && g.cfg.OnGrant != nil {
		g.cfg.OnGrant(model, gr)
	}
	return gr, nil
}

// Observation is what a provider said about one call.
type Observation struct {
	// Limits are its rate-limit figures.
	Limits provider.Limits
	// RateLimited is true for a 429; RetryAfter is its Retry-After when HasRetryAfter.
	RateLimited   bool
	RetryAfter    time.Duration
	HasRetryAfter bool
	// ReservedTokens is what the slot counted, UsedTokens what the call really used (zero:
	// unknown, nothing corrected).
	ReservedTokens, UsedTokens int
}

// pause is how long every process must keep off the model after o, before the MaxPause
// bound: a 429's Retry-After, or the reset of a limit the provider reported exhausted. A bare
// 429 says nothing of the account as a whole; the attempt it refused backs off on its own
// (jobs.Decide).
func (o Observation) pause() time.Duration {
	var p time.Duration
	if o.RateLimited && o.HasRetryAfter {
		p = o.RetryAfter
	}
	l := o.Limits
	if l.HasRemainingRequests && l.RemainingRequests == 0 {
		p = max(p, l.ResetRequests)
	}
	if l.HasRemainingTokens && l.RemainingTokens == 0 {
		p = max(p, l.ResetTokens)
	}
	return max(p, 0)
}

// Observe records what the provider said after a call to model. Calls that reported nothing
// worth recording cost no statement; nor does a token debt where the model's last reservation
// in this process found no token limit in force. Whatever the provider asked, the model is
// held for at most MaxPause from now.
func (g *Governor) Observe(ctx context.Context, model string, o Observation) error {
	limitRPM, limitTPM := 0, 0
	if o.Limits.HasLimitRequests {
		limitRPM = o.Limits.LimitRequests
	}
	if o.Limits.HasLimitTokens {
		limitTPM = o.Limits.LimitTokens
	}
	debt := 0
	if o.UsedTokens > 0 && g.tokenMetered(model) {
		debt = o.UsedTokens - o.ReservedTokens
	}
	pause := min(o.pause(), g.cfg.MaxPause)
	if limitRPM == 0 && limitTPM == 0 && pause == 0 && debt == 0 && !o.RateLimited {
		return nil
	}
	if _, err := g.cfg.DB.DB.ExecContext(ctx, observeSQL, model, limitRPM, limitTPM, pause.Seconds(), g.cfg.TPM,
		debt, o.RateLimited, g.cfg.MaxPause.Seconds()); err != nil {
		return fmt.Errorf("record what the provider said of model %s: %w", model, err)
	}
	return nil
}

// tokenMetered reports whether a token limit may be in force for model: true unless this
// process's last reservation for it found none.
func (g *Governor) tokenMetered(model string) bool {
	if g.cfg.TPM > 0 {
		return true
	}
	m, ok := g.metered.Load(model)
	return !ok || m.(bool)
}

// ModelState is one model's limiter as operators see it.
type ModelState struct {
	bun.BaseModel  `bun:"table:sa_governor"`
	Model          string     `bun:"model,pk"`
	PausedUntil    *time.Time `bun:"paused_until"`
	OperatorPaused bool       `bun:"operator_paused"`
	// PausedBy, PausedRole and PausedActor say who set the operator's pause: the user (nil
	// for the command line), the role it acted in and its name in the audit trail.
	PausedBy    *int64    `bun:"paused_by"`
	PausedRole  string    `bun:"paused_role,nullzero"`
	PausedActor string    `bun:"paused_actor,nullzero"`
	LearnedRPM  int       `bun:"learned_rpm"`
	LearnedTPM  int       `bun:"learned_tpm"`
	Calls       int64     `bun:"calls"`
	Limited     int64     `bun:"limited"`
	UpdatedAt   time.Time `bun:"updated_at"`
}

// RPM is the limit in force for s: the configured one, else what the provider reported.
func (g *Governor) RPM(s ModelState) int {
	if g.cfg.RPM > 0 {
		return g.cfg.RPM
	}
	return s.LearnedRPM
}

// TPM is the token limit in force for s.
func (g *Governor) TPM(s ModelState) int {
	if g.cfg.TPM > 0 {
		return g.cfg.TPM
	}
	return s.LearnedTPM
}

// Models returns every model the governor has seen, by name.
func (g *Governor) Models(ctx context.Context) ([]ModelState, error) {
	var out []ModelState
	if err := g.cfg.DB.NewSelect().Model(&out).Order("model").Scan(ctx); err != nil {
		return nil, fmt.Errorf("read the provider governor: %w", err)
	}
	return out, nil
}
