package delivery

import (
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/riverqueue/river"
	"github.com/uptrace/bun"

	"asterion/jobs"
	"asterion/jobs/registry"
	"asterion/secretbox"
)

// Config configures webhook delivery. The zero value of every field but Jobs means its
// default; a negative duration or count, a BackoffMax below BackoffBase or a Lease within
// Timeout is an error.
type Config struct {
	// Jobs is the prompt execution whose completions are delivered (required): the delivery
	// owner registers with its registry and runs its River jobs on its worker pools.
	Jobs *jobs.Service
	// Timeout bounds one HTTP request (default 10 s).
	Timeout time.Duration
	// MaxAttempts bounds the attempts of one delivery (default 8).
	MaxAttempts int
	// BackoffBase is the wait after the first failed attempt; it doubles per attempt
	// (default 1 s: 1 s, 2 s, 4 s …).
	BackoffBase time.Duration
	// BackoffMax caps the wait (default 60 s, or BackoffBase when that is longer).
	BackoffMax time.Duration
	// Lease is how long an in-flight marker is trusted; an older one belongs to an execution
	// that died (default Timeout + 30 s).
	Lease time.Duration
	// RecoverEvery is how often the leader looks for deliveries whose River job is gone
	// (default 30 s).
	RecoverEvery time.Duration
	// TTL is the TTL the delivery kind asks for (clamped by the policy; zero: its default).
	TTL time.Duration
	// SecretKey gives the server's secret key, which the orgs' webhook secrets are sealed with
	// (required; asked for when a delivery is first sent).
	SecretKey *secretbox.Source
	// AllowPrivate lets deliveries go to loopback, private and link-local addresses
	// (ASTERION_WEBHOOK_ALLOW_PRIVATE); by default they are refused when the connection is
	// dialled.
	AllowPrivate bool
}

// validate fills in the defaults and rejects bad values.
func (c *Config) validate() error {
	if c.Jobs == nil {
		return errors.New("delivery: Config.Jobs is required")
	}
	if c.SecretKey == nil {
		return errors.New("delivery: Config.SecretKey is required")
	}
	for name, d := range map[string]time.Duration{"Timeout": c.Timeout, "BackoffBase": c.BackoffBase,
		"BackoffMax": c.BackoffMax, "Lease": c.Lease, "RecoverEvery": c.RecoverEvery, "TTL": c.TTL} {
		if d < 0 {
			return fmt.Errorf("delivery: Config.%s %s is negative", name, d)
		}
	}
	if c.MaxAttempts < 0 {
		return fmt.Errorf("delivery: Config.MaxAttempts %d is negative", c.MaxAttempts)
	}
	if c.BackoffMax != 0 && c.BackoffBase != 0 && c.BackoffMax < c.BackoffBase {
		return fmt.Errorf("delivery: Config.BackoffMax %s is below BackoffBase %s", c.BackoffMax, c.BackoffBase)
	}
	if c.Lease != 0 && c.Timeout != 0 && c.Lease <= c.Timeout {
		return fmt.Errorf("delivery: Config.Lease %s must exceed Timeout %s", c.Lease, c.Timeout)
	}
	*c = c.withDefaults()
	return nil
}

// withDefaults returns c with every zero field at its default.
func (c Config) withDefaults() Config {
	if c.Timeout == 0 {
		c.Timeout = 10 * time.Second
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = 8
	}
	if c.BackoffBase == 0 {
		c.BackoffBase = time.Second
	}
	if c.BackoffMax == 0 {
		c.BackoffMax = max(time.Minute, c.BackoffBase)
	}
	if c.Lease == 0 {
		c.Lease = c.Timeout + 30*time.Second
	}
	if c.RecoverEvery == 0 {
		c.RecoverEvery = 30 * time.Second
	}
	return c
}

// newClient is the HTTP client of the deliveries: it follows no redirects, uses no proxy (the
// address check must see the receiver's address, not a proxy's) and dials through the
// private-address guard.
func (c Config) newClient() *http.Client {
	dialer := guardedDialer(c.AllowPrivate, c.Timeout)
	return &http.Client{
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Transport: &http.Transport{
			Proxy:                 nil,
			DialContext:           dialer.DialContext,
			ForceAttemptHTTP2:     true,
			MaxIdleConns:          100,
			IdleConnTimeout:       90 * time.Second,
			TLSHandshakeTimeout:   10 * time.Second,
			ExpectContinueTimeout: time.Second,
		},
	}
}

// Backoff is the wait after failed attempt n (1-based): BackoffBase·2^(n-1), at most BackoffMax.
func (c Config) Backoff(n int) time.Duration {
	c = c.withDefaults()
	d := c.BackoffBase
	for i := 1; i < n && d < c.BackoffMax; i++ {
		d *= 2
	}
	return min(d, c.BackoffMax)
}

// Deliveries is the artifact.delivery owner: it accepts the delivery of completed prompts,
// sends them, records their outcome, and answers for them to the registry.
type Deliveries struct {
	cfg    Config
	reg    *registry.Registry
	db     *bun.DB
	log    *slog.Logger
	insert *river.Client[*sql.Tx]
	client *http.Client
}

// New validates cfg, registers the delivery owner with the registry of cfg.Jobs, subscribes
// it to settled operations, and adds its River workers to the worker pools cfg.Jobs builds
// from now on.
func New(cfg Config) (*Deliveries, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	ds := &Deliveries{cfg: cfg, reg: cfg.Jobs.Registry(), db: cfg.Jobs.DB(), log: cfg.Jobs.Logger(),
		insert: cfg.Jobs.Inserter(), client: cfg.newClient()}
	ds.reg.Register(ds)
	ds.reg.OnSettled(ds.accept)
	cfg.Jobs.Extend(ds)
	return ds, nil
}
