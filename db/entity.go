package db

// insertEntitySQL inserts one sa_entity row. source_refs, created_at and updated_at take
// their defaults when the model leaves them zero; body_head is generated.
const insertEntitySQL = `INSERT INTO sa_entity (id, kind, body, correlation_id, parent_id, causation_id, source_refs, ` +
	`truth_class, state_class, org_id, created_by, created_at, updated_at, messages) VALUES (?, ?, ?, ?, ?, ?, ` +
	`coalesce(?::jsonb, '[]'), ?, ?, ?, ?, coalesce(?::timestamptz, now()), coalesce(?::timestamptz, now()), ?::jsonb)`

// InsertStatement is the INSERT of e.
func (e *Entity) InsertStatement() Statement {
	return Statement{Table: "sa_entity", SQL: insertEntitySQL, Args: []any{
		uuidArg(e.ID), e.Kind, e.Body, uuidArg(e.CorrelationID), uuidPtrArg(e.ParentID), uuidPtrArg(e.CausationID),
		defaultJSONArg(e.SourceRefs), e.TruthClass, e.StateClass, e.OrgID, e.CreatedBy,
		defaultTimeArg(e.CreatedAt), defaultTimeArg(e.UpdatedAt), defaultJSONArg(e.Messages),
	}}
}
