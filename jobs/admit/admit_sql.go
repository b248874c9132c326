package admit

// Admission's statements. lockBudgetsSQL and activeJobsSQL run through bun's NewRaw in the
// admitting transaction (bun's ? placeholders: bun.List fills the set of orgs); meanOutputSQL
// runs on database/sql ($1); StartRoomSQL is a condition other packages' statements embed.
const (
	// lockBudgetsSQL locks the budget rows of a set of orgs, in org order, so that transactions
	// that lock several never deadlock, and reads each with its period's usage; an org without a
	// budget has no row and takes no lock. It is one statement whatever the org's backlog: the
	// reservations are counters of the row less the releases not folded into it yet (those since
	// the org's last accept or start), the usage a few shard rows of one period.
	lockBudgetsSQL = `SELECT b.org_id, b.tokens, b.period, b.reserved - coalesce(r.reserved, 0) AS reserved,
    b.running - coalesce(r.running, 0) AS running,
    (SELECT coalesce(sum(u.tokens), 0) FROM sa_usage_period AS u
     WHERE u.org_id = b.org_id AND u.period = b.period AND u.period_start = date_trunc(b.period, ?::timestamptz, 'UTC'))::bigint AS used
FROM sa_org_budget AS b
LEFT JOIN LATERAL (SELECT sum(x.reserved) AS reserved, sum(x.running) AS running FROM sa_budget_release AS x WHERE x.org_id = b.org_id) AS r ON true
WHERE b.org_id IN (?) ORDER BY b.org_id FOR UPDATE OF b`

	// StartRoomSQL is a condition on a sa_job row for a statement that starts the job: its org
	// has no budget, or the period's usage plus the reservations of the org's running jobs leave
	// room. It locks the org's budget row, so two such statements never both take the last of a
	// budget (the second waits for the first to end and then reads the row the first one's job
	// changed); the start's own reservation joins the row through the jobs' trigger. The period is
	// the database's current one.
	StartRoomSQL = `coalesce((SELECT b.running - (SELECT coalesce(sum(x.running), 0) FROM sa_budget_release AS x WHERE x.org_id = b.org_id)
    + (SELECT coalesce(sum(u.tokens), 0) FROM sa_usage_period AS u
    WHERE u.org_id = b.org_id AND u.period = b.period AND u.period_start = date_trunc(b.period, now(), 'UTC')) < b.tokens
  FROM sa_org_budget AS b WHERE b.org_id = sa_job.org_id FOR UPDATE OF b), true)`

	// activeJobsSQL sums an org's queued and running jobs from the trigger-kept counters.
	activeJobsSQL = `SELECT coalesce(sum(n), 0) FROM sa_job_count WHERE org_id = ? AND state IN ('queued', 'running')`

	// meanOutputSQL is the mean output of a model's last 100 attempts (NULL when it has none).
	meanOutputSQL = `SELECT round(avg(output_tokens)) FROM (
    SELECT output_tokens FROM sa_attempt WHERE model = $1 ORDER BY finished_at DESC LIMIT 100) AS a`
)
