package jobs

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"asterion/db"
	"asterion/jobs/admit"
	"asterion/jobs/registry"
)

// IdempotencyKeyTTL is how long an Idempotency-Key of POST /prompt is kept: a submit with the
// same key within it gets the first answer; after it, or once the key's job was archived, the
// key is expired and a submit with it is a new one.
const IdempotencyKeyTTL = 24 * time.Hour

// idempotencyTTLInterval is IdempotencyKeyTTL as a PostgreSQL interval.
var idempotencyTTLInterval = strconv.FormatInt(int64(IdempotencyKeyTTL/time.Second), 10) + " seconds"

// keyEpochOf is the keyEpoch of a key taken over at t.
func keyEpochOf(t time.Time) string { return "@" + strconv.FormatInt(t.UnixMicro(), 10) }

// takeOverArchivedKey makes the key whose job archivedJob was archived this request's, so the
// submit goes on as a new one (found false). If a concurrent submit took it over first, the
// key's new submission answers, as for any replay.
func takeOverArchivedKey(ctx context.Context, tx bun.Tx, req *SubmitRequest, hash string, archivedJob uuid.UUID) (Submitted, bool, error) {
	var at time.Time
	err := tx.NewRaw(takeOverIdempotencyKeySQL, hash, uuid.Nil, uuid.Nil, req.Viewer.UserID, req.IdempotencyKey, archivedJob).Scan(ctx, &at)
	switch {
	case err == nil:
		req.keyEpoch = keyEpochOf(at)
		return Submitted{}, false, nil
	case errors.Is(err, sql.ErrNoRows):
		return claimIdempotencyKey(ctx, tx, req)
	}
	return Submitted{}, false, fmt.Errorf("take over expired idempotency key: %w", err)
}

// claimIdempotencyKey reserves the key for this request, or returns the earlier submission
// made with it. A concurrent twin waits on the key's row until the first commits.
func claimIdempotencyKey(ctx context.Context, tx bun.Tx, req *SubmitRequest) (Submitted, bool, error) {
	hash := req.hash
	// A key older than IdempotencyKeyTTL is expired: taken over as if it were new (xmax is 0
	// for a row the statement inserted, not for one it updated).
	var claimed struct {
		Inserted  bool      `bun:"inserted"`
		CreatedAt time.Time `bun:"created_at"`
	}
	err := tx.NewRaw(claimIdempotencyKeySQL, req.Viewer.UserID, req.IdempotencyKey, hash, uuid.Nil, uuid.Nil, idempotencyTTLInterval).Scan(ctx, &claimed)
	switch {
	case err == nil:
		if !claimed.Inserted {
			req.keyEpoch = keyEpochOf(claimed.CreatedAt)
		}
		return Submitted{}, false, nil
	case !errors.Is(err, sql.ErrNoRows):
		return Submitted{}, false, fmt.Errorf("reserve idempotency key: %w", err)
	}
	var prior keyUse
	if err := tx.NewSelect().Table("sa_idempotency").Column("request_hash", "prompt_id", "job_id").
		Where("user_id = ? AND key = ?", req.Viewer.UserID, req.IdempotencyKey).Scan(ctx, &prior); err != nil {
		return Submitted{}, false, fmt.Errorf("read idempotency key: %w", err)
	}
	if prior.RequestHash != hash {
		return Submitted{}, true, ErrIdempotencyConflict
	}
	out, found, err := priorSubmission(ctx, tx, prior)
	if err == nil && !found {
		// The key's job was archived: the key is expired. Take it over unless a concurrent
		// twin just did, whose submission is then the answer.
		return takeOverArchivedKey(ctx, tx, req, hash, prior.JobID)
	}
	return out, true, err
}

// keyUse is a use of an Idempotency-Key as its row records it.
type keyUse struct {
	RequestHash string    `bun:"request_hash"`
	PromptID    uuid.UUID `bun:"prompt_id"`
	JobID       uuid.UUID `bun:"job_id"`
}

// priorSubmission is the answer a replay of the key's use gets: its prompt, its job as it
// stands and its operation's handle. found is false when the job was archived.
func priorSubmission(ctx context.Context, idb bun.IDB, use keyUse) (Submitted, bool, error) {
	var job db.Job
	err := idb.NewSelect().Model(&job).Where("id = ?", use.JobID).Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return Submitted{}, false, nil
	}
	if err != nil {
		return Submitted{}, false, fmt.Errorf("read job of idempotency key: %w", err)
	}
	var op db.Operation
	if err := idb.NewSelect().Model(&op).Where("id = ?", *job.OperationID).Scan(ctx); err != nil {
		return Submitted{}, false, fmt.Errorf("read operation of idempotency key: %w", err)
	}
	return Submitted{PromptID: use.PromptID, JobID: use.JobID, State: State(job.State),
		Operation: registry.HandleOf(op), Replayed: true}, true, nil
}

// replayOf answers req from its key's live use, before any rule of the submit runs: with that
// use's submission when req is the same request, ErrIdempotencyConflict when it is another.
// found is false when the key has no live use (none, expired, its job archived, or a twin's
// not yet committed): the submit then goes on, and its transaction claims the key.
func replayOf(ctx context.Context, idb bun.IDB, req *SubmitRequest) (Submitted, bool, error) {
	var use keyUse
	err := idb.NewSelect().Table("sa_idempotency").Column("request_hash", "prompt_id", "job_id").
		Where("user_id = ? AND key = ? AND created_at >= now() - ?::interval", req.Viewer.UserID, req.IdempotencyKey,
			idempotencyTTLInterval).Scan(ctx, &use)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return Submitted{}, false, nil
	case err != nil:
		return Submitted{}, false, fmt.Errorf("read idempotency key: %w", err)
	case use.RequestHash != req.hash:
		return Submitted{}, true, ErrIdempotencyConflict
	}
	return priorSubmission(ctx, idb, use)
}

// fingerprint is the request as its Idempotency-Key compares it, made from the request as it
// came in, before any rule or default touched it: the text (the last user message of a
// conversation) trimmed, the priority and attempts with their defaults, the options with the
// model the job runs on, the conversation, and the scheduled time asked for. A request without
// a schedule has the fingerprint it had before the schedule was part of it, so a key in use
// across an upgrade still replays.
func (r *SubmitRequest) fingerprint(door *admit.Admission) string {
	text := r.Prompt
	if r.Messages != nil {
		if i := lastUser(r.Messages); i >= 0 {
			text = r.Messages[i].Content
		}
	}
	priority, attempts := DefaultPriority, DefaultMaxAttempt
	if r.Priority != nil {
		priority = *r.Priority
	}
	if r.MaxAttempts != nil {
		attempts = *r.MaxAttempts
	}
	opts := r.Options
	opts.Model = door.RunsOn(opts.Model)
	var at *time.Time
	if r.ScheduledFor != nil {
		utc := r.ScheduledFor.UTC()
		at = &utc
	}
	b, _ := json.Marshal(struct {
		Prompt       string           `json:"prompt"`
		ParentID     *uuid.UUID       `json:"parent_id"`
		Priority     int              `json:"priority"`
		MaxAttempts  int              `json:"max_attempts"`
		Options      ExecutionOptions `json:"options"`
		Messages     []Message        `json:"messages,omitempty"`
		ScheduledFor *time.Time       `json:"scheduled_for,omitempty"`
	}{strings.TrimSpace(text), r.ParentID, priority, attempts, opts, r.Messages, at})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
