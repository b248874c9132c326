package jobs

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"
	"github.com/uptrace/bun"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"asterion/db"
	"asterion/jobs/admit"
	"asterion/jobs/deferred"
	"asterion/jobs/eta"
	"asterion/jobs/provider"
	"asterion/jobs/tracing"
)

// Limits of a submitted prompt (docs/api.md).
const (
	MaxPromptChars    = admit.MaxPromptChars
	DefaultPriority   = 50
	DefaultMaxAttempt = 3
	MaxMaxAttempts    = 10
	// DefaultRetryAfterSeconds is the polling hint of a prompt operation.
	DefaultRetryAfterSeconds = 2
)

// ExecutionOptions are the recognised execution options of a prompt.
type ExecutionOptions struct {
	Model          string `json:"model,omitempty"`
	PreferProvider string `json:"prefer_provider,omitempty"`
	Depth          *int   `json:"depth,omitempty"`
	RouterModel    string `json:"router_model,omitempty"`
	// MaxTokens bounds the answer's output tokens; Temperature is the sampling temperature;
	// ResponseFormat is passed to the provider as OpenAI defines it.
	MaxTokens      *int            `json:"max_tokens,omitempty"`
	Temperature    *float64        `json:"temperature,omitempty"`
	ResponseFormat json.RawMessage `json:"response_format,omitempty"`
	// Echo is what the door that took the request keeps with its job to answer for it later as
	// it was asked (the OpenAI front door's metadata, for one); it is stored with the job in
	// the submit's transaction, and the jobs package neither reads it nor passes it on.
	Echo json.RawMessage `json:"echo,omitempty"`
}

// SubmitRequest asks for a prompt to be run.
type SubmitRequest struct {
	Viewer Viewer
	// Prompt is the prompt's text; Messages, given instead, is the prompt as a conversation,
	// whose last user message is its text. Exactly one of them is set.
	Prompt         string
	Messages       []Message
	ParentID       *uuid.UUID
	Priority       *int
	MaxAttempts    *int
	Options        ExecutionOptions
	IdempotencyKey string
	// Door is the way the request came in, for admission ("": the submit door).
	Door admit.Door
	// ScheduledFor, when set, is the earliest time the prompt may run (at most MaxScheduleAhead
	// ahead); the job stays queued until then.
	ScheduledFor *time.Time
	// hash is the request's Idempotency-Key fingerprint (fingerprint), made as it came in.
	hash string
	// keyEpoch tells apart the uses of a key that expired and was taken over again (it is ""
	// for a key's first use), so that each use derives its own operation id.
	keyEpoch string
	// trace is the submit's span, the parent of its job's work (invalid: not traced).
	trace trace.SpanContext
	// adm is what admission knows of the request; validate makes it and Check fills it in.
	adm admit.Request
	// promptID and jobID, when set, are the ids a shared transaction chose for this submit
	// (see recoverSubmits): written again, its rows collide with those of that transaction
	// if it committed after all.
	promptID, jobID uuid.UUID
	// hold, when set, names the budget hold of the shared transaction that admitted this
	// submit, given back when that transaction fails (see recoverSubmits).
	hold uuid.UUID
}

// Submitted is the answer to an accepted prompt.
type Submitted struct {
	PromptID  uuid.UUID
	JobID     uuid.UUID
	State     State
	Operation deferred.Handle
	// Replayed is true when an Idempotency-Key returned an earlier submission.
	Replayed bool
	// ETA is the estimate of when the job starts, made as it was accepted; nil for a replayed
	// submission (its job may have moved on) or when the estimate could not be made.
	ETA *eta.ETA
}

// validate checks every field rule of the request and the admission's rules on its fields
// (text, model, schedule), normalises defaults, and makes the admission request the
// transaction reserves.
func (r *SubmitRequest) validate(door *admit.Admission) error {
	if r.Door == "" {
		r.Door = admit.DoorSubmit
	}
	r.adm = admit.Request{Door: r.Door, OrgID: r.Viewer.OrgID, UserID: r.Viewer.UserID, Text: r.Prompt,
		Model: r.Options.Model, ScheduledFor: r.ScheduledFor}
	if r.Options.MaxTokens != nil {
		r.adm.MaxTokens = *r.Options.MaxTokens
	}
	pre := map[string]string{}
	if r.Messages != nil {
		if r.Prompt != "" {
			pre["prompt"] = "give exactly one of prompt and messages"
		}
		messageProblems(r.Messages, r.Door, pre)
		if i := lastUser(r.Messages); i >= 0 {
			r.Prompt = r.Messages[i].Content
			r.adm.Text, r.adm.TextField = r.Prompt, fmt.Sprintf("messages[%d].content", i)
			r.adm.Input = conversationText(r.Messages)
		} else {
			// A conversation without a user message has no text: its problem is already
			// recorded against the messages, so the text rules are given a stand-in to pass.
			r.adm.Text, r.adm.TextField = "-", "messages"
		}
	}
	outputOptionProblems(r.Options, pre)
	fields := door.Fields(&r.adm)
	for k, v := range pre {
		fields[k] = v
	}
	r.Prompt = strings.TrimSpace(r.Prompt)
	if r.Priority == nil {
		p := DefaultPriority
		r.Priority = &p
	} else if *r.Priority < 0 || *r.Priority > 100 {
		fields["priority"] = "must be between 0 and 100"
	}
	if r.MaxAttempts == nil {
		m := DefaultMaxAttempt
		r.MaxAttempts = &m
	} else if *r.MaxAttempts < 1 || *r.MaxAttempts > MaxMaxAttempts {
		fields["max_attempts"] = fmt.Sprintf("must be between 1 and %d", MaxMaxAttempts)
	}
	o := r.Options
	for name, v := range map[string]string{"prefer_provider": o.PreferProvider, "router_model": o.RouterModel} {
		if len(v) > 200 {
			fields["options."+name] = "must be at most 200 characters"
		} else if msg := admit.ControlCharProblem(v); msg != "" {
			fields["options."+name] = msg
		}
	}
	if o.Depth != nil && (*o.Depth < 0 || *o.Depth > 64) {
		fields["options.depth"] = "must be between 0 and 64"
	}
	if r.IdempotencyKey != "" {
		if msg := checkIdempotencyKey(r.IdempotencyKey); msg != "" {
			fields["Idempotency-Key"] = msg
		}
	}
	if len(fields) > 0 {
		return &ValidationError{Fields: fields}
	}
	r.adm.Text = r.Prompt
	return nil
}

// ControlCharProblem says what is wrong with text holding control characters, or returns ""
// (admit.ControlCharProblem: every write path answers the same 422).
func ControlCharProblem(text string) string { return admit.ControlCharProblem(text) }

func checkIdempotencyKey(k string) string {
	if len(k) > 255 {
		return "must be 1..255 characters"
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x21 || k[i] > 0x7e {
			return "must be visible ASCII characters only"
		}
	}
	return ""
}

// Submit accepts a prompt: in one transaction the prompt entity, the queued job, the registry
// row (pending) and the River job. A client mistake returns a ValidationError and writes
// nothing.
//
// Submits without an Idempotency-Key may share their transaction with concurrent ones (see
// intake.Group); with a key, the key's row decides what happens, in a transaction of its own.
func (s *Service) Submit(ctx context.Context, req SubmitRequest) (out Submitted, err error) {
	if s.tracer != nil {
		var span trace.Span
		ctx, span = s.tracer.Start(ctx, "jobs.submit")
		req.trace = span.SpanContext()
		defer func() { endSubmitSpan(span, out, err) }()
	}
	if req.IdempotencyKey != "" && checkIdempotencyKey(req.IdempotencyKey) == "" {
		// A replay is answered before the rules that may refuse the same request later (its
		// scheduled time has come, the user's submit rate is spent): it asks for nothing new.
		req.hash = req.fingerprint(s.door)
		if prior, found, err := replayOf(ctx, s.db, &req); err != nil || found {
			return prior, err
		}
	}
	if err := req.validate(s.door); err != nil {
		return Submitted{}, err
	}
	if err := s.door.Check(ctx, &req.adm); err != nil {
		return Submitted{}, err
	}
	req.Options.Model, req.ScheduledFor = req.adm.Model, req.adm.ScheduledFor
	defer s.intake.Enter()()
	if req.IdempotencyKey == "" {
		out, err = s.submits.Do(ctx, req)
	} else {
		out, err = s.submitOne(ctx, req)
	}
	if err == nil && !out.Replayed {
		// The job is committed whatever the estimate does: one that fails leaves the handle to
		// be placed by its own read.
		if est, eerr := s.eta.Arrival(ctx, RiverPriority(*req.Priority), req.Viewer.OrgID, req.ScheduledFor); eerr == nil {
			out.ETA = &est
		}
	}
	return out, err
}

// submitOne submits a validated request in a transaction of its own.
func (s *Service) submitOne(ctx context.Context, req SubmitRequest) (Submitted, error) {
	var out Submitted
	err := s.inTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		if req.IdempotencyKey != "" {
			// A replay answers with its original handle even once the budget is spent or the
			// quota full: the key is looked up before the reservation.
			prior, found, err := claimIdempotencyKey(ctx, tx, &req)
			if err != nil || found {
				out = prior
				return err
			}
		}
		grants, err := s.door.Reserve(ctx, tx, []*admit.Request{&req.adm})
		if err != nil {
			return err
		}
		if grants[0].Err != nil {
			return grants[0].Err
		}
		var correlation uuid.UUID
		promptID := req.promptID
		if promptID == uuid.Nil {
			promptID = uuid.New()
		}
		if req.ParentID != nil {
			var parent db.Entity
			err := tx.NewSelect().Model(&parent).Where("id = ?", *req.ParentID).Scan(ctx)
			if errors.Is(err, sql.ErrNoRows) || (err == nil && !req.Viewer.Sees(parent.OrgID, parent.CreatedBy)) {
				return &ValidationError{Fields: map[string]string{"parent_id": "no such entity visible to you"}}
			}
			if err != nil {
				return fmt.Errorf("find parent %s: %w", *req.ParentID, err)
			}
			correlation = parent.CorrelationID
		} else {
			correlation = promptID
		}
		// Everything after the River insert reaches the database in one round trip: one
		// statement, whose foreign keys are checked at its end, so the prompt may follow the
		// job that runs it.
		w := db.NewWrites(tx)
		prompt, nj := req.accepted(promptID, correlation)
		nj.ticket = grants[0].Ticket
		job, handle, err := s.enqueueTx(ctx, w, nj)
		if err != nil {
			return err
		}
		w.Insert(prompt.InsertStatement())
		if req.IdempotencyKey != "" {
			w.UpdateSQL("sa_idempotency", "UPDATE sa_idempotency SET prompt_id = ?, job_id = ? WHERE user_id = ? AND key = ?",
				promptID, job.ID, req.Viewer.UserID, req.IdempotencyKey)
		}
		if err := w.Send(ctx); err != nil {
			return fmt.Errorf("submit prompt: %w", err)
		}
		out = Submitted{PromptID: promptID, JobID: job.ID, State: StateQueued, Operation: handle}
		return nil
	})
	if err != nil {
		return Submitted{}, err
	}
	return out, nil
}

// accepted is the prompt entity of a validated request and the job that will run it.
func (r *SubmitRequest) accepted(promptID, correlation uuid.UUID) (db.Entity, newJob) {
	opts, _ := json.Marshal(r.Options)
	var msgs json.RawMessage
	tokenText := r.Prompt
	if r.Messages != nil {
		msgs, _ = json.Marshal(r.Messages)
		tokenText = conversationText(r.Messages)
	}
	return db.Entity{ID: promptID, Kind: "prompt", Body: r.Prompt, Messages: msgs, CorrelationID: correlation,
			ParentID: r.ParentID, CausationID: r.ParentID, TruthClass: "authored", StateClass: "open",
			OrgID: r.Viewer.OrgID, CreatedBy: r.Viewer.UserID},
		newJob{promptID: promptID, priority: *r.Priority, maxAttempts: *r.MaxAttempts, options: opts,
			orgID: r.Viewer.OrgID, userID: r.Viewer.UserID, correlation: correlation, idempotencyKey: r.IdempotencyKey + r.keyEpoch,
			model: r.Options.Model, tokens: provider.EstimateTokens(tokenText), scheduledFor: r.ScheduledFor,
			trace: r.trace, jobID: r.jobID, door: r.Door}
}

// newJob describes a job to enqueue.
type newJob struct {
	promptID uuid.UUID
	// jobID is the job's id when the caller chose it (uuid.Nil: a new one).
	jobID          uuid.UUID
	priority       int
	maxAttempts    int
	options        json.RawMessage
	orgID, userID  int64
	correlation    uuid.UUID
	supersedes     *uuid.UUID
	idempotencyKey string
	// model and tokens ride on the vehicle, so that a worker can ask the provider governor for
	// a slot before it reads anything: the model asked for ("" for the default) and an
	// estimate of the prompt's tokens.
	model  string
	tokens int
	// scheduledFor is when a scheduled prompt may first run.
	scheduledFor *time.Time
	// trace is the span the job's work continues (invalid: none).
	trace trace.SpanContext
	// ticket is the job's admission: enqueueTx refuses a job without one.
	ticket admit.Ticket
	// door is the way the job came in; the front door's is recorded with the job.
	door admit.Door
}

// errNotAdmitted refuses to queue a job that did not pass admission.
var errNotAdmitted = errors.New("the job did not pass admission")

// PromptArgs are the River job arguments: the vehicle carries only the sa_job id (and its
// priority, so a worker with a priority ceiling can decline without a query).
type PromptArgs struct {
	JobID    uuid.UUID `json:"job_id"`
	Priority int       `json:"priority"`
	// Model is the model the prompt asks for ("" for the provider's default) and Tokens an
	// estimate of its input tokens, for the provider governor.
	Model  string `json:"model,omitempty"`
	Tokens int    `json:"tokens,omitempty"`
	// OrgID is the job's org, for its cap of running jobs (0 on vehicles made before it
	// existed: no cap is checked).
	OrgID int64 `json:"org_id,omitempty"`
}

// Kind is the River job kind.
func (PromptArgs) Kind() string { return KindPromptExecute }

// QueuePrompts is the River queue of prompt jobs.
const QueuePrompts = "prompts"

// vehicleMaxAttempts bounds River's own retries, which happen only after infrastructure errors
// (a lost database connection while finalising); job retries are snoozes that River does not
// count (see Worker).
const vehicleMaxAttempts = 25

// enqueueTx writes a queued job with its registry row and its River vehicle in w's
// transaction. The River insert runs at once, after the writes w held (its id goes on the job,
// its created_at is the transaction's clock); the other writes are left in w.
func (s *Service) enqueueTx(ctx context.Context, w *db.Writes, nj newJob) (db.Job, deferred.Handle, error) {
	if !nj.ticket.Valid() {
		return db.Job{}, deferred.Handle{}, fmt.Errorf("queue prompt %s: %w", nj.promptID, errNotAdmitted)
	}
	jobID := nj.jobID
	if jobID == uuid.Nil {
		jobID = uuid.New()
	}
	if !nj.trace.IsValid() {
		// A job queued outside Submit (a retry, a chain step) continues the caller's trace.
		nj.trace = trace.SpanContextFromContext(ctx)
	}
	v := nj.vehicle(jobID)
	tx, err := w.Tx(ctx)
	if err != nil {
		return db.Job{}, deferred.Handle{}, fmt.Errorf("insert job: %w", err)
	}
	res, err := s.insert.InsertTx(ctx, tx.Tx, v.Args, v.InsertOpts)
	if err != nil {
		return db.Job{}, deferred.Handle{}, fmt.Errorf("enqueue river job: %w", err)
	}
	rows, err := s.queuedRowsOf(nj, jobID, res.Job.ID, res.Job.CreatedAt)
	if err != nil {
		return db.Job{}, deferred.Handle{}, err
	}
	for _, s := range []db.Statement{rows.op.InsertStatement(), rows.history.InsertStatement(), rows.job.InsertStatement(),
		rows.event.InsertStatement()} {
		w.Insert(s)
	}
	if rows.door != nil {
		w.Insert(*rows.door)
	}
	return rows.job, rows.handle, nil
}

// vehicle is the River job that carries the job jobID of nj to a worker.
func (nj newJob) vehicle(jobID uuid.UUID) river.InsertManyParams {
	opts := &river.InsertOpts{Queue: QueuePrompts, Priority: RiverPriority(nj.priority), MaxAttempts: vehicleMaxAttempts}
	if nj.scheduledFor != nil {
		// River's scheduled jobs carry a scheduled prompt: no worker fetches it before then.
		opts.ScheduledAt = *nj.scheduledFor
	}
	opts.Metadata = tracing.Metadata(nj.trace)
	return river.InsertManyParams{Args: PromptArgs{JobID: jobID, Priority: nj.priority, Model: nj.model, Tokens: nj.tokens,
		OrgID: nj.orgID},
		InsertOpts: opts}
}

// queuedRows are the rows that make a job queued: its registry row (pending) with the first
// history entry, the job, and its change-feed event; handle is the operation's handle.
type queuedRows struct {
	op      db.Operation
	history db.OperationHistory
	job     db.Job
	event   *db.Event
	handle  deferred.Handle
	// door records the door of a job of the front door (nil for any other).
	door *db.Statement
}

// queuedRowsOf builds the queued rows of nj as job jobID, carried by River job riverID, which
// River dated now: the start of the transaction, the clock every timestamp written in it uses.
func (s *Service) queuedRowsOf(nj newJob, jobID uuid.UUID, riverID int64, now time.Time) (queuedRows, error) {
	subject := map[string]string{"prompt_id": nj.promptID.String(), "job_id": jobID.String()}
	key := ""
	if nj.idempotencyKey != "" {
		key = fmt.Sprintf("%d:%s", nj.userID, nj.idempotencyKey)
	}
	handle, err := deferred.NewHandle(deferred.HandleRequest{Kind: KindPromptExecute, Owner: OwnerPromptRuntime,
		Subject: subject, IdempotencyKey: key, CorrelationID: nj.correlation.String(),
		RetryAfterSeconds: DefaultRetryAfterSeconds}, s.cfg.Policy, now)
	if err != nil {
		return queuedRows{}, fmt.Errorf("build operation handle: %w", err)
	}
	scheduled := now
	if nj.scheduledFor != nil && nj.scheduledFor.After(now) {
		// The operation's time to live counts from when the prompt may run.
		scheduled = deferred.NormalizeTime(*nj.scheduledFor)
		handle.ExpiresAt = deferred.NormalizeTime(handle.ExpiresAt.Add(scheduled.Sub(now)))
	}
	r := queuedRows{handle: handle}
	r.job = db.Job{ID: jobID, PromptID: nj.promptID, State: string(StateQueued), Priority: nj.priority, Attempt: 1,
		MaxAttempts: nj.maxAttempts, ExecutionOptions: nj.options, Supersedes: nj.supersedes, OrgID: nj.orgID,
		CreatedBy: nj.userID, RiverJobID: &riverID, OperationID: &handle.OperationID, CreatedAt: now, UpdatedAt: now,
		ScheduledAt: scheduled, BudgetTokens: nj.ticket.Tokens()}
	if nj.scheduledFor != nil {
		r.job.ScheduledFor = &scheduled
	}
	if r.op, r.history, err = s.reg.Accepted(handle, nj.orgID, nj.userID, nj.correlation); err != nil {
		return queuedRows{}, fmt.Errorf("register operation %s: %w", handle.OperationID, err)
	}
	if r.event, err = jobEventRow(r.job, string(deferred.StatusPending)); err != nil {
		return queuedRows{}, err
	}
	if nj.door == admit.DoorFrontDoor {
		st := db.JobDoorStatement(jobID, string(nj.door))
		r.door = &st
	}
	return r, nil
}

// txNow is the transaction's clock, so every timestamp written in it agrees.
func txNow(ctx context.Context, tx bun.IDB) (t time.Time, err error) {
	err = tx.QueryRowContext(ctx, txNowSQL).Scan(&t)
	return t, err
}

// endSubmitSpan ends the span of a submit with what became of it. A client mistake is not an
// error of the service.
func endSubmitSpan(span trace.Span, out Submitted, err error) {
	if err == nil {
		span.SetAttributes(attribute.String("asterion.prompt_id", out.PromptID.String()),
			attribute.String("asterion.job_id", out.JobID.String()), attribute.Bool("asterion.replayed", out.Replayed))
	} else if ve := (*ValidationError)(nil); !errors.As(err, &ve) && !errors.Is(err, ErrIdempotencyConflict) {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	} else {
		span.SetAttributes(attribute.String("error.type", "client"))
	}
	span.End()
}
