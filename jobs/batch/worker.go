package batch

import (
	"context"
	"fmt"
	"time"

	"github.com/riverqueue/river"
	"github.com/uptrace/bun"

	"asterion/jobs/maintenance"
)

// AdvanceArgs is the River job that moves every unfinished batch on by a step.
type AdvanceArgs struct{}

// Kind is the River job kind.
func (AdvanceArgs) Kind() string { return "batch.advance" }

// Queue is the River queue of the batch worker: one at a time per process is enough, the work
// is the database's.
const Queue = "batches"

func advanceOpts() *river.InsertOpts {
	return &river.InsertOpts{Queue: Queue, UniqueOpts: maintenance.OnlyOne}
}

// wake asks for a visit of the batch worker once tx commits (one at a time: a visit already
// waiting covers this one too).
func (b *Batches) wake(ctx context.Context, tx bun.Tx) error {
	if _, err := b.jobs.Inserter().InsertTx(ctx, tx.Tx, AdvanceArgs{}, advanceOpts()); err != nil {
		return fmt.Errorf("wake the batch worker: %w", err)
	}
	return nil
}

type advanceWorker struct {
	river.WorkerDefaults[AdvanceArgs]
	b *Batches
}

// Timeout leaves a visit time to expand a large batch by many chunks.
func (w *advanceWorker) Timeout(*river.Job[AdvanceArgs]) time.Duration { return 10 * time.Minute }

func (w *advanceWorker) Work(ctx context.Context, _ *river.Job[AdvanceArgs]) error {
	_, err := w.b.Advance(ctx)
	return err
}

// AddWorkers registers the batch worker on a worker pool (jobs.Extension).
func (b *Batches) AddWorkers(workers *river.Workers) {
	river.AddWorker(workers, &advanceWorker{b: b})
}

// Queues is the batch worker's queue (jobs.Extension).
func (b *Batches) Queues() map[string]river.QueueConfig {
	return map[string]river.QueueConfig{Queue: {MaxWorkers: 1}}
}

// PeriodicJobs is the leader's periodic visit of unfinished batches (jobs.Extension).
func (b *Batches) PeriodicJobs() []*river.PeriodicJob {
	return []*river.PeriodicJob{river.NewPeriodicJob(river.PeriodicInterval(b.cfg.TickEvery),
		func() (river.JobArgs, *river.InsertOpts) { return AdvanceArgs{}, advanceOpts() },
		&river.PeriodicJobOpts{RunOnStart: true})}
}
