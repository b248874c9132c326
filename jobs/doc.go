// Package jobs executes prompts and is the prompt.execute owner of the registry: submit
// (prompt, job row, registry row and River job in one transaction), the River worker that
// claims, heartbeats and finalises a job, the state machine and its one transition guard,
// reclaim of crashed work, cancellation, retry-by-supersede and the sync path. The Service
// embeds the registry's calls the server makes (Operations); what the API and the pages show
// is read through package readmodel. It knows nothing of HTTP or HTML.
//
// Each moving part with rules of its own is a package beside it, which it calls and which
// never imports it: admit (admission), fairshare (which job rides a vehicle), eta (estimates),
// heartbeat (liveness of this process's executions), retrypolicy (retry or fail after an
// attempt), maintenance (the leader's periodic jobs), tracing (one trace per prompt), governor
// (provider capacity) and usage (tokens and cost).
//
// sa_job is the truth about a prompt's execution; the River job is its vehicle. Every write
// that finalises a job is conditional on the job still being running under the writer's claim,
// so a second runner's late result is dropped, never written.
//
// Deploys and crashes. A graceful stop (Runtime.Stop) claims nothing new at once, lets running
// calls finish for its grace, then cancels those still running with a shutdown cause that the
// execution tells apart from a user's cancel and from its own timeout; their jobs go back queued
// on new vehicles with error_kind shutdown, the cut run's usage and output kept under its
// attempt and max_attempts raised with the attempt, so the cut costs no attempt (runtime.go).
//
// A claim commits without waiting for the WAL to reach the disk (relaxCommit): it is the most
// frequent write of a job and nothing outside the database has acted on it yet. This stays safe
// because losing one in a database crash only puts the job back to queued on the vehicle its
// worker holds: that worker's heartbeat finds the claim gone and cuts its call, its results are
// dropped (every finalising write needs the claim), and before ending the vehicle it looks at
// the job and, finding it still queued there, gives the vehicle back to run it again; a vehicle
// ended anyway (its worker died, or could not look) is found by the reclaim pass, which moves
// every queued job on a vehicle River has finished to a new one (reclaim.go). Acceptance, every
// terminal state and every hand-back commit durably. A shared submit transaction whose COMMIT
// fails is checked by its chosen ids before any of its submits is written again
// (submit_group.go).
package jobs
