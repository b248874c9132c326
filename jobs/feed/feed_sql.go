package feed

// The change feed's reads of its own rows that take no arguments.
const (
	// pendingEventsSQL probes for committed events not numbered yet (an index-only probe).
	pendingEventsSQL = `SELECT EXISTS (SELECT 1 FROM sa_event WHERE seq IS NULL)`

	// retainedBoundsSQL reads the oldest number still kept and the highest given.
	retainedBoundsSQL = `SELECT (SELECT min(seq) FROM sa_event WHERE seq IS NOT NULL),
	(SELECT last_seq FROM sa_event_cursor WHERE id = 1)`

	// highMarkSQL reads the highest number given so far.
	highMarkSQL = `SELECT last_seq FROM sa_event_cursor WHERE id = 1`
)
