package jobs

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"
	"github.com/uptrace/bun"

	"asterion/jobs/provider"
)

// lockVehicleJobSQL locks the queued or running job on vehicle $1.
const lockVehicleJobSQL = `SELECT id, org_id, state, priority, created_at FROM sa_job
WHERE river_job_id = $1 AND state IN ('queued', 'running') LIMIT 1 FOR UPDATE`

// queuedOrgsSQL lists the orgs with queued work by a skip scan of idx_job_queued_org (one
// index descent per org, however long its backlog), with each one's weight, pause, running
// jobs, and the prompt vehicles its jobs ride that workers hold other than $1: jobs running
// and jobs a worker has fetched and not claimed yet (being dispatched, or waiting for the
// governor). Counting the latter keeps dispatches that follow each other from all giving
// their slot to the same org before its claims land. Those are read from River's running
// jobs, at most one per worker, never a backlog.
const queuedOrgsSQL = `WITH RECURSIVE queued (org_id) AS (
    (SELECT org_id FROM sa_job WHERE state = 'queued'
     ORDER BY org_id, asterion_band(priority), created_at LIMIT 1)
  UNION ALL
    SELECT (SELECT j.org_id FROM sa_job AS j WHERE j.state = 'queued' AND j.org_id > q.org_id
            ORDER BY j.org_id, asterion_band(j.priority), j.created_at LIMIT 1)
    FROM queued AS q WHERE q.org_id IS NOT NULL
), held AS (
    SELECT j.org_id, count(*) AS n FROM river_job AS r
    JOIN sa_job AS j ON j.river_job_id = r.id AND j.state IN ('queued', 'running')
    WHERE r.state = 'running' AND r.queue = $2 AND r.id <> $1
    GROUP BY j.org_id
)
SELECT q.org_id, coalesce(s.weight, 1), coalesce(s.paused, false),
    (SELECT count(*) FROM sa_job AS r WHERE r.org_id = q.org_id AND r.state = 'running'),
    coalesce(h.n, 0)
FROM queued AS q LEFT JOIN sa_org_share AS s ON s.org_id = q.org_id LEFT JOIN held AS h ON h.org_id = q.org_id
WHERE q.org_id IS NOT NULL`

// dispatchLock is the advisory lock class of dispatches that weigh orgs against each other:
// one per River priority band, so that each sees the choices of those before it.
const dispatchLock int64 = 0x6469737061746368

// candidateSQL locks org $1's oldest claimable job of River priority band $2 with a priority
// of at most $3 created before $4, with its vehicle. Claimable: queued, due, not waiting for
// the provider (its model's slot is its own vehicle's business), and on a vehicle nobody holds,
// whose River row is locked so that no worker can fetch it until this transaction ends
// (River's fetch skips locked rows); a row another transaction holds is skipped, never waited
// for, and a row changed since the statement began is judged again as it is now. Only the
// org's 64 oldest queued jobs of the band are looked at: a job beyond them still runs on its
// own vehicle.
const candidateSQL = `WITH head AS MATERIALIZED (
    SELECT a.id, a.created_at FROM sa_job AS a
    WHERE a.state = 'queued' AND a.org_id = $1 AND asterion_band(a.priority) = $2::smallint
      AND a.created_at < $4::timestamptz
    ORDER BY a.org_id, asterion_band(a.priority), a.created_at LIMIT 64)
SELECT j.id, j.river_job_id FROM head
JOIN sa_job AS j ON j.id = head.id
JOIN river_job AS v ON v.id = j.river_job_id
WHERE j.state = 'queued' AND j.priority <= $3 AND j.scheduled_at <= now()
  AND j.waiting_for IS DISTINCT FROM 'provider_capacity'
  AND v.state IN ('available', 'scheduled', 'retryable')
ORDER BY head.created_at
LIMIT 1
FOR UPDATE OF j, v SKIP LOCKED`

// swapSQL exchanges the vehicles of two locked queued jobs: $1 leaves vehicle $3 for $4, $2
// takes $3. $5, when not null, says what the displaced job waits for.
const swapSQL = `UPDATE sa_job SET river_job_id = CASE WHEN id = $1 THEN $4::bigint ELSE $3::bigint END,
    waiting_for = CASE WHEN id = $1 THEN coalesce($5::varchar, waiting_for) ELSE waiting_for END
WHERE id IN ($1, $2) AND state = 'queued'`

// keepPlaceSQL puts vehicle $1, which a swap just gave the displaced job, at the place in
// River's fetch order of the vehicle $2 the displaced job was fetched on: no later than its
// scheduled_at. River fetches by scheduled_at, and the vehicle a swap takes from an older job
// is often late in that order (it came back from a crashed or stopped worker, or from a
// backoff): left there, the displaced job would be the org's oldest on a vehicle fetched last,
// every later dispatch of the org would swap again, and the whole backlog would go through the
// band's lock one swap at a time. Only an available vehicle moves; a scheduled or retryable
// one keeps the time River will make it available at.
const keepPlaceSQL = `UPDATE river_job SET scheduled_at = $2
WHERE id = $1 AND state = 'available' AND scheduled_at > $2`

// jobArgsSQL reads what the governor needs of a job: its model and its prompt's text.
const jobArgsSQL = `SELECT j.priority, j.org_id, coalesce(j.execution_options ->> 'model', ''), e.body
FROM sa_job AS j JOIN sa_entity AS e ON e.id = j.prompt_id WHERE j.id = $1`

// maxOrgProbes bounds the orgs one dispatch looks into before it settles for its own job.
const maxOrgProbes = 8

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
// with queued work that may run (not paused, under the cap) by slots held per weight, the
// vehicle's own org first among equals, and gives the vehicle the best claimable job of the
// first org that has one (for its own org: a job older than the one it carries).
func (f *fairShare) swapTx(ctx context.Context, tx bun.Tx, rj *river.Job[PromptArgs], most int) (dispatched, error) {
	if _, err := tx.Tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, dispatchLock+int64(rj.Priority)); err != nil {
		return dispatched{}, fmt.Errorf("take the dispatch lock: %w", err)
	}
	var x vehicleJob
	err := tx.Tx.QueryRowContext(ctx, lockVehicleJobSQL, rj.ID).Scan(&x.id, &x.orgID, &x.state, &x.priority, &x.createdAt)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return dispatched{outcome: dispatchRun, args: rj.Args}, nil
	case err != nil:
		return dispatched{}, fmt.Errorf("lock the job of vehicle %d: %w", rj.ID, err)
	}
	if x.state != StateQueued {
		args, err := f.argsOf(ctx, tx, x.id, rj.Args)
		return dispatched{outcome: dispatchRun, args: args}, err
	}
	orgs, err := f.queuedOrgs(ctx, tx, rj.ID)
	if err != nil {
		return dispatched{}, err
	}
	own := orgLoad{id: x.orgID, weight: 1}
	var ranked []orgLoad
	for _, o := range orgs {
		if o.id == x.orgID {
			own = o
		}
		if !o.paused && (f.cfg.OrgMaxRunning <= 0 || o.running < f.cfg.OrgMaxRunning) {
			ranked = append(ranked, o)
		}
	}
	// Equals other than the vehicle's org take turns: the order among them is random.
	rnd := rand.New(rand.NewPCG(uint64(rj.ID), uint64(time.Now().UnixNano())))
	rnd.Shuffle(len(ranked), func(i, k int) { ranked[i], ranked[k] = ranked[k], ranked[i] })
	slices.SortStableFunc(ranked, func(a, b orgLoad) int {
		switch {
		case a.lighter(b):
			return -1
		case b.lighter(a):
			return 1
		case a.id == x.orgID:
			return -1
		case b.id == x.orgID:
			return 1
		}
		return 0
	})
	displaced := sql.NullString{}
	if own.paused {
		displaced = sql.NullString{String: WaitingOrgPaused, Valid: true}
	} else if f.cfg.OrgMaxRunning > 0 && own.running >= f.cfg.OrgMaxRunning {
		displaced = sql.NullString{String: WaitingOrgShare, Valid: true}
	}
	for i, o := range ranked {
		if i >= maxOrgProbes && o.id != x.orgID {
			continue
		}
		// Another org's job needs no bound; the vehicle's own org gives the slot only to a
		// job older than the one the vehicle carries.
		before := time.Now().Add(time.Hour)
		if o.id == x.orgID {
			before = x.createdAt
		}
		var y uuid.UUID
		var vy int64
		err := tx.Tx.QueryRowContext(ctx, candidateSQL, o.id, rj.Priority, most, before).Scan(&y, &vy)
		if errors.Is(err, sql.ErrNoRows) {
			if o.id == x.orgID {
				args, err := f.argsOf(ctx, tx, x.id, rj.Args)
				return dispatched{outcome: dispatchRun, args: args}, err
			}
			continue
		}
		if err != nil {
			return dispatched{}, fmt.Errorf("find a job of org %d for vehicle %d: %w", o.id, rj.ID, err)
		}
		res, err := tx.Tx.ExecContext(ctx, swapSQL, x.id, y, rj.ID, vy, displaced)
		if err != nil {
			return dispatched{}, fmt.Errorf("swap the vehicles of jobs %s and %s: %w", x.id, y, err)
		}
		if n, _ := res.RowsAffected(); n != 2 {
			return dispatched{}, fmt.Errorf("swap the vehicles of jobs %s and %s: %d rows changed under the lock", x.id, y, n)
		}
		if !displaced.Valid {
			if _, err := tx.Tx.ExecContext(ctx, keepPlaceSQL, vy, rj.ScheduledAt); err != nil {
				return dispatched{}, fmt.Errorf("keep job %s's place on vehicle %d: %w", x.id, vy, err)
			}
		}
		args, err := f.argsOf(ctx, tx, y, rj.Args)
		return dispatched{outcome: dispatchRun, args: args, swapped: true}, err
	}
	args, err := f.argsOf(ctx, tx, x.id, rj.Args)
	return refusal(args, own.paused), err
}

// queuedOrgs reads queuedOrgsSQL for a dispatch of vehicle.
func (f *fairShare) queuedOrgs(ctx context.Context, tx bun.Tx, vehicle int64) ([]orgLoad, error) {
	var out []orgLoad
	err := scanRows(ctx, tx, queuedOrgsSQL, []any{vehicle, QueuePrompts}, func(rows *sql.Rows) error {
		var o orgLoad
		err := rows.Scan(&o.id, &o.weight, &o.paused, &o.running, &o.held)
		out = append(out, o)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list the orgs with queued work: %w", err)
	}
	return out, nil
}

// scanRows runs query in tx and calls scan for each row.
func scanRows(ctx context.Context, tx bun.Tx, query string, args []any, scan func(*sql.Rows) error) error {
	rows, err := tx.Tx.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// argsOf are the arguments of job id as a vehicle with arguments a carries it: a's own when
// id is a's job, else read from the job.
func (f *fairShare) argsOf(ctx context.Context, tx bun.Tx, id uuid.UUID, a PromptArgs) (PromptArgs, error) {
	if id == a.JobID && a.OrgID > 0 {
		return a, nil
	}
	out := PromptArgs{JobID: id}
	var body string
	if err := tx.Tx.QueryRowContext(ctx, jobArgsSQL, id).Scan(&out.Priority, &out.OrgID, &out.Model, &body); err != nil {
		return PromptArgs{}, fmt.Errorf("read job %s: %w", id, err)
	}
	if id == a.JobID {
		a.OrgID = out.OrgID
		return a, nil
	}
	out.Tokens = provider.EstimateTokens(body)
	return out, nil
}
