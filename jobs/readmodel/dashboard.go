package readmodel

import (
	"asterion/jobs"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"asterion/db"
)

// This file holds the read queries of the operator dashboard (/admin/…): rows by id for the
// live streams, display names, the bulk selection, and the queue-health figures (per-minute
// series, worker liveness, past-due work). Like every read here, each one is limited to what
// the jobs.Viewer may see.

// OperationKinds returns the operation kinds that have a registered owner, sorted.
func (s *Reads) OperationKinds() []string { return s.reg.Kinds() }

// OrgName is an org's id and name.
type OrgName struct {
	ID   int64  `bun:"id"`
	Name string `bun:"name"`
}

// OrgDirectory returns every org, by name (the admin's org filter).
func (s *Reads) OrgDirectory(ctx context.Context) ([]OrgName, error) {
	var out []OrgName
	if err := s.db.NewSelect().Table("orgs").Column("id", "name").OrderExpr("name").Limit(1000).Scan(ctx, &out); err != nil {
		return nil, fmt.Errorf("list orgs: %w", err)
	}
	return out, nil
}

// DisplayNames resolves org and user ids to their names; unknown ids are left out.
func (s *Reads) DisplayNames(ctx context.Context, orgIDs, userIDs []int64) (orgs, users map[int64]string, err error) {
	orgs, users = map[int64]string{}, map[int64]string{}
	load := func(table string, ids []int64, into map[int64]string) error {
		if len(ids) == 0 {
			return nil
		}
		var rows []OrgName
		if err := s.db.NewSelect().Table(table).Column("id", "name").Where("id IN (?)", bun.List(ids)).Scan(ctx, &rows); err != nil {
			return fmt.Errorf("names from %s: %w", table, err)
		}
		for _, r := range rows {
			into[r.ID] = r.Name
		}
		return nil
	}
	if err := load("orgs", orgIDs, orgs); err != nil {
		return nil, nil, err
	}
	if err := load("users", userIDs, users); err != nil {
		return nil, nil, err
	}
	return orgs, users, nil
}

// OperationRows returns the visible operations among ids, by id.
func (s *Reads) OperationRows(ctx context.Context, v jobs.Viewer, ids []uuid.UUID) (map[uuid.UUID]db.Operation, error) {
	out := map[uuid.UUID]db.Operation{}
	if len(ids) == 0 {
		return out, nil
	}
	var rows []db.Operation
	if err := v.Where(s.db.NewSelect().Model(&rows), "operation").Where("operation.id IN (?)", bun.List(ids)).Scan(ctx); err != nil {
		return nil, fmt.Errorf("load operations: %w", err)
	}
	for _, r := range rows {
		out[r.ID] = r
	}
	return out, nil
}

// JobRows returns the visible jobs among ids, by id.
func (s *Reads) JobRows(ctx context.Context, v jobs.Viewer, ids []uuid.UUID) (map[uuid.UUID]db.Job, error) {
	out := map[uuid.UUID]db.Job{}
	if len(ids) == 0 {
		return out, nil
	}
	var rows []db.Job
	if err := v.Where(s.db.NewSelect().Model(&rows), "job").Where("job.id IN (?)", bun.List(ids)).Scan(ctx); err != nil {
		return nil, fmt.Errorf("load jobs: %w", err)
	}
	for _, r := range rows {
		out[r.ID] = r
	}
	return out, nil
}

// FindJob returns the visible job with this id, or else the newest visible job of the prompt
// with this id, or jobs.ErrNotFound.
func (s *Reads) FindJob(ctx context.Context, v jobs.Viewer, id uuid.UUID) (db.Job, error) {
	var job db.Job
	err := v.Where(s.db.NewSelect().Model(&job), "job").Where("(job.id = ? OR job.prompt_id = ?)", id, id).
		OrderExpr("(job.id = ?) DESC, job.created_at DESC, job.id DESC", id).Limit(1).Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return db.Job{}, fmt.Errorf("job or prompt %s: %w", id, jobs.ErrNotFound)
	}
	if err != nil {
		return db.Job{}, fmt.Errorf("find job %s: %w", id, err)
	}
	return job, nil
}

// BulkSelect returns the ids of the visible jobs that match f (its cursor and limit are
// ignored) and are in one of states, newest first, at most limit of them. Pass limit+1 to learn
// whether the selection was cut.
func (s *Reads) BulkSelect(ctx context.Context, v jobs.Viewer, f JobFilter, states []jobs.State, limit int) ([]uuid.UUID, error) {
	if len(states) == 0 || limit <= 0 {
		return nil, nil
	}
	names := make([]string, len(states))
	for i, st := range states {
		names[i] = string(st)
	}
	q := v.Where(s.db.NewSelect().Model((*db.Job)(nil)).Column("job.id"), "job").Where("job.state IN (?)", bun.List(names))
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
	var ids []uuid.UUID
	if err := q.OrderExpr("job.created_at DESC, job.id DESC").Limit(limit).Scan(ctx, &ids); err != nil {
		return nil, fmt.Errorf("select jobs for a bulk action: %w", err)
	}
	return ids, nil
}

// SeriesPoint is one bucket of the queue-health series: jobs that finished inside it, and
// the p50/p95 of their queue wait (claimed − scheduled) and run time (finished − started), in
// seconds.
type SeriesPoint struct {
	At       time.Time `bun:"at"`
	Finished int64     `bun:"finished"`
	Failed   int64     `bun:"failed"`
	WaitP50  float64   `bun:"wait_p50"`
	WaitP95  float64   `bun:"wait_p95"`
	RunP50   float64   `bun:"run_p50"`
	RunP95   float64   `bun:"run_p95"`
}

// QueueSeries returns one point per step over the last window, oldest first, every bucket
// present (zero when nothing finished). A job counts in the bucket its finished_at falls in.
// The scan is bounded by the (org_id, updated_at) index: a finished job's updated_at is at or
// after its finished_at.
func (s *Reads) QueueSeries(ctx context.Context, v jobs.Viewer, window, step time.Duration) ([]SeriesPoint, error) {
	if step < time.Second {
		step = time.Minute
	}
	if window < step {
		window = step
	}
	n := int(window / step)
	stepSecs := int64(step / time.Second)
	// ?0 is the step in seconds, ?1 the number of buckets, ?2 the org and ?3 the user.
	query := queueSeriesUserSQL
	switch {
	case v.AllOrgs:
		query = queueSeriesAllSQL
	case v.OrgWide:
		query = queueSeriesOrgSQL
	}
	all := []any{stepSecs, n, v.OrgID, v.UserID}
	var out []SeriesPoint
	if err := s.db.NewRaw(query, all...).Scan(ctx, &out); err != nil {
		return nil, fmt.Errorf("queue series: %w", err)
	}
	for i := range out {
		out[i].At = out[i].At.UTC()
		// Waits can be slightly negative when a job is claimed in the instant it is scheduled.
		out[i].WaitP50, out[i].WaitP95 = max(out[i].WaitP50, 0), max(out[i].WaitP95, 0)
	}
	return out, nil
}

// WorkerAliveWithin is how recent a sign of life must be for a worker to count as alive.
const WorkerAliveWithin = time.Minute

// Liveness is what the database says about worker processes. A worker counts as alive when,
// within WorkerAliveWithin, one of these was written:
//
//   - River's leader lease: every started worker client takes part in leader election and the
//     leader renews its lease every few seconds, so a lease held within the last minute means
//     some worker process was up (an idle one included);
//   - a running prompt job's heartbeat (sa_job.running_heartbeat_at, our own row);
//   - a River job finalised as completed (river_job.finalized_at, read through River's
//     (state, finalized_at) index): only a live worker completes vehicles, maintenance jobs
//     included.
//
// Each read is an index lookup, so the health page can ask every few seconds at any size.
type Liveness struct {
	// LastSeen is the newest sign of life, nil when there is none.
	LastSeen *time.Time
	// Source names where LastSeen came from: "river leader lease", "job heartbeat" or
	// "completed river job".
	Source string
	// Alive is LastSeen within WorkerAliveWithin of Now.
	Alive bool
	// LeaderID is River's leader client, "" when no lease exists.
	LeaderID string
	// Now is the database's clock when this was read.
	Now time.Time
}

// WorkerLiveness reads the newest sign of life of any worker process.
func (s *Reads) WorkerLiveness(ctx context.Context) (Liveness, error) {
	var row struct {
		Now       time.Time  `bun:"now"`
		LeaseAt   *time.Time `bun:"lease_at"`
		LeaderID  *string    `bun:"leader_id"`
		Heartbeat *time.Time `bun:"heartbeat"`
		Completed *time.Time `bun:"completed"`
	}
	err := s.db.NewRaw(workerLivenessSQL).Scan(ctx, &row)
	if err != nil {
		return Liveness{}, fmt.Errorf("read worker liveness: %w", err)
	}
	l := Liveness{Now: row.Now.UTC()}
	if row.LeaderID != nil {
		l.LeaderID = *row.LeaderID
	}
	for _, c := range []struct {
		t   *time.Time
		src string
	}{{row.LeaseAt, "river leader lease"}, {row.Heartbeat, "job heartbeat"}, {row.Completed, "completed river job"}} {
		if c.t != nil && (l.LastSeen == nil || c.t.After(*l.LastSeen)) {
			t := c.t.UTC()
			l.LastSeen, l.Source = &t, c.src
		}
	}
	l.Alive = l.LastSeen != nil && l.Now.Sub(*l.LastSeen) <= WorkerAliveWithin
	return l, nil
}

// Backlog is the queued work visible to a viewer.
type Backlog struct {
	// Due is how many queued jobs are due now (scheduled_at ≤ now).
	Due int64
	// PastDue is how many queued jobs have been due for longer than the grace period.
	PastDue int64
	// OldestDue is the scheduled_at of the longest-waiting due job, nil when none is due.
	OldestDue *time.Time
	// Capped is true when Due reached the count cap (the real number is larger).
	Capped bool
}

// backlogCap bounds the counts of Backlog, so a huge backlog costs a bounded scan.
const backlogCap = 100000

// QueueBacklog counts queued jobs that are due, and those due for longer than grace (past
// due: no worker took them although they could run).
func (s *Reads) QueueBacklog(ctx context.Context, v jobs.Viewer, grace time.Duration) (Backlog, error) {
	sub := v.Where(s.db.NewSelect().Model((*db.Job)(nil)).Column("job.scheduled_at"), "job").
		Where("job.state = ?", jobs.StateQueued).Where("job.scheduled_at <= now()").Limit(backlogCap)
	var row struct {
		Due     int64      `bun:"due"`
		PastDue int64      `bun:"past_due"`
		Oldest  *time.Time `bun:"oldest"`
	}
	err := s.db.NewSelect().TableExpr("(?) AS d", sub).
		ColumnExpr("count(*) AS due").
		ColumnExpr("count(*) FILTER (WHERE d.scheduled_at < now() - make_interval(secs => ?)) AS past_due", grace.Seconds()).
		ColumnExpr("min(d.scheduled_at) AS oldest").Scan(ctx, &row)
	if err != nil {
		return Backlog{}, fmt.Errorf("queue backlog: %w", err)
	}
	b := Backlog{Due: row.Due, PastDue: row.PastDue, Capped: row.Due >= backlogCap}
	if row.Oldest != nil {
		t := row.Oldest.UTC()
		b.OldestDue = &t
	}
	return b, nil
}

// JobCounts returns jobs by state from the trigger-kept counters (cheap at any size), every
// state present. A zero orgID counts every org the viewer sees; a non-zero one only that org.
func (s *Reads) JobCounts(ctx context.Context, v jobs.Viewer, orgID int64) (map[string]int64, error) {
	out := map[string]int64{}
	for _, st := range []jobs.State{jobs.StateQueued, jobs.StateRunning, jobs.StateSucceeded, jobs.StateFailed, jobs.StateCancelled, jobs.StateSuperseded} {
		out[string(st)] = 0
	}
	q := s.db.NewSelect().Table("sa_job_count").ColumnExpr("state, sum(n) AS n").GroupExpr("state")
	if !v.AllOrgs {
		q = q.Where("org_id = ?", v.OrgID)
	}
	if orgID != 0 {
		q = q.Where("org_id = ?", orgID)
	}
	var rows []struct {
		State string `bun:"state"`
		N     int64  `bun:"n"`
	}
	if err := q.Scan(ctx, &rows); err != nil {
		return nil, fmt.Errorf("count jobs by state: %w", err)
	}
	for _, r := range rows {
		out[r.State] = r.N
	}
	return out, nil
}

// OrgOperationCounts is OperationCounts limited to one org (an admin's org filter); a zero
// orgID is every org the viewer sees.
func (s *Reads) OrgOperationCounts(ctx context.Context, v jobs.Viewer, orgID int64) (map[string]int64, error) {
	if orgID == 0 {
		return s.OperationCounts(ctx, v)
	}
	if !v.AllOrgs && orgID != v.OrgID {
		orgID = -1
	}
	return s.OperationCounts(ctx, jobs.Viewer{OrgID: orgID, OrgWide: true})
}
