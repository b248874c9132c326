package feed

// The change feed's reads of its own rows.
const (
	// pendingEventsSQL probes for committed events not numbered yet (an index-only probe).
	pendingEventsSQL = `SELECT EXISTS (SELECT 1 FROM sa_event WHERE seq IS NULL)`

	// retainedBoundsSQL reads the oldest number still kept and the highest given.
	retainedBoundsSQL = `SELECT (SELECT min(seq) FROM sa_event WHERE seq IS NOT NULL),
	(SELECT last_seq FROM sa_event_cursor WHERE id = 1)`

	// highMarkSQL reads the highest number given so far.
	highMarkSQL = `SELECT last_seq FROM sa_event_cursor WHERE id = 1`

	// pruneBoundsSQL reads, in one snapshot, the oldest number kept, the lowest number of an
	// event created at or after ? (null when there is none) and the highest number given. It
	// walks the numbers in order from the oldest kept event and stops at the first young one:
	// what it passes is what the prune deletes.
	pruneBoundsSQL = `SELECT (SELECT min(seq) FROM sa_event WHERE seq IS NOT NULL),
	(SELECT seq FROM sa_event WHERE seq IS NOT NULL AND created_at >= ? ORDER BY seq LIMIT 1),
	(SELECT last_seq FROM sa_event_cursor WHERE id = 1)`
)
