package readmodel

import (
	"asterion/jobs"
	"strings"
	"time"

	"github.com/google/uuid"

	"asterion/db"
)

// Matches reports whether j passes f as ListJobs's conditions decide it, for a row that
// reaches a live list over the change feed instead of from the list's query; now stands in
// for the database's clock in the scheduled condition. The cursor is not a condition of the
// row: a live list shows only its first page.
func (f JobFilter) Matches(j db.Job, now time.Time) bool {
	switch {
	case f.State != "" && j.State != string(f.State),
		f.OrgID != 0 && j.OrgID != f.OrgID,
		f.Since != nil && j.CreatedAt.Before(*f.Since),
		f.Scheduled && (j.State != string(jobs.StateQueued) || j.ScheduledFor == nil || !j.ScheduledFor.After(now)):
		return false
	}
	return true
}

// Matches reports whether op passes f as ListOperations's conditions decide it, for a row
// that reaches a live list over the change feed. A search that is not a UUID matches nothing,
// as ListOperations refuses it.
func (f OperationFilter) Matches(op db.Operation) bool {
	switch {
	case f.Status != "" && op.Status != f.Status,
		f.Kind != "" && op.Kind != f.Kind,
		f.Owner != "" && op.Owner != f.Owner,
		f.OrgID != 0 && op.OrgID != f.OrgID,
		f.From != nil && op.AcceptedAt.Before(*f.From),
		f.To != nil && !op.AcceptedAt.Before(*f.To):
		return false
	}
	if s := strings.TrimSpace(f.Search); s != "" {
		id, err := uuid.Parse(s)
		return err == nil && (op.ID == id || op.CorrelationID == id)
	}
	return true
}
