package db

// insertEdgeSQL inserts one sa_edge row; created_at takes its default when the model leaves it
// zero.
const insertEdgeSQL = `INSERT INTO sa_edge (kind, from_id, to_id, org_id, created_at) ` +
	`VALUES (?, ?, ?, ?, coalesce(?::timestamptz, now()))`

// InsertStatement is the INSERT of e.
func (e *Edge) InsertStatement() Statement {
	return Statement{Table: "sa_edge", SQL: insertEdgeSQL, Args: []any{
		e.Kind, uuidArg(e.FromID), uuidArg(e.ToID), e.OrgID, defaultTimeArg(e.CreatedAt),
	}}
}
