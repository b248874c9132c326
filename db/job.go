package db

// insertJobSQL inserts one sa_job row. created_at, updated_at and scheduled_at take their
// default (the transaction's clock) when the model leaves them zero.
const insertJobSQL = `INSERT INTO sa_job (id, prompt_id, state, priority, attempt, max_attempts, execution_options, ` +
	`worker_claim, claimed_at, started_at, running_heartbeat_at, finished_at, response_id, error_kind, error_message, ` +
	`supersedes, org_id, created_by, created_at, updated_at, river_job_id, scheduled_at, operation_id, cancel_outcome, ` +
	`waiting_for, scheduled_for, budget_tokens) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ` +
	`coalesce(?::timestamptz, now()), coalesce(?::timestamptz, now()), ?, coalesce(?::timestamptz, now()), ?, ?, ?, ?, ?)`

// InsertStatement is the INSERT of j.
func (j *Job) InsertStatement() Statement {
	return Statement{Table: "sa_job", SQL: insertJobSQL, Args: []any{
		uuidArg(j.ID), uuidArg(j.PromptID), j.State, int64(j.Priority), int64(j.Attempt), int64(j.MaxAttempts),
		jsonArg(j.ExecutionOptions), stringPtrArg(j.WorkerClaim), timePtrArg(j.ClaimedAt), timePtrArg(j.StartedAt),
		timePtrArg(j.RunningHeartbeatAt), timePtrArg(j.FinishedAt), uuidPtrArg(j.ResponseID), stringPtrArg(j.ErrorKind),
		stringPtrArg(j.ErrorMessage), uuidPtrArg(j.Supersedes), j.OrgID, j.CreatedBy, defaultTimeArg(j.CreatedAt),
		defaultTimeArg(j.UpdatedAt), int64PtrArg(j.RiverJobID), defaultTimeArg(j.ScheduledAt), uuidPtrArg(j.OperationID),
		stringPtrArg(j.CancelOutcome), stringPtrArg(j.WaitingFor), timePtrArg(j.ScheduledFor), int64(j.BudgetTokens),
	}}
}
