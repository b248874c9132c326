package jobs

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/uuid"
	"github.com/riverqueue/river"
	"github.com/uptrace/bun"
	"go.opentelemetry.io/otel/trace"

	"asterion/db"
	"asterion/jobs/provider"
)

// newJob is the job q describes.
func (q QueuedPrompt) newJob() newJob {
	o := ExecutionOptions{}
	if q.Options != nil {
		o = *q.Options
	}
	o.Model = q.Model
	opts, _ := json.Marshal(o)
	return newJob{promptID: q.PromptID, priority: q.Priority, maxAttempts: DefaultMaxAttempt, options: opts, orgID: q.OrgID,
		userID: q.UserID, correlation: q.Correlation, ticket: q.Admitted, model: q.Model, tokens: provider.EstimateTokens(q.Text)}
}

// EnqueueMany queues qs in tx as EnqueueTx queues one, in two round trips per enqueueGroup of
// them: one River insert of their vehicles, and one statement of their rows. Each q must carry
// its admission; its prompt is already written in tx. It returns the jobs in the order of qs.
// (A function, not a method: the service's methods are the prompt runtime's own.)
func EnqueueMany(ctx context.Context, s *Service, tx bun.Tx, qs []QueuedPrompt) ([]db.Job, error) {
	var out []db.Job
	for len(qs) > 0 {
		n := min(len(qs), enqueueGroup)
		js, err := enqueueGroupOf(ctx, s, tx, qs[:n])
		if err != nil {
			return nil, err
		}
		out, qs = append(out, js...), qs[n:]
	}
	return out, nil
}

// enqueueGroup is how many jobs one statement writes: their rows' parameters stay well under
// PostgreSQL's 65,535 per statement.
const enqueueGroup = 200

// enqueueGroupOf is EnqueueMany of at most enqueueGroup prompts.
func enqueueGroupOf(ctx context.Context, s *Service, tx bun.Tx, qs []QueuedPrompt) ([]db.Job, error) {
	njs := make([]newJob, len(qs))
	ids := make([]uuid.UUID, len(qs))
	vehicles := make([]river.InsertManyParams, len(qs))
	for i, q := range qs {
		nj := q.newJob()
		if !nj.ticket.Valid() {
			return nil, fmt.Errorf("queue prompt %s: %w", nj.promptID, errNotAdmitted)
		}
		nj.trace = trace.SpanContextFromContext(ctx)
		njs[i], ids[i] = nj, uuid.New()
		vehicles[i] = nj.vehicle(ids[i])
	}
	res, err := s.insert.InsertManyTx(ctx, tx.Tx, vehicles)
	if err != nil {
		return nil, fmt.Errorf("enqueue %d river jobs: %w", len(vehicles), err)
	}
	byJob := make(map[uuid.UUID]int, len(res))
	for k, r := range res {
		var args PromptArgs
		if err := json.Unmarshal(r.Job.EncodedArgs, &args); err != nil {
			return nil, fmt.Errorf("read river job %d: %w", r.Job.ID, err)
		}
		byJob[args.JobID] = k
	}
	rows := make([]queuedRows, len(qs))
	for i := range qs {
		k, ok := byJob[ids[i]]
		if !ok {
			return nil, fmt.Errorf("enqueue river jobs: no vehicle came back for job %s", ids[i])
		}
		if rows[i], err = s.queuedRowsOf(njs[i], ids[i], res[k].Job.ID, res[k].Job.CreatedAt); err != nil {
			return nil, err
		}
	}
	// Table by table, in the order of their references, so each table's rows go as one
	// multi-row INSERT of the one statement the writes become.
	w := db.NewWrites(tx)
	for _, row := range []func(r *queuedRows) db.Statement{
		func(r *queuedRows) db.Statement { return r.op.InsertStatement() },
		func(r *queuedRows) db.Statement { return r.history.InsertStatement() },
		func(r *queuedRows) db.Statement { return r.job.InsertStatement() },
		func(r *queuedRows) db.Statement { return r.event.InsertStatement() },
	} {
		for i := range rows {
			w.Insert(row(&rows[i]))
		}
	}
	if err := w.Send(ctx); err != nil {
		return nil, fmt.Errorf("queue %d prompts: %w", len(qs), err)
	}
	out := make([]db.Job, len(rows))
	for i := range rows {
		out[i] = rows[i].job
	}
	return out, nil
}
