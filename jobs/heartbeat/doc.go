// Package heartbeat keeps the executions of one process alive in the database: once per
// interval, one statement touches the heartbeat of every job this process runs and records
// what each has written so far, and an execution whose job is no longer running under its
// claim (cancelled, or reclaimed by another process) is told so at once to abandon its call.
//
// It is a package of its own because it is one moving part with one statement and one loop,
// which the execution core (package jobs) reaches at two points: an execution registers itself
// for as long as it runs (Keeper.Add), and a worker that finds a job running under a claim of
// its own process asks whether any execution holds that claim (Keeper.Orphaned). The reclaim
// pass of package jobs is the other side: it re-queues or fails a running job whose heartbeat
// went stale.
package heartbeat
