package db

// insertOperationSQL inserts one sa_operation row. accepted_at, next_poll_at and updated_at
// take their default (the transaction's clock) when the model leaves them zero; a nil result
// is NULL.
const insertOperationSQL = `INSERT INTO sa_operation (id, kind, owner, status, org_id, created_by, subject, ` +
	`correlation_id, accepted_at, expires_at, retry_after_seconds, cancel_unavailable_reason, continuation_digest, ` +
	`diagnostics_digest, result, last_error_kind, last_error_message, successor_id, next_poll_at, poll_count, ` +
	`terminal_at, updated_at, history_seq, history_digest, history_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ` +
	`coalesce(?::timestamptz, now()), ?, ?, ?, ?, ?, ?, ?, ?, ?, coalesce(?::timestamptz, now()), ?, ?, ` +
	`coalesce(?::timestamptz, now()), ?, ?, ?)`

// updateOperationSQL writes every column of one sa_operation row but its id, picked by its
// id, with the defaults of insertOperationSQL for the columns the model leaves zero.
const updateOperationSQL = `UPDATE sa_operation SET kind = ?, owner = ?, status = ?, org_id = ?, created_by = ?, ` +
	`subject = ?, correlation_id = ?, accepted_at = coalesce(?::timestamptz, now()), expires_at = ?, ` +
	`retry_after_seconds = ?, cancel_unavailable_reason = ?, continuation_digest = ?, diagnostics_digest = ?, ` +
	`result = ?::jsonb, last_error_kind = ?, last_error_message = ?, successor_id = ?, ` +
	`next_poll_at = coalesce(?::timestamptz, now()), poll_count = ?, terminal_at = ?, ` +
	`updated_at = coalesce(?::timestamptz, now()), history_seq = ?, history_digest = ?, history_at = ? WHERE id = ?`

// InsertStatement is the INSERT of o.
func (o *Operation) InsertStatement() Statement {
	return Statement{Table: "sa_operation", SQL: insertOperationSQL, Args: append([]any{uuidArg(o.ID)}, o.dataArgs()...)}
}

// UpdateStatement is the UPDATE of every column of o's row (all but the id), picked by its id.
func (o *Operation) UpdateStatement() Statement {
	return Statement{Table: "sa_operation", SQL: updateOperationSQL, Args: append(o.dataArgs(), uuidArg(o.ID))}
}

// dataArgs are the values of every column but the id, in the order of both texts.
func (o *Operation) dataArgs() []any {
	return []any{
		o.Kind, o.Owner, o.Status, o.OrgID, o.CreatedBy, jsonArg(o.Subject), uuidArg(o.CorrelationID),
		defaultTimeArg(o.AcceptedAt), timeArg(o.ExpiresAt), int64(o.RetryAfterSeconds),
		stringPtrArg(o.CancelUnavailableReason), stringPtrArg(o.ContinuationDigest), stringPtrArg(o.DiagnosticsDigest),
		defaultJSONArg(o.Result), stringPtrArg(o.LastErrorKind), stringPtrArg(o.LastErrorMessage),
		uuidPtrArg(o.SuccessorID), defaultTimeArg(o.NextPollAt), int64(o.PollCount), timePtrArg(o.TerminalAt),
		defaultTimeArg(o.UpdatedAt), o.HistorySeq, stringPtrArg(o.HistoryDigest), timePtrArg(o.HistoryAt),
	}
}
