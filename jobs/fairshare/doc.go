// Package fairshare decides which queued job rides a River job a worker has fetched (fair
// share between orgs), and holds the cap of one org's running jobs.
//
// River fetches its jobs by priority (four bands of job priorities) and age only, and knows
// nothing of orgs, so a fetched River job (a vehicle) is treated as a free worker slot, and
// Dispatch decides which queued job rides it before the provider governor's slot and the
// claim. The org is chosen first, whatever the priorities: among the orgs with queued work to
// choose, the one holding the fewest worker slots (its running jobs and its fetched ones not
// claimed yet) relative to its weight, paused and capped orgs left out, equals (the vehicle's
// own org among them) in random order, so that they take turns even on a single worker.
// Priority and age then order only that
// org's own jobs: its best claimable job (lowest band, then oldest, within the worker's
// priority ceiling) takes the vehicle, and the job the vehicle carried takes the chosen job's
// vehicle, which nobody holds (a swap). Queued work to choose is a due queued job not waiting
// for the provider or for a budget: a job scheduled for later, or one whose own vehicle sleeps
// until the provider or its budget lets it run, is neither counted for an org nor chosen. Such
// a mark stays on the job until its claim, so once the job's vehicle has woken the leader
// clears it every few seconds (ClearEndedWaits): a job of a worse band whose vehicle River
// would fetch only after every better-band backlog is then queued work again.
//
// It is a package of its own because the choice is one moving part with its own statements,
// locks and proof, which the execution core (package jobs) calls at two points only: a
// worker's dispatch of a fetched vehicle (Dispatch, then PassOn when an execution ends) and the
// claim's transaction (UnderRunningCap). It cannot name the core's types (jobs imports it), so
// a vehicle and the arguments of the job it carries cross as Vehicle and Args.
//
// # The fast path
//
// Dispatch runs on every claim. One statement reads the job on the vehicle (by
// sa_job.river_job_id, never by the vehicle's arguments), its org's weight, pause and running
// count, whether another org has queued work to choose (a skip scan of idx_job_queued_ready,
// one descent per org) and whether its own org has a better claimable job (the job's own band
// and age, not the vehicle's). With one org and nothing better that is all. With one org and
// a better job of its own (submits that committed out of the order they began in leave an
// older job behind a fetched one), the dispatch swaps within the org in a short transaction
// of its own. Otherwise the locked path takes the dispatch lock, ranks the orgs and swaps.
//
// The dispatch lock weighs orgs against each other, so a dispatch with no other org to weigh
// does not take it: two such dispatches cannot both take one job (the candidate's lock skips
// a job another holds), and the lock would only queue them behind every weighing dispatch.
// It is one for every band. A dispatch may give its slot to a job of any band,
// so dispatches of two bands weigh the same orgs; with a lock per band each would count the
// slots held without the other's choice and both could give their slot to the same light org.
// The lock serialises choices, not safety: no job can run twice without it (below).
//
// # Keeping a displaced job's place
//
// The chosen job's vehicle is often later in River's order than the fetched one: of another
// band (the chosen job's band need not be the fetched vehicle's), or back from a crashed or
// stopped worker or from a backoff. A swap therefore gives that vehicle the fetched vehicle's
// place: its River priority, and no later a time than the fetched one's (a sleeping vehicle
// keeps its wake-up time). The displaced job is then fetched again where it was, as its org's
// best, and its org's order corrects itself in one swap instead of one swap per job of the
// backlog. (A job displaced because its org is paused or at its cap keeps the far place.)
//
// # Why no job runs twice, and none is lost
//
// Only the claim starts a job, and it is one conditional update from queued to running where
// sa_job.river_job_id is the claiming vehicle, so a job runs on one vehicle at a time and once
// per attempt, whatever the vehicles' arguments, priorities or bands say. A swap changes only
// two queued jobs, both locked: the fetched vehicle's job (FOR UPDATE) and the chosen job,
// locked with its vehicle's River row (FOR UPDATE SKIP LOCKED, every condition judged again on
// the newest row version, so a candidate listed before the lock that was claimed, swapped or
// fetched since is skipped). River's fetch skips a locked row, so the chosen job's vehicle
// cannot be handed to a worker during the swap, and a worker that fetches it after the commit
// reads the job now on it. A vehicle a worker holds is never taken by another dispatch (its
// River state is running), so the job a worker found on it stays there until its own claim,
// except for the reclaim of orphaned vehicles and cancels, which the claim's condition turns
// into a drop. A displaced job always keeps a vehicle, so nothing is lost, and a cancel uses
// sa_job.river_job_id. ClearEndedWaits changes only what a job says it waits for, never which
// vehicle carries it.
//
// Swaps across bands change none of this: the band of a vehicle only says when River fetches
// it. Giving a vehicle another priority and time (its place, above) happens while its River
// row is locked and nobody holds it; it is still one River row, which River's fetch hands to
// one worker at a time, and what it carries is still read from sa_job. A worker's priority
// ceiling is kept the same way: Dispatch reads the priority of the job on the vehicle (a swap
// may have put a job of another priority on a vehicle whose arguments say otherwise), declines
// one above the ceiling, and chooses only jobs under it.
//
// # Why no job is starved
//
// Between orgs, a slot goes to the org with queued work that holds the fewest slots per
// weight; an org passed over holds more, and its running jobs end. Within an org, the best job
// is found among the org's first 64 queued jobs in its order (lowest band, then oldest), and a
// displaced job keeps the fetched vehicle's place, so the org's next vehicle fetched carries it
// or gives it the slot. A job beyond the first 64 still rides its own vehicle, which River
// fetches in its turn. Within one org, priority is the order: a job of a worse band waits for
// its org's better ones, as the contract says.
//
// # The running cap
//
// Config.OrgMaxRunning caps one org's running jobs across every process: the claim's
// transaction calls UnderRunningCap, which takes the org's advisory lock and counts, so two
// processes never both take the last slot. A refused job waits on its vehicle, and PassOn
// moves the org's best refused job to a new vehicle as soon as an execution of the org ends.
package fairshare
