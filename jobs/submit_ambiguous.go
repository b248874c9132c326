package jobs

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/driver/pgdriver"

	"asterion/jobs/intake"
)

// A shared submit transaction that fails at COMMIT (the connection lost while the server
// commits) may have committed: its outcome is unknown. Its submits are not written again as new
// jobs. recoverSubmits first reads which of their jobs exist (their ids were chosen before the
// commit) and answers those as accepted; it writes the others again, each alone, with the same
// ids, so that a commit still in flight when it looked makes the second write collide with its
// rows instead of adding a second job, and that collision is answered as accepted too.

// recoverSubmits settles the submits of a shared transaction that failed with failure (see
// intake.GroupSpec.Recover).
func (s *Service) recoverSubmits(ctx context.Context, batch []*pendingSubmit, outcomes []intake.Outcome[Submitted], failure error) {
	// Write records a submit's handle only once the statement that wrote its rows went
	// through: only those may have been committed.
	var maybe []uuid.UUID
	for i := range batch {
		if outcomes[i].Err == nil && outcomes[i].Res.JobID != uuid.Nil {
			maybe = append(maybe, outcomes[i].Res.JobID)
		}
	}
	written := map[uuid.UUID]bool{}
	if len(maybe) > 0 {
		var found []uuid.UUID
		err := s.db.NewSelect().Table("sa_job").Column("id").Where("id IN (?)", bun.List(maybe)).Scan(ctx, &found)
		if err != nil {
			// Neither accepted nor refused for sure: an error, never a second job.
			for i := range batch {
				outcomes[i] = intake.Outcome[Submitted]{Err: fmt.Errorf("submit prompt: its transaction failed (%v) and whether it committed could not be read: %w", failure, err)}
			}
			return
		}
		for _, id := range found {
			written[id] = true
		}
	}
	settled := 0
	for i, p := range batch {
		prior := outcomes[i]
		switch {
		case prior.Err != nil:
			// Write refused it on its own merits (an invisible parent): nothing of it was written.
		case written[prior.Res.JobID]:
			settled++
		default:
			res, err := s.submitOne(ctx, p.Req)
			if err != nil && prior.Res.JobID != uuid.Nil && isPresetRowCollision(err) {
				// The failed transaction's commit landed after the read above.
				res, err = prior.Res, nil
				settled++
			}
			outcomes[i] = intake.Outcome[Submitted]{Res: res, Err: err}
		}
	}
	if settled > 0 {
		s.log.Warn("a shared submit transaction failed but committed: its submits are answered as accepted",
			"submits", len(batch), "written", settled, "err", failure)
	}
}

// isPresetRowCollision reports whether err is a unique violation on a row a submit writes
// under its chosen ids: its operation, job or prompt.
func isPresetRowCollision(err error) bool {
	var pgErr pgdriver.Error
	if errors.As(err, &pgErr) && pgErr.Field('C') == "23505" {
		switch pgErr.Field('n') {
		case "sa_operation_pkey", "sa_job_pkey", "sa_entity_pkey":
			return true
		}
	}
	return false
}
