// Package maintenance is the periodic work of the worker pools, which River runs on its
// elected leader only, on the maintenance queue: the reclaim pass over stuck, orphaned and
// stranded jobs, the deferred-operation poller, and the prune of change-feed events, expired
// idempotency keys and the trigger-written counter deltas. It also holds the archive of old
// terminal jobs that `asterion archive-old-jobs` runs.
//
// It is a package of its own so that what runs on a schedule, how often and how it is kept
// from piling up (OnlyOne) is in one place, apart from the execution core. The reclaim pass
// and the poller change jobs and operations through the core's transitions and the registry,
// which this package cannot name (package jobs imports it), so the worker pool hands them in
// as functions (Config.Reclaim, Config.Poll); the prune and the archive are statements of
// their own over the database.
package maintenance
