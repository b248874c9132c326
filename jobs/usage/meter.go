package usage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"asterion/db"
)

// DefaultStatusTTL is how long a meter trusts an org's budget status before reading it again:
// a submit checks its budget on every call, and a second of lag on a spent budget costs at
// most a second's submits.
const DefaultStatusTTL = time.Second

// Config configures a Meter.
type Config struct {
	// DB holds usage and budgets. Required.
	DB *bun.DB
	// Prices price each model's tokens. Default: every model is free.
	Prices Prices
	// StatusTTL is how long a budget status is cached, in [0, 1 min]. Zero means
	// DefaultStatusTTL; use a negative value for no cache.
	StatusTTL time.Duration
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

func (c *Config) validate() error {
	if c.DB == nil {
		return errors.New("usage: DB is required")
	}
	if c.Prices == nil {
		c.Prices = Prices{}
	}
	switch {
	case c.StatusTTL == 0:
		c.StatusTTL = DefaultStatusTTL
	case c.StatusTTL < 0:
		c.StatusTTL = 0
	case c.StatusTTL > time.Minute:
		return fmt.Errorf("usage: StatusTTL %s is over a minute", c.StatusTTL)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return nil
}

// Meter records usage and answers budget questions.
type Meter struct {
	cfg Config

	mu     sync.Mutex
	status map[int64]cachedStatus
	// recorded sums what this process recorded, per model, for /metrics.
	recorded map[string]Total
}

type cachedStatus struct {
	st Status
	at time.Time
}

// New validates cfg and returns a meter.
func New(cfg Config) (*Meter, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Meter{cfg: cfg, status: map[int64]cachedStatus{}, recorded: map[string]Total{}}, nil
}

// Prices is the meter's price table.
func (m *Meter) Prices() Prices { return m.cfg.Prices }

// AttemptUsage is what one attempt used.
type AttemptUsage struct {
	JobID     uuid.UUID
	Attempt   int
	OrgID     int64
	Model     string
	StartedAt time.Time
	// ErrorKind is the attempt's failure, "" for a success.
	ErrorKind    string
	InputTokens  int
	OutputTokens int
}

// Record writes u with its cost inside the caller's transaction (idb) and returns the row.
func (m *Meter) Record(ctx context.Context, idb bun.IDB, u AttemptUsage) (db.Attempt, error) {
	a := db.Attempt{JobID: u.JobID, Attempt: u.Attempt, OrgID: u.OrgID, Model: u.Model, StartedAt: u.StartedAt,
		InputTokens: max(u.InputTokens, 0), OutputTokens: max(u.OutputTokens, 0)}
	if u.ErrorKind != "" {
		a.ErrorKind = &u.ErrorKind
	}
	a.CostUSD = m.cfg.Prices.Cost(u.Model, a.InputTokens, a.OutputTokens)
	if err := db.RecordAttempt(ctx, idb, a, rand.IntN(db.UsageShards)); err != nil {
		return db.Attempt{}, err
	}
	m.mu.Lock()
	t := m.recorded[a.Model]
	t.Add(a)
	m.recorded[a.Model] = t
	m.mu.Unlock()
	return a, nil
}

// Recorded returns what this process recorded since it started, per model: counters that only
// grow, for /metrics (sum them over processes).
func (m *Meter) Recorded() map[string]Total {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]Total, len(m.recorded))
	for k, v := range m.recorded {
		out[k] = v
	}
	return out
}

// Status returns where org stands against its budget, from a cache at most StatusTTL old.
func (m *Meter) Status(ctx context.Context, orgID int64) (Status, error) {
	now := m.cfg.Now()
	m.mu.Lock()
	c, ok := m.status[orgID]
	m.mu.Unlock()
	if ok && now.Sub(c.at) < m.cfg.StatusTTL && now.Before(c.st.Resets) {
		return c.st, nil
	}
	st, err := m.readStatus(ctx, orgID, now)
	if err != nil {
		return Status{}, err
	}
	m.mu.Lock()
	m.status[orgID] = cachedStatus{st: st, at: now}
	m.mu.Unlock()
	return st, nil
}

func (m *Meter) readStatus(ctx context.Context, orgID int64, now time.Time) (Status, error) {
	var b db.OrgBudget
	err := m.cfg.DB.NewSelect().Model(&b).Where("org_id = ?", orgID).Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		_, end := Day.Bounds(now)
		return Status{Resets: end}, nil
	}
	if err != nil {
		return Status{}, fmt.Errorf("read the budget of org %d: %w", orgID, err)
	}
	p, err := ParsePeriod(b.Period)
	if err != nil {
		return Status{}, err
	}
	start, end := p.Bounds(now)
	used, err := db.PeriodUsage(ctx, m.cfg.DB, orgID, string(p), start)
	if err != nil {
		return Status{}, err
	}
	return Status{Budget: Budget{Tokens: b.Tokens, Period: p}, Used: used, Resets: end}, nil
}

// SetBudget gives org a budget of tokens per period; tokens 0 clears it.
func (m *Meter) SetBudget(ctx context.Context, orgID int64, b Budget) error {
	var err error
	if b.Tokens <= 0 {
		_, err = m.cfg.DB.NewDelete().Model((*db.OrgBudget)(nil)).Where("org_id = ?", orgID).Exec(ctx)
	} else {
		if _, perr := ParsePeriod(string(b.Period)); perr != nil {
			return perr
		}
		// The row's seed trigger runs on the update path too, dropping the org's pending
		// releases as it counts the reservations afresh: the update takes that count.
		_, err = m.cfg.DB.NewInsert().Model(&db.OrgBudget{OrgID: orgID, Tokens: b.Tokens, Period: string(b.Period)}).
			On("CONFLICT (org_id) DO UPDATE").Set("tokens = EXCLUDED.tokens, period = EXCLUDED.period, reserved = EXCLUDED.reserved").Exec(ctx)
	}
	if err != nil {
		return fmt.Errorf("set the budget of org %d: %w", orgID, err)
	}
	m.mu.Lock()
	delete(m.status, orgID)
	m.mu.Unlock()
	return nil
}

// Total is usage summed over attempts.
type Total struct {
	InputTokens  int64   `json:"input_tokens"`
	OutputTokens int64   `json:"output_tokens"`
	CostUSD      float64 `json:"cost_usd"`
}

// Add adds a to t.
func (t *Total) Add(a db.Attempt) {
	t.InputTokens += int64(a.InputTokens)
	t.OutputTokens += int64(a.OutputTokens)
	t.CostUSD += a.CostUSD
}

// JobAttempts returns the usage rows of a job, oldest attempt first, and their sum.
func (m *Meter) JobAttempts(ctx context.Context, jobID uuid.UUID) ([]db.Attempt, Total, error) {
	var rows []db.Attempt
	if err := m.cfg.DB.NewSelect().Model(&rows).Where("job_id = ?", jobID).Order("attempt").Scan(ctx); err != nil {
		return nil, Total{}, fmt.Errorf("read the usage of job %s: %w", jobID, err)
	}
	var t Total
	for _, a := range rows {
		t.Add(a)
	}
	return rows, t, nil
}

// OrgUsage is an org's usage in a window, in all and per model.
type OrgUsage struct {
	Total
	Models map[string]Total `json:"models"`
}

// Window returns the usage of every org (or of orgID alone, when not zero) of the attempts
// that finished at or after since.
func (m *Meter) Window(ctx context.Context, since time.Time, orgID int64) (map[int64]OrgUsage, error) {
	return Window(ctx, m.cfg.DB, since, orgID)
}

// Window is Meter.Window on any database handle, for readers that hold no meter.
func Window(ctx context.Context, idb bun.IDB, since time.Time, orgID int64) (map[int64]OrgUsage, error) {
	var rows []struct {
		OrgID        int64   `bun:"org_id"`
		Model        string  `bun:"model"`
		InputTokens  int64   `bun:"input_tokens"`
		OutputTokens int64   `bun:"output_tokens"`
		CostUSD      float64 `bun:"cost_usd"`
	}
	q := idb.NewSelect().TableExpr("sa_attempt").
		ColumnExpr("org_id, model").
		ColumnExpr("sum(input_tokens) AS input_tokens, sum(output_tokens) AS output_tokens, sum(cost_usd) AS cost_usd").
		Where("finished_at >= ?", since).GroupExpr("org_id, model")
	if orgID != 0 {
		q = q.Where("org_id = ?", orgID)
	}
	if err := q.Scan(ctx, &rows); err != nil {
		return nil, fmt.Errorf("read usage since %s: %w", since.Format(time.RFC3339), err)
	}
	out := map[int64]OrgUsage{}
	for _, r := range rows {
		ou, ok := out[r.OrgID]
		if !ok {
			ou.Models = map[string]Total{}
		}
		t := Total{InputTokens: r.InputTokens, OutputTokens: r.OutputTokens, CostUSD: r.CostUSD}
		ou.Models[r.Model] = t
		ou.InputTokens += t.InputTokens
		ou.OutputTokens += t.OutputTokens
		ou.CostUSD += t.CostUSD
		out[r.OrgID] = ou
	}
	return out, nil
}
