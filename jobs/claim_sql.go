package jobs

// The claim's conditions and statements beside the transition engine's: the paused-org condition,
// the waiting mark and the stranded-claim pass of reclaim.

// notPausedSQL is the condition of a claim that the job's org is not paused: the dispatch
// looked before the governor's wait, this is the word that counts.
const notPausedSQL = `NOT EXISTS (SELECT 1 FROM sa_org_share AS p WHERE p.org_id = sa_job.org_id AND p.paused)`

// markWaitingSQL says on a queued job what it waits for; a job no longer queued is left as
// it is, and a job that already says so is not written again.
const markWaitingSQL = `UPDATE sa_job SET waiting_for = $2
WHERE id = $1 AND state = 'queued' AND waiting_for IS DISTINCT FROM $2`

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
