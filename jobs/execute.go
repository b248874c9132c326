package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"asterion/db"
	"asterion/jobs/admit"
	"asterion/jobs/fairshare"
	"asterion/jobs/intake"
	"asterion/jobs/output"
	"asterion/jobs/provider"
	"asterion/jobs/registry"
	"asterion/jobs/retrypolicy"
)

// claimOutcome says what a worker should do with a vehicle it fetched.
type claimOutcome int

const (
	// claimed: the job is now running under the returned claim.
	claimed claimOutcome = iota
	// claimDrop: nothing to run (terminal, cancelled, or a stale vehicle); end the vehicle.
	claimDrop
	// claimWait: a previous execution may still be alive; look again after the delay.
	claimWait
)

// claimResult is the answer of claim.
type claimResult struct {
	outcome claimOutcome
	job     db.Job
	// prompt is the job's prompt when the claim read it; nil when runClaimed must.
	prompt *db.Entity
	claim  string
	wait   time.Duration
	reason string
}

// newClaim returns a claim token unique to one execution: the worker process id and a random
// suffix, so two executions in one process never share a claim.
func newClaim(workerID string) string {
	return workerID + "/" + uuid.NewString()[:18]
}

// claim moves the job of a fetched vehicle to running under a fresh claim: only the claim starts a job. A
// vehicle that is no longer the job's (the job was reclaimed onto a new one) is dropped. A job
// still running under an older claim means that execution died (River re-fetched its vehicle
// after a rescue): once its heartbeat is stale it is reclaimed in place.
func (s *Service) claim(ctx context.Context, jobID uuid.UUID, orgID int64, riverJobID int64, workerID string) (claimResult, error) {
	// The common case, a queued job on its own vehicle, is one conditional UPDATE; anything
	// else (a stale vehicle, a job already running or settled) takes the locked look below.
	c := newClaim(workerID)
	moved, err := s.claimHeld(ctx, jobID, orgID, riverJobID, c)
	switch {
	case err == nil:
		return claimResult{outcome: claimed, job: moved.Job, prompt: &moved.Prompt, claim: c}, nil
	case errors.Is(err, fairshare.ErrAtCap):
		s.calls.markWaiting(ctx, jobID, WaitingOrgShare)
		return claimResult{outcome: claimWait, wait: s.share.CapRecheck(), reason: "the org runs its most jobs at once"}, nil
	case errors.As(err, new(*operationExpiredError)):
		return expireUnclaimed(ctx, s.reg, err)
	case !errors.Is(err, errNoChange) && !errors.Is(err, admit.ErrBudgetWait):
		return claimResult{}, err
	}
	// The locked look decides a job whose budget had no room as well: it checks again under the
	// running counter's lock and says why the job waits.
	var res claimResult
	err = s.inTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		var job db.Job
		if err := tx.NewSelect().Model(&job).Where("id = ?", jobID).For("UPDATE").Scan(ctx); err != nil {
			return fmt.Errorf("lock job %s: %w", jobID, err)
		}
		if job.RiverJobID == nil || *job.RiverJobID != riverJobID {
			res = claimResult{outcome: claimDrop, reason: "stale vehicle: the job moved to another river job"}
			return nil
		}
		switch State(job.State) {
		case StateQueued:
		case StateRunning:
			now, err := txNow(ctx, tx)
			if err != nil {
				return err
			}
			age := s.cfg.StaleAfter
			if job.RunningHeartbeatAt != nil {
				age = now.Sub(*job.RunningHeartbeatAt)
			}
			if age < s.cfg.StaleAfter && !s.beats.Orphaned(job, workerID) {
				res = claimResult{outcome: claimWait, wait: s.cfg.StaleAfter - age, reason: "previous execution may be alive"}
				return nil
			}
			requeued, err := s.reclaimTx(ctx, tx, job, now, false)
			if err != nil {
				return err
			}
			if State(requeued.State) != StateQueued {
				res = claimResult{outcome: claimDrop, job: requeued, reason: "previous execution died and the job is stuck"}
				return nil
			}
			job = requeued
		default:
			res = claimResult{outcome: claimDrop, job: job, reason: "job is " + job.State}
			return nil
		}
		// A paused org's job stays queued (the claim's condition would refuse it anyway).
		paused, err := orgPaused(ctx, tx, job.OrgID)
		if err != nil {
			return err
		}
		if paused {
			if _, err := tx.Tx.ExecContext(ctx, markWaitingSQL, job.ID, WaitingOrgPaused); err != nil {
				return fmt.Errorf("say job %s waits for its paused org: %w", job.ID, err)
			}
			res = claimResult{outcome: claimWait, wait: s.share.PausedRecheck(), reason: "the org is paused"}
			return nil
		}
		if err := s.door.Start(ctx, tx, job.OrgID); errors.Is(err, admit.ErrBudgetWait) {
			if _, err := tx.Tx.ExecContext(ctx, markWaitingSQL, job.ID, WaitingBudget); err != nil {
				return fmt.Errorf("say job %s waits for its org's budget: %w", job.ID, err)
			}
			res = budgetWaitOf(err)
			return nil
		} else if err != nil {
			return err
		}
		w := db.NewWrites(tx)
		moved, err := s.move(ctx, w, claimChange(job.ID, riverJobID, c))
		if err != nil {
			return err
		}
		if err := expiredAtClaim(moved); err != nil {
			return err
		}
		claimedJob := moved.Job
		relaxCommit(w)
		if err := w.Send(ctx); err != nil {
			return err
		}
		res = claimResult{outcome: claimed, job: claimedJob, claim: c}
		return nil
	})
	if errors.As(err, new(*operationExpiredError)) {
		return expireUnclaimed(ctx, s.reg, err)
	}
	return res, err
}

// operationExpiredError is a claim refused because the job's operation expired before the
// claim: its transaction is rolled back, and the job is not started.
type operationExpiredError struct {
	JobID, OperationID uuid.UUID
}

func (e *operationExpiredError) Error() string {
	return fmt.Sprintf("job %s: its operation %s expired before the job started", e.JobID, e.OperationID)
}

// expiredAtClaim returns an *operationExpiredError when the job a claim just moved to running
// belongs to an operation whose expiry had passed at the claim's time (the poller's rule:
// expired once now is not before expires_at). The poller visits operations in rounds, so a job
// whose operation expired while it waited in the queue could otherwise start after its end.
func expiredAtClaim(moved movedJob) error {
	job := moved.Job
	if job.OperationID == nil || moved.Op.ID != *job.OperationID || job.ClaimedAt == nil {
		return nil
	}
	if job.ClaimedAt.Before(moved.Op.ExpiresAt) {
		return nil
	}
	return &operationExpiredError{JobID: job.ID, OperationID: *job.OperationID}
}

// expireUnclaimed ends, through the registry's expiry, the operation of a job whose claim was
// refused because the operation expired (err an *operationExpiredError), and drops the vehicle.
// A registry that could not expire it leaves the vehicle to River's retry, whose claim decides
// again.
func expireUnclaimed(ctx context.Context, reg *registry.Registry, err error) (claimResult, error) {
	var expired *operationExpiredError
	errors.As(err, &expired)
	terminal, eerr := reg.ExpireDue(ctx, expired.OperationID)
	if eerr != nil {
		return claimResult{}, fmt.Errorf("claim job %s: %w", expired.JobID, eerr)
	}
	if !terminal {
		return claimResult{}, fmt.Errorf("claim job %s: operation %s expired but is not terminal", expired.JobID, expired.OperationID)
	}
	return claimResult{outcome: claimDrop, reason: "the job's operation expired before it started"}, nil
}

// claimHeld holds the start's running reservation against the org's budget, then claims the
// queued job (claimQueued), giving the hold back when the claim did not happen. It returns an
// error matching admit.ErrBudgetWait when the budget has no room.
func (s *Service) claimHeld(ctx context.Context, jobID uuid.UUID, orgID int64, riverJobID int64, claim string) (movedJob, error) {
	hold, err := s.door.HoldStart(ctx, jobID, orgID)
	if err != nil {
		return movedJob{}, err
	}
	moved, err := s.claimQueued(ctx, jobID, orgID, riverJobID, claim, hold.Held())
	if err != nil {
		if gerr := s.door.GiveBackStart(context.WithoutCancel(ctx), hold); gerr != nil {
			s.log.Warn("a start hold was not given back; a later start of its org sweeps it", "job_id", jobID, "err", gerr)
		}
	}
	return moved, err
}

// claimQueued moves a queued job still carried by riverJobID to running under claim, in one
// transaction, and reads its prompt in the same statement; errNoChange means the job is in any
// other situation, or its org's budget has no room for one more running job (the locked claim
// then says it waits). Unless the start is held, a budgeted org's claim checks the budget under
// the running counter's lock in that one statement.
func (s *Service) claimQueued(ctx context.Context, jobID uuid.UUID, orgID int64, riverJobID int64, claim string, held bool) (movedJob, error) {
	var moved movedJob
	err := s.inTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		if err := s.share.UnderRunningCap(ctx, tx, orgID); err != nil {
			return err
		}
		w := db.NewWrites(tx)
		ch := claimChange(jobID, riverJobID, claim)
		if !held {
			ch.where = append(ch.where, is(admit.StartRoomSQL))
		}
		ch.prompt = true
		var err error
		if moved, err = s.move(ctx, w, ch); err != nil {
			return err
		}
		if err := expiredAtClaim(moved); err != nil {
			return err
		}
		relaxCommit(w)
		return w.Send(ctx)
	})
	return moved, err
}

// relaxCommit adds to w the setting of a transaction whose commit need not wait for the WAL
// to reach the disk: a claim. It is added after the claim's UPDATE, whose read would otherwise
// send it first in a round trip of its own, and travels with the claim's last writes. Losing
// a claim in a database crash is the same as it never happening: the job is queued again (a
// watcher that saw it running sees it queued, then running again), the worker's result is
// dropped for lack of the claim, and the job runs again, as it already does after a
// crashed execution. Acceptance and every terminal state stay durable.
func relaxCommit(w *db.Writes) {
	w.SetLocal("synchronous_commit", "off")
}

// claimChange is the queued → running change of a claim.
func claimChange(jobID uuid.UUID, riverJobID int64, claim string) change {
	return change{jobID: jobID, from: []State{StateQueued}, to: StateRunning,
		set: []clause{is("worker_claim = ?", claim), is("claimed_at = now()"), is("started_at = now()"),
			is("running_heartbeat_at = now()"), is("finished_at = NULL"), is("waiting_for = NULL"),
			is("progress_chunks = 0"), is("progress_tokens = 0")},
		where: []clause{is("river_job_id = ?", riverJobID), is(notPausedSQL)}}
}

// orgPaused says whether an operator paused org's work.
func orgPaused(ctx context.Context, tx bun.Tx, org int64) (bool, error) {
	var paused bool
	err := tx.Tx.QueryRowContext(ctx, orgPausedSQL, org).Scan(&paused)
	if err != nil {
		return false, fmt.Errorf("read whether org %d is paused: %w", org, err)
	}
	return paused, nil
}

// outcome is how an execution ended, for the River worker to translate.
type outcome struct {
	// state is the job's state after finalising ("" when the result was dropped).
	state State
	// retryIn is the backoff when the job was re-queued.
	retryIn time.Duration
	// dropped is true when the job was no longer ours: the result was discarded.
	dropped bool
	// handedBack is true when a graceful stop cut the run and the job rides a new vehicle.
	handedBack bool
	err        error
}

// runClaimed runs the provider for a claimed job while heartbeating, then finalises under
// the claim. prompt is the job's prompt when the claim read it, nil otherwise.
func (s *Service) runClaimed(ctx context.Context, job db.Job, claim string, prompt *db.Entity) outcome {
	if prompt == nil || prompt.ID != job.PromptID {
		prompt = new(db.Entity)
		if err := db.ScanOne(ctx, s.db, prompt, "SELECT * FROM sa_entity WHERE id = ?", job.PromptID); err != nil {
			return outcome{err: fmt.Errorf("load prompt %s: %w", job.PromptID, err)}
		}
	}
	var opts ExecutionOptions
	_ = json.Unmarshal(job.ExecutionOptions, &opts)
	callCtx, cancelCall := context.WithCancelCause(ctx)
	defer cancelCall(nil)
	var out *output.Stream
	var progress func() output.Progress
	if s.cfg.Output != nil {
		out = s.cfg.Output.Open(output.Ref{JobID: job.ID, Attempt: job.Attempt, Claim: claim})
		progress = out.Progress
	}
	removeBeat := s.beats.Add(job.ID, claim, progress, func() { cancelCall(errClaimLost) })
	// A cancelled execution must not prove liveness any more, even while its provider call
	// has yet to return.
	stopBeatOnCancel := context.AfterFunc(callCtx, removeBeat)
	defer stopBeatOnCancel()
	started := time.Now()
	depth := 0
	if opts.Depth != nil {
		depth = *opts.Depth
	}
	req := provider.Request{PromptID: job.PromptID.String(), JobID: job.ID.String(),
		Attempt: job.Attempt, Text: prompt.Body, Options: opts.provider(depth)}
	if msgs, merr := PromptMessages(prompt.Messages); merr != nil {
		s.log.Warn("a prompt's messages are unreadable; it runs on its text alone", "prompt_id", job.PromptID, "err", merr)
	} else {
		req.Messages = providerMessages(msgs)
	}
	if out != nil {
		req.Output = out.Write
	}
	resp, err := s.cfg.Provider.Complete(callCtx, req)
	took := time.Since(started)
	if err != nil && cutByShutdown(ctx) {
		// The process's shutdown grace ran out: the run is handed back (finishFailure).
		err = fmt.Errorf("%w: %w", errShutdown, err)
	}
	removeBeat()
	cancelCall(nil)
	// Finalising must happen even when the worker's context has just been cancelled.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	// What the provider said of its limits reaches every process first: a 429 pauses the
	// model before anything else happens.
	s.calls.observeProvider(fctx, s.calls.modelOf(opts.Model), provider.EstimateTokens(prompt.Body), resp, err)
	s.calls.recordAttempt(fctx, job, opts.Model, resp, err)
	if out != nil {
		// The output is stored before the job settles: a chunk is kept only while the job
		// still runs this execution's claim and attempt.
		if cerr := out.Close(fctx); cerr != nil {
			s.log.Warn("the end of a job's live output was not stored", "job_id", job.ID, "err", cerr)
		}
	}
	defer s.intake.Transaction(fctx, intake.Finish)()
	var o outcome
	if err == nil {
		o = s.finishSuccess(fctx, job, claim, *prompt, resp, took)
	} else {
		o = s.finishFailure(fctx, job, claim, err)
	}
	logSettled(s.log, job, o, err, time.Since(started))
	return o
}

// logSettled writes one info line for a job this execution ended (succeeded or failed), with
// its ids, attempt, error kind and how long the attempt took; a retry is a debug line.
func logSettled(log *slog.Logger, job db.Job, o outcome, callErr error, took time.Duration) {
	if o.err != nil || o.dropped {
		return
	}
	kind := ""
	if callErr != nil {
		kind = string(provider.Classify(callErr).Kind)
	}
	attrs := []any{"job_id", job.ID, "prompt_id", job.PromptID, "operation_id", job.OperationID, "org_id", job.OrgID,
		"state", o.state, "attempt", job.Attempt, "error_kind", kind, "duration", took.Round(time.Millisecond)}
	if o.state == StateQueued {
		log.Debug("job attempt failed; retrying", append(attrs, "retry_in", o.retryIn)...)
		return
	}
	log.Info("job "+string(o.state), attrs...)
}

var errClaimLost = errors.New("claim lost: the job was cancelled or reclaimed")

// responseID derives the response entity id from (prompt_id, adapter_request_id) when the
// provider gives a request id, so a duplicate write of one provider answer collides. The
// job is part of the key: a retry of the prompt is another job with an answer of its own, and
// a provider that repeats its ids (some OpenAI-compatible servers answer every call with one)
// must not make that answer look like a duplicate.
func responseID(promptID, jobID uuid.UUID, requestID string) uuid.UUID {
	if requestID == "" {
		return uuid.New()
	}
	return uuid.NewSHA1(promptID, []byte("adapter-request:"+jobID.String()+":"+requestID))
}

// finishSuccess writes the response entity, the flows-to edge, the ledger and audit rows and
// the succeeded job in one transaction, only while the job is still running under claim.
func (s *Service) finishSuccess(ctx context.Context, job db.Job, claim string, prompt db.Entity, resp provider.Response, took time.Duration) outcome {
	var final db.Job
	err := s.inTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		rid := responseID(job.PromptID, job.ID, resp.RequestID)
		refs, _ := json.Marshal([]map[string]string{{"provider": resp.Provider, "model": resp.Model, "request_id": resp.RequestID, "job_id": job.ID.String()}})
		// The response rows travel in the same statement as the job's UPDATE (which references
		// the response); a second write of one provider answer fails on the response's primary
		// key, and the whole transaction with it.
		response := db.Entity{ID: rid, Kind: "response", Body: resp.Text, CorrelationID: prompt.CorrelationID,
			ParentID: &prompt.ID, CausationID: &job.ID, SourceRefs: refs, TruthClass: "generated", StateClass: "settled",
			OrgID: job.OrgID, CreatedBy: job.CreatedBy}
		edge := db.Edge{Kind: "flows-to", FromID: prompt.ID, ToID: rid, OrgID: job.OrgID}
		ledger := db.LedgerEntry{JobID: job.ID, PromptID: job.PromptID, ResponseID: rid, OrgID: job.OrgID,
			Provider: resp.Provider, Model: resp.Model, RequestID: resp.RequestID, PromptTokens: resp.PromptTokens,
			CompletionTokens: resp.CompletionTokens, DurationMS: took.Milliseconds()}
		rows := []db.Statement{response.InsertStatement(), edge.InsertStatement(), ledger.InsertStatement()}
		result, _ := json.Marshal(map[string]string{"prompt_id": job.PromptID.String(), "job_id": job.ID.String(), "response_id": rid.String()})
		w := db.NewWrites(tx)
		var err error
		final, err = s.apply(ctx, w, change{jobID: job.ID, from: []State{StateRunning}, to: StateSucceeded, claim: claim, result: result,
			with: rows, set: []clause{is("response_id = ?", rid), is("finished_at = now()"), is("error_kind = NULL"),
				is("error_message = NULL")}})
		if db.IsUniqueViolation(err, "sa_entity_pkey") {
			return errDuplicateResponse
		}
		if err != nil {
			return err
		}
		entry, err := auditEntry(job.OrgID, nil, "worker:"+claim, "job.succeeded", "job", job.ID.String(),
			map[string]any{"response_id": rid, "attempt": job.Attempt, "duration_ms": took.Milliseconds()})
		if err != nil {
			return err
		}
		w.Insert(entry.InsertStatement())
		return w.Send(ctx)
	})
	switch {
	case errors.Is(err, errNoChange), errors.Is(err, errDuplicateResponse):
		s.log.Info("dropped a late result: the job is no longer running under this claim", "job_id", job.ID, "claim", claim, "why", err)
		return outcome{dropped: true}
	case err != nil:
		return outcome{err: err}
	}
	return outcome{state: State(final.State)}
}

var errDuplicateResponse = errors.New("response for this provider request already written")

// finishFailure classifies the error by kind (package retrypolicy) and re-queues with backoff or fails the job, only
// while it is still running under claim. A run cut by a graceful stop is handed back without
// spending an attempt (handBack); any other cancellation while the job is still ours re-queues
// it at once as a worker crash.
func (s *Service) finishFailure(ctx context.Context, job db.Job, claim string, callErr error) outcome {
	if errors.Is(callErr, errShutdown) {
		return s.handBack(ctx, job, claim)
	}
	perr := provider.Classify(callErr)
	// Members see a fixed description; the provider's own words and the cause go to operators
	// (sa_job_error) and the log.
	kind, msg, detail := string(perr.Kind), truncate(perr.MemberMessage(), 1000), truncate(perr.Error(), 4000)
	decision := retrypolicy.Decide(perr, job.Attempt, job.MaxAttempts, maxPauseOf(s.cfg.Governor), s.cfg.Rand)
	if provider.IsCanceled(callErr) {
		kind, msg = KindWorkerCrash, "the worker stopped while the provider call was in flight"
		decision = retrypolicy.Decision{Retry: job.Attempt < job.MaxAttempts}
	}
	if detail != msg {
		s.log.Warn("provider call failed", "job_id", job.ID, "attempt", job.Attempt, "error_kind", kind, "detail", detail)
	}
	var final db.Job
	err := s.inTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		if err := recordErrorDetail(ctx, tx, job.ID, job.Attempt, detail); err != nil {
			return err
		}
		var err error
		w := db.NewWrites(tx)
		if decision.Retry {
			final, err = s.apply(ctx, w, change{jobID: job.ID, from: []State{StateRunning}, to: StateQueued, claim: claim,
				set: []clause{is("attempt = attempt + 1"), is("error_kind = ?", kind), is("error_message = ?", msg),
					is("worker_claim = NULL"), is("scheduled_at = now() + ?::interval", fmt.Sprintf("%d milliseconds", decision.Delay.Milliseconds()))}})
			if err != nil {
				return err
			}
			return w.Send(ctx)
		}
		final, err = s.apply(ctx, w, change{jobID: job.ID, from: []State{StateRunning}, to: StateFailed, claim: claim,
			set: []clause{is("error_kind = ?", kind), is("error_message = ?", msg), is("finished_at = now()")}})
		if err != nil {
			return err
		}
		entry, err := auditEntry(job.OrgID, nil, "worker:"+claim, "job.failed", "job", job.ID.String(),
			map[string]any{"error_kind": kind, "attempt": job.Attempt})
		if err != nil {
			return err
		}
		w.Insert(entry.InsertStatement())
		return w.Send(ctx)
	})
	switch {
	case errors.Is(err, errNoChange):
		s.log.Info("dropped a failure: the job is no longer running under this claim", "job_id", job.ID, "claim", claim)
		return outcome{dropped: true}
	case err != nil:
		return outcome{err: err}
	}
	return outcome{state: State(final.State), retryIn: decision.Delay}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
