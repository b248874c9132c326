package usage

import (
	"context"
	"fmt"
	"time"

	"github.com/uptrace/bun"
)

// MinuteUsage is what the attempts of one model that finished in one minute used.
type MinuteUsage struct {
	// At is the start of the minute (UTC).
	At    time.Time `bun:"at"`
	Model string    `bun:"model"`
	// Calls is the number of attempts; Tokens their input and output tokens together.
	Calls  int64 `bun:"calls"`
	Tokens int64 `bun:"tokens"`
	// RecentCalls and RecentTokens count those of them that finished in the 60 seconds
	// before the read: summed over the minutes, a model's use against a per-minute limit.
	RecentCalls  int64 `bun:"recent_calls"`
	RecentTokens int64 `bun:"recent_tokens"`
}

// PerMinute returns the usage per minute and model of the attempts that finished at or after
// since, of every org (orgID zero) or of orgID alone, oldest minute first: one grouped read.
// An attempt counts in the minute it finished, when its usage became known.
func PerMinute(ctx context.Context, idb bun.IDB, since time.Time, orgID int64) ([]MinuteUsage, error) {
	var rows []MinuteUsage
	q := idb.NewSelect().TableExpr("sa_attempt").
		ColumnExpr("date_trunc('minute', finished_at, 'UTC') AS at, model").
		ColumnExpr("count(*) AS calls, sum(input_tokens + output_tokens) AS tokens").
		ColumnExpr("count(*) FILTER (WHERE finished_at >= now() - interval '1 minute') AS recent_calls").
		ColumnExpr("coalesce(sum(input_tokens + output_tokens) FILTER (WHERE finished_at >= now() - interval '1 minute'), 0) AS recent_tokens").
		Where("finished_at >= ?", since).GroupExpr("1, 2").OrderExpr("1, 2")
	if orgID != 0 {
		q = q.Where("org_id = ?", orgID)
	}
	if err := q.Scan(ctx, &rows); err != nil {
		return nil, fmt.Errorf("read usage per minute since %s: %w", since.Format(time.RFC3339), err)
	}
	for i := range rows {
		rows[i].At = rows[i].At.UTC()
	}
	return rows, nil
}
