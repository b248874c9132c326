package jobs

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/google/uuid"
	"github.com/riverqueue/river"
	"github.com/uptrace/bun"

	"asterion/db"
)

// Concurrent submits share transactions. Each submit writes a row to each of five tables and
// a River job; most of what PostgreSQL spends on that is per statement and per transaction
// (opening tables and indexes, taking locks, the round trips, the commit's WAL flush), not per
// row. Submits that arrive while earlier ones are being written wait for the next transaction
// and go in it together: one River insert for all their vehicles, one statement with one
// multi-row INSERT per table, one commit. Under light load a submit finds nobody ahead of it
// and has a transaction to itself, as before; each submit still commits with all its rows or
// none, and is answered only after its transaction commits.
const (
	// groupFlushers bounds the shared transactions in flight at once.
	groupFlushers = 4
	// groupMax bounds the submits in one transaction.
	groupMax = 32
)

// submitGroup holds the submits waiting for a transaction.
type submitGroup struct {
	mu      sync.Mutex
	pending []*pendingSubmit
	active  int // flushers running
}

// pendingSubmit is one submit waiting for its transaction's outcome.
type pendingSubmit struct {
	ctx  context.Context
	req  SubmitRequest
	done chan submitOutcome
}

type submitOutcome struct {
	sub Submitted
	err error
}

// submitGrouped submits a validated request without an Idempotency-Key in a transaction it
// may share with other submits, and waits for that transaction's outcome (even if ctx ends
// meanwhile: the caller must not be told a submit failed that then commits).
func (s *Service) submitGrouped(ctx context.Context, req SubmitRequest) (Submitted, error) {
	p := &pendingSubmit{ctx: ctx, req: req, done: make(chan submitOutcome, 1)}
	g := &s.group
	g.mu.Lock()
	g.pending = append(g.pending, p)
	start := g.active < groupFlushers
	if start {
		g.active++
	}
	g.mu.Unlock()
	if start {
		go s.flushGroups(context.WithoutCancel(ctx))
	}
	out := <-p.done
	return out.sub, out.err
}

// flushGroups writes waiting submits, up to groupMax per transaction, until none waits.
func (s *Service) flushGroups(ctx context.Context) {
	g := &s.group
	for {
		g.mu.Lock()
		n := min(len(g.pending), groupMax)
		if n == 0 {
			g.active--
			g.mu.Unlock()
			return
		}
		batch := g.pending[:n:n]
		g.pending = append([]*pendingSubmit(nil), g.pending[n:]...)
		g.mu.Unlock()
		s.flushGroup(ctx, batch)
	}
}

// flushGroup writes batch in one transaction and answers each submit. When the transaction
// fails, nothing of it was written, and each submit is tried again in a transaction of its
// own, so one submit's failure never becomes another's. A panic while writing (which the HTTP
// server's recovery cannot see from this goroutine) answers every submit not yet answered
// with an error instead of leaving it waiting.
func (s *Service) flushGroup(ctx context.Context, batch []*pendingSubmit) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("submit group panicked", "panic", r, "submits", len(batch))
			for _, p := range batch {
				select {
				case p.done <- submitOutcome{err: fmt.Errorf("submit prompt: %v", r)}:
				default: // answered already
				}
			}
		}
	}()
	live := batch[:0:0]
	for _, p := range batch {
		if err := p.ctx.Err(); err != nil {
			p.done <- submitOutcome{err: err}
			continue
		}
		live = append(live, p)
	}
	if len(live) == 0 {
		return
	}
	outcomes := make([]submitOutcome, len(live))
	err := s.inTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		return s.writeGroup(ctx, tx, live, outcomes)
	})
	if err != nil && len(live) > 1 {
		for _, p := range live {
			sub, err := s.submitOne(ctx, p.req)
			p.done <- submitOutcome{sub: sub, err: err}
		}
		return
	}
	for i, p := range live {
		if err != nil {
			outcomes[i] = submitOutcome{err: err}
		}
		p.done <- outcomes[i]
	}
}

// groupedPrompt is one accepted submit of a group on its way to the database.
type groupedPrompt struct {
	at     int // index in the group
	prompt db.Entity
	nj     newJob
	jobID  uuid.UUID
	rows   queuedRows
}

// writeGroup writes the submits of batch in tx and records each one's outcome: a submit whose
// parent is not visible gets its validation error and writes nothing; the others are written
// together (see the comment at the top of this file).
func (s *Service) writeGroup(ctx context.Context, tx bun.Tx, batch []*pendingSubmit, outcomes []submitOutcome) error {
	parents, err := s.parentsOf(ctx, tx, batch)
	if err != nil {
		return err
	}
	var prompts []groupedPrompt
	var vehicles []river.InsertManyParams
	for i, p := range batch {
		req := p.req
		promptID := uuid.New()
		correlation := promptID
		if req.ParentID != nil {
			parent, ok := parents[*req.ParentID]
			if !ok || !req.Viewer.sees(parent.OrgID, parent.CreatedBy) {
				outcomes[i] = submitOutcome{err: &ValidationError{Fields: map[string]string{"parent_id": "no such entity visible to you"}}}
				continue
			}
			correlation = parent.CorrelationID
		}
		gp := groupedPrompt{at: i, jobID: uuid.New()}
		gp.prompt, gp.nj = req.accepted(promptID, correlation)
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
	// multi-row INSERT of the one statement the batch becomes.
	b := db.NewBatch(tx)
	for _, row := range []func(*groupedPrompt) any{
		func(gp *groupedPrompt) any { return &gp.prompt },
		func(gp *groupedPrompt) any { return &gp.rows.op },
		func(gp *groupedPrompt) any { return &gp.rows.history },
		func(gp *groupedPrompt) any { return &gp.rows.job },
		func(gp *groupedPrompt) any { return gp.rows.event },
	} {
		for k := range prompts {
			if err := b.Insert(row(&prompts[k])); err != nil {
				return fmt.Errorf("submit prompts: %w", err)
			}
		}
	}
	if err := b.Exec(ctx, tx); err != nil {
		return fmt.Errorf("submit %d prompts: %w", len(prompts), err)
	}
	for _, gp := range prompts {
		outcomes[gp.at] = submitOutcome{sub: Submitted{PromptID: gp.prompt.ID, JobID: gp.jobID, State: StateQueued,
			Operation: gp.rows.handle}}
	}
	return nil
}

// parentsOf reads the parent entities the submits of batch name, in one query.
func (s *Service) parentsOf(ctx context.Context, tx bun.Tx, batch []*pendingSubmit) (map[uuid.UUID]db.Entity, error) {
	var ids []uuid.UUID
	for _, p := range batch {
		if p.req.ParentID != nil {
			ids = append(ids, *p.req.ParentID)
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	var rows []db.Entity
	if err := tx.NewSelect().Model(&rows).Where("id IN (?)", bun.In(ids)).Scan(ctx); err != nil {
		return nil, fmt.Errorf("find parents: %w", err)
	}
	parents := make(map[uuid.UUID]db.Entity, len(rows))
	for _, e := range rows {
		parents[e.ID] = e
	}
	return parents, nil
}
