package db

// insertLedgerSQL inserts one sa_ledger row; its id comes from the table's sequence and
// created_at takes its default when the model leaves it zero.
const insertLedgerSQL = `INSERT INTO sa_ledger (job_id, prompt_id, response_id, org_id, provider, model, request_id, ` +
	`prompt_tokens, completion_tokens, duration_ms, created_at) ` +
	`VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, coalesce(?::timestamptz, now()))`

// InsertStatement is the INSERT of l. Its ID is not written: the table's sequence numbers
// the row.
func (l *LedgerEntry) InsertStatement() Statement {
	return Statement{Table: "sa_ledger", SQL: insertLedgerSQL, Args: []any{
		uuidArg(l.JobID), uuidArg(l.PromptID), uuidArg(l.ResponseID), l.OrgID, l.Provider, l.Model, l.RequestID,
		int64(l.PromptTokens), int64(l.CompletionTokens), l.DurationMS, defaultTimeArg(l.CreatedAt),
	}}
}
