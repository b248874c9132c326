package admit

// Admission's statements. They run through bun's NewRaw, in the admitting or starting
// transaction or, for a hold, on the database (bun's ? placeholders: bun.List fills the set
// of orgs); meanOutputSQL runs on database/sql ($1); StartRoomSQL is a condition other
// packages' statements embed.
const (
	// lockBudgetsSQL locks the budget rows of a set of orgs, in org order, so that transactions
	// that lock several never deadlock, and reads each with its period's usage; an org without a
	// budget has no row and takes no lock. It is one statement whatever the org's backlog: the
	// reservations are the row's counter less the releases not folded into it yet (those since
	// the org's last accept), the usage a few shard rows of one period.
	lockBudgetsSQL = `SELECT b.org_id, b.tokens, b.period,
    b.reserved - (SELECT coalesce(sum(x.reserved), 0) FROM sa_budget_release AS x WHERE x.org_id = b.org_id) AS reserved,
    (SELECT coalesce(sum(u.tokens), 0) FROM sa_usage_period AS u
     WHERE u.org_id = b.org_id AND u.period = b.period AND u.period_start = date_trunc(b.period, ?::timestamptz, 'UTC'))::bigint AS used
FROM sa_org_budget AS b
WHERE b.org_id IN (?) ORDER BY b.org_id FOR UPDATE OF b`

	// holdSQL holds the estimates of a group's requests against their orgs' budgets ahead of
	// the transaction that writes their jobs (see db/functions/asterion_budget_hold.sql); takeSQL
	// takes the hold in that transaction, as the main query of the statement whose WITH clause
	// writes the jobs (see Take); giveBackSQL gives it back when that transaction did not
	// commit.
	holdSQL     = `SELECT org_id, granted, budget, period, used, reserved FROM asterion_budget_hold(?, ?::bigint[], ?::bigint[], ?)`
	takeSQL     = `SELECT 1 AS taken FROM asterion_budget_take(?)`
	giveBackSQL = `SELECT asterion_budget_giveback(?)`

	// startHoldsSQL holds the running reservations of starts ahead of the transactions that
	// start their jobs (see db/functions/asterion_budget_start_holds.sql); startGiveBackSQL gives
	// one back when its transaction did not commit. The job's change to running takes it.
	startHoldsSQL    = `SELECT job, outcome, budget, period, used, running FROM asterion_budget_start_holds(?::uuid[], ?::uuid[], ?)`
	startGiveBackSQL = `SELECT asterion_budget_start_giveback(?, ?)`

	// lockRunningSQL locks the running counter of an org's budget and reads the budget with the
	// reservations of the org's running jobs and its period's usage. The budget row itself is
	// read, not locked: a start never waits for an admission.
	lockRunningSQL = `SELECT b.org_id, b.tokens, b.period,
    r.running - (SELECT coalesce(sum(x.tokens), 0) FROM sa_budget_running_release AS x WHERE x.org_id = r.org_id) AS reserved,
    (SELECT coalesce(sum(u.tokens), 0) FROM sa_usage_period AS u
     WHERE u.org_id = b.org_id AND u.period = b.period AND u.period_start = date_trunc(b.period, ?::timestamptz, 'UTC'))::bigint AS used
FROM sa_budget_running AS r JOIN sa_org_budget AS b ON b.org_id = r.org_id
WHERE r.org_id = ? FOR UPDATE OF r`

	// StartRoomSQL is a condition on a sa_job row for a statement that starts the job: its org
	// has no budget, or the period's usage plus the reservations of the org's running jobs leave
	// room. It locks the org's running counter, so two such statements never both take the last
	// of a budget (the second waits for the first to end and then reads the counter the first
	// one's job changed); the start's own reservation joins the counter through the jobs'
	// trigger. The period is the database's current one.
	StartRoomSQL = `coalesce((SELECT r.running - (SELECT coalesce(sum(x.tokens), 0) FROM sa_budget_running_release AS x WHERE x.org_id = r.org_id)
    + (SELECT coalesce(sum(u.tokens), 0) FROM sa_usage_period AS u
    WHERE u.org_id = b.org_id AND u.period = b.period AND u.period_start = date_trunc(b.period, now(), 'UTC')) < b.tokens
  FROM sa_budget_running AS r JOIN sa_org_budget AS b ON b.org_id = r.org_id WHERE r.org_id = sa_job.org_id FOR UPDATE OF r), true)`

	// activeJobsSQL sums an org's queued and running jobs from the trigger-kept counters.
	activeJobsSQL = `SELECT coalesce(sum(n), 0) FROM sa_job_count WHERE org_id = ? AND state IN ('queued', 'running')`

	// meanOutputSQL is the mean output of a model's last 100 attempts (NULL when it has none).
	meanOutputSQL = `SELECT round(avg(output_tokens)) FROM (
    SELECT output_tokens FROM sa_attempt WHERE model = $1 ORDER BY finished_at DESC LIMIT 100) AS a`
)
