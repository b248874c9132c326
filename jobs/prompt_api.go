package jobs

import (
	"context"
	"database/sql"

	"github.com/google/uuid"
	"github.com/riverqueue/river"
	"github.com/uptrace/bun"

	"asterion/db"
	"asterion/jobs/admit"
	"asterion/jobs/deferred"
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
