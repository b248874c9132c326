// Package delivery is the owner of artifact.delivery operations: a succeeded prompt response is
// delivered to its org's webhook. It registers with the registry as the owner of its kind,
// learns of completed prompt.execute operations by subscribing to settled operations
// (registry.OnSettled), and runs its River jobs on the prompt worker pool (jobs.Extension).
//
// Acceptance. In the transaction that records a prompt.execute operation as completed (the job
// succeeded), when the org has a webhook URL, the delivery is accepted: a registry row of kind
// artifact.delivery (subject prompt_id, job_id, response_id; its id is deterministic from
// them, so a second settlement of the same operation accepts nothing new), a ledger row in
// sa_delivery (state accepted) and a River job (kind artifact.deliver, queue deliveries).
//
// Sending. The worker marks the ledger row in flight (attempts+1, a fresh in_flight_token, one
// sa_delivery_attempt row) in one transaction, which also sets the registry row running with
// cancel/unavailable-reason "the delivery request is in flight"; then POSTs the body
//
//	{"schema":"asterion.delivery.v1","delivery_id","operation_id","prompt_id","job_id",
//	 "response_id","text","created_at"}
//
// signed as Standard Webhooks says: webhook-id: <delivery_id> (the same on every attempt),
// webhook-timestamp: <Unix seconds of the attempt> and webhook-signature: v1,<base64
// HMAC-SHA256 of "<id>.<timestamp>.<body>">, keyed with the decoded part after whsec_ of the
// org's secret (X-Asterion-Attempt carries the attempt number). The secret is stored sealed
// with the server's secret key (Config.SecretKey, package secretbox) and bound to its org's
// row; a secret that does not open, or one stored in plain text, fails the delivery
// (webhook_secret) before anything is sent, never a request with a wrong signature. The
// connection is dialled through a guard that refuses loopback, private and link-local
// addresses after resolution, so a name that resolves elsewhere later is caught too
// (target_private, final), unless Config.AllowPrivate. Then, in a second transaction and only
// while the row is still in flight under the same token, records the outcome and clears the
// in-flight marker (and so the cancel reason):
//
//	2xx                                   delivered (operation completed)
//	408, 429, 5xx, timeout, connection    retryable after Config.Backoff(attempt),
//	                                      failed (retries_exhausted) after MaxAttempts
//	any other status (3xx, 4xx)           failed (receiver_4xx, receiver_3xx …)
//
// Status mapping (ledger state → registry status, cancel surface), used by the worker's own
// writes and by the poller through Deliveries.Report:
//
//	accepted   → pending    cancel_href
//	in_flight  → running    cancel/unavailable-reason "the delivery request is in flight"
//	retryable  → running    cancel_href
//	delivered  → completed  result {delivery_id, status_code, attempts}
//	failed     → failed     error {kind, message}
//	cancelled  → cancelled
//	expired    → expired    error {kind: expired}
//	(no ledger row) → unknown
//
// Delivery is at least once, with an id. A request whose outcome was never recorded (the
// process died or was stopped while it was in flight) is sent again, with the same body and
// the same webhook-id; the receiver deduplicates on that id. What is exactly once
// is the ledger and the registry: one delivery row per operation, and its terminal status is
// recorded once, by the conditional writes above (state = in_flight AND token = mine), so a
// late answer of an execution that lost its marker is recorded as "late" and changes nothing.
//
// Recovery after a restart. River keeps the job of an accepted or retryable delivery, so a new
// worker pool simply runs it. Recover (a periodic leader job, also on start) finds
// ledger rows whose vehicle is gone: accepted or retryable rows whose River job is missing or
// finished, and in-flight rows whose marker is older than the lease (the execution holding it
// died), and gives each a new River job. A vehicle that is no longer the row's (river_job_id)
// ends without doing anything.
package delivery
