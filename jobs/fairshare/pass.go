package fairshare

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"asterion/jobs/provider"
)

// PassOn hands the running slot an execution of org has just given up to the org's best job
// refused for its cap, so the cap is used fully instead of waiting for refused vehicles to
// wake: the job moves from its sleeping vehicle (ended by Config.Revehicle) to a new one, whose
// insert River announces to every worker at once. (River's JobRetry would wake the old
// vehicle but announces nothing, so it would wait for a worker's next poll.) A failure
// changes only how soon the job runs, so it is logged, not returned.
func (s *Share) PassOn(ctx context.Context, org int64) {
	if s.cfg.OrgMaxRunning <= 0 || org <= 0 || s.cfg.Revehicle == nil {
		return
	}
	err := s.cfg.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		args, old, err := lockRefused(ctx, tx, org)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("find a refused job: %w", err)
		}
		vehicle, err := s.cfg.Revehicle(ctx, tx.Tx, old, args)
		if err != nil {
			return fmt.Errorf("new vehicle for job %s: %w", args.Job, err)
		}
		moved, err := tx.Tx.ExecContext(ctx, moveJobSQL, vehicle, args.Job, old)
		if err != nil {
			return fmt.Errorf("move job %s to vehicle %d: %w", args.Job, vehicle, err)
		}
		if n, _ := moved.RowsAffected(); n != 1 {
			return fmt.Errorf("move job %s to vehicle %d: it changed under the lock", args.Job, vehicle)
		}
		return nil
	})
	if err != nil && ctx.Err() == nil {
		s.cfg.Logger.Warn("passing a running slot on to a refused job failed", "org_id", org, "err", err)
	}
}

// lockRefused locks org's best job refused for its cap on a sleeping vehicle, and that
// vehicle; sql.ErrNoRows means none.
func lockRefused(ctx context.Context, tx bun.Tx, org int64) (Args, int64, error) {
	type refused struct {
		args    Args
		vehicle int64
	}
	var list []refused
	rows, err := tx.Tx.QueryContext(ctx, refusedSQL, org)
	if err != nil {
		return Args{}, 0, err
	}
	for rows.Next() {
		r := refused{args: Args{Org: org}}
		var body sql.NullString
		if err := rows.Scan(&r.args.Job, &r.vehicle, &r.args.Priority, &r.args.Model, &body); err != nil {
			rows.Close()
			return Args{}, 0, err
		}
		r.args.Tokens = provider.EstimateTokens(body.String)
		list = append(list, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return Args{}, 0, err
	}
	for _, r := range list {
		var id uuid.UUID
		err := tx.Tx.QueryRowContext(ctx, lockRefusedSQL, r.args.Job, r.vehicle).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return Args{}, 0, err
		}
		return r.args, r.vehicle, nil
	}
	return Args{}, 0, sql.ErrNoRows
}
