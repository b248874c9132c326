package db

// insertEdgeSQL inserts one sa_edge row; its id comes from the table's sequence and
// created_at takes its default when the model leaves it zero.
const insertEdgeSQL = `INSERT INTO sa_edge (kind, from_id, to_id, org_id, created_at) ` +
	`VALUES (?, ?, ?, ?, coalesce(?::timestamptz, now()))`

// InsertStatement is the INSERT of e. Its ID is not written: the table's sequence numbers
// the row.
func (e *Edge) InsertStatement() Statement {
	return Statement{Table: "sa_edge", SQL: insertEdgeSQL, Args: []any{
		e.Kind, uuidArg(e.FromID), uuidArg(e.ToID), e.OrgID, defaultTimeArg(e.CreatedAt),
	}}
}
