package jobs

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"
	"github.com/uptrace/bun/schema"

	"asterion/db"
	"asterion/jobs/feed"
	"asterion/jobs/registry"
)

// change is one conditional state change of a job. Every state write goes through apply, which
// checks it against the state machine, makes it only if the row is still in an expected state
// (and, for a worker, still under its claim), mirrors it onto the operation and publishes the
// change-feed event, all in the caller's transaction: the job's UPDATE runs at once, the
// writes that follow it are left in the transaction's Writes.
type change struct {
	jobID uuid.UUID
	from  []State
	to    State
	// claim, when set, also requires worker_claim = claim.
	claim string
	// set adds column assignments to the UPDATE; where adds conditions.
	set, where []clause
	// result is stored on the operation when the job succeeds.
	result json.RawMessage
	// with holds inserts of other rows that travel in the same statement as the job's UPDATE
	// (rows the job will reference, such as its response); they are undone with the
	// transaction when the change does not apply.
	with []db.Statement
	// prompt also reads the job's prompt entity in the same statement (a claim, whose worker
	// needs the text next).
	prompt bool
}

// clause is one assignment or condition of a change, in bun's ? syntax with its arguments.
type clause struct {
	sql  string
	args []any
}

// is builds a clause.
func is(sql string, args ...any) clause { return clause{sql: sql, args: args} }

// errNoChange means the row was not in an expected state (or not under the claim): the caller
// decides whether that is a conflict or a result to drop.
var errNoChange = errors.New("job not in an expected state")

// statement writes ch as one UPDATE of the job that returns the row it wrote beside its
// operation's row, locked, with ? placeholders. Its text depends only on the shape of the
// change, never on its values, so the connection keeps it prepared.
func (ch change) statement() (string, []any) {
	var q strings.Builder
	args := []any{string(ch.to)}
	// The registry row is locked in the same statement, after the job's row as everywhere.
	// updated_at is set here to what the touch trigger would set, which skips the trigger.
	q.WriteString("WITH moved AS (UPDATE sa_job SET state = ?, updated_at = now()")
	for _, c := range ch.set {
		q.WriteString(", ")
		q.WriteString(c.sql)
		args = append(args, c.args...)
	}
	// The state's condition is wrapped in IS TRUE (the same test of a column that is never
	// null) so that the planner cannot prove from it the predicate of a partial index of one
	// state: with statistics taken while the queue was empty, such an index looks tiny and the
	// UPDATE would walk every queued or running job, filtering them by id, instead of
	// finding the one row by its key. The batch statements of the heartbeat and the live
	// output keep the plain condition: they join many rows of running jobs, whose number the
	// workers bound, and a join by key could read the whole table instead.
	q.WriteString(" WHERE id = ? AND (state IN (")
	args = append(args, ch.jobID)
	for i, f := range ch.from {
		if i > 0 {
			q.WriteString(", ")
		}
		q.WriteString("?")
		args = append(args, string(f))
	}
	q.WriteString(")) IS TRUE")
	if ch.claim != "" {
		q.WriteString(" AND worker_claim = ?")
		args = append(args, ch.claim)
	}
	for _, c := range ch.where {
		q.WriteString(" AND ")
		q.WriteString(c.sql)
		args = append(args, c.args...)
	}
	q.WriteString(" RETURNING *) SELECT moved.*, ")
	q.WriteString(operationColumns())
	if ch.prompt {
		q.WriteString(", ")
		q.WriteString(promptColumns())
	}
	q.WriteString(" FROM moved LEFT JOIN LATERAL (")
	q.WriteString(registry.LockMovedOperation)
	q.WriteString(") AS op ON true")
	if ch.prompt {
		q.WriteString(" LEFT JOIN sa_entity AS prompt ON prompt.id = moved.prompt_id")
	}
	return q.String(), args
}

// movedJob is a job as a change left it, with its registry row (zero when it has none) locked
// by the same statement, as registry.LockMovedOperation reads it, and its prompt when the change
// asked.
type movedJob struct {
	db.Job
	Op               db.Operation `bun:"embed:op__"`
	OpOrgWebhookRead bool         `bun:"op__org_webhook_read,scanonly"`
	OpOrgWebhookURL  *string      `bun:"op__org_webhook_url,scanonly"`
	Prompt           db.Entity    `bun:"embed:prompt__"`
}

// locked is the registry row of m as the registry's lock reads it.
func (m movedJob) locked() registry.Locked {
	return registry.Locked{Operation: m.Op, OrgWebhookRead: m.OpOrgWebhookRead, OrgWebhookURL: m.OpOrgWebhookURL}
}

// operationColumns lists the registry row's columns as the op__ columns of movedJob.
var operationColumns = sync.OnceValue(func() string {
	return columnsOf[db.Operation]("op", registry.LockedColumns...)
})

// promptColumns lists the prompt's columns as the prompt__ columns of movedJob.
var promptColumns = sync.OnceValue(func() string { return columnsOf[db.Entity]("prompt") })

// columnsOf lists the columns of bun model M, and the extra ones named, read from alias as
// alias__column.
func columnsOf[M any](alias string, extra ...string) string {
	var names []string
	for _, f := range schema.NewTables(pgdialect.New()).Get(reflect.TypeFor[M]()).Fields {
		names = append(names, f.Name)
	}
	cols := make([]string, 0, len(names)+len(extra))
	for _, name := range append(names, extra...) {
		cols = append(cols, alias+"."+name+" AS "+alias+"__"+name)
	}
	return strings.Join(cols, ", ")
}

// apply performs ch in w's transaction and returns the job as written.
func (s *Service) apply(ctx context.Context, w *db.Writes, ch change) (db.Job, error) {
	moved, err := s.move(ctx, w, ch)
	return moved.Job, err
}

// move performs ch in w's transaction and returns the job as written, with its prompt when ch
// asked. The job's UPDATE sees every write w has collected; the writes that follow it are
// left in w.
func (s *Service) move(ctx context.Context, w *db.Writes, ch change) (movedJob, error) {
	if err := checkTransition(ch.to, ch.from...); err != nil {
		return movedJob{}, err
	}
	query, args := ch.statement()
	sawTransition(s, ch, query)
	var moved movedJob
	var err error
	if len(ch.with) > 0 {
		// The rows of with travel in the UPDATE's statement; whatever w held before goes
		// first, so the UPDATE sees it.
		if err = w.Send(ctx); err == nil {
			for _, row := range ch.with {
				w.Insert(row)
			}
			err = w.ScanWith(ctx, &moved, query, args...)
		}
	} else {
		err = w.ScanOne(ctx, &moved, query, args...)
	}
	job := moved.Job
	if err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return movedJob{}, errNoChange
		}
		return movedJob{}, fmt.Errorf("move job %s to %s: %w", ch.jobID, ch.to, err)
	}
	// The registry row, its history entry, the event and whatever the caller adds travel to
	// the database together, after the one read (the registry lock) they depend on.
	opStatus := ""
	if job.OperationID != nil {
		var was string
		if moved.Op.ID != *job.OperationID {
			return movedJob{}, fmt.Errorf("move job %s to %s: operation %s not found", ch.jobID, ch.to, *job.OperationID)
		}
		op, err := registry.WriteOperation(w, moved.locked(), func(op *db.Operation) {
			was = op.Status
			op.Status = operationStatusOf(job, op.Status)
			if ch.to == StateSucceeded {
				op.Result = ch.result
			}
			if job.ErrorKind != nil && ch.to != StateSucceeded {
				op.LastErrorKind, op.LastErrorMessage = job.ErrorKind, job.ErrorMessage
			}
		})
		if err != nil {
			return movedJob{}, err
		}
		if err := s.reg.Settle(ctx, w, was, op); err != nil {
			return movedJob{}, err
		}
		opStatus = op.Status
	}
	if err := publishJob(w, job, opStatus); err != nil {
		return movedJob{}, err
	}
	moved.Job = job
	return moved, nil
}

// JobEvent is the data of a job.state_changed event of the change feed, plus the operation's status.
type JobEvent struct {
	PromptID        uuid.UUID  `json:"prompt_id"`
	JobID           uuid.UUID  `json:"job_id"`
	State           string     `json:"state"`
	Attempt         int        `json:"attempt"`
	ErrorKind       *string    `json:"error_kind"`
	ResponseID      *uuid.UUID `json:"response_id"`
	UpdatedAt       time.Time  `json:"updated_at"`
	OperationID     *uuid.UUID `json:"operation_id,omitempty"`
	OperationStatus string     `json:"operation_status,omitempty"`
	Priority        int        `json:"priority"`
}

// publishJob adds the job's change-feed event to w.
func publishJob(w *db.Writes, job db.Job, opStatus string) error {
	row, err := jobEventRow(job, opStatus)
	if err != nil {
		return err
	}
	w.Insert(row.InsertStatement())
	return nil
}

// jobEventRow is the change-feed row publishJob writes.
func jobEventRow(job db.Job, opStatus string) (*db.Event, error) {
	payload, err := json.Marshal(JobEvent{PromptID: job.PromptID, JobID: job.ID, State: job.State, Attempt: job.Attempt,
		ErrorKind: job.ErrorKind, ResponseID: job.ResponseID, UpdatedAt: job.UpdatedAt.UTC(),
		OperationID: job.OperationID, OperationStatus: opStatus, Priority: job.Priority})
	if err != nil {
		return nil, fmt.Errorf("publish job event: %w", err)
	}
	return feed.Row(feed.Event{Topic: feed.TopicJob, OrgID: job.OrgID, UserID: job.CreatedBy,
		PromptID: &job.PromptID, JobID: &job.ID, OperationID: job.OperationID, Payload: payload}), nil
}

// audit writes one structural audit row.
func audit(ctx context.Context, tx bun.IDB, orgID int64, actorID *int64, actor, action, subjectType, subjectID string, detail any) error {
	row, err := auditEntry(orgID, actorID, actor, action, subjectType, subjectID, detail)
	if err != nil {
		return err
	}
	if _, err := tx.NewInsert().Model(row).Exec(ctx); err != nil {
		return fmt.Errorf("audit %s on %s %s: %w", action, subjectType, subjectID, err)
	}
	return nil
}

// auditEntry is the row audit writes, for a caller that adds it to its Writes.
func auditEntry(orgID int64, actorID *int64, actor, action, subjectType, subjectID string, detail any) (*db.AuditEntry, error) {
	raw, err := json.Marshal(detail)
	if err != nil {
		return nil, fmt.Errorf("audit %s on %s %s: %w", action, subjectType, subjectID, err)
	}
	row := db.AuditEntry{OrgID: orgID, ActorID: actorID, Actor: actor, Action: action, SubjectType: subjectType,
		SubjectID: subjectID, Detail: raw}
	return &row, nil
}

// transitionWatchers holds, per Service, a function told the text of every job UPDATE the
// service's transitions run: the golden-file test of the transition statements registers one.
// watching keeps the lookup off the transition path while nobody watches.
var (
	transitionWatchers sync.Map // *Service -> func(label, query string)
	watching           atomic.Bool
)

// watchTransitions makes every transition of s tell f its label and statement text, until the
// returned function is called.
func watchTransitions(s *Service, f func(label, query string)) (stop func()) {
	transitionWatchers.Store(s, f)
	watching.Store(true)
	return func() { transitionWatchers.Delete(s) }
}

// sawTransition tells s's watcher, if it has one, the statement query that ch runs.
func sawTransition(s *Service, ch change, query string) {
	if !watching.Load() {
		return
	}
	if f, ok := transitionWatchers.Load(s); ok {
		f.(func(string, string))(ch.label(), query)
	}
}

// label names the transition ch makes: its states, and whether it needs the worker's claim and
// reads the prompt.
func (ch change) label() string {
	from := make([]string, len(ch.from))
	for i, f := range ch.from {
		from[i] = string(f)
	}
	l := strings.Join(from, ", ") + " -> " + string(ch.to)
	if ch.claim != "" {
		l += " (under the claim)"
	}
	if ch.prompt {
		l += " (with the prompt)"
	}
	return l
}
