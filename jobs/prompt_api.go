package jobs

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/google/uuid"
	"github.com/riverqueue/river"
	"github.com/uptrace/bun"
	"go.opentelemetry.io/otel/trace"

	"asterion/db"
	"asterion/jobs/admit"
	"asterion/jobs/deferred"
	"asterion/jobs/provider"
)

// This file is what prompt execution offers the components built on it (flow.chain,
// artifact.delivery): submitting a prompt job inside their own transaction, cancelling one,
// the intake lane their acceptances share with prompt submits, the audit trail and the
// insert-only River client.

// QueuedPrompt describes a prompt job a runtime submits inside its own transaction; the
// prompt entity PromptID is already written in that transaction.
type QueuedPrompt struct {
	PromptID    uuid.UUID
	Priority    int
	OrgID       int64
	UserID      int64
	Correlation uuid.UUID
	// Admitted is the admission of the job (Admission().Admit) and Model the model it admitted.
	Admitted admit.Ticket
	Model    string
	// Text is the prompt's text, for the governor's estimate of its tokens.
	Text string
	// Options, when set, are the job's execution options (their model is Model); nil: the
	// defaults.
	Options *ExecutionOptions
}

// Admission is the one admission of the service, for the doors built on it.
func (s *Service) Admission() *admit.Admission { return s.door }

// EnqueueTx queues q as a job with default execution options and DefaultMaxAttempt attempts:
// its registry row, history, change-feed event and River vehicle, all in tx. It returns the
// job and its operation's handle. q must carry its admission.
func (s *Service) EnqueueTx(ctx context.Context, tx bun.Tx, q QueuedPrompt) (db.Job, deferred.Handle, error) {
	w := db.NewWrites(tx)
	job, handle, err := s.enqueueTx(ctx, w, q.newJob())
	if err == nil {
		err = w.Send(ctx)
	}
	if err != nil {
		return db.Job{}, deferred.Handle{}, err
	}
	return job, handle, nil
}

// CancelJobTx cancels job, which tx has locked; errorKind marks why (KindExpired for an
// expired operation). A terminal job is ErrConflict.
func (s *Service) CancelJobTx(ctx context.Context, tx bun.Tx, job db.Job, errorKind string, actor Actor) (db.Job, error) {
	return s.cancelTx(ctx, tx, job, errorKind, actor)
}

// Admit enters the intake lane for one acceptance, so that the workers of this process yield
// to it as they yield to prompt submits; the caller calls release when it is done.
func (s *Service) Admit() (release func()) { return s.intake.Enter() }

// CheckIdempotencyKey says what is wrong with an Idempotency-Key, or "" when it is valid.
func CheckIdempotencyKey(k string) string { return checkIdempotencyKey(k) }

// Audit writes one structural audit row in tx.
func Audit(ctx context.Context, tx bun.IDB, orgID int64, actorID *int64, actor, action, subjectType, subjectID string, detail any) error {
	return audit(ctx, tx, orgID, actorID, actor, action, subjectType, subjectID, detail)
}

// AuditEntry is the row Audit writes, for a caller that adds it to its Writes.
func AuditEntry(orgID int64, actorID *int64, actor, action, subjectType, subjectID string, detail any) (*db.AuditEntry, error) {
	return auditEntry(orgID, actorID, actor, action, subjectType, subjectID, detail)
}

// Inserter is the insert-only River client that enqueues inside bun transactions; components
// that enqueue River jobs of their own in a transaction of the service's use it.
func (s *Service) Inserter() *river.Client[*sql.Tx] { return s.insert }

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
