package chain

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"asterion/db"
	"asterion/jobs"
	"asterion/jobs/deferred"
	"asterion/jobs/registry"
)

// Detail is a visible chain with its steps and its operation, never the steps' texts or
// the continuation.
type Detail struct {
	Chain     Chain
	Steps     []StepView
	Operation db.Operation
	Status    deferred.StatusDoc
}

// StepView is a step with the live status of its operation ("" before it is submitted).
type StepView struct {
	StepRow
	OperationStatus string
}

// Get returns a chain the viewer may see, or jobs.ErrNotFound.
func (c *Chains) Get(ctx context.Context, v registry.Viewer, id uuid.UUID) (Detail, error) {
	var d Detail
	err := c.db.NewSelect().Model(&d.Chain).Where("id = ?", id).Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && !v.Sees(d.Chain.OrgID, d.Chain.CreatedBy)) {
		return Detail{}, fmt.Errorf("chain %s: %w", id, jobs.ErrNotFound)
	}
	if err != nil {
		return Detail{}, fmt.Errorf("get chain %s: %w", id, err)
	}
	if err := c.db.NewSelect().Model(&d.Operation).Where("id = ?", d.Chain.OperationID).Scan(ctx); err != nil {
		return Detail{}, fmt.Errorf("operation of chain %s: %w", id, err)
	}
	if d.Status, err = registry.StatusDocOf(d.Operation); err != nil {
		return Detail{}, err
	}
	var rows []StepRow
	if err := c.db.NewSelect().Model(&rows).Where("chain_id = ?", id).OrderExpr("step").Scan(ctx); err != nil {
		return Detail{}, fmt.Errorf("steps of chain %s: %w", id, err)
	}
	var ids []uuid.UUID
	for _, r := range rows {
		if r.OperationID != nil {
			ids = append(ids, *r.OperationID)
		}
	}
	statuses := map[uuid.UUID]string{}
	if len(ids) > 0 {
		var ops []db.Operation
		if err := c.db.NewSelect().Model(&ops).Column("id", "status").Where("id IN (?)", bun.List(ids)).Scan(ctx); err != nil {
			return Detail{}, fmt.Errorf("step operations of chain %s: %w", id, err)
		}
		for _, o := range ops {
			statuses[o.ID] = o.Status
		}
	}
	d.Steps = make([]StepView, len(rows))
	for i, r := range rows {
		d.Steps[i] = StepView{StepRow: r}
		if r.OperationID != nil {
			d.Steps[i].OperationStatus = statuses[*r.OperationID]
		}
	}
	return d, nil
}
