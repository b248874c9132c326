package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/riverqueue/river"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/driver/pgdriver"

	"asterion/db"
	"asterion/jobs/admit"
	"asterion/jobs/intake"
)

// Concurrent submits share transactions (see intake.Group): one River insert for all their
// vehicles, one statement with one multi-row INSERT per table, one commit. Under light load a
// submit finds a writer free and has a transaction to itself, as before.

// pendingSubmit is one submit waiting for its transaction.
type pendingSubmit = intake.Wait[SubmitRequest, Submitted]

// groupedPrompt is one accepted submit of a group on its way to the database.
type groupedPrompt struct {
	at     int // index in the group
	prompt db.Entity
	nj     newJob
	jobID  uuid.UUID
	rows   queuedRows
}

// writeSubmits writes the submits of batch in tx and records each one's outcome: a submit whose
// parent is not visible gets its validation error and writes nothing; the others are written
// together (see intake.Group).
func (s *Service) writeSubmits(ctx context.Context, tx bun.Tx, batch []*pendingSubmit, outcomes []intake.Outcome[Submitted]) error {
	parents, err := parentsOf(ctx, tx, batch)
	if err != nil {
		return err
	}
	var prompts []groupedPrompt
	var vehicles []river.InsertManyParams
	var asks []*admit.Request
	var seen []int
	for i, p := range batch {
		// The ids are chosen once per submit and kept on its request, so that a replay after a
		// failed commit writes the same rows (recoverSubmits).
		if p.Req.promptID == uuid.Nil {
			p.Req.promptID, p.Req.jobID = uuid.New(), uuid.New()
		}
		req := p.Req
		if req.ParentID != nil {
			parent, ok := parents[*req.ParentID]
			if !ok || !req.Viewer.Sees(parent.OrgID, parent.CreatedBy) {
				outcomes[i] = intake.Outcome[Submitted]{Err: &ValidationError{Fields: map[string]string{"parent_id": "no such entity visible to you"}}}
				continue
			}
		}
		asks = append(asks, &batch[i].Req.adm)
		seen = append(seen, i)
	}
	// The reservations are held ahead of this transaction and taken by it (see admit.Hold),
	// so that one org's groups lock its budget row only for the hold's own statement. When
	// the transaction fails, Recover gives the hold back and writes each submit again alone
	// through Reserve.
	held, err := s.door.Hold(ctx, tx, asks)
	if err != nil {
		return err
	}
	grants := held.Grants
	for _, i := range seen {
		batch[i].Req.hold = held.ID
	}
	for k, i := range seen {
		if grants[k].Err != nil {
			outcomes[i] = intake.Outcome[Submitted]{Err: grants[k].Err}
			continue
		}
		req := batch[i].Req
		promptID := req.promptID
		correlation := promptID
		if req.ParentID != nil {
			correlation = parents[*req.ParentID].CorrelationID
		}
		gp := groupedPrompt{at: i, jobID: req.jobID}
		gp.prompt, gp.nj = req.accepted(promptID, correlation)
		gp.nj.ticket = grants[k].Ticket
		prompts = append(prompts, gp)
		vehicles = append(vehicles, gp.nj.vehicle(gp.jobID))
	}
	if len(prompts) == 0 {
		return nil
	}
	if s.groupFault != nil {
		if err := s.groupFault(len(prompts)); err != nil {
			return err
		}
	}
	res, err := s.insert.InsertManyTx(ctx, tx.Tx, vehicles)
	if err != nil {
		return fmt.Errorf("enqueue %d river jobs: %w", len(vehicles), err)
	}
	byJob := make(map[uuid.UUID]int, len(res))
	for k, r := range res {
		var args PromptArgs
		if err := json.Unmarshal(r.Job.EncodedArgs, &args); err != nil {
			return fmt.Errorf("read river job %d: %w", r.Job.ID, err)
		}
		byJob[args.JobID] = k
	}
	for k := range prompts {
		gp := &prompts[k]
		r, ok := byJob[gp.jobID]
		if !ok {
			return fmt.Errorf("enqueue river jobs: no vehicle came back for job %s", gp.jobID)
		}
		if gp.rows, err = s.queuedRowsOf(gp.nj, gp.jobID, res[r].Job.ID, res[r].Job.CreatedAt); err != nil {
			return err
		}
	}
	// Table by table, in the order of their references, so each table's rows go as one
	// multi-row INSERT of the one statement the batch becomes, whose main query takes the
	// group's hold (admit.Take).
	w := db.NewWrites(tx)
	for _, row := range []func(*groupedPrompt) db.Statement{
		func(gp *groupedPrompt) db.Statement { return gp.prompt.InsertStatement() },
		func(gp *groupedPrompt) db.Statement { return gp.rows.op.InsertStatement() },
		func(gp *groupedPrompt) db.Statement { return gp.rows.history.InsertStatement() },
		func(gp *groupedPrompt) db.Statement { return gp.rows.job.InsertStatement() },
		func(gp *groupedPrompt) db.Statement { return gp.rows.event.InsertStatement() },
	} {
		for k := range prompts {
			w.Insert(row(&prompts[k]))
		}
	}
	for k := range prompts {
		if d := prompts[k].rows.door; d != nil {
			w.Insert(*d)
		}
	}
	if err := s.door.Take(ctx, tx, w, held); err != nil {
		return fmt.Errorf("submit %d prompts: %w", len(prompts), err)
	}
	for _, gp := range prompts {
		outcomes[gp.at] = intake.Outcome[Submitted]{Res: Submitted{PromptID: gp.prompt.ID, JobID: gp.jobID, State: StateQueued,
			Operation: gp.rows.handle}}
	}
	return nil
}

// parentsOf reads the parent entities the submits of batch name, in one query.
func parentsOf(ctx context.Context, tx bun.Tx, batch []*pendingSubmit) (map[uuid.UUID]db.Entity, error) {
	var ids []uuid.UUID
	for _, p := range batch {
		if p.Req.ParentID != nil {
			ids = append(ids, *p.Req.ParentID)
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	var rows []db.Entity
	if err := tx.NewSelect().Model(&rows).Where("id IN (?)", bun.List(ids)).Scan(ctx); err != nil {
		return nil, fmt.Errorf("find parents: %w", err)
	}
	parents := make(map[uuid.UUID]db.Entity, len(rows))
	for _, e := range rows {
		parents[e.ID] = e
	}
	return parents, nil
}

// A shared submit transaction that fails at COMMIT (the connection lost while the server
// commits) may have committed: its outcome is unknown. Its submits are not written again as new
// jobs. recoverSubmits first reads which of their jobs exist (their ids were chosen before the
// commit) and answers those as accepted; it writes the others again, each alone, with the same
// ids, so that a commit still in flight when it looked makes the second write collide with its
// rows instead of adding a second job, and that collision is answered as accepted too.

// recoverSubmits settles the submits of a shared transaction that failed with failure (see
// intake.GroupSpec.Recover).
func (s *Service) recoverSubmits(ctx context.Context, batch []*pendingSubmit, outcomes []intake.Outcome[Submitted], failure error) {
	// The group's hold goes back first: its jobs are either written (and the hold taken with
	// them) or not, and those written again below are admitted again.
	if id := groupHold(batch); id != uuid.Nil {
		if err := s.door.GiveBack(ctx, id); err != nil {
			for i := range batch {
				outcomes[i] = intake.Outcome[Submitted]{Err: fmt.Errorf("submit prompt: its transaction failed (%v): %w", failure, err)}
			}
			return
		}
	}
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

// groupHold is the budget hold the submits of batch were admitted under, if any.
func groupHold(batch []*pendingSubmit) uuid.UUID {
	for _, p := range batch {
		if p.Req.hold != uuid.Nil {
			return p.Req.hold
		}
	}
	return uuid.Nil
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
