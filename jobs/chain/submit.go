package chain

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"asterion/db"
	"asterion/jobs"
	"asterion/jobs/admit"
	"asterion/jobs/deferred"
	"asterion/jobs/registry"
)

// Accepted is the answer to Submit.
type Accepted struct {
	Chain Chain
	// Operation is the chain's handle when it suspended (202).
	Operation deferred.Handle
	// Rejected is true for a reject-as-failure chain: it failed at once and Status is its
	// terminal status document.
	Rejected bool
	Status   deferred.StatusDoc
	Replayed bool
}

// Submit accepts a chain: in one transaction its registry row, its rows, and step 1's
// prompt, on whose operation it suspends. A reject-as-failure chain fails at once instead.
func (c *Chains) Submit(ctx context.Context, req Request) (Accepted, error) {
	if err := req.validate(); err != nil {
		return Accepted{}, err
	}
	defer c.jobs.Admit()()
	var out Accepted
	err := c.reg.InTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		hash := req.requestHash()
		key := ""
		if req.IdempotencyKey != "" {
			key = fmt.Sprintf("%d:%s", req.Viewer.UserID, req.IdempotencyKey)
			prior, found, err := c.byKey(ctx, tx, req, key, hash)
			if err != nil || found {
				out = prior
				return err
			}
		}
		now, err := registry.TxNow(ctx, tx)
		if err != nil {
			return err
		}
		chainID := uuid.New()
		ttl := time.Duration(len(req.Steps)) * c.reg.Policy().ClampTTL(0)
		if req.TTLSeconds != nil {
			ttl = time.Duration(*req.TTLSeconds) * time.Second
		}
		status := deferred.StatusRunning
		if req.Mode == ModeReject {
			status = deferred.StatusPending
		}
		h, err := deferred.NewHandle(deferred.HandleRequest{Kind: Kind, Owner: OwnerName,
			Subject: map[string]string{"chain_id": chainID.String()}, IdempotencyKey: key, CorrelationID: chainID.String(),
			Status: status, TTL: ttl, RetryAfterSeconds: jobs.DefaultRetryAfterSeconds}, c.reg.Policy(), now)
		if err != nil {
			return fmt.Errorf("build chain handle: %w", err)
		}
		w := db.NewWrites(tx)
		op, err := c.reg.RecordAccepted(w, h, req.Viewer.OrgID, req.Viewer.UserID, chainID)
		if err == nil {
			err = w.Send(ctx)
		}
		if err != nil {
			return err
		}
		ch := Chain{ID: chainID, OperationID: op.ID, OrgID: req.Viewer.OrgID, CreatedBy: req.Viewer.UserID,
			State: Running, Mode: req.Mode, Priority: *req.Priority, StepCount: len(req.Steps), RequestHash: hash}
		if req.IdempotencyKey != "" {
			ch.IdempotencyKey = &req.IdempotencyKey
		}
		if _, err := tx.NewInsert().Model(&ch).Returning("*").Exec(ctx); err != nil {
			return fmt.Errorf("insert chain: %w", err)
		}
		rows := make([]StepRow, len(req.Steps))
		cont := continuation{V: 1, ChainID: chainID, Step: 1, Steps: make([]contStep, len(req.Steps)), Responses: []uuid.UUID{}}
		for i, st := range req.Steps {
			rows[i] = StepRow{ChainID: chainID, Step: i + 1, IncludePrevious: st.IncludePrevious, State: "waiting"}
			cont.Steps[i] = contStep(st)
		}
		if _, err := tx.NewInsert().Model(&rows).Exec(ctx); err != nil {
			return fmt.Errorf("insert chain steps: %w", err)
		}
		if err := registry.Publish(ctx, tx, op); err != nil {
			return err
		}
		if err := jobs.Audit(ctx, tx, ch.OrgID, &req.Viewer.UserID, fmt.Sprintf("user:%d", req.Viewer.UserID), "chain.accepted",
			"chain", chainID.String(), map[string]any{"operation_id": op.ID, "steps": len(req.Steps), "mode": req.Mode}); err != nil {
			return err
		}
		if req.Mode == ModeReject {
			msg := fmt.Sprintf("step 1 of %d would suspend on a deferred %s operation, and the chain asked for deferred_response_mode %s",
				ch.StepCount, jobs.KindPromptExecute, ModeReject)
			if err := c.failTx(ctx, tx, &ch, Diagnostic{ChainID: chainID, Step: 1, StepCount: ch.StepCount,
				Status: "rejected", ErrorKind: "deferred_rejected", Message: msg}, "deferred_rejected"); err != nil {
				return err
			}
			out, err = c.accepted(ctx, tx, ch.ID, false)
			return err
		}
		if err := c.suspendOnStep(ctx, tx, &ch, cont, nil); err != nil {
			return err
		}
		out = Accepted{Chain: ch, Operation: h}
		return nil
	})
	return out, err
}

// byKey serialises requests with one Idempotency-Key and returns the chain made with it
// earlier, if any; a different body is jobs.ErrIdempotencyConflict.
func (c *Chains) byKey(ctx context.Context, tx bun.Tx, req Request, scopedKey, hash string) (Accepted, bool, error) {
	if _, err := tx.Tx.ExecContext(ctx, chainKeyLockSQL, "chain:"+scopedKey); err != nil {
		return Accepted{}, false, fmt.Errorf("lock idempotency key: %w", err)
	}
	var prior Chain
	err := tx.NewSelect().Model(&prior).Where("created_by = ? AND idempotency_key = ?", req.Viewer.UserID, req.IdempotencyKey).Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return Accepted{}, false, nil
	}
	if err != nil {
		return Accepted{}, false, fmt.Errorf("read chain of idempotency key: %w", err)
	}
	if prior.RequestHash != hash {
		return Accepted{}, true, jobs.ErrIdempotencyConflict
	}
	out, err := c.accepted(ctx, tx, prior.ID, true)
	return out, true, err
}

// accepted rebuilds the answer to an accepted chain: the handle as it was issued, or the
// terminal status of a rejected chain.
func (c *Chains) accepted(ctx context.Context, idb bun.IDB, chainID uuid.UUID, replayed bool) (Accepted, error) {
	var ch Chain
	if err := idb.NewSelect().Model(&ch).Where("id = ?", chainID).Scan(ctx); err != nil {
		return Accepted{}, fmt.Errorf("read chain %s: %w", chainID, err)
	}
	var op db.Operation
	if err := idb.NewSelect().Model(&op).Where("id = ?", ch.OperationID).Scan(ctx); err != nil {
		return Accepted{}, fmt.Errorf("read operation of chain %s: %w", chainID, err)
	}
	out := Accepted{Chain: ch, Replayed: replayed}
	if ch.Mode == ModeReject {
		doc, err := registry.StatusDocOf(op)
		out.Rejected, out.Status = true, doc
		return out, err
	}
	out.Operation = registry.HandleOf(op)
	out.Operation.Status = deferred.StatusRunning
	return out, nil
}

// suspendOnStep submits step cont.Step (with the previous response's text when the step
// includes it) and suspends the chain on its operation.
func (c *Chains) suspendOnStep(ctx context.Context, tx bun.Tx, ch *Chain, cont continuation, previous *db.Entity) error {
	st := cont.Steps[cont.Step-1]
	text := st.Prompt
	var parent *uuid.UUID
	if previous != nil {
		parent = &previous.ID
		if st.IncludePrevious {
			text = withPrevious(text, previous.Body)
		}
	}
	// Each step is new work and passes the one admission, the first as the chain is accepted
	// and each later one as the step before settles.
	door := admit.DoorChainStep
	if cont.Step == 1 {
		door = admit.DoorChain
	}
	ask := admit.Request{Door: door, OrgID: ch.OrgID, UserID: ch.CreatedBy, Text: text,
		TextField: fmt.Sprintf("steps[%d].prompt", cont.Step-1)}
	ticket, err := c.jobs.Admission().Admit(ctx, tx, &ask)
	if err != nil {
		return fmt.Errorf("admit chain %s step %d: %w", ch.ID, cont.Step, err)
	}
	promptID := uuid.New()
	prompt := db.Entity{ID: promptID, Kind: "prompt", Body: text, CorrelationID: ch.ID, ParentID: parent, CausationID: parent,
		TruthClass: "authored", StateClass: "open", OrgID: ch.OrgID, CreatedBy: ch.CreatedBy}
	if _, err := tx.NewInsert().Model(&prompt).Exec(ctx); err != nil {
		return fmt.Errorf("insert prompt of chain %s step %d: %w", ch.ID, cont.Step, err)
	}
	job, h, err := c.jobs.EnqueueTx(ctx, tx, jobs.QueuedPrompt{PromptID: promptID, Priority: ch.Priority,
		OrgID: ch.OrgID, UserID: ch.CreatedBy, Correlation: ch.ID, Admitted: ticket, Model: ask.Model, Text: text})
	if err != nil {
		return err
	}
	data, err := cont.encode()
	if err != nil {
		return fmt.Errorf("encode continuation of chain %s: %w", ch.ID, err)
	}
	if _, err := registry.Suspend(ctx, tx, h.OperationID, OwnerName, data, ch.OperationID); err != nil {
		return err
	}
	if _, err := tx.NewUpdate().Model((*StepRow)(nil)).Set("state = 'suspended'").Set("prompt_id = ?", promptID).
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
// prompt stays within jobs.MaxPromptChars.
func withPrevious(text, previous string) string {
	room := jobs.MaxPromptChars - utf8.RuneCountInString(text) - utf8.RuneCountInString(previousHeader)
	if room <= 0 {
		return text
	}
	if utf8.RuneCountInString(previous) > room {
		r := []rune(previous)
		previous = string(r[:room-1]) + "…"
	}
	return text + previousHeader + previous
}
