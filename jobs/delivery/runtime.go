package delivery

import (
	"context"
	"fmt"
	"time"

	"github.com/riverqueue/river"
	"github.com/uptrace/bun"

	"asterion/jobs/maintenance"
)

// Recover gives a new River job to every open delivery whose vehicle is gone: an
// accepted or retryable one whose River job is missing or finished, and an in-flight one
// whose marker is older than the lease (the execution holding it died) and whose River job
// will not run again by itself. It returns how many it re-enqueued.
func (ds *Deliveries) Recover(ctx context.Context) (int, error) {
	cfg := ds.cfg
	lease := fmt.Sprintf("%d milliseconds", cfg.Lease.Milliseconds())
	n := 0
	err := ds.reg.InTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		var lost []Delivery
		if err := tx.NewSelect().Model(&lost).
			Where("delivery.state IN (?)", bun.List([]string{Accepted, Retryable, InFlight})).
			Where(`CASE WHEN delivery.state = 'in_flight' THEN
				delivery.in_flight_since < now() - ?::interval AND NOT EXISTS (SELECT 1 FROM river_job r
					WHERE r.id = delivery.river_job_id AND r.state IN ('available', 'scheduled', 'retryable', 'pending'))
			ELSE NOT EXISTS (SELECT 1 FROM river_job r
				WHERE r.id = delivery.river_job_id AND r.state IN ('available', 'scheduled', 'retryable', 'pending', 'running'))
			END`, lease).
			Where("NOT EXISTS (SELECT 1 FROM sa_operation o WHERE o.id = delivery.operation_id AND o.terminal_at IS NOT NULL)").
			OrderExpr("delivery.next_attempt_at").Limit(200).For("UPDATE SKIP LOCKED").Scan(ctx); err != nil {
			return fmt.Errorf("find deliveries to recover: %w", err)
		}
		for _, d := range lost {
			ins, err := ds.insert.InsertTx(ctx, tx.Tx, DeliverArgs{DeliveryID: d.ID}, insertOpts())
			if err != nil {
				return fmt.Errorf("re-enqueue delivery %s: %w", d.ID, err)
			}
			if _, err := tx.NewUpdate().Model((*Delivery)(nil)).Set("river_job_id = ?", ins.Job.ID).
				Where("id = ?", d.ID).Exec(ctx); err != nil {
				return fmt.Errorf("re-enqueue delivery %s: %w", d.ID, err)
			}
			ds.log.Info("recovered a delivery whose river job was gone", "delivery_id", d.ID, "state", d.State,
				"river_job_id", ins.Job.ID)
			n++
		}
		return nil
	})
	return n, err
}

// sendWorkers is how many deliveries one worker pool sends at once.
const sendWorkers = 4

// sendWorker is the River worker of artifact.deliver jobs.
type sendWorker struct {
	river.WorkerDefaults[DeliverArgs]
	ds *Deliveries
}

// Timeout leaves room for the request and the two short transactions around it.
func (w *sendWorker) Timeout(*river.Job[DeliverArgs]) time.Duration {
	return w.ds.cfg.Timeout + 30*time.Second
}

func (w *sendWorker) Work(ctx context.Context, rj *river.Job[DeliverArgs]) error {
	return w.ds.run(ctx, rj.Args.DeliveryID, rj.ID)
}

// RecoverArgs is the periodic delivery recovery job.
type RecoverArgs struct{}

// Kind is the River job kind.
func (RecoverArgs) Kind() string { return "asterion.recover_deliveries" }

type recoverWorker struct {
	river.WorkerDefaults[RecoverArgs]
	ds *Deliveries
}

func (w *recoverWorker) Work(ctx context.Context, _ *river.Job[RecoverArgs]) error {
	_, err := w.ds.Recover(ctx)
	return err
}

// AddWorkers registers the delivery workers on a worker pool (jobs.Extension).
func (ds *Deliveries) AddWorkers(workers *river.Workers) {
	river.AddWorker(workers, &sendWorker{ds: ds})
	river.AddWorker(workers, &recoverWorker{ds: ds})
}

// Queues is the deliveries queue of a worker pool (jobs.Extension).
func (ds *Deliveries) Queues() map[string]river.QueueConfig {
	return map[string]river.QueueConfig{Queue: {MaxWorkers: sendWorkers}}
}

// PeriodicJobs is the leader's periodic Recover, run on start too (jobs.Extension).
func (ds *Deliveries) PeriodicJobs() []*river.PeriodicJob {
	return []*river.PeriodicJob{river.NewPeriodicJob(river.PeriodicInterval(ds.cfg.RecoverEvery),
		func() (river.JobArgs, *river.InsertOpts) {
			return RecoverArgs{}, &river.InsertOpts{Queue: maintenance.Queue, UniqueOpts: maintenance.OncePer(ds.cfg.RecoverEvery)}
		}, &river.PeriodicJobOpts{RunOnStart: true})}
}
