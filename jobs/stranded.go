package jobs

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/riverqueue/river"
	"github.com/uptrace/bun"

	"asterion/db"
)

// A claim commits without waiting for the disk (relaxCommit). A database crash right after one
// undoes it: the job is queued again, still on the vehicle its worker holds. Two things keep such
// a job from waiting for its operation to expire: the worker, finding its claim gone, looks at
// the job before it ends its vehicle and, when the job is still queued on that vehicle, snoozes
// the vehicle instead, so the job runs again at once (dropped); and the reclaim pass moves every
// queued job whose vehicle River has finalised (completed, cancelled or discarded) to a new one
// (revehicleStranded), for a worker that ended its vehicle anyway (it died, or the database was
// down when it looked). A running job on a finalised vehicle is the stale-heartbeat pass's: no
// execution beats for it, and that pass puts it on a new vehicle too.

// strandedLookback is how far back the first stranded pass of a process looks at finalised
// vehicles. A vehicle whose claim a crash undid ends within its job timeout of the crash, and
// the leader's pass runs every ReclaimEvery, so an hour covers a leader that was itself down.
const strandedLookback = time.Hour

// strandedMargin overlaps each pass with the one before, for a vehicle finalised by a
// transaction that committed after that pass read the clock.
const strandedMargin = time.Minute

// strandedWatch remembers where the last stranded pass of this process looked up to.
type strandedWatch struct {
	mu    sync.Mutex
	since time.Time
}

// dropped is what a worker returns for a vehicle whose job's result it dropped. A job queued
// again on this very vehicle lost its claim to a database crash (the claim's commit did not
// wait for the disk): snoozing the vehicle runs it again; anything else ends the vehicle.
func (w *Worker) dropped(ctx context.Context, job db.Job, vehicle int64) error {
	qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	var state string
	err := w.svc.db.NewSelect().Model((*db.Job)(nil)).Column("state").
		Where("id = ? AND river_job_id = ?", job.ID, vehicle).Scan(qctx, &state)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		// The database cannot say: River retries the vehicle, whose claim then decides.
		return fmt.Errorf("look at job %s after its result was dropped: %w", job.ID, err)
	case State(state) == StateQueued:
		w.svc.log.Warn("lost claim: the job is queued again on the vehicle its worker holds (a database crash undid the claim); running it again",
			"job_id", job.ID, "river_job_id", vehicle, "attempt", job.Attempt)
		return river.JobSnooze(0)
	}
	return river.JobCancel(errClaimLost)
}

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

// revehicleStranded moves every queued job whose vehicle River has finalised onto a new
// vehicle, keeping its attempt: the job never ran to an end. It returns how many it moved.
func (s *Service) revehicleStranded(ctx context.Context) (int, error) {
	s.stranded.mu.Lock()
	defer s.stranded.mu.Unlock()
	moved := 0
	var passStart time.Time
	for {
		n := 0
		err := s.inTx(ctx, func(ctx context.Context, tx bun.Tx) error {
			now, err := txNow(ctx, tx)
			if err != nil {
				return err
			}
			if passStart.IsZero() {
				passStart = now
			}
			since := now.Add(-strandedLookback)
			if !s.stranded.since.IsZero() {
				since = s.stranded.since.Add(-strandedMargin)
			}
			var ids []string
			rows, err := tx.Tx.QueryContext(ctx, strandedSQL, since)
			if err != nil {
				return fmt.Errorf("find queued jobs on finished vehicles: %w", err)
			}
			for rows.Next() {
				var id string
				if err := rows.Scan(&id); err != nil {
					rows.Close()
					return fmt.Errorf("find queued jobs on finished vehicles: %w", err)
				}
				ids = append(ids, id)
			}
			if err := rows.Close(); err != nil {
				return fmt.Errorf("find queued jobs on finished vehicles: %w", err)
			}
			if len(ids) == 0 {
				return nil
			}
			var jobs []db.Job
			if err := tx.NewSelect().Model(&jobs).Where("id IN (?)", bun.List(ids)).Scan(ctx); err != nil {
				return fmt.Errorf("read queued jobs on finished vehicles: %w", err)
			}
			for _, j := range jobs {
				if err := s.moveToNewVehicle(ctx, tx, j, "its vehicle ended while the job was still queued (a claim lost in a database crash)"); err != nil {
					return err
				}
				n++
			}
			return nil
		})
		moved += n
		if err != nil {
			return moved, err
		}
		if n < 200 {
			break
		}
	}
	s.stranded.since = passStart
	return moved, nil
}

// moveToNewVehicle puts the locked queued job j on a new vehicle, in tx, and audits why.
func (s *Service) moveToNewVehicle(ctx context.Context, tx bun.Tx, j db.Job, why string) error {
	vehicle, err := s.replaceVehicle(ctx, tx, j)
	if err != nil {
		return err
	}
	q := tx.NewUpdate().Model((*db.Job)(nil)).Set("river_job_id = ?", vehicle).Where("id = ? AND state = ?", j.ID, StateQueued)
	if j.RiverJobID != nil {
		q = q.Where("river_job_id = ?", *j.RiverJobID)
	}
	upd, err := q.Exec(ctx)
	if err != nil {
		return fmt.Errorf("move job %s to a new vehicle: %w", j.ID, err)
	}
	if k, _ := upd.RowsAffected(); k != 1 {
		return fmt.Errorf("move job %s to a new vehicle: it changed under the lock", j.ID)
	}
	return audit(ctx, tx, j.OrgID, nil, "reclaimer", "job.revehicled", "job", j.ID.String(),
		map[string]any{"old_river_job_id": j.RiverJobID, "river_job_id": vehicle, "reason": why})
}
