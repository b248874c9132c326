package jobs

// The named statements of package jobs beside the transition engine's (transition.go composes
// those): the full text of a job's latest failure and the transaction's clock, on database/sql
// ($N); the Idempotency-Key's; and the claim's condition that the org is not paused, its
// waiting mark and reclaim's stranded-claim pass.
const (
	// recordErrorDetailSQL keeps the latest failure's text of job $1 at attempt $2.
	recordErrorDetailSQL = `INSERT INTO sa_job_error (job_id, attempt, detail) VALUES ($1, $2, $3)
	ON CONFLICT (job_id) DO UPDATE SET attempt = EXCLUDED.attempt, detail = EXCLUDED.detail, at = now()`

	// txNowSQL is the transaction's clock, so every timestamp written in it agrees.
	txNowSQL = `SELECT now()`
)

// The statements of Idempotency-Key. Both run through bun's NewRaw in the submit's transaction
// and scan into a struct, with bun's ? placeholders.
const (
	// claimIdempotencyKeySQL reserves a key for a request, or takes over one older than the TTL
	// (the last argument, an interval) as if it were new: xmax is 0 for a row the statement
	// inserted, not for one it updated. No row comes back when the key is live.
	claimIdempotencyKeySQL = `INSERT INTO sa_idempotency (user_id, key, request_hash, prompt_id, job_id)
	VALUES (?, ?, ?, ?, ?) ON CONFLICT (user_id, key) DO UPDATE
	SET request_hash = EXCLUDED.request_hash, prompt_id = EXCLUDED.prompt_id, job_id = EXCLUDED.job_id, created_at = now()
	WHERE sa_idempotency.created_at < now() - ?::interval
	RETURNING xmax = 0 AS inserted, created_at`

	// takeOverIdempotencyKeySQL makes a key whose job was archived this request's; no row comes
	// back when a concurrent submit took it over first.
	takeOverIdempotencyKeySQL = `UPDATE sa_idempotency
	SET request_hash = ?, prompt_id = ?, job_id = ?, created_at = now()
	WHERE user_id = ? AND key = ? AND job_id = ?
	RETURNING created_at`
)

// notPausedSQL is the condition of a claim that the job's org is not paused: the dispatch
// looked before the governor's wait, this is the word that counts.
const notPausedSQL = `NOT EXISTS (SELECT 1 FROM sa_org_share AS p WHERE p.org_id = sa_job.org_id AND p.paused)`

// markWaitingSQL says on a queued job what it waits for; a job no longer queued is left as
// it is, and a job that already says so is not written again. The state's test is wrapped in
// IS TRUE so that the job is found by its key, never by walking a partial index of every queued
// job, which statistics taken while the queue was empty make look tiny.
const markWaitingSQL = `UPDATE sa_job SET waiting_for = $2
WHERE id = $1 AND (state = 'queued') IS TRUE AND waiting_for IS DISTINCT FROM $2`

// strandedSQL finds queued jobs whose vehicle River finalised after $1, oldest vehicle first. It
// reads the vehicles that ended since the last pass by River's (state, finalized_at) index, and
// reaches each one's job by idx_job_vehicle: never sa_job as a whole, and never River's
// vehicles of other times or states.
const strandedSQL = `WITH ended AS MATERIALIZED (
    SELECT id, finalized_at FROM river_job
    WHERE state IN ('completed', 'cancelled', 'discarded') AND finalized_at >= $1
)
SELECT j.id FROM ended r
JOIN sa_job j ON j.river_job_id = r.id
WHERE j.state = 'queued'
ORDER BY r.finalized_at
LIMIT 200
FOR UPDATE OF j SKIP LOCKED`

// orgPausedSQL says whether an operator paused org $1's work.
const orgPausedSQL = `SELECT coalesce((SELECT paused FROM sa_org_share WHERE org_id = $1), false)`
