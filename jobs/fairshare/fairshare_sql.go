package fairshare

// The statements of fair share's dispatch, its running cap and its wake of ended waits, named and
// with $N placeholders.

// runningOfOrgSQL counts an org's running jobs.
const runningOfOrgSQL = `SELECT count(*) FROM sa_job WHERE org_id = $1 AND state = 'running'`

// refusedSQL lists, best first, up to 8 of org $1's jobs refused for its cap whose vehicle
// sleeps (snoozed, so nobody holds it and no worker would fetch it yet), with that vehicle and
// what the governor needs of the job. Like candidatesSQL it looks at the org's first 64 queued
// jobs only, reads every table by key or by the head of idx_job_queued_org, and locks nothing.
const refusedSQL = `SELECT h.id, h.river_job_id, h.priority, coalesce(h.execution_options ->> 'model', ''),
    (SELECT e.body FROM sa_entity AS e WHERE e.id = h.prompt_id)
FROM (
    SELECT a.id, a.river_job_id, a.priority, a.execution_options, a.prompt_id, a.waiting_for, a.scheduled_at,
        asterion_band(a.priority) AS band, a.created_at
    FROM sa_job AS a
    WHERE a.state = 'queued' AND a.org_id = $1
    ORDER BY a.org_id, asterion_band(a.priority), a.created_at LIMIT 64) AS h
WHERE h.waiting_for = 'org_share' AND h.scheduled_at <= now()
  AND (SELECT v.state = 'scheduled' OR v.state = 'retryable' OR (v.state = 'available' AND v.scheduled_at > now())
       FROM river_job AS v WHERE v.id = h.river_job_id)
ORDER BY h.band, h.created_at
LIMIT 8`

// lockRefusedSQL locks job $1 and its sleeping vehicle $2 if the job still waits for its org's
// share on it, skipping rows another transaction holds. The job is found by its key (the state's
// test in IS TRUE, as in moveJobSQL).
const lockRefusedSQL = `SELECT j.id FROM sa_job AS j, river_job AS v
WHERE j.id = $1 AND v.id = $2 AND j.river_job_id = v.id
  AND (j.state = 'queued') IS TRUE AND j.waiting_for = 'org_share' AND j.scheduled_at <= now()
  AND (v.state IN ('scheduled', 'retryable') OR (v.state = 'available' AND v.scheduled_at > now()))
FOR UPDATE OF j, v SKIP LOCKED`

// moveJobSQL moves queued job $2 from vehicle $3 to vehicle $1. Here and in swapSQL the state's
// test is wrapped in IS TRUE so that the jobs are found by their key, never by walking a partial
// index of every queued job, which statistics taken while the queue was empty make look tiny.
const moveJobSQL = `UPDATE sa_job SET river_job_id = $1 WHERE id = $2 AND river_job_id = $3 AND (state = 'queued') IS TRUE`

// vehicleJobSQL reads, in one statement, what the fast path of a dispatch needs: the queued
// or running job on vehicle $1, its org's weight and pause, whether the org runs its cap of $4
// jobs already (counted only when there is a cap, and only up to it), whether another org has
// queued work to choose, and whether its own org has a claimable job better than it (a lower
// band, or its band and older) with a priority of at most $3. $2 is the job the vehicle's
// arguments name: the prompt's text (for the governor's token estimate) is read only when the
// row is another job.
//
// Queued work to choose is a queued job, not waiting for the provider or a budget, due, of an
// org that is not paused: the others probe walks idx_job_queued_ready one org at a time (its
// first entry is the org's earliest scheduled_at, so one descent says whether the org has a due
// job, however many it scheduled for later), stops at the first other org that has one, and
// after 32 orgs without an answer says yes (the locked path then decides). In the usual case of
// one org with a backlog it is two descents.
//
// It runs once per claim while the queue's size swings from empty to a long backlog faster
// than the planner's statistics follow, so every probe is written to have one sensible plan
// whatever they say: the job is found by its vehicle alone (OFFSET 0 keeps the state test out
// of that scan: with both, the planner combined idx_job_vehicle with an index of every queued
// job), the skip scan orders by a prefix of its index, the better-job look reads at most 64
// entries of idx_job_queued_org below the job's own (org, band, created_at) (a bound only that
// index can serve), and their vehicles are looked up by key, one by one, instead of joined (a
// join let the planner walk River's whole queue). TestDispatchPlans checks the plan.
const vehicleJobSQL = `WITH RECURSIVE x AS MATERIALIZED (
    SELECT j.id, j.org_id, j.state, j.priority, j.created_at, j.execution_options, j.prompt_id
    FROM (SELECT * FROM sa_job WHERE river_job_id = $1 OFFSET 0) AS j
    WHERE j.state IN ('queued', 'running')
    LIMIT 1
), other (org_id, due, n) AS (
    (SELECT o.org_id, o.scheduled_at <= now(), 1 FROM sa_job AS o
     WHERE o.state = 'queued' AND (o.waiting_for IS NULL OR o.waiting_for NOT IN ('provider_capacity', 'budget'))
     ORDER BY o.org_id, o.scheduled_at LIMIT 1)
  UNION ALL
    SELECT nx.org_id, nx.due, q.n + 1 FROM other AS q CROSS JOIN LATERAL (
        SELECT o.org_id, o.scheduled_at <= now() AS due FROM sa_job AS o
        WHERE o.state = 'queued' AND (o.waiting_for IS NULL OR o.waiting_for NOT IN ('provider_capacity', 'budget'))
          AND o.org_id > q.org_id
        ORDER BY o.org_id, o.scheduled_at LIMIT 1) AS nx
    WHERE q.n < 32 AND NOT (q.due AND q.org_id <> (SELECT x.org_id FROM x)
        AND NOT coalesce((SELECT p.paused FROM sa_org_share AS p WHERE p.org_id = q.org_id), false))
)
SELECT x.id, x.org_id, x.state, x.priority, x.created_at,
    coalesce(s.weight, 1) AS weight, coalesce(s.paused, false) AS paused,
    CASE WHEN $4::integer > 0 THEN (SELECT count(*) FROM (SELECT FROM sa_job AS r
        WHERE r.org_id = x.org_id AND r.state = 'running' LIMIT $4::integer) AS c) ELSE 0 END AS running,
    EXISTS (SELECT FROM other AS q WHERE q.n >= 32 OR (q.due AND q.org_id <> x.org_id
        AND NOT coalesce((SELECT p.paused FROM sa_org_share AS p WHERE p.org_id = q.org_id), false))) AS others,
    EXISTS (SELECT FROM (SELECT a.river_job_id, a.priority, a.scheduled_at, a.waiting_for FROM sa_job AS a
            WHERE a.state = 'queued' AND a.org_id = x.org_id
              AND (a.org_id, asterion_band(a.priority), a.created_at) < (x.org_id, asterion_band(x.priority), x.created_at)
            ORDER BY a.org_id, asterion_band(a.priority), a.created_at LIMIT 64) AS h
        WHERE h.scheduled_at <= now() AND h.priority <= $3
          AND (h.waiting_for IS NULL OR h.waiting_for NOT IN ('provider_capacity', 'budget'))
          AND (SELECT v.state FROM river_job AS v WHERE v.id = h.river_job_id) IN ('available', 'scheduled', 'retryable')) AS better,
    coalesce(x.execution_options ->> 'model', '') AS model,
    CASE WHEN x.id <> $2 THEN (SELECT e.body FROM sa_entity AS e WHERE e.id = x.prompt_id) END AS body
FROM x LEFT JOIN sa_org_share AS s ON s.org_id = x.org_id`

// lockVehicleJobSQL locks the queued or running job on vehicle $1.
const lockVehicleJobSQL = `SELECT id, org_id, state, priority, created_at FROM sa_job
WHERE river_job_id = $1 AND state IN ('queued', 'running') LIMIT 1 FOR UPDATE`

// queuedOrgsSQL lists the orgs with queued work to choose (as vehicleJobSQL's others probe:
// a due job not waiting for the provider or a budget), found by a skip scan of
// idx_job_queued_ready (one index descent per org, however long its backlog), and org $3 (the
// vehicle's) whatever it has, with each one's weight, pause, running jobs, and the prompt
// vehicles of queue $2 its jobs ride that workers hold other than $1: jobs running and jobs a
// worker has fetched and not claimed yet (being dispatched, or waiting for the governor).
// Counting the latter keeps dispatches that follow each other from all giving their slot to
// the same org before its claims land. Those are read from River's running jobs, at most one
// per worker, never a backlog.
const queuedOrgsSQL = `WITH RECURSIVE queued (org_id, due) AS (
    (SELECT o.org_id, o.scheduled_at <= now() FROM sa_job AS o
     WHERE o.state = 'queued' AND (o.waiting_for IS NULL OR o.waiting_for NOT IN ('provider_capacity', 'budget'))
     ORDER BY o.org_id, o.scheduled_at LIMIT 1)
  UNION ALL
    SELECT nx.org_id, nx.due FROM queued AS q CROSS JOIN LATERAL (
        SELECT o.org_id, o.scheduled_at <= now() AS due FROM sa_job AS o
        WHERE o.state = 'queued' AND (o.waiting_for IS NULL OR o.waiting_for NOT IN ('provider_capacity', 'budget'))
          AND o.org_id > q.org_id
        ORDER BY o.org_id, o.scheduled_at LIMIT 1) AS nx
), orgs AS (
    SELECT org_id FROM queued WHERE due UNION SELECT $3::bigint
), held AS (
    SELECT j.org_id, count(*) AS n FROM river_job AS r
    CROSS JOIN LATERAL (SELECT * FROM sa_job WHERE river_job_id = r.id OFFSET 0) AS j
    WHERE r.state = 'running' AND r.queue = $2 AND r.id <> $1 AND j.state IN ('queued', 'running')
    GROUP BY j.org_id
)
SELECT q.org_id, coalesce(s.weight, 1), coalesce(s.paused, false),
    (SELECT count(*) FROM sa_job AS r WHERE r.org_id = q.org_id AND r.state = 'running'),
    coalesce(h.n, 0)
FROM orgs AS q LEFT JOIN sa_org_share AS s ON s.org_id = q.org_id LEFT JOIN held AS h ON h.org_id = q.org_id`

// candidatesSQL lists, best first, up to 8 claimable jobs of org $1 (with their vehicles) that
// come before (asterion_band($2), $3) in the org's order (lowest band, then oldest), with a
// priority of at most $4. Claimable: queued, due, not waiting for the provider or a budget
// (that wait is its own vehicle's business), and on a vehicle nobody holds. Only the org's
// first 64 queued jobs in that order are looked at: a job beyond them still runs on its own
// vehicle. It locks nothing (lockCandidateSQL does, one job at a time), so that every table is
// read by key or by the head of idx_job_queued_org, never joined: a join let the planner pick
// another queued index for the job rows and walk it once per entry of the head. The bound
// names the org as well, a condition only idx_job_queued_org (org first) can serve.
// idx_job_queued_band (band first, for the estimates) gives the same order within one org, but
// its predicate also asks for a due time (scheduled_at IS NOT NULL), which no read of the
// dispatch states inside its head, so the planner cannot choose it for them whatever its
// statistics say.
const candidatesSQL = `SELECT h.id, h.river_job_id FROM (
    SELECT a.id, a.river_job_id, a.priority, a.scheduled_at, a.waiting_for, asterion_band(a.priority) AS band, a.created_at
    FROM sa_job AS a
    WHERE a.state = 'queued' AND a.org_id = $1
      AND (a.org_id, asterion_band(a.priority), a.created_at) < ($1, asterion_band($2::smallint), $3::timestamptz)
    ORDER BY a.org_id, asterion_band(a.priority), a.created_at LIMIT 64) AS h
WHERE h.priority <= $4 AND h.scheduled_at <= now()
  AND (h.waiting_for IS NULL OR h.waiting_for NOT IN ('provider_capacity', 'budget'))
  AND (SELECT v.state FROM river_job AS v WHERE v.id = h.river_job_id) IN ('available', 'scheduled', 'retryable')
ORDER BY h.band, h.created_at
LIMIT 8`

// lockCandidateSQL locks job $1 and its vehicle $2 if the job is still claimable on it (as
// candidatesSQL says, priority at most $3), skipping rows another transaction holds, never
// waiting for them. The vehicle's River row is locked so that no worker can fetch it until
// this transaction ends (River's fetch skips locked rows), and a row changed since the
// statement began is judged again as it is now.
const lockCandidateSQL = `SELECT j.id FROM sa_job AS j, river_job AS v
WHERE j.id = $1 AND v.id = $2 AND j.river_job_id = v.id
  AND j.state = 'queued' AND j.priority <= $3 AND j.scheduled_at <= now()
  AND (j.waiting_for IS NULL OR j.waiting_for NOT IN ('provider_capacity', 'budget'))
  AND v.state IN ('available', 'scheduled', 'retryable')
FOR UPDATE OF j, v SKIP LOCKED`

// swapSQL exchanges the vehicles of two locked queued jobs: $1 leaves vehicle $3 for $4, $2
// takes $3. $5, when not null, says what the displaced job waits for.
const swapSQL = `UPDATE sa_job SET river_job_id = CASE WHEN id = $1 THEN $4::bigint ELSE $3::bigint END,
    waiting_for = CASE WHEN id = $1 THEN coalesce($5::varchar, waiting_for) ELSE waiting_for END
WHERE id IN ($1, $2) AND (state = 'queued') IS TRUE`

// keepPlaceSQL puts vehicle $1, which a swap just gave the displaced job, at the place in
// River's fetch order of the vehicle the displaced job was fetched on: River priority $3 and
// no later than its scheduled_at $2. River fetches by priority, then scheduled_at, and the
// vehicle a swap takes is often later in that order: another band's (the chosen job's band
// need not be the fetched vehicle's), or one back from a crashed or stopped worker or from a
// backoff. Left there, the displaced job would be its org's best on a vehicle fetched last,
// every later dispatch of the org would swap again, and the whole backlog would go through the
// dispatch lock one swap at a time. Only an available vehicle's time moves; a scheduled or
// retryable one keeps the time River will make it available at, in the band it now belongs to.
const keepPlaceSQL = `UPDATE river_job SET priority = $3,
    scheduled_at = CASE WHEN state = 'available' AND scheduled_at > $2 THEN $2 ELSE scheduled_at END
WHERE id = $1`

// jobArgsSQL reads what the governor needs of a job: its model and its prompt's text.
const jobArgsSQL = `SELECT j.priority, j.org_id, coalesce(j.execution_options ->> 'model', ''), e.body
FROM sa_job AS j JOIN sa_entity AS e ON e.id = j.prompt_id WHERE j.id = $1`

// endedWaitsSQL clears what a queued job waits for when that was the provider or a budget and
// the wait is over: its vehicle, snoozed for the wait, is awake (available and due) but no
// worker has fetched it yet. Such a job is not queued work to choose an org by while its mark
// stands, and River fetches the vehicles of better bands first: left marked until its own
// vehicle came up, a job of a worse band would wait for every better-band backlog of other
// orgs, as if fair share did not exist. Unmarked, it is queued work again, and the next
// dispatch of any band may give it a slot; if the provider or the budget still says no, the
// worker marks it again. It reads the waiting jobs by idx_job_queued_waiting and their
// vehicles by key.
const endedWaitsSQL = `UPDATE sa_job AS j SET waiting_for = NULL
FROM river_job AS v
WHERE j.state = 'queued' AND j.waiting_for IN ('provider_capacity', 'budget')
  AND v.id = j.river_job_id AND v.state = 'available' AND v.scheduled_at <= now()`

// advisoryLockSQL takes transaction-scoped advisory lock $1 (the dispatch's or an org's cap).
const advisoryLockSQL = `SELECT pg_advisory_xact_lock($1)`
