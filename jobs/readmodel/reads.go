package readmodel

import (
	"asterion/jobs"
	"context"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"asterion/db"
	"asterion/jobs/feed"
)

// JobDetail is a job with the history of its prompt: every job of the prompt, oldest first.
type JobDetail struct {
	Job     db.Job
	History []db.Job
}

// GetJob returns a visible job and its prompt's history, or jobs.ErrNotFound.
func (s *Reads) GetJob(ctx context.Context, v jobs.Viewer, id uuid.UUID) (JobDetail, error) {
	var job db.Job
	err := s.db.NewSelect().Model(&job).Where("id = ?", id).Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && !v.Sees(job.OrgID, job.CreatedBy)) {
		return JobDetail{}, fmt.Errorf("job %s: %w", id, jobs.ErrNotFound)
	}
	if err != nil {
		return JobDetail{}, fmt.Errorf("get job %s: %w", id, err)
	}
	var hist []db.Job
	if err := s.db.NewSelect().Model(&hist).Where("prompt_id = ?", job.PromptID).
		OrderExpr("created_at, id").Scan(ctx); err != nil {
		return JobDetail{}, fmt.Errorf("history of job %s: %w", id, err)
	}
	return JobDetail{Job: job, History: hist}, nil
}

// JobFilter selects jobs for the operator list.
type JobFilter struct {
	State  jobs.State
	OrgID  int64
	Since  *time.Time
	Limit  int
	Cursor string
	// Scheduled keeps only the queued jobs whose scheduled_for is still ahead: prompts
	// waiting for the time they asked to run at.
	Scheduled bool
}

// scheduledWhere narrows q to f's scheduled jobs when it asks for them (the partial index
// idx_job_scheduled holds exactly the queued jobs with a scheduled_for).
func (f JobFilter) scheduledWhere(q *bun.SelectQuery) *bun.SelectQuery {
	if !f.Scheduled {
		return q
	}
	return q.Where("job.state = 'queued' AND job.scheduled_for IS NOT NULL AND job.scheduled_for > now()")
}

// ErrBadCursor reports a pagination cursor that was not made by ListJobs.
var ErrBadCursor = errors.New("malformed cursor")

func encodeCursor(t time.Time, id uuid.UUID) string {
	return base64.RawURLEncoding.EncodeToString([]byte(t.UTC().Format(time.RFC3339Nano) + "|" + id.String()))
}

func decodeCursor(c string) (time.Time, uuid.UUID, error) {
	raw, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return time.Time{}, uuid.Nil, ErrBadCursor
	}
	ts, idStr, ok := strings.Cut(string(raw), "|")
	if !ok {
		return time.Time{}, uuid.Nil, ErrBadCursor
	}
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return time.Time{}, uuid.Nil, ErrBadCursor
	}
	id, err := uuid.Parse(idStr)
	if err != nil {
		return time.Time{}, uuid.Nil, ErrBadCursor
	}
	return t, id, nil
}

// ListJobs returns visible jobs newest first with keyset pagination: pass the returned cursor
// to get the next page ("" when there is none).
func (s *Reads) ListJobs(ctx context.Context, v jobs.Viewer, f JobFilter) ([]db.Job, string, error) {
	if f.Limit <= 0 || f.Limit > 500 {
		f.Limit = 100
	}
	q := v.Where(s.db.NewSelect().Model((*db.Job)(nil)), "job")
	if f.State != "" {
		q = q.Where("job.state = ?", f.State)
	}
	if f.OrgID != 0 {
		q = q.Where("job.org_id = ?", f.OrgID)
	}
	if f.Since != nil {
		q = q.Where("job.created_at >= ?", *f.Since)
	}
	q = f.scheduledWhere(q)
	if f.Cursor != "" {
		t, id, err := decodeCursor(f.Cursor)
		if err != nil {
			return nil, "", err
		}
		q = q.Where("(job.created_at, job.id) < (?, ?)", t, id)
	}
	var jobs []db.Job
	if err := q.OrderExpr("job.created_at DESC, job.id DESC").Limit(f.Limit+1).Scan(ctx, &jobs); err != nil {
		return nil, "", fmt.Errorf("list jobs: %w", err)
	}
	next := ""
	if len(jobs) > f.Limit {
		jobs = jobs[:f.Limit]
		last := jobs[len(jobs)-1]
		next = encodeCursor(last.CreatedAt, last.ID)
	}
	return jobs, next, nil
}

// MissionItem is one prompt of the mission field with its current job and response.
type MissionItem struct {
	Prompt    db.Entity
	Job       db.Job
	Response  *db.Entity
	ChangedAt time.Time
	// Superseded are the prompt's jobs that retries replaced, oldest first, and TextCut and
	// ResponseCut report a text cut to MissionTextCap (MissionField and MissionChanged only).
	Superseded           []db.Job
	TextCut, ResponseCut bool
}

// MissionRecentWindow is how far back MissionRecent looks when it is given no since: no call
// reads a whole history.
const MissionRecentWindow = 24 * time.Hour

// MissionRecent returns the viewer's prompts whose prompt, job or response changed at or after
// since (inside the last MissionRecentWindow when nil), oldest change first, with texts cut to
// MissionTextCap (TextCut and ResponseCut say which were), and the as_of to pass as the next
// since.
//
// Why chaining never misses a change: a row's updated_at is its transaction's start time, and
// as_of is at most the start time of the oldest transaction still open when the read began.
// Any change not yet visible to this read belongs to a transaction open then or started later,
// so its updated_at is ≥ as_of and the next call (which includes since itself) returns it. The
// price is that a change may be returned twice; clients merge by prompt_id.
func (s *Reads) MissionRecent(ctx context.Context, v jobs.Viewer, since *time.Time, limit int) (time.Time, []MissionItem, error) {
	if limit <= 0 || limit > 500 {
		limit = 100
	}
	asOf, err := changeWatermark(ctx, s.db)
	if err != nil {
		return time.Time{}, nil, err
	}
	if since != nil && asOf.Before(*since) {
		// Never hand back an earlier mark than the one given: chaining stays monotonic.
		asOf = *since
	}
	q := v.Where(s.db.NewSelect().TableExpr("sa_job AS j").ColumnExpr("j.prompt_id, max(j.updated_at) AS changed_at"), "j")
	if since != nil {
		q = q.Where("j.updated_at >= ?", *since)
	} else {
		q = q.Where("j.updated_at >= ?", asOf.Add(-MissionRecentWindow))
	}
	var changed []promptChange
	if err := q.GroupExpr("j.prompt_id").OrderExpr("changed_at, j.prompt_id").Limit(limit).Scan(ctx, &changed); err != nil {
		return time.Time{}, nil, fmt.Errorf("find changed prompts: %w", err)
	}
	if n := len(changed); n == limit && changed[n-1].ChangedAt.Before(asOf) {
		// A full page ends inside the visible past. Every other prompt that changed at the
		// page's last instant joins the page (one transaction may touch many prompts at one
		// instant, more than a page), so the next since can start a microsecond later: what
		// was not visible now changed at or after the watermark, later than that.
		last := changed[n-1]
		var ties []promptChange
		tq := v.Where(s.db.NewSelect().TableExpr("sa_job AS j").ColumnExpr("j.prompt_id, max(j.updated_at) AS changed_at"), "j").
			Where("j.updated_at >= ?", last.ChangedAt).Where("j.prompt_id > ?", last.PromptID).
			GroupExpr("j.prompt_id").Having("max(j.updated_at) = ?", last.ChangedAt).OrderExpr("j.prompt_id")
		if err := tq.Scan(ctx, &ties); err != nil {
			return time.Time{}, nil, fmt.Errorf("find prompts changed with the page's last: %w", err)
		}
		changed = append(changed, ties...)
		asOf = last.ChangedAt.Add(time.Microsecond)
	}
	if len(changed) == 0 {
		return asOf, nil, nil
	}
	ids := make([]uuid.UUID, len(changed))
	for i, c := range changed {
		ids[i] = c.PromptID
	}
	items, err := s.missionItems(ctx, s.db, ids)
	if err != nil {
		return time.Time{}, nil, err
	}
	for i := range items {
		items[i].ChangedAt = changed[i].ChangedAt
	}
	return asOf, items, nil
}

// promptChange is a prompt and the newest change of its jobs.
type promptChange struct {
	PromptID  uuid.UUID `bun:"prompt_id"`
	ChangedAt time.Time `bun:"changed_at"`
}

// missionEntityColumns select an entity with its body cut to one character more than
// MissionTextCap (to tell a cut text), read from body_head when the body is longer than that, so
// that no long body is fetched.
const missionEntityColumns = `id, kind, left(coalesce(body_head, body), ?) AS body, correlation_id, parent_id,
	causation_id, source_refs, truth_class, state_class, org_id, created_by, created_at, updated_at`

// missionItems loads prompts with their newest job and that job's response, in ids order, texts
// cut to MissionTextCap.
func (s *Reads) missionItems(ctx context.Context, idb bun.IDB, ids []uuid.UUID) ([]MissionItem, error) {
	var prompts []db.Entity
	if err := idb.NewSelect().Model(&prompts).ColumnExpr(missionEntityColumns, MissionTextCap+1).
		Where("id IN (?)", bun.List(ids)).Scan(ctx); err != nil {
		return nil, fmt.Errorf("load prompts: %w", err)
	}
	var latest []db.Job
	if err := idb.NewSelect().Model(&latest).DistinctOn("prompt_id").Where("prompt_id IN (?)", bun.List(ids)).
		OrderExpr("prompt_id, created_at DESC, id DESC").Scan(ctx); err != nil {
		return nil, fmt.Errorf("load latest jobs: %w", err)
	}
	var respIDs []uuid.UUID
	for _, j := range latest {
		if j.ResponseID != nil {
			respIDs = append(respIDs, *j.ResponseID)
		}
	}
	responses := map[uuid.UUID]db.Entity{}
	if len(respIDs) > 0 {
		var rs []db.Entity
		if err := idb.NewSelect().Model(&rs).ColumnExpr(missionEntityColumns, MissionTextCap+1).
			Where("id IN (?)", bun.List(respIDs)).Scan(ctx); err != nil {
			return nil, fmt.Errorf("load responses: %w", err)
		}
		for _, r := range rs {
			responses[r.ID] = r
		}
	}
	byPrompt := map[uuid.UUID]db.Entity{}
	for _, p := range prompts {
		byPrompt[p.ID] = p
	}
	jobOf := map[uuid.UUID]db.Job{}
	for _, j := range latest {
		jobOf[j.PromptID] = j
	}
	items := make([]MissionItem, 0, len(ids))
	for _, id := range ids {
		it := MissionItem{Prompt: byPrompt[id], Job: jobOf[id]}
		it.Prompt.Body, it.TextCut = cutText(it.Prompt.Body)
		if r, ok := responses[derefUUID(it.Job.ResponseID)]; ok {
			r.Body, it.ResponseCut = cutText(r.Body)
			it.Response = &r
		}
		items = append(items, it)
	}
	return items, nil
}

func derefUUID(u *uuid.UUID) uuid.UUID {
	if u == nil {
		return uuid.Nil
	}
	return *u
}

// ReplayEvents returns change-feed events after seq inside scope, oldest first.
func (s *Reads) ReplayEvents(ctx context.Context, after int64, scope feed.Scope, limit int) ([]feed.Event, error) {
	return feed.Replay(ctx, s.db, after, scope, limit)
}

// Response returns the response entity of a job the viewer may see, for a caller that waited
// for the job (jobs.ErrNotFound when the job has none or is not visible).
func (s *Reads) Response(ctx context.Context, v jobs.Viewer, job db.Job) (db.Entity, error) {
	if job.ResponseID == nil || !v.Sees(job.OrgID, job.CreatedBy) {
		return db.Entity{}, fmt.Errorf("response of job %s: %w", job.ID, jobs.ErrNotFound)
	}
	var e db.Entity
	if err := s.db.NewSelect().Model(&e).Where("id = ?", *job.ResponseID).Scan(ctx); err != nil {
		return db.Entity{}, fmt.Errorf("read response of job %s: %w", job.ID, err)
	}
	return e, nil
}
