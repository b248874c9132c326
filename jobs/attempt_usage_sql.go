package jobs

// finishUsageSQL is the part of a success's finish statement (change.statement, after the
// job's UPDATE named moved) that writes the attempt's usage and adds it to its org's day and
// month totals, as db.RecordAttempt does alone, only when the UPDATE wrote the job. It runs in
// the finish's first statement, so that everything the finish reads after it (the settling of
// its operation, which may admit a chain's next step against the org's budget) sees the usage,
// and it costs the finish no statement and no commit of its own. An attempt already recorded
// is neither written nor counted again. Its placeholders are the row's attempt, org, model,
// start, error kind, input and output tokens and cost, then the shard.
const finishUsageSQL = `, usage_attempt AS (
    INSERT INTO sa_attempt (job_id, attempt, org_id, model, started_at, error_kind, input_tokens, output_tokens, cost_usd)
    SELECT moved.id, ?::smallint, ?::bigint, ?::text, ?::timestamptz, ?::varchar, ?::integer, ?::integer, ?::double precision
    FROM moved
    ON CONFLICT (job_id, attempt) DO NOTHING
    RETURNING org_id, input_tokens + output_tokens AS tokens, cost_usd, finished_at
), usage_period AS (
    INSERT INTO sa_usage_period AS u (org_id, period, period_start, shard, tokens, cost_usd)
    SELECT a.org_id, p.period, date_trunc(p.period, a.finished_at, 'UTC'), ?::smallint, a.tokens, a.cost_usd
    FROM usage_attempt AS a CROSS JOIN (VALUES ('day'), ('month')) AS p (period)
    ON CONFLICT (org_id, period, period_start, shard)
    DO UPDATE SET tokens = u.tokens + EXCLUDED.tokens, cost_usd = u.cost_usd + EXCLUDED.cost_usd
)`
