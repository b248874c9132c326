package db

// The migrator's own statements: the lock that serialises migrating processes and the record of
// the function files applied.
const (
	migrationLockSQL   = `SELECT pg_advisory_lock($1)`
	migrationUnlockSQL = `SELECT pg_advisory_unlock($1)`

	functionHashesSQL = `SELECT name, sha256 FROM asterion_function`

	functionRecordSQL = `INSERT INTO asterion_function (name, sha256) VALUES ($1, $2)
ON CONFLICT (name) DO UPDATE SET sha256 = EXCLUDED.sha256, applied_at = now()`

	functionForgetSQL = `DELETE FROM asterion_function WHERE NOT (name = ANY($1))`
)
