package jobs

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"asterion/db"
	"asterion/jobs/deferred"
)

// flow.chain: ordered prompt steps, where a step may include the previous step's response.
//
// Acceptance (SubmitChain, one transaction): the chain's registry row (kind flow.chain,
// status running, subject chain_id, cancelable), its sa_chain and sa_chain_step rows, and the
// prompt of step 1 submitted like any prompt (prompt entity, queued job, prompt.execute
// operation, River job). The chain then suspends on step 1's operation: its continuation —
// chain id, the step it waits for, every step's text and the responses so far — is stored as
// host-owned state in sa_operation_continuation, keyed by that operation, and only its SHA-256
// digest is written on the registry rows (the step's operation and the chain's). The steps'
// texts are nowhere else until they are submitted: sa_chain_step has states and ids only.
//
// Resumption. When the awaited operation settles, afterOperationChange (chain_hooks.go) takes
// the continuation in the same transaction and calls resumeChain:
//
//	completed, not the last step → the next step is submitted (its text, then, when it has
//	                               include_previous, "\n\nPrevious response:\n" and the previous
//	                               response's text) and the chain suspends on it;
//	completed, the last step     → the chain completes with {chain_id, responses};
//	failed, timed-out, cancelled,
//	expired, unknown             → the chain fails with a diagnostic naming the step and that
//	                               status (error kind "step_<status>"); the diagnostic is kept
//	                               on sa_chain and its digest on the registry row.
//
// deferred_response_mode "reject-as-failure" asks for synchronous semantics: every prompt step
// is a deferred operation, so such a chain fails at acceptance with a diagnostic instead of
// suspending, and submits nothing.
//
// Cancel (cancel_href of the chain) marks the chain cancelled and cancels the running step's
// job; expiry does the same with error kind expired. A step whose job is being finalised at
// that very moment cannot be cancelled: the answer is the reason, and a retry succeeds.
//
// Chain status mapping (sa_chain.state → registry status):
//
//	running → running (cancel_href), completed → completed, failed → failed,
//	cancelled → cancelled, expired → expired; no chain row → unknown.

// Chain constants.
const (
	// KindFlowChain is the deferred-operation kind of a chain.
	KindFlowChain = "flow.chain"
	// OwnerChainRuntime is the component that owns chains and their continuations.
	OwnerChainRuntime = "asterion.chain"
	// MaxChainSteps bounds the steps of one chain.
	MaxChainSteps = 20
	// ChainModeSuspend suspends the chain on each step's deferred operation (the default).
	ChainModeSuspend = "suspend"
	// ChainModeReject fails the chain instead of suspending.
	ChainModeReject = "reject-as-failure"
	// maxChainTTLSeconds bounds ttl_seconds before the policy clamps it (one week).
	maxChainTTLSeconds = 7 * 24 * 3600
)

// Chain states.
const (
	ChainRunning   = "running"
	ChainCompleted = "completed"
	ChainFailed    = "failed"
	ChainCancelled = "cancelled"
	ChainExpired   = "expired"
)

// ChainStep is one step of a chain request.
type ChainStep struct {
	Prompt          string
	IncludePrevious bool
}

// ChainRequest asks for a chain of prompts to be run.
type ChainRequest struct {
	Viewer Viewer
	Steps  []ChainStep
	// Mode is ChainModeSuspend (default when empty) or ChainModeReject.
	Mode     string
	Priority *int
	// TTLSeconds is the lifetime the caller asks for; the host policy clamps it. When nil the
	// chain asks for one policy default TTL per step (clamped too).
	TTLSeconds     *int
	IdempotencyKey string
}

// validate checks every rule and normalises defaults; field names follow the JSON body.
func (r *ChainRequest) validate() error {
	fields := map[string]string{}
	switch n := len(r.Steps); {
	case n == 0:
		fields["steps"] = fmt.Sprintf("must hold 1..%d steps", MaxChainSteps)
	case n > MaxChainSteps:
		fields["steps"] = fmt.Sprintf("must hold 1..%d steps, got %d", MaxChainSteps, n)
	}
	for i := range r.Steps {
		st := &r.Steps[i]
		text := strings.TrimSpace(st.Prompt)
		switch n := utf8.RuneCountInString(text); {
		case !utf8.ValidString(st.Prompt):
			fields[fmt.Sprintf("steps[%d].prompt", i)] = "must be valid UTF-8"
		case ControlCharProblem(st.Prompt) != "":
			fields[fmt.Sprintf("steps[%d].prompt", i)] = ControlCharProblem(st.Prompt)
		case n == 0:
			fields[fmt.Sprintf("steps[%d].prompt", i)] = "is required and must not be blank"
		case n > MaxPromptChars:
			fields[fmt.Sprintf("steps[%d].prompt", i)] = fmt.Sprintf("must be at most %d characters, got %d", MaxPromptChars, n)
		}
		st.Prompt = text
	}
	if len(r.Steps) > 0 && r.Steps[0].IncludePrevious {
		fields["steps[0].include_previous"] = "the first step has no previous response"
	}
	switch r.Mode {
	case "":
		r.Mode = ChainModeSuspend
	case ChainModeSuspend, ChainModeReject:
	default:
		fields["deferred_response_mode"] = `must be "suspend" or "reject-as-failure"`
	}
	if r.Priority == nil {
		p := DefaultPriority
		r.Priority = &p
	} else if *r.Priority < 0 || *r.Priority > 100 {
		fields["priority"] = "must be between 0 and 100"
	}
	if r.TTLSeconds != nil && (*r.TTLSeconds < 1 || *r.TTLSeconds > maxChainTTLSeconds) {
		fields["ttl_seconds"] = fmt.Sprintf("must be between 1 and %d", maxChainTTLSeconds)
	}
	if r.IdempotencyKey != "" {
		if msg := checkIdempotencyKey(r.IdempotencyKey); msg != "" {
			fields["Idempotency-Key"] = msg
		}
	}
	if len(fields) > 0 {
		return &ValidationError{Fields: fields}
	}
	return nil
}

// requestHash fingerprints the normalised request for Idempotency-Key comparison.
func (r *ChainRequest) requestHash() string {
	type step struct {
		Prompt          string `json:"prompt"`
		IncludePrevious bool   `json:"include_previous"`
	}
	steps := make([]step, len(r.Steps))
	for i, s := range r.Steps {
		steps[i] = step{s.Prompt, s.IncludePrevious}
	}
	b, _ := json.Marshal(struct {
		Steps    []step `json:"steps"`
		Mode     string `json:"mode"`
		Priority int    `json:"priority"`
		TTL      *int   `json:"ttl_seconds"`
	}{steps, r.Mode, *r.Priority, r.TTLSeconds})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Chain is a row of sa_chain.
type Chain struct {
	bun.BaseModel  `bun:"table:sa_chain"`
	ID             uuid.UUID       `bun:"id,pk,type:uuid"`
	OperationID    uuid.UUID       `bun:"operation_id,type:uuid"`
	OrgID          int64           `bun:"org_id"`
	CreatedBy      int64           `bun:"created_by"`
	State          string          `bun:"state"`
	Mode           string          `bun:"deferred_response_mode"`
	Priority       int             `bun:"priority"`
	StepCount      int             `bun:"step_count"`
	CurrentStep    int             `bun:"current_step"`
	IdempotencyKey *string         `bun:"idempotency_key"`
	RequestHash    string          `bun:"request_hash"`
	Result         json.RawMessage `bun:"result,type:jsonb,nullzero"`
	Diagnostic     json.RawMessage `bun:"diagnostic,type:jsonb,nullzero"`
	CreatedAt      time.Time       `bun:"created_at,nullzero,default:now()"`
	UpdatedAt      time.Time       `bun:"updated_at,nullzero,default:now()"`
	FinishedAt     *time.Time      `bun:"finished_at"`
}

// ChainStepRow is a row of sa_chain_step: a step's state and ids, never its text.
type ChainStepRow struct {
	bun.BaseModel   `bun:"table:sa_chain_step"`
	ChainID         uuid.UUID  `bun:"chain_id,pk,type:uuid"`
	Step            int        `bun:"step,pk"`
	IncludePrevious bool       `bun:"include_previous"`
	State           string     `bun:"state"`
	PromptID        *uuid.UUID `bun:"prompt_id,type:uuid"`
	JobID           *uuid.UUID `bun:"job_id,type:uuid"`
	OperationID     *uuid.UUID `bun:"operation_id,type:uuid"`
	ResponseID      *uuid.UUID `bun:"response_id,type:uuid"`
	UpdatedAt       time.Time  `bun:"updated_at,nullzero,default:now()"`
}

// ChainDiagnostic explains why a chain failed; it is stored on sa_chain and its digest on the
// registry row.
type ChainDiagnostic struct {
	ChainID   uuid.UUID  `json:"chain_id"`
	Step      int        `json:"step"`
	StepCount int        `json:"step_count"`
	Operation *uuid.UUID `json:"operation_id,omitempty"`
	// Status is the terminal status of the step's operation, or "rejected" for a chain that
	// asked for reject-as-failure.
	Status    string `json:"status"`
	ErrorKind string `json:"error_kind,omitempty"`
	Message   string `json:"message"`
}

// ChainAccepted is the answer to SubmitChain.
type ChainAccepted struct {
	Chain Chain
	// Operation is the chain's handle when it suspended (202).
	Operation deferred.Handle
	// Rejected is true for a reject-as-failure chain: it failed at once and Status is its
	// terminal status document.
	Rejected bool
	Status   deferred.StatusDoc
	Replayed bool
}

// chainContinuation is the host-owned state of a suspended chain. It is written only to
// sa_operation_continuation and read only by resumeChain.
type chainContinuation struct {
	V         int          `json:"v"`
	ChainID   uuid.UUID    `json:"chain_id"`
	Step      int          `json:"step"`
	Steps     []chainCStep `json:"steps"`
	Responses []uuid.UUID  `json:"responses"`
}

type chainCStep struct {
	Prompt          string `json:"prompt"`
	IncludePrevious bool   `json:"include_previous"`
}

func (c chainContinuation) encode() ([]byte, error) { return deferred.CanonicalJSON(c) }

// SubmitChain accepts a chain: in one transaction its registry row, its rows, and step 1's
// prompt, on whose operation it suspends. A reject-as-failure chain fails at once instead.
func (s *Service) SubmitChain(ctx context.Context, req ChainRequest) (ChainAccepted, error) {
	if err := req.validate(); err != nil {
		return ChainAccepted{}, err
	}
	defer s.intake.enter()()
	var out ChainAccepted
	err := s.inTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		hash := req.requestHash()
		key := ""
		if req.IdempotencyKey != "" {
			key = fmt.Sprintf("%d:%s", req.Viewer.UserID, req.IdempotencyKey)
			prior, found, err := s.chainByKey(ctx, tx, req, key, hash)
			if err != nil || found {
				out = prior
				return err
			}
		}
		now, err := txNow(ctx, tx)
		if err != nil {
			return err
		}
		chainID := uuid.New()
		ttl := time.Duration(len(req.Steps)) * s.cfg.Policy.ClampTTL(0)
		if req.TTLSeconds != nil {
			ttl = time.Duration(*req.TTLSeconds) * time.Second
		}
		status := deferred.StatusRunning
		if req.Mode == ChainModeReject {
			status = deferred.StatusPending
		}
		h, err := deferred.NewHandle(deferred.HandleRequest{Kind: KindFlowChain, Owner: OwnerChainRuntime,
			Subject: map[string]string{"chain_id": chainID.String()}, IdempotencyKey: key, CorrelationID: chainID.String(),
			Status: status, TTL: ttl, RetryAfterSeconds: DefaultRetryAfterSeconds}, s.cfg.Policy, now)
		if err != nil {
			return fmt.Errorf("build chain handle: %w", err)
		}
		op, err := s.recordAccepted(ctx, tx, nil, h, req.Viewer.OrgID, req.Viewer.UserID, chainID)
		if err != nil {
			return err
		}
		ch := Chain{ID: chainID, OperationID: op.ID, OrgID: req.Viewer.OrgID, CreatedBy: req.Viewer.UserID,
			State: ChainRunning, Mode: req.Mode, Priority: *req.Priority, StepCount: len(req.Steps), RequestHash: hash}
		if req.IdempotencyKey != "" {
			ch.IdempotencyKey = &req.IdempotencyKey
		}
		if _, err := tx.NewInsert().Model(&ch).Returning("*").Exec(ctx); err != nil {
			return fmt.Errorf("insert chain: %w", err)
		}
		rows := make([]ChainStepRow, len(req.Steps))
		cont := chainContinuation{V: 1, ChainID: chainID, Step: 1, Steps: make([]chainCStep, len(req.Steps)), Responses: []uuid.UUID{}}
		for i, st := range req.Steps {
			rows[i] = ChainStepRow{ChainID: chainID, Step: i + 1, IncludePrevious: st.IncludePrevious, State: "waiting"}
			cont.Steps[i] = chainCStep{Prompt: st.Prompt, IncludePrevious: st.IncludePrevious}
		}
		if _, err := tx.NewInsert().Model(&rows).Exec(ctx); err != nil {
			return fmt.Errorf("insert chain steps: %w", err)
		}
		if err := publishOperation(ctx, tx, op); err != nil {
			return err
		}
		if err := audit(ctx, tx, ch.OrgID, &req.Viewer.UserID, fmt.Sprintf("user:%d", req.Viewer.UserID), "chain.accepted",
			"chain", chainID.String(), map[string]any{"operation_id": op.ID, "steps": len(req.Steps), "mode": req.Mode}); err != nil {
			return err
		}
		if req.Mode == ChainModeReject {
			msg := fmt.Sprintf("step 1 of %d would suspend on a deferred %s operation, and the chain asked for deferred_response_mode %s",
				ch.StepCount, KindPromptExecute, ChainModeReject)
			if err := s.failChainTx(ctx, tx, &ch, ChainDiagnostic{ChainID: chainID, Step: 1, StepCount: ch.StepCount,
				Status: "rejected", ErrorKind: "deferred_rejected", Message: msg}, "deferred_rejected"); err != nil {
				return err
			}
			out, err = s.acceptedChain(ctx, tx, ch.ID, false)
			return err
		}
		if err := s.suspendChainOnStep(ctx, tx, &ch, cont, nil); err != nil {
			return err
		}
		out = ChainAccepted{Chain: ch, Operation: h}
		return nil
	})
	return out, err
}

// chainByKey serialises requests with one Idempotency-Key and returns the chain made with it
// earlier, if any; a different body is ErrIdempotencyConflict.
func (s *Service) chainByKey(ctx context.Context, tx bun.Tx, req ChainRequest, scopedKey, hash string) (ChainAccepted, bool, error) {
	if _, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock(hashtextextended(?, 0))", "chain:"+scopedKey); err != nil {
		return ChainAccepted{}, false, fmt.Errorf("lock idempotency key: %w", err)
	}
	var prior Chain
	err := tx.NewSelect().Model(&prior).Where("created_by = ? AND idempotency_key = ?", req.Viewer.UserID, req.IdempotencyKey).Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return ChainAccepted{}, false, nil
	}
	if err != nil {
		return ChainAccepted{}, false, fmt.Errorf("read chain of idempotency key: %w", err)
	}
	if prior.RequestHash != hash {
		return ChainAccepted{}, true, ErrIdempotencyConflict
	}
	out, err := s.acceptedChain(ctx, tx, prior.ID, true)
	return out, true, err
}

// acceptedChain rebuilds the answer to an accepted chain: the handle as it was issued, or the
// terminal status of a rejected chain.
func (s *Service) acceptedChain(ctx context.Context, idb bun.IDB, chainID uuid.UUID, replayed bool) (ChainAccepted, error) {
	var ch Chain
	if err := idb.NewSelect().Model(&ch).Where("id = ?", chainID).Scan(ctx); err != nil {
		return ChainAccepted{}, fmt.Errorf("read chain %s: %w", chainID, err)
	}
	var op db.Operation
	if err := idb.NewSelect().Model(&op).Where("id = ?", ch.OperationID).Scan(ctx); err != nil {
		return ChainAccepted{}, fmt.Errorf("read operation of chain %s: %w", chainID, err)
	}
	out := ChainAccepted{Chain: ch, Replayed: replayed}
	if ch.Mode == ChainModeReject {
		doc, err := StatusDocOf(op)
		out.Rejected, out.Status = true, doc
		return out, err
	}
	out.Operation = handleOf(op)
	out.Operation.Status = deferred.StatusRunning
	return out, nil
}

// suspendChainOnStep submits step cont.Step (with the previous response's text when the step
// includes it) and suspends the chain on its operation.
func (s *Service) suspendChainOnStep(ctx context.Context, tx bun.Tx, ch *Chain, cont chainContinuation, previous *db.Entity) error {
	st := cont.Steps[cont.Step-1]
	text := st.Prompt
	var parent *uuid.UUID
	if previous != nil {
		parent = &previous.ID
		if st.IncludePrevious {
			text = withPrevious(text, previous.Body)
		}
	}
	promptID := uuid.New()
	prompt := db.Entity{ID: promptID, Kind: "prompt", Body: text, CorrelationID: ch.ID, ParentID: parent, CausationID: parent,
		TruthClass: "authored", StateClass: "open", OrgID: ch.OrgID, CreatedBy: ch.CreatedBy}
	if _, err := tx.NewInsert().Model(&prompt).Exec(ctx); err != nil {
		return fmt.Errorf("insert prompt of chain %s step %d: %w", ch.ID, cont.Step, err)
	}
	opts, _ := json.Marshal(ExecutionOptions{})
	job, h, err := s.enqueueTx(ctx, tx, nil, newJob{promptID: promptID, priority: ch.Priority, maxAttempts: DefaultMaxAttempt,
		options: opts, orgID: ch.OrgID, userID: ch.CreatedBy, correlation: ch.ID})
	if err != nil {
		return err
	}
	data, err := cont.encode()
	if err != nil {
		return fmt.Errorf("encode continuation of chain %s: %w", ch.ID, err)
	}
	if _, err := suspendOn(ctx, tx, h.OperationID, OwnerChainRuntime, data, ch.OperationID); err != nil {
		return err
	}
	if _, err := tx.NewUpdate().Model((*ChainStepRow)(nil)).Set("state = 'suspended'").Set("prompt_id = ?", promptID).
		Set("job_id = ?", job.ID).Set("operation_id = ?", h.OperationID).
		Where("chain_id = ? AND step = ?", ch.ID, cont.Step).Exec(ctx); err != nil {
		return fmt.Errorf("record chain %s step %d: %w", ch.ID, cont.Step, err)
	}
	ch.CurrentStep = cont.Step
	_, err = tx.NewUpdate().Model((*Chain)(nil)).Set("current_step = ?", cont.Step).Where("id = ?", ch.ID).Exec(ctx)
	return err
}

// previousHeader separates a step's text from the previous response it includes.
const previousHeader = "\n\nPrevious response:\n"

// withPrevious appends the previous response to a step's text, cutting the response so the
// prompt stays within MaxPromptChars.
func withPrevious(text, previous string) string {
	room := MaxPromptChars - utf8.RuneCountInString(text) - utf8.RuneCountInString(previousHeader)
	if room <= 0 {
		return text
	}
	if utf8.RuneCountInString(previous) > room {
		r := []rune(previous)
		previous = string(r[:room-1]) + "…"
	}
	return text + previousHeader + previous
}

// resumeChain continues a chain whose awaited step operation has settled (see the file
// comment). It runs in the transaction that recorded the settlement.
func (s *Service) resumeChain(ctx context.Context, tx bun.Tx, awaited db.Operation, data []byte) error {
	var cont chainContinuation
	if err := json.Unmarshal(data, &cont); err != nil {
		return fmt.Errorf("decode continuation suspended on %s: %w", awaited.ID, err)
	}
	// Lock order: the chain row, then its registry row (written below), as in Cancel.
	var ch Chain
	err := tx.NewSelect().Model(&ch).Where("id = ?", cont.ChainID).For("UPDATE").Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		s.log.Warn("a continuation named a chain that does not exist", "operation_id", awaited.ID)
		return nil
	}
	if err != nil {
		return fmt.Errorf("lock chain %s: %w", cont.ChainID, err)
	}
	if ch.State != ChainRunning || ch.CurrentStep != cont.Step {
		return nil // the chain ended (cancelled, expired) while the step ran
	}
	var res struct {
		ResponseID uuid.UUID `json:"response_id"`
	}
	_ = json.Unmarshal(awaited.Result, &res)
	step := tx.NewUpdate().Model((*ChainStepRow)(nil)).Set("state = ?", awaited.Status).
		Where("chain_id = ? AND step = ?", ch.ID, cont.Step)
	if res.ResponseID != uuid.Nil {
		step = step.Set("response_id = ?", res.ResponseID)
	}
	if _, err := step.Exec(ctx); err != nil {
		return fmt.Errorf("record chain %s step %d: %w", ch.ID, cont.Step, err)
	}
	if awaited.Status != string(deferred.StatusCompleted) || res.ResponseID == uuid.Nil {
		kind := deref(awaited.LastErrorKind)
		msg := fmt.Sprintf("step %d of %d ended %s", cont.Step, ch.StepCount, awaited.Status)
		if kind != "" {
			msg += " (" + kind + ")"
		}
		if m := deref(awaited.LastErrorMessage); m != "" {
			msg += ": " + m
		}
		id := awaited.ID
		return s.failChainTx(ctx, tx, &ch, ChainDiagnostic{ChainID: ch.ID, Step: cont.Step, StepCount: ch.StepCount,
			Operation: &id, Status: awaited.Status, ErrorKind: kind, Message: truncate(msg, 2000)}, "step_"+awaited.Status)
	}
	cont.Responses = append(cont.Responses, res.ResponseID)
	if cont.Step == ch.StepCount {
		result, err := json.Marshal(map[string]any{"chain_id": ch.ID, "responses": cont.Responses})
		if err != nil {
			return err
		}
		if _, err := tx.NewUpdate().Model((*Chain)(nil)).Set("state = ?", ChainCompleted).Set("result = ?", string(result)).
			Set("finished_at = now()").Where("id = ?", ch.ID).Exec(ctx); err != nil {
			return fmt.Errorf("complete chain %s: %w", ch.ID, err)
		}
		_, err = s.recordStatus(ctx, tx, ch.OperationID, Report{Status: deferred.StatusCompleted, Result: result})
		return err
	}
	var prev db.Entity
	if err := tx.NewSelect().Model(&prev).Where("id = ?", res.ResponseID).Scan(ctx); err != nil {
		return fmt.Errorf("read response of chain %s step %d: %w", ch.ID, cont.Step, err)
	}
	cont.Step++
	return s.suspendChainOnStep(ctx, tx, &ch, cont, &prev)
}

// failChainTx ends a running chain as failed with diag: the diagnostic on sa_chain, its digest
// and the error on the registry row, the steps that never ran skipped.
func (s *Service) failChainTx(ctx context.Context, tx bun.Tx, ch *Chain, diag ChainDiagnostic, kind string) error {
	raw, err := deferred.CanonicalJSON(diag)
	if err != nil {
		return err
	}
	if _, err := tx.NewUpdate().Model((*Chain)(nil)).Set("state = ?", ChainFailed).Set("diagnostic = ?", string(raw)).
		Set("finished_at = now()").Where("id = ?", ch.ID).Exec(ctx); err != nil {
		return fmt.Errorf("fail chain %s: %w", ch.ID, err)
	}
	ch.State = ChainFailed
	if err := skipRemainingSteps(ctx, tx, ch.ID); err != nil {
		return err
	}
	if _, err := tx.NewUpdate().Model((*db.Operation)(nil)).Set("diagnostics_digest = ?", deferred.Digest(raw)).
		Where("id = ?", ch.OperationID).Exec(ctx); err != nil {
		return fmt.Errorf("record diagnostics digest of chain %s: %w", ch.ID, err)
	}
	_, err = s.recordStatus(ctx, tx, ch.OperationID, Report{Status: deferred.StatusFailed, ErrorKind: truncate(kind, 32),
		ErrorMessage: diag.Message})
	return err
}

func skipRemainingSteps(ctx context.Context, tx bun.IDB, chainID uuid.UUID) error {
	_, err := tx.NewUpdate().Model((*ChainStepRow)(nil)).Set("state = 'skipped'").
		Where("chain_id = ? AND state = 'waiting'", chainID).Exec(ctx)
	if err != nil {
		return fmt.Errorf("skip steps of chain %s: %w", chainID, err)
	}
	return nil
}

// ChainDetail is a visible chain with its steps and its operation, never the steps' texts or
// the continuation.
type ChainDetail struct {
	Chain     Chain
	Steps     []ChainStepView
	Operation db.Operation
	Status    deferred.StatusDoc
}

// ChainStepView is a step with the live status of its operation ("" before it is submitted).
type ChainStepView struct {
	ChainStepRow
	OperationStatus string
}

// GetChain returns a chain the viewer may see, or ErrNotFound.
func (s *Service) GetChain(ctx context.Context, v Viewer, id uuid.UUID) (ChainDetail, error) {
	var d ChainDetail
	err := s.db.NewSelect().Model(&d.Chain).Where("id = ?", id).Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && !v.sees(d.Chain.OrgID, d.Chain.CreatedBy)) {
		return ChainDetail{}, fmt.Errorf("chain %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return ChainDetail{}, fmt.Errorf("get chain %s: %w", id, err)
	}
	if err := s.db.NewSelect().Model(&d.Operation).Where("id = ?", d.Chain.OperationID).Scan(ctx); err != nil {
		return ChainDetail{}, fmt.Errorf("operation of chain %s: %w", id, err)
	}
	if d.Status, err = StatusDocOf(d.Operation); err != nil {
		return ChainDetail{}, err
	}
	var rows []ChainStepRow
	if err := s.db.NewSelect().Model(&rows).Where("chain_id = ?", id).OrderExpr("step").Scan(ctx); err != nil {
		return ChainDetail{}, fmt.Errorf("steps of chain %s: %w", id, err)
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
		if err := s.db.NewSelect().Model(&ops).Column("id", "status").Where("id IN (?)", bun.In(ids)).Scan(ctx); err != nil {
			return ChainDetail{}, fmt.Errorf("step operations of chain %s: %w", id, err)
		}
		for _, o := range ops {
			statuses[o.ID] = o.Status
		}
	}
	d.Steps = make([]ChainStepView, len(rows))
	for i, r := range rows {
		d.Steps[i] = ChainStepView{ChainStepRow: r}
		if r.OperationID != nil {
			d.Steps[i].OperationStatus = statuses[*r.OperationID]
		}
	}
	return d, nil
}

// chainOwner owns flow.chain operations.
type chainOwner struct{ s *Service }

func (chainOwner) Kind() string { return KindFlowChain }

func (o chainOwner) Report(ctx context.Context, tx bun.Tx, op db.Operation) (Report, error) {
	var ch Chain
	err := tx.NewSelect().Model(&ch).Where("operation_id = ?", op.ID).Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return Report{Status: deferred.StatusUnknown, ErrorKind: "unknown", ErrorMessage: "no chain belongs to this operation"}, nil
	}
	if err != nil {
		return Report{}, fmt.Errorf("read chain of operation %s: %w", op.ID, err)
	}
	switch ch.State {
	case ChainRunning:
		return Report{Status: deferred.StatusRunning}, nil
	case ChainCompleted:
		return Report{Status: deferred.StatusCompleted, Result: ch.Result}, nil
	case ChainCancelled:
		return Report{Status: deferred.StatusCancelled}, nil
	case ChainExpired:
		return Report{Status: deferred.StatusExpired, ErrorKind: KindExpired, ErrorMessage: "the chain expired before its last step finished"}, nil
	}
	var diag ChainDiagnostic
	_ = json.Unmarshal(ch.Diagnostic, &diag)
	kind := deref(op.LastErrorKind)
	if kind == "" {
		kind = "step_" + diag.Status
	}
	msg := diag.Message
	if msg == "" {
		msg = "the chain failed"
	}
	return Report{Status: deferred.StatusFailed, ErrorKind: kind, ErrorMessage: msg}, nil
}

// Cancel ends a running chain (cancelled, or expired for errorKind expired) and cancels the
// job of the step it waits for. Lock order: the chain row, the step's job, its operation; the
// caller then records the chain operation's terminal status.
func (o chainOwner) Cancel(ctx context.Context, tx bun.Tx, op db.Operation, errorKind string, actor Actor) error {
	var ch Chain
	if err := tx.NewSelect().Model(&ch).Where("operation_id = ?", op.ID).For("UPDATE").Scan(ctx); err != nil {
		return fmt.Errorf("lock chain of operation %s: %w", op.ID, err)
	}
	if ch.State != ChainRunning {
		return fmt.Errorf("cancel chain %s: it is %s: %w", ch.ID, ch.State, ErrConflict)
	}
	var cur ChainStepRow
	err := tx.NewSelect().Model(&cur).Where("chain_id = ? AND step = ?", ch.ID, ch.CurrentStep).Scan(ctx)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("current step of chain %s: %w", ch.ID, err)
	}
	var job *db.Job
	if err == nil && cur.JobID != nil && cur.State == "suspended" {
		// A step that settles locks job → its operation → the chain row; this side holds the
		// chain row already, so it never waits for the job: a job locked right now is being
		// finalised or heartbeated, and the attempt is refused as busy; CancelOperation
		// retries it in a fresh transaction, after the other side let go.
		var jobs []db.Job
		if err := tx.NewSelect().Model(&jobs).Where("id = ?", *cur.JobID).For("UPDATE SKIP LOCKED").Scan(ctx); err != nil {
			return fmt.Errorf("lock job of chain %s step %d: %w", ch.ID, cur.Step, err)
		}
		if len(jobs) == 0 {
			return &ErrNotCancelable{Reason: fmt.Sprintf("step %d is being finalised right now; try again", cur.Step), Busy: true}
		}
		job = &jobs[0]
	}
	to := ChainCancelled
	if errorKind == KindExpired {
		to = ChainExpired
	}
	if _, err := tx.NewUpdate().Model((*Chain)(nil)).Set("state = ?", to).Set("finished_at = now()").
		Where("id = ?", ch.ID).Exec(ctx); err != nil {
		return fmt.Errorf("cancel chain %s: %w", ch.ID, err)
	}
	if err := skipRemainingSteps(ctx, tx, ch.ID); err != nil {
		return err
	}
	if job != nil && !State(job.State).Terminal() {
		// The chain is no longer running, so the step's settlement resumes nothing.
		if _, err := o.s.cancelTx(ctx, tx, *job, errorKind, actor); err != nil && !errors.Is(err, ErrConflict) {
			return err
		}
		stepState := string(deferred.StatusCancelled)
		if errorKind == KindExpired {
			stepState = string(deferred.StatusExpired)
		}
		if _, err := tx.NewUpdate().Model((*ChainStepRow)(nil)).Set("state = ?", stepState).
			Where("chain_id = ? AND step = ?", ch.ID, cur.Step).Exec(ctx); err != nil {
			return fmt.Errorf("record chain %s step %d: %w", ch.ID, cur.Step, err)
		}
	}
	return audit(ctx, tx, ch.OrgID, actor.UserID, actor.Name, "chain."+to, "chain", ch.ID.String(),
		map[string]any{"step": ch.CurrentStep})
}

// Consume ends the chain row when the registry settles the chain operation itself (expired by
// the poller while a step was being finalised, unknown): a chain never outlives its operation.
func (o chainOwner) Consume(ctx context.Context, tx bun.Tx, op db.Operation) error {
	to := ChainFailed
	switch deferred.Status(op.Status) {
	case deferred.StatusCompleted:
		return nil
	case deferred.StatusCancelled:
		to = ChainCancelled
	case deferred.StatusExpired:
		to = ChainExpired
	}
	res, err := tx.NewUpdate().Model((*Chain)(nil)).Set("state = ?", to).Set("finished_at = now()").
		Where("operation_id = ? AND state = ?", op.ID, ChainRunning).Exec(ctx)
	if err != nil {
		return fmt.Errorf("end chain of operation %s: %w", op.ID, err)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		var id uuid.UUID
		if err := tx.NewSelect().Model((*Chain)(nil)).Column("id").Where("operation_id = ?", op.ID).Scan(ctx, &id); err != nil {
			return err
		}
		return skipRemainingSteps(ctx, tx, id)
	}
	return nil
}
