// Package eta estimates when a job that has not ended will start (a queued job) or end (a
// running one, or the chain whose current step it is): the eta_seconds that 202 handles,
// non-terminal statuses, the mission page and the command line carry, and the Retry-After that
// follows it.
//
// An estimate is a job's place in River's order (band, then oldest first) divided by the rate
// the queue drains at. The place is one bounded walk of idx_job_queued_band back from the job
// (Job, Operation), one walk of the queue's front for many jobs at once (Jobs), or, for a job
// just accepted, no read at all: the front counted at most once per Config.CacheFor plus the
// jobs this process accepted since (Arrival). The rate is the capacity (the jobs running, their
// recent peak, and the workers this process runs) over the mean run time of the last jobs that
// ended, at least the rate measured over the last minute, and at most what the provider's RPM
// lets start; an org's cap of running jobs bounds its own jobs' rate. The measurement is shared
// by every estimate of the process for CacheFor.
//
// It is a package of its own because it only reads: it knows the tables (sa_job, sa_job_count,
// sa_operation, sa_chain) but nothing of how jobs are written, and the execution core (package
// jobs) holds one Estimator, tells it how many workers it runs (AddWorkers) and asks it for
// the estimate of each submit it accepts.
package eta
