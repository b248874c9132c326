package jobs

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"
	"github.com/uptrace/bun"

	"asterion/jobs/provider"
)

// Fair share between orgs is decided when a worker has fetched a vehicle, before it asks the
// provider governor for a slot and claims: River fetches its jobs by priority and age only,
// so the vehicle is just a free slot of its priority band, and the dispatch decides which
// queued job rides it. When another org has fewer running jobs relative to its weight (or the
// vehicle's org is paused or at its cap), the dispatch swaps the two jobs' vehicles: the chosen
// job takes the fetched vehicle and the displaced job takes the chosen job's, which nobody
// holds. Within an org the same swap puts the org's best job (priority, then age) on the slot.
// See README "Fair share" for why this never runs a job twice.
type fairShare struct {
	cfg    *Config
	db     *bun.DB
	insert *river.Client[*sql.Tx]
	log    *slog.Logger
}

// dispatchOutcome says what a worker does with the vehicle it fetched.
type dispatchOutcome int

const (
	// dispatchRun: claim the job in args (after the governor's slot).
	dispatchRun dispatchOutcome = iota
	// dispatchWait: the job may not run yet (its org is paused or at its cap); snooze.
	dispatchWait
	// dispatchDecline: the job is above the worker's priority ceiling; give the vehicle back.
	dispatchDecline
)

// dispatched is the answer of dispatch: args describe the job the vehicle now carries.
type dispatched struct {
	outcome dispatchOutcome
	args    PromptArgs
	// wait and waitingFor say how long to snooze and why, for dispatchWait.
	wait       time.Duration
	waitingFor string
	reason     string
	// swapped is true when the vehicle was given another job than the one it carried.
	swapped bool
}

// orgPausedRecheck is how soon a vehicle of a paused org that found nothing else to carry is
// fetched again: a resume is seen within it.
const orgPausedRecheck = 3 * time.Second

// vehicleJobSQL reads, in one statement, what the fast path of a dispatch needs: the queued
// or running job on vehicle $1, its org's weight and pause, whether the org runs its cap of $5
// jobs already (counted only when there is a cap, and only up to it), whether any other org has
// queued work, and whether its own org has an older claimable job in River priority band $3
// with a priority of at most $4. $2 is the job the vehicle's arguments name: the prompt's text
// (for the governor's token estimate) is read only when the row is another job.
//
// It runs once per claim while the queue's size swings from empty to a long backlog faster
// than the planner's statistics follow, so every probe is written to have one sensible plan
// whatever they say: the others probe orders by org alone (a prefix of idx_job_queued_org),
// the older-job look reads at most 64 entries of that index, and their vehicles are looked up
// by key, one by one, instead of joined (a join let the planner walk River's whole queue).
const vehicleJobSQL = `SELECT j.id, j.org_id, j.state, j.priority, j.created_at,
    coalesce(s.weight, 1) AS weight, coalesce(s.paused, false) AS paused,
    CASE WHEN $5::integer > 0 THEN (SELECT count(*) FROM (SELECT FROM sa_job AS r
        WHERE r.org_id = j.org_id AND r.state = 'running' LIMIT $5::integer) AS c) ELSE 0 END AS running,
    ((SELECT o.org_id FROM sa_job AS o WHERE o.state = 'queued' AND o.org_id < j.org_id
      ORDER BY o.org_id DESC LIMIT 1) IS NOT NULL
     OR (SELECT o.org_id FROM sa_job AS o WHERE o.state = 'queued' AND o.org_id > j.org_id
      ORDER BY o.org_id LIMIT 1) IS NOT NULL) AS others,
    EXISTS (SELECT FROM (SELECT a.river_job_id, a.priority, a.scheduled_at, a.waiting_for FROM sa_job AS a
            WHERE a.state = 'queued' AND a.org_id = j.org_id AND asterion_band(a.priority) = $3::smallint
              AND a.created_at < j.created_at
            ORDER BY a.org_id, asterion_band(a.priority), a.created_at LIMIT 64) AS h
        WHERE h.scheduled_at <= now() AND h.priority <= $4
          AND h.waiting_for IS DISTINCT FROM 'provider_capacity'
          AND (SELECT v.state FROM river_job AS v WHERE v.id = h.river_job_id) IN ('available', 'scheduled', 'retryable')) AS better,
    coalesce(j.execution_options ->> 'model', '') AS model,
    CASE WHEN j.id <> $2 THEN (SELECT e.body FROM sa_entity AS e WHERE e.id = j.prompt_id) END AS body
FROM sa_job AS j LEFT JOIN sa_org_share AS s ON s.org_id = j.org_id
WHERE j.river_job_id = $1 AND j.state IN ('queued', 'running')
LIMIT 1`

// vehicleJob is a row of vehicleJobSQL.
type vehicleJob struct {
	id        uuid.UUID
	orgID     int64
	state     State
	priority  int
	createdAt time.Time
	weight    int
	paused    bool
	running   int // the org's running jobs, counted up to the cap; 0 without a cap
	others    bool
	better    bool
	model     string
	body      sql.NullString
}

// dispatch decides which job the fetched vehicle rj carries, swapping vehicles when fair share
// or the org's own order (oldest first within the band, as River's) asks for it. ceiling ≥ 0 bounds the priority of a job the worker may
// run. The common case (one org with queued work, the vehicle's job its best) is one read.
func (f *fairShare) dispatch(ctx context.Context, rj *river.Job[PromptArgs], ceiling int) (dispatched, error) {
	most := 100
	if ceiling >= 0 {
		most = ceiling
	}
	var x vehicleJob
	err := f.db.DB.QueryRowContext(ctx, vehicleJobSQL, rj.ID, rj.Args.JobID, rj.Priority, most,
		max(f.cfg.OrgMaxRunning, 0)).Scan(&x.id, &x.orgID, &x.state,
		&x.priority, &x.createdAt, &x.weight, &x.paused, &x.running, &x.others, &x.better, &x.model, &x.body)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		// No live job rides this vehicle: the one its arguments name settled on it (the
		// claim then drops it), or moved to another vehicle (the claim sees that too).
		return dispatched{outcome: dispatchRun, args: rj.Args}, nil
	case err != nil:
		return dispatched{}, fmt.Errorf("read the job of vehicle %d: %w", rj.ID, err)
	}
	args := x.argsOn(rj.Args)
	if x.state != StateQueued {
		return dispatched{outcome: dispatchRun, args: args}, nil
	}
	if ceiling >= 0 && x.priority > ceiling {
		return dispatched{outcome: dispatchDecline, args: args}, nil
	}
	atCap := f.cfg.OrgMaxRunning > 0 && x.running >= f.cfg.OrgMaxRunning
	switch {
	case !x.others && !x.paused && !atCap && !x.better:
		return dispatched{outcome: dispatchRun, args: args}, nil
	case !x.others && (x.paused || atCap):
		return refusal(args, x.paused), nil
	}
	var d dispatched
	err = f.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		var err error
		d, err = f.swapTx(ctx, tx, rj, most)
		return err
	})
	if err != nil {
		return dispatched{}, fmt.Errorf("dispatch vehicle %d: %w", rj.ID, err)
	}
	return d, nil
}

// argsOn are the arguments of x as the vehicle with arguments a carries it: a's own when x is
// a's job, else x's model and an estimate of its prompt's tokens.
func (x vehicleJob) argsOn(a PromptArgs) PromptArgs {
	if x.id == a.JobID {
		a.OrgID = x.orgID
		return a
	}
	return PromptArgs{JobID: x.id, Priority: x.priority, Model: x.model, Tokens: provider.EstimateTokens(x.body.String),
		OrgID: x.orgID}
}

// refusal is the answer for a job whose org is paused or at its cap while no other org has
// work to give the slot.
func refusal(args PromptArgs, paused bool) dispatched {
	if paused {
		return dispatched{outcome: dispatchWait, args: args, wait: orgPausedRecheck, waitingFor: WaitingOrgPaused,
			reason: "the org is paused"}
	}
	return dispatched{outcome: dispatchWait, args: args, wait: orgCapRecheck, waitingFor: WaitingOrgShare,
		reason: "the org runs its most jobs at once"}
}
