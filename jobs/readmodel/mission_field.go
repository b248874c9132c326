package readmodel

import (
	"asterion/jobs"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/uptrace/bun"

	"github.com/google/uuid"
	"github.com/uptrace/bun/dialect/pgdialect"

	"asterion/db"
)

// MissionTextCap is how many characters of a prompt's or a response's text the mission field
// carries: the field's read, and the page it renders, stay bounded whatever one prompt holds.
// It must not exceed the 1000 characters sa_entity.body_head keeps of a long body.
const MissionTextCap = 1000

// MissionFieldMax is the most prompts one mission read returns.
const MissionFieldMax = 200

// MissionField returns the newest limit (at most MissionFieldMax) prompts of v by creation,
// oldest first, each with its newest job, that job's response and the jobs retries replaced,
// texts cut to MissionTextCap; and the as_of to pass as the next since (see MissionRecent).
// The prompts are read in one query that stops at limit, however many v has.
func (s *Reads) MissionField(ctx context.Context, v jobs.Viewer, limit int) (time.Time, []MissionItem, error) {
	asOf, err := changeWatermark(ctx, s.db)
	if err != nil {
		return time.Time{}, nil, err
	}
	items, err := s.missionRead(ctx, v, nil, nil, limit)
	if err != nil {
		return time.Time{}, nil, err
	}
	return asOf, items, nil
}

// MissionChanged returns, like MissionField, the newest limit prompts of v among those whose
// jobs changed at or after since, only among ids when ids is not empty, in one query.
func (s *Reads) MissionChanged(ctx context.Context, v jobs.Viewer, since time.Time, ids []uuid.UUID, limit int) ([]MissionItem, error) {
	return s.missionRead(ctx, v, &since, ids, limit)
}

// missionRow is one row of missionFieldSQL.
type missionRow struct {
	PromptID        uuid.UUID  `bun:"prompt_id"`
	ParentID        *uuid.UUID `bun:"parent_id"`
	PromptBody      string     `bun:"prompt_body"`
	PromptCreatedAt time.Time  `bun:"prompt_created_at"`
	PromptOrgID     int64      `bun:"prompt_org_id"`
	PromptCreatedBy int64      `bun:"prompt_created_by"`

	JobID        uuid.UUID  `bun:"job_id"`
	State        string     `bun:"state"`
	Priority     int        `bun:"priority"`
	Attempt      int        `bun:"attempt"`
	MaxAttempts  int        `bun:"max_attempts"`
	ErrorKind    *string    `bun:"error_kind"`
	ErrorMessage *string    `bun:"error_message"`
	Supersedes   *uuid.UUID `bun:"supersedes"`
	ResponseID   *uuid.UUID `bun:"response_id"`
	OperationID  *uuid.UUID `bun:"operation_id"`
	JobCreatedAt time.Time  `bun:"job_created_at"`
	JobUpdatedAt time.Time  `bun:"job_updated_at"`

	ResponseBody      *string    `bun:"response_body"`
	ResponseCreatedAt *time.Time `bun:"response_created_at"`

	Superseded json.RawMessage `bun:"superseded"`
}

// supersededRow is one element of missionRow.Superseded.
type supersededRow struct {
	ID        uuid.UUID `json:"id"`
	Attempt   int       `json:"attempt"`
	ErrorKind *string   `json:"error_kind"`
	UpdatedAt time.Time `json:"updated_at"`
}

// missionRead runs missionFieldSQL for v and returns its items oldest first. A field is one
// user's own prompts: v's org and user name it, whatever v's role.
func (s *Reads) missionRead(ctx context.Context, v jobs.Viewer, since *time.Time, ids []uuid.UUID, limit int) ([]MissionItem, error) {
	if limit <= 0 || limit > MissionFieldMax {
		limit = MissionFieldMax
	}
	var sinceArg time.Time
	if since != nil {
		sinceArg = *since
	}
	var idsArg any
	if len(ids) > 0 {
		idsArg = pgdialect.Array(ids)
	}
	var rows []missionRow
	if err := s.db.NewRaw(missionFieldSQL, v.OrgID, v.UserID, MissionTextCap, since != nil, sinceArg, limit, idsArg).
		Scan(ctx, &rows); err != nil {
		return nil, fmt.Errorf("read the mission field: %w", err)
	}
	items := make([]MissionItem, len(rows))
	for i, r := range rows {
		items[len(rows)-1-i] = r.item()
	}
	return items, nil
}

// cutText returns the first MissionTextCap characters of s and whether s had more.
func cutText(s string) (string, bool) {
	n := 0
	for i := range s {
		if n == MissionTextCap {
			return s[:i], true
		}
		n++
	}
	return s, false
}

func (r missionRow) item() MissionItem {
	body, cut := cutText(r.PromptBody)
	it := MissionItem{
		Prompt: db.Entity{ID: r.PromptID, Kind: "prompt", ParentID: r.ParentID, Body: body, CreatedAt: r.PromptCreatedAt,
			OrgID: r.PromptOrgID, CreatedBy: r.PromptCreatedBy},
		Job: db.Job{ID: r.JobID, PromptID: r.PromptID, State: r.State, Priority: r.Priority, Attempt: r.Attempt,
			MaxAttempts: r.MaxAttempts, ErrorKind: r.ErrorKind, ErrorMessage: r.ErrorMessage, Supersedes: r.Supersedes,
			ResponseID: r.ResponseID, OperationID: r.OperationID, OrgID: r.PromptOrgID, CreatedBy: r.PromptCreatedBy,
			CreatedAt: r.JobCreatedAt, UpdatedAt: r.JobUpdatedAt},
		ChangedAt: r.JobUpdatedAt,
		TextCut:   cut,
	}
	if r.ResponseID != nil && r.ResponseBody != nil {
		text, cut := cutText(*r.ResponseBody)
		it.Response = &db.Entity{ID: *r.ResponseID, Kind: "response", Body: text, OrgID: r.PromptOrgID,
			CreatedBy: r.PromptCreatedBy}
		if r.ResponseCreatedAt != nil {
			it.Response.CreatedAt = *r.ResponseCreatedAt
		}
		it.ResponseCut = cut
	}
	var sup []supersededRow
	if len(r.Superseded) > 0 && json.Unmarshal(r.Superseded, &sup) == nil {
		for _, s := range sup {
			it.Superseded = append(it.Superseded, db.Job{ID: s.ID, PromptID: r.PromptID, State: string(jobs.StateSuperseded),
				Attempt: s.Attempt, ErrorKind: s.ErrorKind, UpdatedAt: s.UpdatedAt})
		}
	}
	return it
}

// clientBackend is the backend_type of changeWatermarkSQL: a parameter, so that through
// database/sql the statement stays prepared (planning the pg_stat_activity view costs far more
// than running it).
const clientBackend = "client backend"

// changeWatermark reads the as_of of a mission read.
func changeWatermark(ctx context.Context, idb bun.IDB) (time.Time, error) {
	var asOf time.Time
	if err := idb.QueryRowContext(ctx, changeWatermarkSQL, clientBackend).Scan(&asOf); err != nil {
		return time.Time{}, fmt.Errorf("read change watermark: %w", err)
	}
	return asOf, nil
}
