package db

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"
)

// Attempt is the usage of one attempt of a job that reached the provider.
type Attempt struct {
	bun.BaseModel `bun:"table:sa_attempt"`
	JobID         uuid.UUID `bun:"job_id,pk,type:uuid"`
	Attempt       int       `bun:"attempt,pk"`
	OrgID         int64     `bun:"org_id"`
	Model         string    `bun:"model"`
	StartedAt     time.Time `bun:"started_at"`
	FinishedAt    time.Time `bun:"finished_at,nullzero,default:now()"`
	ErrorKind     *string   `bun:"error_kind"`
	InputTokens   int       `bun:"input_tokens"`
	OutputTokens  int       `bun:"output_tokens"`
	CostUSD       float64   `bun:"cost_usd"`
}

// OrgBudget is an org's token budget per UTC day or month.
type OrgBudget struct {
	bun.BaseModel `bun:"table:sa_org_budget"`
	OrgID         int64  `bun:"org_id,pk"`
	Tokens        int64  `bun:"tokens"`
	Period        string `bun:"period"`
}

// UsageShards is how many rows each org's total of a period is spread over. A finish holds
// its shard's two rows (day and month) until its durable commit, so with few shards the
// finishes of one busy org queue behind each other's disk flush; a reader sums a period's rows
// from one index range, whose size matters little next to that wait.
const UsageShards = 32

// recordAttemptSQL writes an attempt's usage and adds it to its org's day and month totals, in
// one statement; an attempt already recorded is neither written nor counted again.
const recordAttemptSQL = `WITH a AS (
    INSERT INTO sa_attempt (job_id, attempt, org_id, model, started_at, error_kind, input_tokens, output_tokens, cost_usd)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
    ON CONFLICT (job_id, attempt) DO NOTHING
    RETURNING org_id, input_tokens + output_tokens AS tokens, cost_usd, finished_at
)
INSERT INTO sa_usage_period AS u (org_id, period, period_start, shard, tokens, cost_usd)
SELECT a.org_id, p.period, date_trunc(p.period, a.finished_at, 'UTC'), $10, a.tokens, a.cost_usd
FROM a CROSS JOIN (VALUES ('day'), ('month')) AS p (period)
ON CONFLICT (org_id, period, period_start, shard)
DO UPDATE SET tokens = u.tokens + EXCLUDED.tokens, cost_usd = u.cost_usd + EXCLUDED.cost_usd`

// RecordAttempt writes a's usage inside the caller's transaction (or alone), counting it in
// shard (0 ≤ shard < UsageShards) of its org's totals.
func RecordAttempt(ctx context.Context, idb bun.IDB, a Attempt, shard int) error {
	q := rawSQL(idb)
	if q == nil {
		return fmt.Errorf("record attempt usage: unsupported bun.IDB %T", idb)
	}
	if _, err := q.ExecContext(ctx, recordAttemptSQL, a.JobID, a.Attempt, a.OrgID, a.Model, a.StartedAt, a.ErrorKind,
		a.InputTokens, a.OutputTokens, a.CostUSD, shard%UsageShards); err != nil {
		return fmt.Errorf("record usage of job %s attempt %d: %w", a.JobID, a.Attempt, err)
	}
	return nil
}

// periodUsageSQL sums an org's total for one period.
const periodUsageSQL = `SELECT coalesce(sum(tokens), 0) FROM sa_usage_period
WHERE org_id = $1 AND period = $2 AND period_start = $3`

// PeriodUsage returns the tokens org recorded in the period starting at start.
func PeriodUsage(ctx context.Context, idb bun.IDB, orgID int64, period string, start time.Time) (int64, error) {
	rows, err := rawQuery(ctx, idb, periodUsageSQL, orgID, period, start)
	if err != nil {
		return 0, fmt.Errorf("read the %s usage of org %d: %w", period, orgID, err)
	}
	defer rows.Close()
	var n int64
	if rows.Next() {
		err = rows.Scan(&n)
	}
	if err == nil {
		err = rows.Err()
	}
	if err != nil {
		return 0, fmt.Errorf("read the %s usage of org %d: %w", period, orgID, err)
	}
	return n, nil
}
