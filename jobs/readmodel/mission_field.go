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

// missionFieldSQL reads the newest ?5 prompts of org ?0 and user ?1 (every job of a prompt has
// its prompt's org and creator) walking idx_entity_org_user_created newest first, each with its
// newest job, that job's response and the superseded jobs of the prompt, texts cut to ?2 + 1
// characters (one more than shown, to tell a cut text), read from body_head when the body is
// longer than that head's 1000, so that no long body is fetched. With ?3 true only prompts with
// a job updated at or after ?4 count, and with ?6 not null only the prompts in it. The nested
// loop stops at the limit: the read is the same for a user with 200 prompts or 100,000.
const missionFieldSQL = `
SELECT p.id AS prompt_id, p.parent_id, left(coalesce(p.body_head, p.body), ?2 + 1) AS prompt_body, p.created_at AS prompt_created_at,
    p.org_id AS prompt_org_id, p.created_by AS prompt_created_by,
    j.id AS job_id, j.state, j.priority, j.attempt, j.max_attempts, j.error_kind, j.error_message, j.supersedes,
    j.response_id, j.operation_id, j.created_at AS job_created_at, j.updated_at AS job_updated_at,
    left(coalesce(r.body_head, r.body), ?2 + 1) AS response_body, r.created_at AS response_created_at,
    h.superseded
FROM sa_entity AS p
JOIN LATERAL (
    SELECT x.id, x.state, x.priority, x.attempt, x.max_attempts, x.error_kind, x.error_message, x.supersedes, x.response_id,
        x.operation_id, x.created_at, x.updated_at
    FROM sa_job AS x WHERE x.prompt_id = p.id AND x.org_id = p.org_id AND x.created_by = p.created_by
    ORDER BY x.created_at DESC, x.id DESC LIMIT 1
) AS j ON true
LEFT JOIN sa_entity AS r ON r.id = j.response_id
LEFT JOIN LATERAL (
    SELECT json_agg(json_build_object('id', s.id, 'attempt', s.attempt, 'error_kind', s.error_kind, 'updated_at', s.updated_at)
        ORDER BY s.created_at, s.id) AS superseded
    FROM sa_job AS s WHERE s.prompt_id = p.id AND s.state = 'superseded'
) AS h ON true
WHERE p.org_id = ?0 AND p.created_by = ?1 AND p.kind = 'prompt'
    AND (NOT ?3 OR EXISTS (SELECT 1 FROM sa_job AS c WHERE c.prompt_id = p.id AND c.updated_at >= ?4))
    AND (?6::uuid[] IS NULL OR p.id = ANY (?6::uuid[]))
ORDER BY p.created_at DESC, p.id DESC
LIMIT ?5`

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

// changeWatermarkSQL is the as_of of a mission read: now, or the start of the oldest
// transaction still open when it runs, whichever is earlier (see MissionRecent).
const changeWatermarkSQL = `SELECT LEAST(clock_timestamp(), COALESCE((
	SELECT min(xact_start) FROM pg_stat_activity
	WHERE datname = current_database() AND pid <> pg_backend_pid() AND xact_start IS NOT NULL
	  AND backend_type = ?), 'infinity'))`

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
