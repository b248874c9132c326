package jobs

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"
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
func (s *Service) takeOverArchivedKey(ctx context.Context, tx bun.Tx, req *SubmitRequest, hash string, archivedJob uuid.UUID) (Submitted, bool, error) {
	var at time.Time
	err := tx.NewRaw(takeOverIdempotencyKeySQL, hash, uuid.Nil, uuid.Nil, req.Viewer.UserID, req.IdempotencyKey, archivedJob).Scan(ctx, &at)
	switch {
	case err == nil:
		req.keyEpoch = keyEpochOf(at)
		return Submitted{}, false, nil
	case errors.Is(err, sql.ErrNoRows):
		return s.claimIdempotencyKey(ctx, tx, req)
	}
	return Submitted{}, false, fmt.Errorf("take over expired idempotency key: %w", err)
}
