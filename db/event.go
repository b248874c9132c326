package db

// insertEventSQL inserts one sa_event row; its id comes from the table's sequence and
// created_at takes its default when the model leaves it zero.
const insertEventSQL = `INSERT INTO sa_event (seq, topic, org_id, user_id, prompt_id, job_id, operation_id, payload, ` +
	`created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, coalesce(?::timestamptz, now()))`

// InsertStatement is the INSERT of e. Its ID is not written: the table's sequence numbers the
// row.
func (e *Event) InsertStatement() Statement {
	return Statement{Table: "sa_event", SQL: insertEventSQL, Args: []any{
		int64PtrArg(e.Seq), e.Topic, e.OrgID, e.UserID, uuidPtrArg(e.PromptID), uuidPtrArg(e.JobID),
		uuidPtrArg(e.OperationID), jsonArg(e.Payload), defaultTimeArg(e.CreatedAt),
	}}
}
