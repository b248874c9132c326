package jobs

// The statements of Idempotency-Key. Both run through bun's NewRaw in the submit's transaction
// and scan into a struct, with bun's ? placeholders.
const (
	// claimIdempotencyKeySQL reserves a key for a request, or takes over one older than the TTL
	// (the last argument, an interval) as if it were new: xmax is 0 for a row the statement
	// inserted, not for one it updated. No row comes back when the key is live.
	claimIdempotencyKeySQL = `INSERT INTO sa_idempotency (user_id, key, request_hash, prompt_id, job_id)
	VALUES (?, ?, ?, ?, ?) ON CONFLICT (user_id, key) DO UPDATE
	SET request_hash = EXCLUDED.request_hash, prompt_id = EXCLUDED.prompt_id, job_id = EXCLUDED.job_id, created_at = now()
	WHERE sa_idempotency.created_at < now() - ?::interval
	RETURNING xmax = 0 AS inserted, created_at`

	// takeOverIdempotencyKeySQL makes a key whose job was archived this request's; no row comes
	// back when a concurrent submit took it over first.
	takeOverIdempotencyKeySQL = `UPDATE sa_idempotency
	SET request_hash = ?, prompt_id = ?, job_id = ?, created_at = now()
	WHERE user_id = ? AND key = ? AND job_id = ?
	RETURNING created_at`
)
