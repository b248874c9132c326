package flowctl

// Flow control's statements, run on database/sql ($N placeholders), so the connection keeps
// them prepared.
const (
	// setOrgPausedSQL upserts an org's pause flag and who set it ($3 user, $4 role, $5 actor; all
	// NULL on a resume), for an org that exists. A pause held by a higher role than the caller's
	// ($6, the rank of pauseRank) is left alone. No row back means no such org, or a pause the
	// caller may not change.
	setOrgPausedSQL = `INSERT INTO sa_org_share (org_id, paused, paused_by, paused_role, paused_actor)
SELECT id, $2::boolean, CASE WHEN $2::boolean THEN $3::bigint END, CASE WHEN $2::boolean THEN $4::text END,
       CASE WHEN $2::boolean THEN $5::text END
FROM orgs WHERE id = $1
ON CONFLICT (org_id) DO UPDATE SET paused = EXCLUDED.paused, paused_by = EXCLUDED.paused_by,
    paused_role = EXCLUDED.paused_role, paused_actor = EXCLUDED.paused_actor, updated_at = now()
WHERE NOT sa_org_share.paused
   OR (CASE sa_org_share.paused_role WHEN 'admin' THEN 2 WHEN 'operator' THEN 1 ELSE 0 END) <= $6
RETURNING org_id`

	// orgExistsSQL tells a missing org from a pause the caller may not change.
	orgExistsSQL = `SELECT EXISTS (SELECT 1 FROM orgs WHERE id = $1)`

	// orgFlowsSQL reads each org's share, budget, use in the budget's current period and running
	// and queued jobs (from the trigger-kept counters), for every org ($1 = 0) or one.
	orgFlowsSQL = `WITH c AS (
    SELECT org_id,
           coalesce(sum(n) FILTER (WHERE state = 'running'), 0) AS running,
           coalesce(sum(n) FILTER (WHERE state = 'queued'), 0) AS queued
    FROM sa_job_count
    WHERE state IN ('running', 'queued') AND ($1::bigint = 0 OR org_id = $1)
    GROUP BY org_id
)
SELECT o.id, o.name, coalesce(c.running, 0), coalesce(c.queued, 0),
       coalesce(s.weight, 1), coalesce(s.paused, false), s.paused_by, coalesce(s.paused_role, ''),
       coalesce(s.paused_actor, ''),
       coalesce(b.tokens, 0), coalesce(b.period, ''),
       coalesce((SELECT sum(u.tokens) FROM sa_usage_period u
                 WHERE u.org_id = o.id AND u.period = b.period
                   AND u.period_start = date_trunc(b.period, now(), 'UTC')), 0)
FROM orgs o
LEFT JOIN c ON c.org_id = o.id
LEFT JOIN sa_org_share s ON s.org_id = o.id
LEFT JOIN sa_org_budget b ON b.org_id = o.id
WHERE $1::bigint = 0 OR o.id = $1
ORDER BY o.name
LIMIT $2`

	// waitersSQL finds the sleeping vehicles of the jobs waiting for provider capacity on model
	// ($1; a job that names no model asks for the provider's default, which may be this one, and
	// waking it needlessly costs one reservation). Only a vehicle River would not run yet is
	// taken: one already running meets the resumed model when it asks. The lock keeps River from
	// finishing a vehicle between this read and its retry, which would otherwise revive it.
	// 'provider_capacity' is the waiting_for the execution core writes (jobs.WaitingProviderCapacity).
	waitersSQL = `SELECT v.id
FROM sa_job AS j
JOIN river_job AS v ON v.id = j.river_job_id
WHERE j.state = 'queued' AND j.waiting_for = 'provider_capacity' AND j.scheduled_at <= now()
  AND coalesce(j.execution_options ->> 'model', '') IN ($1, '')
  AND (v.state IN ('scheduled', 'retryable') OR (v.state = 'available' AND v.scheduled_at > now()))
FOR UPDATE OF v SKIP LOCKED`
)
