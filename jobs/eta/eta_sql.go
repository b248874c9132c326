package eta

// The estimator's statements: its samples of finished work, the queue before a job and the place
// of one job, operation, chain or batch.

// frontSQL counts the claimable front of the queue in River's order (band, then oldest first),
// up to a bound, by band and org, on idx_job_queued_band.
const frontSQL = `SELECT b, org_id, count(*) AS n FROM (
	SELECT asterion_band(priority) AS b, org_id FROM sa_job
	WHERE state = 'queued' AND scheduled_at <= now()
	ORDER BY asterion_band(priority), created_at, id LIMIT ?) f
GROUP BY b, org_id`

// sampleSQL measures the queue in one round trip: the running jobs (partial index
// idx_job_running), the mean run time of the last 50 jobs that ran to an end, and the jobs
// finished in the last minute (both on idx_job_finished, bounded).
const sampleSQL = `SELECT
	(SELECT count(*) FROM sa_job WHERE state = 'running') AS running,
	(SELECT coalesce(extract(epoch FROM now() - min(started_at)), 0) FROM sa_job WHERE state = 'running') AS oldest,
	(SELECT coalesce(avg(extract(epoch FROM finished_at - started_at)), 0) FROM (
		SELECT started_at, finished_at FROM sa_job
		WHERE finished_at IS NOT NULL AND state IN ('succeeded', 'failed') AND started_at IS NOT NULL
		ORDER BY finished_at DESC LIMIT 50) r) AS mean_run,
	(SELECT count(*) FROM (SELECT 1 FROM sa_job WHERE finished_at IS NOT NULL AND finished_at > now() - interval '60 seconds'
		LIMIT 5000) f) AS finished`

// queuedSQL is what an extrapolation needs: the queued total (the trigger-kept counts) and how
// long the oldest queued job has waited (idx_job_state_created_id, one entry).
const queuedSQL = `SELECT
	(SELECT coalesce(sum(n), 0) FROM sa_job_count WHERE state = 'queued') AS queued,
	(SELECT coalesce(extract(epoch FROM now() - min(created_at)), 0) FROM sa_job WHERE state = 'queued') AS oldest`

// etaBatchSQL places many jobs with one walk of the front of the queue: the first CountCap
// claimable queued jobs in River's order, numbered overall and per org; a job of the batch
// found there has its place, one past it is extrapolated.
const etaBatchSQL = `WITH head AS (
		SELECT id, row_number() OVER (ORDER BY b, created_at, id) - 1 AS ahead,
			row_number() OVER (PARTITION BY org_id ORDER BY b, created_at, id) - 1 AS ahead_org
		FROM (SELECT id, org_id, created_at, asterion_band(priority) AS b FROM sa_job
			WHERE state = 'queued' AND scheduled_at <= now()
			ORDER BY asterion_band(priority), created_at, id LIMIT ?) h)
	SELECT j.id, j.state, j.created_at, j.scheduled_at, j.scheduled_for, j.started_at, now() AS now,
		head.id IS NOT NULL AS counted, coalesce(head.ahead, 0) AS ahead, coalesce(head.ahead_org, 0) AS ahead_org
	FROM sa_job j LEFT JOIN head ON head.id = j.id
	WHERE j.id = ANY(?::uuid[]) AND j.state IN ('queued', 'running')`
