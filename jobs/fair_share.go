package jobs

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"asterion/jobs/fairshare"
)

// The adapters between the River worker and package fairshare, which decides which queued job
// a fetched vehicle carries (fair share between orgs) and holds the running cap: fairshare
// cannot name PromptArgs (jobs imports it), so a vehicle and its arguments cross as its own
// types.

// newShare builds the fair share of a service whose River client ins inserts vehicles.
func newShare(cfg *Config, ins *river.Client[*sql.Tx]) (*fairshare.Share, error) {
	share, err := fairshare.New(fairshare.Config{DB: cfg.DB, Logger: cfg.Logger, Queue: QueuePrompts,
		OrgMaxRunning: cfg.OrgMaxRunning, Revehicle: revehicle(ins)})
	if err != nil {
		return nil, fmt.Errorf("jobs: %w", err)
	}
	return share, nil
}

// revehicle is fairshare's Config.Revehicle over River: the old vehicle is cancelled and the
// new one inserted on the prompt queue at the job's band.
func revehicle(ins *river.Client[*sql.Tx]) func(ctx context.Context, tx *sql.Tx, old int64, a fairshare.Args) (int64, error) {
	return func(ctx context.Context, tx *sql.Tx, old int64, a fairshare.Args) (int64, error) {
		if _, err := ins.JobCancelTx(ctx, tx, old); err != nil && !errors.Is(err, rivertype.ErrNotFound) {
			return 0, fmt.Errorf("cancel the sleeping vehicle %d of job %s: %w", old, a.Job, err)
		}
		res, err := ins.InsertTx(ctx, tx, promptArgsOf(a), &river.InsertOpts{Queue: QueuePrompts,
			Priority: RiverPriority(a.Priority), MaxAttempts: vehicleMaxAttempts})
		if err != nil {
			return 0, err
		}
		return res.Job.ID, nil
	}
}

// dispatch asks fair share which job the fetched vehicle rj carries, for a worker with ceiling.
func (w *Worker) dispatch(ctx context.Context, rj *river.Job[PromptArgs], ceiling int) (fairshare.Decision, PromptArgs, error) {
	a := rj.Args
	d, err := w.svc.share.Dispatch(ctx, fairshare.Vehicle{ID: rj.ID, Priority: rj.Priority, ScheduledAt: rj.ScheduledAt,
		Args: fairshare.Args{Job: a.JobID, Org: a.OrgID, Priority: a.Priority, Model: a.Model, Tokens: a.Tokens}}, ceiling)
	return d, promptArgsOf(d.Args), err
}

// promptArgsOf are fairshare's arguments of a job as a vehicle's.
func promptArgsOf(a fairshare.Args) PromptArgs {
	return PromptArgs{JobID: a.Job, Priority: a.Priority, Model: a.Model, Tokens: a.Tokens, OrgID: a.Org}
}
