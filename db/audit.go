package db

// insertAuditSQL inserts one sa_audit row; its id comes from the table's sequence, and detail
// and created_at take their defaults when the model leaves them zero.
const insertAuditSQL = `INSERT INTO sa_audit (org_id, actor_id, actor, action, subject_type, subject_id, detail, ` +
	`created_at) VALUES (?, ?, ?, ?, ?, ?, coalesce(?::jsonb, '{}'), coalesce(?::timestamptz, now()))`

// InsertStatement is the INSERT of a. Its ID is not written: the table's sequence numbers
// the row.
func (a *AuditEntry) InsertStatement() Statement {
	return Statement{Table: "sa_audit", SQL: insertAuditSQL, Args: []any{
		a.OrgID, int64PtrArg(a.ActorID), a.Actor, a.Action, a.SubjectType, a.SubjectID, defaultJSONArg(a.Detail),
		defaultTimeArg(a.CreatedAt),
	}}
}
