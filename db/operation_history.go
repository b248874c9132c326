package db

// insertOperationHistorySQL inserts one sa_operation_history row.
const insertOperationHistorySQL = `INSERT INTO sa_operation_history (operation_id, seq, status, at, doc_digest, ` +
	`prev_digest, entry_digest) VALUES (?, ?, ?, ?, ?, ?, ?)`

// InsertStatement is the INSERT of h.
func (h *OperationHistory) InsertStatement() Statement {
	return Statement{Table: "sa_operation_history", SQL: insertOperationHistorySQL, Args: []any{
		uuidArg(h.OperationID), h.Seq, h.Status, timeArg(h.At), h.DocDigest, h.PrevDigest, h.EntryDigest,
	}}
}
