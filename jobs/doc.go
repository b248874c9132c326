// Package jobs executes prompts and is the prompt.execute owner of the registry: submit
// (prompt, job row, registry row and River job in one transaction), the River worker that
// claims, heartbeats and finalises a job, the state machine and its one transition guard, the
// retry policy, reclaim of crashed work, cancellation, retry-by-supersede and the sync path.
// The Service embeds the registry's calls the server makes (Operations); what the API and the
// pages show is read through package readmodel. It knows nothing of HTTP or HTML.
//
// sa_job is the truth about a prompt's execution; the River job is its vehicle. Every write
// that finalises a job is conditional on the job still being running under the writer's claim,
// so a second runner's late result is dropped, never written.
package jobs
