package jobs

// Statements beside the transition engine's (transition.go composes those) that need no model:
// the full text of a job's latest failure, on database/sql ($N), and the transaction's clock.
const (
	// recordErrorDetailSQL keeps the latest failure's text of job $1 at attempt $2.
	recordErrorDetailSQL = `INSERT INTO sa_job_error (job_id, attempt, detail) VALUES ($1, $2, $3)
	ON CONFLICT (job_id) DO UPDATE SET attempt = EXCLUDED.attempt, detail = EXCLUDED.detail, at = now()`

	// txNowSQL is the transaction's clock, so every timestamp written in it agrees.
	txNowSQL = `SELECT now()`
)
