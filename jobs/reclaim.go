package jobs

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/uptrace/bun"

	"asterion/db"
	"asterion/jobs/maintenance"
)

// ReclaimStuck finds running jobs whose heartbeat is older than StaleAfter (stuck-job
// recovery) and, for each, either re-queues it as a worker crash (attempts left and started
// less than StuckAfter ago) or fails it as stuck.
//
// A re-queued job must run again, but its River vehicle is still "running" in River's eyes
// (its worker is gone). River offers no way to make a running job available, and Asterion
// never writes River's tables, so the job moves to a new vehicle in the same transaction and
// the old one is cancelled through River: River's rescuer then finalises the old vehicle as
// cancelled instead of retrying it, and if it ever ran again the worker would see that the job
// belongs to another vehicle and drop it.
func (s *Service) ReclaimStuck(ctx context.Context) (maintenance.ReclaimReport, error) {
	var rep maintenance.ReclaimReport
	for {
		var batch maintenance.ReclaimReport
		err := s.inTx(ctx, func(ctx context.Context, tx bun.Tx) error {
			now, err := txNow(ctx, tx)
			if err != nil {
				return err
			}
			// NO KEY UPDATE, since a reclaim never changes the job's key: a row being written
			// that refers to the job (an output chunk) holds a key share on it, which would
			// make a stronger lock skip the job for this pass.
			var stale []db.Job
			if err := tx.NewSelect().Model(&stale).
				Where("state = ? AND running_heartbeat_at < ?", StateRunning, now.Add(-s.cfg.StaleAfter)).
				OrderExpr("running_heartbeat_at").Limit(200).For("NO KEY UPDATE SKIP LOCKED").Scan(ctx); err != nil {
				return fmt.Errorf("find stale jobs: %w", err)
			}
			for _, j := range stale {
				out, err := s.reclaimTx(ctx, tx, j, now, true)
				if err != nil {
					return err
				}
				if State(out.State) == StateQueued {
					batch.Requeued++
				} else {
					batch.Failed++
				}
			}
			return nil
		})
		if err != nil {
			return rep, err
		}
		rep.Requeued += batch.Requeued
		rep.Failed += batch.Failed
		if batch.Requeued+batch.Failed < 200 {
			break
		}
	}
	n, err := s.revehicleOrphans(ctx)
	rep.Revehicled = n
	if err != nil {
		return rep, err
	}
	rep.Stranded, err = s.revehicleStranded(ctx)
	return rep, err
}

// revehicleOrphans moves queued jobs off vehicles that River has held as running for longer
// than StaleAfter. Such a job was fetched by a worker that died before its claim committed:
// the job never ran, so no heartbeat goes stale, and only River's rescuer (much later, and only
// on the leader) would free the vehicle. A live worker claims within milliseconds of a fetch,
// and one that claims late anyway finds the job on another vehicle and drops its own. The job
// keeps its attempt: it never started.
func (s *Service) revehicleOrphans(ctx context.Context) (int, error) {
	moved := 0
	for {
		n := 0
		err := s.inTx(ctx, func(ctx context.Context, tx bun.Tx) error {
			var orphans []db.Job
			if err := tx.NewSelect().Model(&orphans).
				Join("JOIN river_job AS r ON r.id = job.river_job_id").
				Where("job.state = ? AND r.state = 'running' AND r.attempted_at < now() - ?::interval",
					StateQueued, fmt.Sprintf("%d milliseconds", s.cfg.StaleAfter.Milliseconds())).
				OrderExpr("r.attempted_at").Limit(200).For("UPDATE OF job SKIP LOCKED").Scan(ctx); err != nil {
				return fmt.Errorf("find jobs on orphaned vehicles: %w", err)
			}
			for _, j := range orphans {
				vehicle, err := s.replaceVehicle(ctx, tx, j)
				if err != nil {
					return err
				}
				upd, err := tx.NewUpdate().Model((*db.Job)(nil)).Set("river_job_id = ?", vehicle).
					Where("id = ? AND state = ? AND river_job_id = ?", j.ID, StateQueued, *j.RiverJobID).Exec(ctx)
				if err != nil {
					return fmt.Errorf("move job %s to a new vehicle: %w", j.ID, err)
				}
				if k, _ := upd.RowsAffected(); k != 1 {
					return fmt.Errorf("move job %s to a new vehicle: it changed under the lock", j.ID)
				}
				if err := audit(ctx, tx, j.OrgID, nil, "reclaimer", "job.revehicled", "job", j.ID.String(),
					map[string]any{"old_river_job_id": *j.RiverJobID, "river_job_id": vehicle,
						"reason": "the worker that fetched it died before claiming it"}); err != nil {
					return err
				}
				n++
			}
			return nil
		})
		moved += n
		if err != nil || n < 200 {
			return moved, err
		}
	}
}

// reclaimTx applies the reclaim rule to one locked running job. With newVehicle the job moves
// to a fresh River job and the old one is cancelled (see ReclaimStuck); without, the caller is
// the worker that fetched the job's own vehicle and runs it next.
func (s *Service) reclaimTx(ctx context.Context, tx bun.Tx, j db.Job, now time.Time, newVehicle bool) (db.Job, error) {
	started := j.StartedAt
	if started == nil {
		started = &j.CreatedAt
	}
	if j.Attempt < j.MaxAttempts && now.Sub(*started) < s.cfg.StuckAfter {
		var vehicle *int64
		if newVehicle {
			id, err := s.replaceVehicle(ctx, tx, j)
			if err != nil {
				return db.Job{}, err
			}
			vehicle = &id
		}
		w := db.NewWrites(tx)
		out, err := s.apply(ctx, w, change{jobID: j.ID, from: []State{StateRunning}, to: StateQueued,
			set: requeueSet(vehicle)})
		if err == nil {
			err = w.Send(ctx)
		}
		if err != nil {
			return db.Job{}, err
		}
		return out, audit(ctx, tx, j.OrgID, nil, "reclaimer", "job.reclaimed", "job", j.ID.String(),
			map[string]any{"attempt": j.Attempt, "claim": deref(j.WorkerClaim)})
	}
	w := db.NewWrites(tx)
	out, err := s.apply(ctx, w, change{jobID: j.ID, from: []State{StateRunning}, to: StateFailed,
		set: []clause{is("error_kind = ?", KindStuck), is("error_message = ?", "no heartbeat and no attempts or time left"),
			is("finished_at = now()")}})
	if err == nil {
		err = w.Send(ctx)
	}
	if err != nil {
		return db.Job{}, err
	}
	if newVehicle && j.RiverJobID != nil {
		if _, err := s.insert.JobCancelTx(ctx, tx.Tx, *j.RiverJobID); err != nil && !errors.Is(err, rivertype.ErrNotFound) {
			return db.Job{}, fmt.Errorf("cancel vehicle of stuck job %s: %w", j.ID, err)
		}
	}
	return out, audit(ctx, tx, j.OrgID, nil, "reclaimer", "job.stuck", "job", j.ID.String(),
		map[string]any{"attempt": j.Attempt})
}

// replaceVehicle cancels j's River job through River (its rescuer then finalises it as
// cancelled instead of retrying it) and inserts a new one carrying j, returning its id; the
// caller points j at it in the same transaction.
func (s *Service) replaceVehicle(ctx context.Context, tx bun.Tx, j db.Job) (int64, error) {
	if j.RiverJobID != nil {
		if _, err := s.insert.JobCancelTx(ctx, tx.Tx, *j.RiverJobID); err != nil && !errors.Is(err, rivertype.ErrNotFound) {
			return 0, fmt.Errorf("cancel old vehicle of job %s: %w", j.ID, err)
		}
	}
	res, err := s.insert.InsertTx(ctx, tx.Tx, PromptArgs{JobID: j.ID, Priority: j.Priority, Model: optionsOf(j).Model, OrgID: j.OrgID}, &river.InsertOpts{
		Queue: QueuePrompts, Priority: RiverPriority(j.Priority), MaxAttempts: vehicleMaxAttempts})
	if err != nil {
		return 0, fmt.Errorf("new vehicle for job %s: %w", j.ID, err)
	}
	return res.Job.ID, nil
}

// requeueSet is what a reclaim writes besides the state, with the new vehicle when there is one.
func requeueSet(vehicle *int64) []clause {
	set := []clause{is("attempt = attempt + 1"), is("error_kind = ?", KindWorkerCrash),
		is("error_message = ?", "heartbeat lost: the worker stopped answering"), is("worker_claim = NULL"),
		is("scheduled_at = now()")}
	if vehicle != nil {
		set = append(set, is("river_job_id = ?", *vehicle))
	}
	return set
}

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
