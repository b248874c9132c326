package chain

// The chains' statements beyond bun's builder.
const (
	// chainKeyLockSQL serialises the requests with one Idempotency-Key ($1, scoped to its user)
	// for the rest of the transaction.
	chainKeyLockSQL = `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`
)
