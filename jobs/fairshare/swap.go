package fairshare

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"asterion/jobs/provider"
)

// dispatchLock is the advisory lock of dispatches that weigh orgs against each other, so that
// each sees the choices of those before it. It is one for every band: a dispatch may give its
// slot to a job of any band, so dispatches of two bands weigh the same orgs and would each give
// the same light org a slot if they did not see each other's choice. A dispatch takes it only
// on the locked path, held for a few index reads.
const dispatchLock int64 = 0x6469737061746368

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
// names the org as well, a condition only idx_job_queued_org (org first) can serve, so that
// idx_job_queued_band (band first), which gives the same order within one org, is never walked
// through every org's jobs instead.
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

// anyTime bounds candidatesSQL's order for another org's job: every job of a band comes before
// it, so the bound is only the worker's ceiling's band.
var anyTime = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)

// swapSQL exchanges the vehicles of two locked queued jobs: $1 leaves vehicle $3 for $4, $2
// takes $3. $5, when not null, says what the displaced job waits for.
const swapSQL = `UPDATE sa_job SET river_job_id = CASE WHEN id = $1 THEN $4::bigint ELSE $3::bigint END,
    waiting_for = CASE WHEN id = $1 THEN coalesce($5::varchar, waiting_for) ELSE waiting_for END
WHERE id IN ($1, $2) AND state = 'queued'`

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

// orgLoad is an org with queued work: its weight, pause, running jobs, and the worker slots
// it holds (its running jobs and its fetched ones not claimed yet).
type orgLoad struct {
	id      int64
	weight  int
	paused  bool
	running int
	held    int
}

// lighter says whether o holds fewer slots than p relative to their weights.
func (o orgLoad) lighter(p orgLoad) bool {
	return o.held*max(p.weight, 1) < p.held*max(o.weight, 1)
}

// swapTx is the locked part of a dispatch: with the vehicle's job locked, it ranks the orgs
// with queued work that may run (not paused, under the cap) by slots held per weight, equals
// in random order, and gives the vehicle the best claimable job of the
// first org that has one, in any band the worker may run (for its own org: a job better than
// the one it carries).
func (s *Share) swapTx(ctx context.Context, tx bun.Tx, v Vehicle, most int) (Decision, error) {
	if _, err := tx.Tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, dispatchLock); err != nil {
		return Decision{}, fmt.Errorf("take the dispatch lock: %w", err)
	}
	var x struct {
		id        uuid.UUID
		orgID     int64
		state     string
		priority  int
		createdAt time.Time
	}
	err := tx.Tx.QueryRowContext(ctx, lockVehicleJobSQL, v.ID).Scan(&x.id, &x.orgID, &x.state, &x.priority, &x.createdAt)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return Decision{Outcome: Run, Args: v.Args}, nil
	case err != nil:
		return Decision{}, fmt.Errorf("lock the job of vehicle %d: %w", v.ID, err)
	}
	if x.state != stateQueued {
		args, err := argsOf(ctx, tx, x.id, v.Args)
		return Decision{Outcome: Run, Args: args}, err
	}
	orgs, err := s.queuedOrgs(ctx, tx, v.ID, x.orgID)
	if err != nil {
		return Decision{}, err
	}
	own := orgLoad{id: x.orgID, weight: 1}
	var ranked []orgLoad
	for _, o := range orgs {
		if o.id == x.orgID {
			own = o
		}
		if !o.paused && (s.cfg.OrgMaxRunning <= 0 || o.running < s.cfg.OrgMaxRunning) {
			ranked = append(ranked, o)
		}
	}
	// Equals take turns: the order among them, the vehicle's own org included, is random. A
	// preference for the vehicle's org would give it every tie, and ties are the rule with one
	// worker: the org whose vehicles River fetches first (its jobs of a better band, say)
	// would keep the only slot until its backlog ran out.
	rnd := rand.New(rand.NewPCG(uint64(v.ID), uint64(time.Now().UnixNano())))
	rnd.Shuffle(len(ranked), func(i, k int) { ranked[i], ranked[k] = ranked[k], ranked[i] })
	slices.SortStableFunc(ranked, func(a, b orgLoad) int {
		switch {
		case a.lighter(b):
			return -1
		case b.lighter(a):
			return 1
		}
		return 0
	})
	displaced := sql.NullString{}
	if own.paused {
		displaced = sql.NullString{String: WaitingOrgPaused, Valid: true}
	} else if s.cfg.OrgMaxRunning > 0 && own.running >= s.cfg.OrgMaxRunning {
		displaced = sql.NullString{String: WaitingOrgShare, Valid: true}
	}
	probes := 0
	for _, o := range ranked {
		// Another org's job may be of any band the worker runs; the vehicle's own org gives
		// the slot only to a job before the one the vehicle carries in the org's order (by
		// the job's own band, not the vehicle's: a job a swap left on another band's vehicle
		// is found this way).
		bandOf, before := most, anyTime
		if o.id == x.orgID {
			bandOf, before = x.priority, x.createdAt
		} else if probes++; probes > s.cfg.MaxOrgProbes {
			continue
		}
		y, vy, err := lockCandidate(ctx, tx, o.id, bandOf, before, most)
		if errors.Is(err, sql.ErrNoRows) {
			if o.id == x.orgID {
				args, err := argsOf(ctx, tx, x.id, v.Args)
				return Decision{Outcome: Run, Args: args}, err
			}
			continue
		}
		if err != nil {
			return Decision{}, fmt.Errorf("find a job of org %d for vehicle %d: %w", o.id, v.ID, err)
		}
		res, err := tx.Tx.ExecContext(ctx, swapSQL, x.id, y, v.ID, vy, displaced)
		if err != nil {
			return Decision{}, fmt.Errorf("swap the vehicles of jobs %s and %s: %w", x.id, y, err)
		}
		if n, _ := res.RowsAffected(); n != 2 {
			return Decision{}, fmt.Errorf("swap the vehicles of jobs %s and %s: %d rows changed under the lock", x.id, y, n)
		}
		if !displaced.Valid {
			if _, err := tx.Tx.ExecContext(ctx, keepPlaceSQL, vy, v.ScheduledAt, v.Priority); err != nil {
				return Decision{}, fmt.Errorf("keep job %s's place on vehicle %d: %w", x.id, vy, err)
			}
		}
		args, err := argsOf(ctx, tx, y, v.Args)
		return Decision{Outcome: Run, Args: args, Swapped: true}, err
	}
	args, err := argsOf(ctx, tx, x.id, v.Args)
	return s.refusal(args, own.paused), err
}

// lockCandidate locks the best claimable job of org before (the band of priority bandOf,
// before) in the org's order, with a priority of at most most, and its vehicle; sql.ErrNoRows
// means none.
func lockCandidate(ctx context.Context, tx bun.Tx, org int64, bandOf int, before time.Time, most int) (uuid.UUID, int64, error) {
	type candidate struct {
		job     uuid.UUID
		vehicle int64
	}
	var list []candidate
	rows, err := tx.Tx.QueryContext(ctx, candidatesSQL, org, bandOf, before, most)
	if err != nil {
		return uuid.Nil, 0, err
	}
	for rows.Next() {
		var c candidate
		if err := rows.Scan(&c.job, &c.vehicle); err != nil {
			rows.Close()
			return uuid.Nil, 0, err
		}
		list = append(list, c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return uuid.Nil, 0, err
	}
	for _, c := range list {
		var id uuid.UUID
		err := tx.Tx.QueryRowContext(ctx, lockCandidateSQL, c.job, c.vehicle, most).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return uuid.Nil, 0, err
		}
		return c.job, c.vehicle, nil
	}
	return uuid.Nil, 0, sql.ErrNoRows
}

// queuedOrgs reads queuedOrgsSQL for a dispatch of vehicle carrying a job of org.
func (s *Share) queuedOrgs(ctx context.Context, tx bun.Tx, vehicle, org int64) ([]orgLoad, error) {
	rows, err := tx.Tx.QueryContext(ctx, queuedOrgsSQL, vehicle, s.cfg.Queue, org)
	if err != nil {
		return nil, fmt.Errorf("list the orgs with queued work: %w", err)
	}
	defer rows.Close()
	var out []orgLoad
	for rows.Next() {
		var o orgLoad
		if err := rows.Scan(&o.id, &o.weight, &o.paused, &o.running, &o.held); err != nil {
			return nil, fmt.Errorf("list the orgs with queued work: %w", err)
		}
		out = append(out, o)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list the orgs with queued work: %w", err)
	}
	return out, nil
}

// argsOf are the arguments of job id as a vehicle with arguments a carries it: a's own when
// id is a's job, else read from the job.
func argsOf(ctx context.Context, tx bun.Tx, id uuid.UUID, a Args) (Args, error) {
	if id == a.Job && a.Org > 0 {
		return a, nil
	}
	out := Args{Job: id}
	var body string
	if err := tx.Tx.QueryRowContext(ctx, jobArgsSQL, id).Scan(&out.Priority, &out.Org, &out.Model, &body); err != nil {
		return Args{}, fmt.Errorf("read job %s: %w", id, err)
	}
	if id == a.Job {
		a.Org = out.Org
		return a, nil
	}
	out.Tokens = provider.EstimateTokens(body)
	return out, nil
}
