package readmodel

// The dashboard's and the health page's statements that bun's builder would not say plainly.
// They run through bun's NewRaw, which scans into structs and fills bun's ?N placeholders.
const (
	// queueSeriesHead opens every form of the queue series: one bucket per step (?0 seconds)
	// over the last ?1 steps, each ending at the next step boundary after now, joined with the
	// jobs that finished in it. The scan is bounded by the (org_id, updated_at) index: a
	// finished job's updated_at is at or after its finished_at.
	queueSeriesHead = `WITH buckets AS (
    SELECT to_timestamp((floor(extract(epoch FROM now()) / ?0) - g) * ?0) AS at
    FROM generate_series(0, ?1 - 1) AS g
)
SELECT b.at,
    count(j.id) AS finished,
    count(j.id) FILTER (WHERE j.state = 'failed') AS failed,
    coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM j.claimed_at - j.scheduled_at)), 0) AS wait_p50,
    coalesce(percentile_cont(0.95) WITHIN GROUP (ORDER BY extract(epoch FROM j.claimed_at - j.scheduled_at)), 0) AS wait_p95,
    coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM j.finished_at - j.started_at)), 0) AS run_p50,
    coalesce(percentile_cont(0.95) WITHIN GROUP (ORDER BY extract(epoch FROM j.finished_at - j.started_at)), 0) AS run_p95
FROM buckets AS b LEFT JOIN sa_job AS j ON j.finished_at >= b.at AND j.finished_at < b.at + make_interval(secs => ?0)
    AND j.updated_at >= (SELECT min(at) FROM buckets)
    AND j.state IN ('succeeded', 'failed', 'cancelled', 'superseded') AND j.started_at IS NOT NULL`
	queueSeriesTail = `
GROUP BY b.at ORDER BY b.at`

	// queueSeriesAllSQL is the series of every org's jobs; queueSeriesOrgSQL of org ?2's;
	// queueSeriesUserSQL of those user ?3 submitted in org ?2.
	queueSeriesAllSQL  = queueSeriesHead + ` AND j.org_id IN (SELECT id FROM orgs)` + queueSeriesTail
	queueSeriesOrgSQL  = queueSeriesHead + ` AND j.org_id = ?2` + queueSeriesTail
	queueSeriesUserSQL = queueSeriesHead + ` AND j.org_id = ?2 AND j.created_by = ?3` + queueSeriesTail

	// workerLivenessSQL reads the newest sign of life of any worker process (see Liveness).
	// The lease is renewed well before it expires, so the leader was alive at least until
	// expires_at minus its TTL; taking expires_at capped at now is at most 15 s generous.
	workerLivenessSQL = `SELECT now() AS now,
    (SELECT least(expires_at, now()) FROM river_leader ORDER BY expires_at DESC LIMIT 1) AS lease_at,
    (SELECT leader_id FROM river_leader ORDER BY expires_at DESC LIMIT 1) AS leader_id,
    (SELECT max(running_heartbeat_at) FROM sa_job WHERE state = 'running') AS heartbeat,
    (SELECT max(finalized_at) FROM river_job WHERE state = 'completed' AND finalized_at IS NOT NULL) AS completed`

	// orgLivenessSQL reads the signs of life org ?0 may see: the leader lease, and its own
	// jobs' heartbeats and finishes.
	orgLivenessSQL = `SELECT now() AS now,
    (SELECT least(expires_at, now()) FROM river_leader ORDER BY expires_at DESC LIMIT 1) AS lease_at,
    (SELECT max(running_heartbeat_at) FROM sa_job WHERE state = 'running' AND org_id = ?0) AS heartbeat,
    (SELECT updated_at FROM sa_job WHERE org_id = ?0 AND state IN ('succeeded', 'failed')
      ORDER BY updated_at DESC LIMIT 1) AS finished`

	// drainingWorkersSQL lists the processes draining now, and those past their grace by less
	// than ?0 (an interval) that never recorded their stop.
	drainingWorkersSQL = `SELECT worker_id, started_at, started_at + grace_ms * interval '1 millisecond' AS grace_ends
FROM sa_worker_drain
WHERE stopped_at IS NULL AND started_at + grace_ms * interval '1 millisecond' + ?0::interval > now()
ORDER BY started_at`
)
