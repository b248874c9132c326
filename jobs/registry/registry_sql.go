package registry

// The registry's statements beside the lock reads of row.go.
const (
	// txNowSQL is the transaction's clock, so every timestamp written in it agrees.
	txNowSQL = `SELECT now()`
)
