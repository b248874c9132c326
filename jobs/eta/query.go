package eta

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/uptrace/bun/dialect/pgdialect"
)

// The place of one job: its row and the claimable queued jobs before it in River's order
// (band, then oldest first), counted up to a bound on idx_job_queued_band. The row comparison
// is one contiguous range of that index, walked back from the job (the ORDER BY makes it an
// index-only scan that stops at the bound), so a job near the front costs a few index entries
// and one at the back of a long queue at most the bound.
const (
	etaJobByID = `WITH ch AS (SELECT false AS chain, 0 AS steps_after),
	me AS (SELECT id, state, priority, created_at, scheduled_at, scheduled_for, started_at, org_id FROM sa_job WHERE id = ?)`
	etaJobByOperation = `WITH ch AS (SELECT false AS chain, 0 AS steps_after),
	me AS (SELECT id, state, priority, created_at, scheduled_at, scheduled_for, started_at, org_id FROM sa_job
		WHERE id = (SELECT (subject->>'job_id')::uuid FROM sa_operation WHERE id = ? AND kind = 'prompt.execute'))`
	// A running chain's estimate is its current step's, and the steps after it.
	etaChainByOperation = `WITH ch AS (
		SELECT true AS chain, c.step_count - c.current_step AS steps_after, s.job_id FROM sa_operation o
		JOIN sa_chain c ON c.id = (o.subject->>'chain_id')::uuid AND c.state = 'running'
		JOIN sa_chain_step s ON s.chain_id = c.id AND s.step = c.current_step
		WHERE o.id = ? AND o.kind = 'flow.chain'),
	me AS (SELECT id, state, priority, created_at, scheduled_at, scheduled_for, started_at, org_id FROM sa_job
		WHERE id = (SELECT job_id FROM ch))`
	etaPlace = `
	SELECT me.id, me.state, me.created_at, me.scheduled_at, me.scheduled_for, me.started_at, now() AS now, true AS counted,
		coalesce(a.ahead, 0) AS ahead, coalesce(a.ahead_org, 0) AS ahead_org,
		(SELECT chain FROM ch) AS chain, (SELECT steps_after FROM ch) AS steps_after
	FROM me LEFT JOIN LATERAL (
		SELECT count(*) AS ahead, count(*) FILTER (WHERE q.org_id = me.org_id) AS ahead_org FROM (
			SELECT q.org_id FROM sa_job q
			WHERE me.state = 'queued' AND q.state = 'queued' AND q.scheduled_at <= now()
				AND (asterion_band(q.priority), q.created_at, q.id) < (asterion_band(me.priority), me.created_at, me.id)
			ORDER BY asterion_band(q.priority) DESC, q.created_at DESC, q.id DESC
			LIMIT ?) q) a ON true`
	etaJobSQL       = etaJobByID + etaPlace
	etaOperationSQL = etaJobByOperation + etaPlace
	etaChainSQL     = etaChainByOperation + etaPlace
)

// Job is the ETA of job id, or false when the job has ended or does not exist. The caller has
// checked that its viewer may see the job.
func (e *Estimator) Job(ctx context.Context, id uuid.UUID) (ETA, bool, error) {
	return e.one(ctx, etaJobSQL, id)
}

// Operation is the ETA of an operation: of its job for prompt.execute; for a running
// flow.chain, of the end of its current step's job and of the steps after it. It is false when
// the work has ended, the operation is of another kind, a chain has no step running, or there
// is no such operation. The caller has checked that its
// viewer may see the operation.
func (e *Estimator) Operation(ctx context.Context, id uuid.UUID) (ETA, bool, error) {
	if eta, ok, err := e.one(ctx, etaOperationSQL, id); ok || err != nil {
		return eta, ok, err
	}
	return e.one(ctx, etaChainSQL, id)
}

func (e *Estimator) one(ctx context.Context, query string, id uuid.UUID) (ETA, bool, error) {
	var r etaRow
	err := e.cfg.DB.NewRaw(query, id, e.cfg.CountCap).Scan(ctx, &r)
	if errors.Is(err, sql.ErrNoRows) {
		return ETA{}, false, nil
	}
	if err != nil {
		return ETA{}, false, fmt.Errorf("place job %s in the queue: %w", id, err)
	}
	s, peak, err := e.measure(ctx, r.State == stateQueued && r.Ahead >= e.cfg.CountCap)
	if err != nil {
		return ETA{}, false, err
	}
	eta, ok := e.estimate(r, s, peak)
	return eta, ok, nil
}

// Jobs are the ETAs of the jobs in ids that have not ended, from one query for all of them
// (the mission field asks for every drop it shows at once). The caller has checked that its
// viewer may see the jobs.
func (e *Estimator) Jobs(ctx context.Context, ids []uuid.UUID) (map[uuid.UUID]ETA, error) {
	out := make(map[uuid.UUID]ETA, len(ids))
	switch len(ids) {
	case 0:
		return out, nil
	case 1:
		// One drop re-rendered on its change: its own range of the index is cheaper than the
		// walk of the queue's front.
		eta, ok, err := e.Job(ctx, ids[0])
		if ok {
			out[ids[0]] = eta
		}
		return out, err
	}
	var rows []etaRow
	if err := e.cfg.DB.NewRaw(etaBatchSQL, e.cfg.CountCap, pgdialect.Array(ids)).Scan(ctx, &rows); err != nil {
		return nil, fmt.Errorf("place %d jobs in the queue: %w", len(ids), err)
	}
	if len(rows) == 0 {
		return out, nil
	}
	extrapolates := false
	for _, r := range rows {
		extrapolates = extrapolates || (r.State == stateQueued && !r.Counted)
	}
	s, peak, err := e.measure(ctx, extrapolates)
	if err != nil {
		return nil, err
	}
	for _, r := range rows {
		if eta, ok := e.estimate(r, s, peak); ok {
			out[r.ID] = eta
		}
	}
	return out, nil
}
