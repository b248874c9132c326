package delivery

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"asterion/jobs"
	"asterion/jobs/registry"
)

// Of returns the delivery of a visible artifact.delivery operation, or jobs.ErrNotFound.
func (ds *Deliveries) Of(ctx context.Context, v registry.Viewer, operationID uuid.UUID) (Detail, error) {
	var d Detail
	err := ds.db.NewSelect().Model(&d.Delivery).Where("operation_id = ?", operationID).Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && !v.Sees(d.Delivery.OrgID, d.Delivery.CreatedBy)) {
		return Detail{}, fmt.Errorf("delivery of operation %s: %w", operationID, jobs.ErrNotFound)
	}
	if err != nil {
		return Detail{}, fmt.Errorf("delivery of operation %s: %w", operationID, err)
	}
	if err := ds.db.NewSelect().Model(&d.Attempts).Where("delivery_id = ?", d.Delivery.ID).OrderExpr("attempt").
		Scan(ctx); err != nil {
		return Detail{}, fmt.Errorf("attempts of delivery %s: %w", d.Delivery.ID, err)
	}
	return d, nil
}
